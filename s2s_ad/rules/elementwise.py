"""Elementwise primitives: NumPy ufuncs, operators and ``math`` functions.

Each is declared by its partial derivatives in terms of its operands and its
output ``out``; the reverse and forward rules follow from them.  Domains in
``samples`` keep the generic tests inside each function's domain.
"""
import ast
import math

import numpy as np

from .registry import RULES, Rule, elementwise, nondiff, register

POS = "positive"     # sample inputs in (0.5, 2)
UNIT = "unit"        # sample inputs in (-0.9, 0.9)

# Operators share the rules of their NumPy functions.
elementwise("np.add", np.add, ("x1", "x2"), {"x1": "1.0", "x2": "1.0"}, operator=ast.Add,
            cheap=True, signs=(1, 1))
elementwise("np.subtract", np.subtract, ("x1", "x2"), {"x1": "1.0", "x2": "-1.0"},
            operator=ast.Sub, cheap=True, signs=(1, -1))
elementwise("np.multiply", np.multiply, ("x1", "x2"), {"x1": "x2", "x2": "x1"},
            operator=ast.Mult, equal_operands="np.square",   # one product g * 2x, not two
            cheap=True, scales=("x1", "x2"))
elementwise("np.divide", np.divide, ("x1", "x2"), {"x1": "1.0 / x2", "x2": "-out / x2"},
            operator=ast.Div, also=(np.true_divide,), cheap=True, scales=("x1",))
elementwise("np.power", np.power, ("x1", "x2"),
            {"x1": "x2 * x1 ** (x2 - 1)", "x2": "out * np.log(x1)"},
            operator=ast.Pow, samples=POS, cheap=True)
elementwise("np.negative", np.negative, ("x",), {"x": "-1.0"}, operator=ast.USub, cheap=True)
elementwise("np.positive", np.positive, ("x",), {"x": "1.0"}, operator=ast.UAdd, cheap=True)
elementwise("np.mod", np.mod, ("x1", "x2"), {"x1": "1.0", "x2": "-np.floor(x1 / x2)"},
            operator=ast.Mod, samples=POS, also=(np.remainder,), cheap=True)

_UNARY = {
    "sin": ("np.cos(x)", None), "cos": ("-np.sin(x)", None),
    "tan": ("1.0 + out * out", UNIT),
    "arcsin": ("1.0 / np.sqrt(1.0 - x * x)", UNIT),
    "arccos": ("-1.0 / np.sqrt(1.0 - x * x)", UNIT),
    "arctan": ("1.0 / (1.0 + x * x)", None),
    "sinh": ("np.cosh(x)", None), "cosh": ("np.sinh(x)", None),
    "tanh": ("1.0 - out * out", None),
    "arcsinh": ("1.0 / np.sqrt(x * x + 1.0)", None),
    "arccosh": ("1.0 / np.sqrt(x * x - 1.0)", "above_one"),
    "arctanh": ("1.0 / (1.0 - x * x)", UNIT),
    "exp": ("out", None), "exp2": ("out * 0.6931471805599453", None),
    "expm1": ("out + 1.0", None),
    "log": ("1.0 / x", POS), "log1p": ("1.0 / (1.0 + x)", POS),
    "log2": ("1.0 / (x * 0.6931471805599453)", POS),
    "log10": ("1.0 / (x * 2.302585092994046)", POS),
    "sqrt": ("0.5 / out", POS), "cbrt": ("1.0 / (3.0 * out * out)", POS),
    "square": ("2.0 * x", None), "reciprocal": ("-out * out", POS),
}
for _fn, (_partial, _dom) in _UNARY.items():
    _obj = getattr(np, _fn)
    elementwise(f"np.{_fn}", _obj, ("x",), {"x": _partial}, samples=_dom,
                cheap=_fn == "square",       # x * x
                summed="rt.sum_squares" if _fn == "square" else None)
# |x|: partial sign(x) for real x.  For complex x its cotangent is Re(g) conj(x) / |x|
# (JAX's convention) and its tangent Re(conj(x) dx) / |x|, a real number: neither is
# a partial times the other, so both are declared (runtime/fft.py).
register(Rule(name="np.abs", params=("x",), operands=("x",), emit="np.abs",
              partials={"x": "np.sign(x)"}, vjp={"x": "rt.abs_vjp(g, x)"},
              jvp={"x": "rt.abs_jvp(dx, x)"}, cheap=True), np.abs, methods=("__abs__",))

elementwise("np.arctan2", np.arctan2, ("x1", "x2"),
            {"x1": "x2 / (x1 * x1 + x2 * x2)", "x2": "-x1 / (x1 * x1 + x2 * x2)"})
elementwise("np.hypot", np.hypot, ("x1", "x2"), {"x1": "x1 / out", "x2": "x2 / out"})
# Ties send the whole cotangent to the first operand, as NumPy's choice of
# value does; the derivative is one-sided there either way.
elementwise("np.maximum", np.maximum, ("x1", "x2"), {"x1": "x1 >= x2", "x2": "x1 < x2"})
elementwise("np.minimum", np.minimum, ("x1", "x2"), {"x1": "x1 <= x2", "x2": "x1 > x2"})
# The condition selects; it may be any truthy array, not only booleans.
elementwise("np.where", np.where, ("condition", "x", "y"),
            {"x": "condition != 0", "y": "condition == 0"}, samples={"condition": "bool"})
