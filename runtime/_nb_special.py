"""Numba overloads of the scipy.special helpers in special.py.

Each applies a scalar kernel elementwise: Numba's ``math.lgamma``,
``math.erf`` and ``math.erfc``, and the kernels of special.py for digamma,
polygamma and erfinv.  A scalar argument gives a float; an array gives an
array of its float dtype (float64 for integers), as SciPy's ufuncs do.
``polygamma`` takes a scalar order ``n``.
"""
import math

from numba import types
from numba.core.errors import TypingError
from numba.extending import overload

from . import special
from ._nbutil import compile_impl, elementwise_impl, elementwise_overload, is_scalar

_KERNELS = {"digamma": special.digamma_scalar, "erfinv": special.erfinv_scalar,
            "gammaln": math.lgamma, "erf": math.erf, "erfc": math.erfc, "gamma": math.gamma,
            "ndtr": special.ndtr_scalar, "log_ndtr": special.log_ndtr_scalar,
            "entr": special.entr_scalar}


for _name, _kernel in _KERNELS.items():
    overload(getattr(special, _name))(elementwise_overload(_kernel, _name))
del _name, _kernel


@overload(special.polygamma)
def _polygamma(n, x):
    if not isinstance(n, types.Integer):
        raise TypingError("s2s_ad.runtime.polygamma in compiled code takes an integer order n, "
                          f"got {n}")
    return elementwise_impl(special.polygamma_scalar, x, "polygamma", lead="n, ")


@overload(special.float_power)
def _float_power(x1, x2):
    def cast(name, ty):
        if is_scalar(ty):
            return f"np.float64({name})"
        return f"{name}.astype(np.float64)"
    return compile_impl(f"def impl(x1, x2):\n    return np.power({cast('x1', x1)}, "
                        f"{cast('x2', x2)})")


@overload(special.math_cbrt)
def _math_cbrt(x):
    return compile_impl("def impl(x):\n    return np.cbrt(float(x))")


@overload(special.math_fmod)
def _math_fmod(x, y):
    return compile_impl("def impl(x, y):\n    return np.fmod(float(x), float(y))")


@overload(special.math_remainder)
def _math_remainder(x, y):
    return lambda x, y: special.remainder_scalar(float(x), float(y))
