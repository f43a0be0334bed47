"""User code calling NumPy/SciPy functions implemented in s2s_ad/rules/library/."""
import math

import numpy as np
import scipy.special as sc

XP = np.array([0.0, 0.9, 1.2])


def var_axis(x):
    return np.var(x, axis=0, ddof=1)


def var_all(x):
    return np.var(x)


def std_keep(x):
    return np.std(x, axis=1, keepdims=True)


def var_method(x):
    return x.var(axis=-1)


def average_w(x):
    return np.average(x, axis=1, weights=np.array([1.0, 2.0, 3.0, 4.0]))


def average_plain(x):
    return np.average(x)


def ptp_axis(x):
    return np.ptp(x, axis=0)


def nan_stats(x):
    y = np.where(x > 1.5, np.nan, x)
    return np.nansum(y, axis=0) + np.nanmean(y, axis=0) + np.nanmax(y, axis=0) + np.nanmin(y)


def diff2(x):
    return np.diff(x, 2)


def diff_axis0(x):
    return np.diff(x, axis=0)


def trapezoids(x):
    return (np.trapezoid(x) + np.trapezoid(x ** 2, dx=0.3, axis=0).sum()
            + np.trapezoid(x, np.linspace(0.0, 1.0, 4)) * np.trapezoid(x, x[0], axis=1))


def gradients(x):
    rows, cols = np.gradient(x, 0.5, 2.0)
    return rows * cols + np.gradient(x[0] ** 2) + np.gradient(x, axis=0)


def logaddexps(x):
    return np.logaddexp(x, x[::-1]) + np.logaddexp2(x, 0.5)


def flips(x):
    return np.flip(x) + 2.0 * np.flip(x, 0) + 3.0 * np.fliplr(x) + 4.0 * np.flipud(x)


def moves(x):
    return np.moveaxis(x, 0, -1) + 2.0 * np.swapaxes(x, 0, 1)


def rot(x):
    return np.rot90(x) + np.rot90(x, 3) + np.rot90(np.rot90(x, 2), -1) * 2.0


def rolls(x):
    return np.roll(x, 1) + 2.0 * np.roll(x, -1, axis=1) + 3.0 * np.roll(x, (1, 2), (0, 1)) + \
        np.roll(x, shift=1, axis=(1, 0))


def stacks(x):
    v = x[0]
    return np.sum(np.hstack((x, x))) + np.sum(np.vstack((x, v)) ** 2) + \
        np.sum(np.column_stack((v, v)) ** 3) + np.sum(np.dstack((x, x)) * 1.5) + \
        np.sum(np.hstack((v, v)) ** 2)


def grids(x):
    """np.meshgrid: two and three arrays, both indexings, sparse grids, a scalar and a
    2-D array (flattened)."""
    a, b = np.meshgrid(x[0], x[1, :3])
    c, d, e = np.meshgrid(x[2, :2], x[0, 1:], x[1, 0], indexing="ij")
    s, t = np.meshgrid(x[0], x[1], sparse=True)
    (g,) = np.meshgrid(x[:2, :2])
    return np.sum(a * b ** 2, axis=0) + np.sum(c * d + np.sin(e) * c) + \
        np.sum(s * t, axis=1) + g ** 3


def list_operands(x):
    """Python lists where NumPy takes array-likes: a filter, sample points, values."""
    v = x[0]
    return np.convolve(v, [1.0, -1.0])[1:] + np.correlate(v, [0.5, 2.0, 1.0], "same") + \
        np.interp(0.3, [0.0, 0.5, 1.0], v[:3]) + np.trapezoid(v, [0.0, 0.1, 0.3, 0.6]) + \
        np.trapezoid([v[0], 1.0, v[1]]) + np.sum(np.convolve([1.0, 2.0], v, "valid"))


def clips(x):
    """np.clip and x.clip with one bound, None for a bound, and min=/max= (values away
    from the bounds: the derivative is one-sided there)."""
    return x.clip(0.25) + x.clip(max=1.65) + np.clip(x, None, 1.05) + \
        x.clip(min=0.45, max=1.35) + np.clip(x, 0.35, 1.45)


def log_sigmoids(x):
    """scipy.special.log_expit, far out on both sides too (no overflow)."""
    return sc.log_expit(x) + sc.log_expit(-30.0 * x) * 0.1 + sc.log_expit(30.0 * x)


def atleasts(x):
    return np.sum(np.atleast_2d(x[0]) ** 2) + np.sum(np.atleast_1d(x[0, 0]) ** 3)