# clip(a, lo, hi) is minimum(maximum(a, lo), hi): where lo > hi NumPy
# returns hi, so the cotangent goes to hi alone.
elementwise("np.clip", np.clip, ("a", "a_min", "a_max"),
            {"a": "np.logical_and(a >= a_min, a <= a_max)",
             "a_min": "np.logical_and(a < a_min, a_min <= a_max)",
             "a_max": "np.logical_or(a > a_max, a_min > a_max)"}, methods=("clip",),
            emit="rt.clip")


def _clip_forms(args, kwargs):
    """``x.clip(0)``, ``x.clip(max=1.0)``, ``np.clip(a, None, hi)`` and the
    ``min=``/``max=`` spellings: the library's ``clip_open`` (one bound is
    np.maximum or np.minimum)."""
    import inspect

    from ..ir import Const
    from .library import numeric
    from .library.registry import Implementation
    bounds = list(args[1:3]) + [kwargs.get(k) for k in ("a_min", "a_max") if k in kwargs]
    if len(bounds) < 2 or {"min", "max"} & set(kwargs) or any(
            isinstance(b, Const) and b.value is None for b in bounds):
        fn = numeric.clip_open
        return Implementation("np.clip", fn, None, inspect.signature(fn))
    return None


RULES["np.clip"].forms = _clip_forms

# math functions act on Python floats.
_MATH = {
    "sin": "math.cos(x)", "cos": "-math.sin(x)", "tan": "1.0 + out * out",
    "asin": "1.0 / math.sqrt(1.0 - x * x)", "acos": "-1.0 / math.sqrt(1.0 - x * x)",
    "atan": "1.0 / (1.0 + x * x)", "sinh": "math.cosh(x)", "cosh": "math.sinh(x)",
    "tanh": "1.0 - out * out", "exp": "out", "expm1": "out + 1.0",
    "log": "1.0 / x", "log1p": "1.0 / (1.0 + x)", "log2": "1.0 / (x * 0.6931471805599453)",
    "log10": "1.0 / (x * 2.302585092994046)", "sqrt": "0.5 / out", "fabs": "np.sign(x)",
    "asinh": "1.0 / math.sqrt(x * x + 1.0)", "atanh": "1.0 / (1.0 - x * x)",
    "erf": "1.1283791670955126 * math.exp(-x * x)",
    "erfc": "-1.1283791670955126 * math.exp(-x * x)",
}
_MATH_DOMAIN = {"asin": UNIT, "acos": UNIT, "atanh": UNIT, "tan": UNIT, "log": POS,
                "log1p": POS, "log2": POS, "log10": POS, "sqrt": POS}
for _fn, _partial in _MATH.items():
    elementwise(f"math.{_fn}", getattr(math, _fn), ("x",), {"x": _partial},
                samples=_MATH_DOMAIN.get(_fn))


def _log_base_form(args, kwargs):
    """``math.log(x, base)``: the library's form (log(x) / log(base))."""
    if len(args) == 2:
        from .library import elementwise as library_elementwise
        from .library.registry import helper
        return helper(library_elementwise.log_base)
    return None


RULES["math.log"].forms = _log_base_form
elementwise("math.pow", math.pow, ("x", "y"),
            {"x": "y * math.pow(x, y - 1.0)", "y": "out * math.log(x)"}, samples=POS)
elementwise("math.atan2", math.atan2, ("y", "x"),
            {"y": "x / (x * x + y * y)", "x": "-y / (x * x + y * y)"})
elementwise("math.hypot", math.hypot, ("x", "y"), {"x": "x / out", "y": "y / out"})

# Zero-derivative elementwise functions and comparisons.
for _fn in ("sign", "floor", "ceil", "trunc", "rint", "isnan", "isinf", "isfinite",
            "logical_not"):
    nondiff(f"np.{_fn}", getattr(np, _fn), ("x",))
nondiff("np.round", np.round, ("a", "decimals"), defaults={"decimals": 0},
        operands=("a",), also=(np.around,), methods=("round",), shape="same", batch="same")
for _fn in ("floor", "ceil", "trunc", "isnan", "isinf", "isfinite"):
    nondiff(f"math.{_fn}", getattr(math, _fn), ("x",))
_COMPARE = {"less": ast.Lt, "less_equal": ast.LtE, "greater": ast.Gt,
            "greater_equal": ast.GtE, "equal": ast.Eq, "not_equal": ast.NotEq}
for _fn, _op in _COMPARE.items():
    nondiff(f"np.{_fn}", getattr(np, _fn), ("x1", "x2"), operator=_op, cheap=True)
for _fn in ("logical_and", "logical_or", "logical_xor"):
    nondiff(f"np.{_fn}", getattr(np, _fn), ("x1", "x2"))
nondiff("np.floor_divide", np.floor_divide, ("x1", "x2"), operator=ast.FloorDiv, cheap=True)
nondiff("and", None, ("x1", "x2"), operator=ast.And, cheap=True)
nondiff("or", None, ("x1", "x2"), operator=ast.Or, cheap=True)
nondiff("not", None, ("x",), operator=ast.Not, cheap=True)
