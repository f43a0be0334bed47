"""scipy.special functions for generated code: gammaln, digamma, polygamma,
erf, erfc, erfinv.

In Python they are SciPy's.  Numba cannot call SciPy in nopython mode, so
the overloads in _nb_special.py apply the scalar kernels below elementwise
(``gammaln``, ``erf`` and ``erfc`` are Numba's ``math.lgamma``/``erf``/
``erfc``).  The kernels are plain Python as well (``register_jitable``), and
tests/test_coverage_more.py checks them against SciPy:

- ``digamma_scalar``: the recurrence ``psi(x) = psi(x + 1) - 1/x`` up to
  ``x >= 10``, then the asymptotic series to ``x**-14``; relative error
  below 1e-13 away from the zeros of psi (where the absolute error stays
  below 1e-15), inf/nan at the poles 0, -1, -2, ...
- ``polygamma_scalar(n, x)`` for n >= 1: ``(-1)**(n+1) n! zeta(n+1, x)``,
  the Hurwitz zeta by direct summation up to ``x + N >= n + 12``, then
  Euler-Maclaurin with 10 Bernoulli terms; relative error below 1e-12 for
  n <= 10 (any non-pole x, negative included).  n = 0 is digamma.
- ``erfinv_scalar``: a rational first guess refined by Halley steps on erf
  (on erfc near +-1, so the tails keep their relative accuracy); relative
  error below 1e-14; +-inf at +-1, nan outside [-1, 1].
"""
import math

import numpy as np
import scipy.special as _sc
from numba.extending import register_jitable

_B2K = (1.0 / 6.0, -1.0 / 30.0, 1.0 / 42.0, -1.0 / 30.0, 5.0 / 66.0, -691.0 / 2730.0,
        7.0 / 6.0, -3617.0 / 510.0, 43867.0 / 798.0, -174611.0 / 330.0)   # B_2 .. B_20


@register_jitable
def digamma_scalar(x):
    """psi(x) (see the module docstring for accuracy)."""
    if math.isnan(x):
        return x
    if x <= 0.0 and x == math.floor(x):
        return math.nan if x < 0.0 else -math.inf
    acc = 0.0
    while x < 10.0:
        acc -= 1.0 / x
        x += 1.0
    z = 1.0 / (x * x)
    series = z * (1.0 / 12.0 - z * (1.0 / 120.0 - z * (1.0 / 252.0 - z * (
        1.0 / 240.0 - z * (1.0 / 132.0 - z * (691.0 / 32760.0 - z / 12.0))))))
    return acc + math.log(x) - 0.5 / x - series


@register_jitable
def polygamma_scalar(n, x):
    """The n-th derivative of psi at x (n >= 0 an integer)."""
    if n == 0:
        return digamma_scalar(x)
    if n < 0 or math.isnan(x):
        return math.nan
    if x <= 0.0 and x == math.floor(x):
        return math.inf if n % 2 == 1 else math.nan
    s = n + 1.0
    zeta = 0.0
    while x < n + 12.0:
        zeta += x ** -s
        x += 1.0
    zeta += x ** (1.0 - s) / (s - 1.0) + 0.5 * x ** -s
    factor = s * x ** (-s - 1.0)          # s (s+1) ... (s+2j-2) x**(-s-2j+1) / (2j)!
    fact = 2.0
    for j in range(10):
        zeta += _B2K[j] * factor / fact
        factor *= (s + 2 * j + 1) * (s + 2 * j + 2) / (x * x)
        fact *= (2 * j + 3) * (2 * j + 4)
    sign = 1.0 if n % 2 == 1 else -1.0
    return sign * math.gamma(n + 1.0) * zeta


