"""Elementwise functions of ``scipy.special``, the remaining ``math``
functions, and ``np.fmod``/``np.fabs``/``np.float_power``/``np.nan_to_num``.

Each is one declaration of its partial derivatives.  The ``scipy.special``
ones print as runtime helpers (runtime/special.py): SciPy in Python, scalar
kernels under Numba (digamma, polygamma and erfinv written for Numba, see
that module for their accuracy), so every mode and backend works.
"""
import math

import numpy as np
import scipy.special as sc

from .registry import Rule, elementwise, register

POS = "positive"
UNIT = "unit"

# -- scipy.special ------------------------------------------------------------------------
_SQRT_PI_2 = "0.886226925452758"          # sqrt(pi) / 2
_TWO_SQRT_PI = "1.1283791670955126"       # 2 / sqrt(pi)
elementwise("scipy.special.gammaln", sc.gammaln, ("x",), {"x": "rt.digamma(x)"},
            emit="rt.gammaln", samples=POS)
elementwise("scipy.special.digamma", sc.digamma, ("x",), {"x": "rt.polygamma(1, x)"},
            emit="rt.digamma", samples=POS, also=(sc.psi,))
elementwise("scipy.special.polygamma", sc.polygamma, ("n", "x"),
            {"x": "rt.polygamma(n + 1, x)"}, emit="rt.polygamma", samples={"n": 2, "x": POS})
elementwise("scipy.special.erf", sc.erf, ("x",), {"x": f"{_TWO_SQRT_PI} * np.exp(-x * x)"},
            emit="rt.erf")
elementwise("scipy.special.erfc", sc.erfc, ("x",), {"x": f"-{_TWO_SQRT_PI} * np.exp(-x * x)"},
            emit="rt.erfc")
elementwise("scipy.special.erfinv", sc.erfinv, ("x",),
            {"x": f"{_SQRT_PI_2} * np.exp(out * out)"}, emit="rt.erfinv", samples=UNIT)

elementwise("scipy.special.gamma", sc.gamma, ("x",), {"x": "out * rt.digamma(x)"},
            emit="rt.gamma", samples=POS)
_PDF = "0.3989422804014327 * np.exp(-0.5 * x * x"         # the standard normal density
elementwise("scipy.special.ndtr", sc.ndtr, ("x",), {"x": f"{_PDF})"}, emit="rt.ndtr")
elementwise("scipy.special.log_ndtr", sc.log_ndtr, ("x",), {"x": f"{_PDF} - out)"},
            emit="rt.log_ndtr")
elementwise("scipy.special.entr", sc.entr, ("x",), {"x": "-(np.log(x) + 1.0)"},
            emit="rt.entr", samples=POS)

# -- math ---------------------------------------------------------------------------------
_LN2 = "0.6931471805599453"
_MATH = {
    "acosh": ("1.0 / math.sqrt(x * x - 1.0)", "above_one", None),
    "cbrt": ("1.0 / (3.0 * out * out)", POS, "rt.math_cbrt"),
    "exp2": (f"out * {_LN2}", None, None),
    "degrees": ("57.29577951308232", None, None),
    "radians": ("0.017453292519943295", None, None),
    "lgamma": ("rt.digamma(x)", POS, None),
    "gamma": ("out * rt.digamma(x)", POS, None),
}
for _fn, (_partial, _dom, _emit) in _MATH.items():
    elementwise(f"math.{_fn}", getattr(math, _fn), ("x",), {"x": _partial}, samples=_dom,
                emit=_emit)
# copysign(x, y) = |x| sign(y): locally constant in y (y = -0.0 counts as negative, as
# math.copysign says).
elementwise("math.copysign", math.copysign, ("x", "y"),
            {"x": "math.copysign(1.0, x) * math.copysign(1.0, y)", "y": "0.0"})
# fmod and remainder subtract an integer multiple of y (trunc / round-to-even of x / y).
elementwise("math.fmod", math.fmod, ("x", "y"),
            {"x": "1.0", "y": "-math.trunc(x / y)"}, emit="rt.math_fmod", samples=POS)
elementwise("math.remainder", math.remainder, ("x", "y"),
            {"x": "1.0", "y": "(out - x) / y"}, emit="rt.math_remainder", samples=POS)
register(Rule(name="math.ldexp", params=("x", "i"), operands=("x", "i"),
              emit="math.ldexp", partials={"x": "math.ldexp(1.0, i)"},
              piecewise=("i",), samples={"i": 3}), math.ldexp)

# -- NumPy --------------------------------------------------------------------------------
elementwise("np.fabs", np.fabs, ("x",), {"x": "np.sign(x)"})
elementwise("np.fmod", np.fmod, ("x1", "x2"), {"x1": "1.0", "x2": "-np.trunc(x1 / x2)"},
            samples=POS)
# x1 * 2**x2 for an integer exponent x2 (locally constant, as math.ldexp's i).
elementwise("np.ldexp", np.ldexp, ("x1", "x2"), {"x1": "np.ldexp(1.0, x2)"},
            piecewise=("x2",), samples={"x2": 3})
elementwise("np.float_power", np.float_power, ("x1", "x2"),
            {"x1": "x2 * rt.float_power(x1, x2 - 1.0)", "x2": "out * np.log(x1)"},
            emit="rt.float_power", samples=POS)
# nan_to_num replaces non-finite values by constants: derivative 1 where x is finite.
register(Rule(name="np.nan_to_num", params=("x", "copy", "nan", "posinf", "neginf"),
              operands=("x",), emit="np.nan_to_num", partials={"x": "np.isfinite(x)"},
              defaults={"copy": True, "nan": 0.0, "posinf": None, "neginf": None}),
         np.nan_to_num)