def takes(x):
    return np.take(x, np.array([2, 0, 0]), axis=1) * 2.0 + np.take(x, np.array([1, 4, 5]))[0]


def broadcasts(x):
    return np.broadcast_to(x[0], (3, 4)) * x


def special(x):
    return sc.expit(x) + sc.logit(sc.expit(x)) + sc.softmax(x, axis=1) + sc.log_softmax(x)


def lse(x):
    return sc.logsumexp(x, axis=1) + sc.logsumexp(x, b=np.ones((3, 4)) * 2.0)


def xlogs(x):
    return sc.xlogy(x, x * x + 1.0) + sc.xlog1py(x, x * x)


def elementwise(x):
    return np.sinc(x) + np.deg2rad(x) + np.rad2deg(x) * 0.01 + np.fmax(x, 0.2) + \
        np.fmin(x, 0.3) + np.copysign(x, x - 0.5) + np.heaviside(x - 0.1, 0.5)


def convolutions(x):
    return np.convolve(x[0], x[1, :3]) + \
        np.pad(np.convolve(x[0], x[1, :3], mode="same") + np.convolve(x[1, :2], x[2], "same"),
               1) + np.convolve(x[0], x[2, 1:], mode="valid")[0]


def correlations(x):
    return np.correlate(x[0], x[1, :3], "full")[:4] + np.correlate(x[0], x[1, :3]).sum() + \
        np.correlate(x[1, :2], x[2], mode="same")


def interpolations(x):
    return np.interp(x[0] * 1.3 - 0.3, np.sort(x[1]), x[2]) + \
        np.interp(1.0, XP, x[1, :3] * x[1, :3], left=0.0, right=-1.0) * x[0]


def polynomials(x):
    return np.polyval(x[0], x[1]) + np.polyval([1.0, -2.0, 0.5], x[2])


def vector_products(x):
    return np.vecdot(x, x[::-1]) + np.matvec(x[:, :3], x[0, 1:]) + np.vecmat(x[0, :3], x)[1:]


def math_reductions(x):
    return math.fsum(x[0]) * math.prod(x[1]) + math.dist(x[2], x[0]) + \
        math.prod(x[0], start=2.0) + math.log(x[1, 1], 2.0) + math.log(3.0, x[2, 2])


FW = np.array([1.0, 2.0, 1.0, 3.0])   # (NumPy multiplies fweights by aweights in place:
AW = np.array([0.5, 1.0, 2.0, 0.3])   # a new array where both are given)


def covariances(x):
    return np.cov(x) + np.cov(x, bias=True) * 0.5 + np.cov(x[:, :3], x[:, 1:], False)[:3, 3:] + \
        np.cov(x, None, True, False, 2, np.array([1.0, 2.0, 1.0, 3.0]), AW) + \
        np.cov(x, aweights=AW, ddof=0) + \
        np.sum(np.cov(x[0], x[2])[1:, :] @ np.cov(x[1:], fweights=FW)) * 0.1 + np.cov(x[1])


def correlation_coefficients(x):
    return np.corrcoef(x) + np.corrcoef(x[:, 1:], x[:, :3], rowvar=False)[1:4, 2:5] + \
        np.corrcoef(x[0], x[2])[0, 1] + np.corrcoef(x[1])


def out_kwarg(x):
    y = np.zeros(4)
    return np.var(x, axis=0, out=y)


def bad_kwarg(x):
    return np.var(x, where=x > 0)


def unsupported_call(x):
    return np.sum(np.vander(x[0]).flat)


def no_rule(x):
    return np.sum(np.spacing(x))


def jit_cases(x):
    """The sum of tests/test_library.py's JIT cases (one compiled function)."""
    return np.sum(np.sin(std_keep(x))) + np.sum(np.sin(nan_stats(x) * 1.1)) + \
        np.sum(np.sin(stacks(x) * 1.2)) + np.sum(np.sin(lse(x) * 1.3)) + \
        np.sum(np.sin(elementwise(x) * 1.4)) + np.sum(np.sin(grids(x) * 1.5))


def numeric_cases(x):
    """Convolutions, polynomials, vector products and math reductions in one loss
    (tests/test_library.py compiles it once)."""
    return np.sum(np.sin(convolutions(x))) + np.sum(np.sin(correlations(x) * 1.1)) + \
        np.sum(np.sin(polynomials(x) * 1.2)) + np.sum(np.sin(interpolations(x))) + np.sum(np.sin(vector_products(x) * 1.3)) + \
        np.sin(math_reductions(x))