@register_jitable
def erfinv_scalar(y):
    """The inverse of erf on [-1, 1]."""
    if math.isnan(y) or y < -1.0 or y > 1.0:
        return math.nan
    if y == 1.0 or y == -1.0:
        return y * math.inf
    # Giles (2010), single-precision branch: a guess good to about 1e-7.
    w = -math.log((1.0 - y) * (1.0 + y))
    if w < 5.0:
        w -= 2.5
        p = 2.81022636e-08
        for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                  -0.00125372503, -0.00417768164, 0.246640727, 1.50140941):
            p = c + p * w
    else:
        w = math.sqrt(w) - 3.0
        p = -0.000200214257
        for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                  -0.0076224613, 0.00943887047, 1.00167406, 2.83297682):
            p = c + p * w
    x = p * y
    a = abs(y)
    t = abs(x)
    for _ in range(8):        # Halley on erf(t) = a, or on erfc(t) = 1 - a in the tail
        f = math.erf(t) - a if a <= 0.5 else (1.0 - a) - math.erfc(t)
        u = f / (1.1283791670955126 * math.exp(-t * t))
        step = u / (1.0 + t * u)
        t -= step
        if abs(step) <= 1e-16 * t:
            break
    return t if y >= 0.0 else -t


@register_jitable
def ndtr_scalar(x):
    """The standard normal distribution function."""
    return 0.5 * math.erfc(-x * 0.7071067811865476)


@register_jitable
def log_ndtr_scalar(x):
    """log of :func:`ndtr_scalar`; for x < -20 the asymptotic series of the
    normal tail (relative error below 1e-16 there), where erfc underflows."""
    if x > -20.0:
        return math.log(0.5 * math.erfc(-x * 0.7071067811865476))
    z = 1.0 / (x * x)
    series = 1.0 - z * (1.0 - z * (3.0 - z * (15.0 - z * (105.0 - z * 945.0))))
    return -0.5 * x * x - math.log(-x) - 0.9189385332046728 + math.log(series)


@register_jitable
def entr_scalar(x):
    """-x log x for x > 0, 0 at 0, -inf below (scipy.special.entr)."""
    if x > 0.0:
        return -x * math.log(x)
    if x == 0.0:
        return 0.0
    return -math.inf


def gamma(x):
    """scipy.special.gamma."""
    return _sc.gamma(x)


def ndtr(x):
    """scipy.special.ndtr."""
    return _sc.ndtr(x)


def log_ndtr(x):
    """scipy.special.log_ndtr."""
    return _sc.log_ndtr(x)


def entr(x):
    """scipy.special.entr."""
    return _sc.entr(x)


def gammaln(x):
    """scipy.special.gammaln."""
    return _sc.gammaln(x)


def digamma(x):
    """scipy.special.digamma."""
    return _sc.digamma(x)


def polygamma(n, x):
    """scipy.special.polygamma."""
    return _sc.polygamma(n, x)


def erf(x):
    """scipy.special.erf."""
    return _sc.erf(x)


def erfc(x):
    """scipy.special.erfc."""
    return _sc.erfc(x)


def erfinv(x):
    """scipy.special.erfinv."""
    return _sc.erfinv(x)


def float_power(x1, x2):
    """np.float_power (in Numba: np.power in float64)."""
    return np.float_power(x1, x2)


EXPORTS = ("gammaln", "digamma", "polygamma", "erf", "erfc", "erfinv", "float_power", "gamma",
           "ndtr", "log_ndtr", "entr")


@register_jitable
def remainder_scalar(x, y):
    """math.remainder: x - n y with n the integer nearest x / y (ties to even)."""
    r = np.fmod(x, y)
    ay, ar = abs(y), abs(r)
    if ar > 0.5 * ay or (ar == 0.5 * ay and np.fmod((x - r) / y, 2.0) != 0.0):
        r -= math.copysign(ay, r)
    return r


def math_cbrt(x):
    """math.cbrt (np.cbrt in Numba)."""
    return math.cbrt(x)


def math_fmod(x, y):
    """math.fmod (np.fmod in Numba)."""
    return math.fmod(x, y)


def math_remainder(x, y):
    """math.remainder."""
    return math.remainder(x, y)


EXPORTS += ("math_cbrt", "math_fmod", "math_remainder")
