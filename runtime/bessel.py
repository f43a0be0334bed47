"""``np.i0`` and its derivative ``scipy.special.i1``, in NumPy and under Numba.

Python: ``np.i0`` itself and SciPy's ``i1``.  Numba (no ``np.i0`` there): the
same Chebyshev expansions NumPy evaluates for i0 (Cephes' coefficients, read
from NumPy), and for i1 the power series ``sum (x/2)^(2k+1) / (k! (k+1)!)``,
whose terms are all of one sign: its relative error is a few ulps per term
(below 1e-13 up to |x| = 700, where i1 overflows).
"""
import math

import numpy as np
import scipy.special as sc
from numba.extending import overload, register_jitable
from numpy.lib import _function_base_impl as _impl

from ._nbutil import elementwise_overload

_I0A = np.array(_impl._i0A, dtype=np.float64)
_I0B = np.array(_impl._i0B, dtype=np.float64)


def i0(x):
    """np.i0 (a NumPy float for a scalar x, as np.i0 gives a 0-d array)."""
    out = np.i0(x)
    return out[()] if np.ndim(x) == 0 else out


def i1(x):
    """scipy.special.i1: the derivative of i0."""
    return sc.i1(x)


@register_jitable
def _chbevl(x, vals):
    b0 = vals[0]
    b1 = 0.0
    b2 = 0.0
    for i in range(1, vals.shape[0]):
        b2 = b1
        b1 = b0
        b0 = x * b1 - b2 + vals[i]
    return 0.5 * (b0 - b2)


@register_jitable
def i0_scalar(x):
    x = abs(x)
    if x <= 8.0:
        return math.exp(x) * _chbevl(x / 2.0 - 2.0, _I0A)
    return math.exp(x) * _chbevl(32.0 / x - 2.0, _I0B) / math.sqrt(x)


@register_jitable
def i1_scalar(x):
    q = 0.25 * x * x
    term = 0.5 * x
    total = term
    k = 0
    while k < 2000 and abs(term) > 1e-17 * abs(total):
        k += 1
        term *= q / (k * (k + 1.0))
        total += term
    return total


overload(i0)(elementwise_overload(i0_scalar, "i0"))
overload(i1)(elementwise_overload(i1_scalar, "i1"))

EXPORTS = ("i0", "i1")
