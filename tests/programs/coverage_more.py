"""User code for tests/test_coverage_more.py: scans, sorting, quantiles,
padding, splitting, special functions."""
import math

import numpy as np
import scipy.special as sc


def scans(x):
    z = x * (x > 0.6)                    # exact zeros for cumprod
    return np.cumsum(x, axis=1) + np.cumprod(z, axis=0) + x.cumsum(0) * 0.5 + \
        np.reshape(np.cumprod(x), (3, 4)) + np.reshape(np.cumsum(z), (3, 4))


def orders(x):
    s = np.sort(x, axis=0) + np.sort(x) * 2.0
    m = np.median(x, axis=1) + np.quantile(x, 0.3) + np.percentile(x, 70.0, axis=1)
    i = np.argsort(x, axis=1)
    return s * np.expand_dims(m, 1) + np.take_along_axis(x, i[:, ::-1], axis=1)


def scans_loss(x):
    return np.sum(np.sin(scans(x))) + np.sum(np.cos(orders(x)))


def quantiles(x):
    return np.quantile(x, np.array([0.1, 0.5, 0.9]), axis=0) + \
        np.percentile(x, 40.0, axis=1, keepdims=True)[:1] + np.median(x, keepdims=True)


def specials(x):
    return sc.gammaln(x) + sc.digamma(x) + sc.polygamma(2, x) + sc.erf(x) + sc.erfc(x) + \
        sc.erfinv(x - 1.0) + np.fmod(x, 0.7) + np.float_power(x, 1.5) + np.fabs(x - 1.0)


def maths(x):
    return math.acosh(x + 1.0) + math.cbrt(x) + math.exp2(x) + math.copysign(x, -1.0) + \
        math.degrees(x) + math.radians(x) + math.fmod(x, 0.7) + math.remainder(x, 0.7) + \
        math.ldexp(x, 3) + math.lgamma(x) + math.gamma(x)
