"""Array primitives: reductions, linear algebra, shape operations, indexing,
constructors.

Linear primitives declare their transpose as VJP templates; where Numba lacks
a NumPy feature (``axis``/``keepdims`` reductions, mixed-dtype ``dot``), the
primal is printed as a call to the runtime's equivalent.
"""
import ast

import numpy as np

from .. import _stop
from .internal import BDOT, BINNER, BMATMUL, BOUTER
from .registry import RULES, Rule, linear, nondiff, nonlinear, register

AXES = {"axis": None, "keepdims": False}
REDUCTION = {"shape": "reduced", "batch": "reduction"}
SAME = {"shape": "same", "batch": "same"}

# -- reductions ----------------------------------------------------------
linear("np.sum", np.sum, ("a", "axis", "keepdims"), ("a",),
       {"a": "rt.sum_grad(g, a, axis, keepdims)"}, emit="rt.sum", defaults=AXES,
       methods=("sum",), shape="reduced", batch="reduction", total="elements",
       shape_only=("a",), kept_vjp={"a": "rt.sum_grad_kept(g, a, axis, keepdims)"})
linear("np.mean", np.mean, ("a", "axis", "keepdims"), ("a",),
       {"a": "rt.mean_grad(g, a, axis, keepdims)"}, emit="rt.mean", defaults=AXES,
       methods=("mean",), shape_only=("a",),
       kept_vjp={"a": "rt.mean_grad_kept(g, a, axis, keepdims)"}, **REDUCTION)
# Not linear: each is the sum over the reduced axes of its partials times
# the tangent (the partials of max/min share the derivative among ties).
nonlinear("np.prod", np.prod, ("a", "axis", "keepdims"), ("a",),
          {"a": "rt.prod_grad(g, a, axis, keepdims)"},
          {"a": "rt.sum(rt.prod_grad(np.ones_like(out), a, axis, keepdims) * da, axis, "
                "keepdims)"},
          emit="rt.prod", defaults=AXES, methods=("prod",), **REDUCTION)
_MINMAX_JVP = {"a": "rt.sum(rt.minmax_grad(np.ones_like(out), a, out, axis, keepdims) * da, "
                    "axis, keepdims)"}
nonlinear("np.max", np.max, ("a", "axis", "keepdims"), ("a",),
          {"a": "rt.minmax_grad(g, a, out, axis, keepdims)"}, _MINMAX_JVP, emit="rt.amax",
          defaults=AXES, methods=("max",), also=(np.amax,), reduces_iterable=max, **REDUCTION)
nonlinear("np.min", np.min, ("a", "axis", "keepdims"), ("a",),
          {"a": "rt.minmax_grad(g, a, out, axis, keepdims)"}, _MINMAX_JVP, emit="rt.amin",
          defaults=AXES, methods=("min",), also=(np.amin,), reduces_iterable=min, **REDUCTION)

# -- linear algebra --------------------------------------------------------
linear("np.dot", np.dot, ("a", "b"), ("a", "b"),
       {"a": "rt.dot_grad_a(g, a, b)", "b": "rt.dot_grad_b(g, a, b)"}, emit="rt.dot",
       methods=("dot",), batch="product", batched=BDOT, total="products", contraction=True)
linear("np.matmul", np.matmul, ("x1", "x2"), ("x1", "x2"),
       {"x1": "rt.matmul_grad_a(g, x1, x2)", "x2": "rt.matmul_grad_b(g, x1, x2)"},
       emit="rt.matmul", operator=ast.MatMult, batch="product", batched=BMATMUL, contraction=True,
       row_sum_vjp={"x1": "rt.matmul(rt.sum(g, axis=0), np.transpose(x2))"})
linear("np.inner", np.inner, ("a", "b"), ("a", "b"),
       {"a": "rt.inner_grad_a(g, a, b)", "b": "rt.inner_grad_b(g, a, b)"}, emit="rt.inner",
       batch="product", batched=BINNER, total="products", contraction=True)
linear("np.outer", np.outer, ("a", "b"), ("a", "b"),
       {"a": "rt.reshape_like(rt.dot(g, np.ravel(b)), a)",
        "b": "rt.reshape_like(rt.dot(np.ravel(a), g), b)"}, batch="product", batched=BOUTER)

# -- shape operations --------------------------------------------------------
_RESHAPE_BACK = {"a": "rt.reshape_like(g, a)"}
linear("np.reshape", np.reshape, ("a", "shape"), ("a",), _RESHAPE_BACK, methods=("reshape",),
       shape="reshaped", batch="reshape", view=True, shaped_by_first=True)
linear("np.ravel", np.ravel, ("a",), ("a",), _RESHAPE_BACK, methods=("ravel", "flatten"),
       batch="ravel", view=True, shaped_by_first=True)
linear("np.squeeze", np.squeeze, ("a", "axis"), ("a",), _RESHAPE_BACK, emit="rt.squeeze",
       defaults={"axis": None}, methods=("squeeze",), batch="squeeze",
       view=True, shaped_by_first=True)
linear("np.expand_dims", np.expand_dims, ("a", "axis"), ("a",), _RESHAPE_BACK,
       batch="expand_dims", view=True, shaped_by_first=True)
linear("np.transpose", np.transpose, ("a", "axes"), ("a",),
       {"a": "rt.transpose_grad(g, axes)"}, defaults={"axes": None},
       methods=("transpose",), shape="permuted", batch="transpose",
       view=True, shaped_by_first=True)
linear("np.copy", np.copy, ("a",), ("a",), {"a": "g"}, methods=("copy",), fresh=True,
       shaped_by_first=True, **SAME)
linear("np.asarray", np.asarray, ("a",), ("a",), {"a": "g"}, view=True, from_list=True,
       shaped_by_first=True, stacks_list=True, **SAME)
# ``a.astype(dtype)``: a cast to a float dtype passes the derivative through
# (the cotangent cast back to a's dtype); to an integer or boolean dtype it
# is another primitive, with no derivative (``forms`` picks it).
linear("np.astype", np.astype, ("a", "dtype"), ("a",), {"a": "rt.like(g, a)"}, emit="rt.astype",
       methods=("astype",), shaped_by_first=True, **SAME)
nondiff("astype_exact", None, ("a", "dtype"), emit="rt.astype", operands=("a",),
        shaped_by_first=True, **SAME)


def _exact_cast_form(args, kwargs):
    """``a.astype(int)``, ``a.astype(bool)``: the cast with no derivative."""
    dtype = args[1] if len(args) > 1 else kwargs.get("dtype")
    try:
        kind = np.dtype(dtype.value).kind
    except (AttributeError, TypeError):
        return None          # not a constant dtype: the static parameter's error
    return RULES["astype_exact"] if kind in "iub" else None


RULES["np.astype"].forms = _exact_cast_form
linear("float", float, ("x",), ("x",), {"x": "g"}, shape="scalar", batch="same", cheap=True)


def _concatenate_vjp(i, items, g, params, atom):
    """Cotangent of the i-th array of ``np.concatenate``: its slice of g."""
    axis = params["axis"]
    offset = None
    for prev in items[:i]:
        size = ast.Subscript(ast.Call(ast.Name("np.shape", ast.Load()), [atom(prev)], []),
                             ast.Constant(axis), ast.Load())
        offset = size if offset is None else ast.BinOp(offset, ast.Add(), size)
    size = ast.Subscript(ast.Call(ast.Name("np.shape", ast.Load()), [atom(items[i])], []),
                         ast.Constant(axis), ast.Load())
    return ast.Call(ast.Name("rt.split_grad", ast.Load()),
                    [g, offset or ast.Constant(0), size, ast.Constant(axis)], [])


def _stack_vjp(i, items, g, params, atom):
    """Cotangent of the i-th array of ``np.stack``: g's i-th slice."""
    return ast.Call(ast.Name("rt.stack_grad", ast.Load()),
                    [g, ast.Constant(i), ast.Constant(params["axis"])], [])


def _array_vjp(i, items, g, params, atom):
    """Cotangent of the i-th element of ``np.array([...])``."""
    return ast.Subscript(g, ast.Constant(i), ast.Load())


linear("np.concatenate", np.concatenate, ("arrays", "axis"), ("arrays",),
       {"arrays": _concatenate_vjp}, defaults={"axis": 0}, shape="joined", batch="concatenate")
linear("np.stack", np.stack, ("arrays", "axis"), ("arrays",), {"arrays": _stack_vjp},
       defaults={"axis": 0}, shape="stacked", batch="stack", stacks_list=True)
linear("np.array", np.array, ("object",), ("object",), {"object": _array_vjp}, shape="stacked",
       batch="array", from_list=True, stacks_list=True)

# -- indexing ----------------------------------------------------------------
# The reverse transform accumulates ``g`` into the indexed part of the
# operand's adjoint in place, so reading one element costs O(1).
register(Rule(name="getitem", params=("x", "index"), operands=("x",),
              vjp={"x": "rt.index_grad(g, x, index)"}, linear=True, emit="getitem", cheap=True,
              shaped_by_first=True))

# ``x[index] = value`` writes into x's storage; the reverse transform saves
# the overwritten part when the adjoint needs it and restores it afterwards.
register(Rule(name="setitem", params=("x", "value", "index"), operands=("x", "value"),
              vjp={"x": "g", "value": "g"}, linear=True, emit="setitem", mutates=True))
# Copies join values at the end of branches and loop bodies.
register(Rule(name="copy", params=("x",), operands=("x",), vjp={"x": "g"}, linear=True,
              emit="identity", cheap=True, shaped_by_first=True, **SAME))

# -- stop_gradient -----------------------------------------------------------
register(Rule(name="stop_gradient", params=("x",), operands=("x",), nondiff=True,
              emit="identity", shaped_by_first=True, **SAME), _stop.stop_gradient)

# -- constructors and queries: zero derivative ----------------------------------
_DTYPE = {"dtype": None}
for _fn in ("zeros", "ones", "empty"):
    nondiff(f"np.{_fn}", getattr(np, _fn), ("shape", "dtype"), defaults=_DTYPE,
            operands=(), shape="from_shape", fresh=_fn != "ones",
            fill={"zeros": 0.0, "ones": 1.0}.get(_fn))
for _fn in ("zeros_like", "ones_like", "empty_like"):
    nondiff(f"np.{_fn}", getattr(np, _fn), ("a", "dtype"), defaults=_DTYPE, operands=("a",),
            fresh=_fn != "ones_like", metadata=True, **SAME)
linear("np.full", np.full, ("shape", "fill_value", "dtype"), ("fill_value",),
       {"fill_value": "rt.unbroadcast(g, fill_value)"}, defaults=_DTYPE, shape="from_shape")
linear("np.full_like", np.full_like, ("a", "fill_value", "dtype"), ("a", "fill_value"),
       {"fill_value": "rt.unbroadcast(g, fill_value)"}, defaults=_DTYPE, shape="same",
       batch="full_like")
nondiff("np.arange", np.arange, ("start", "stop", "step"), defaults={"stop": None, "step": None})
nondiff("np.eye", np.eye, ("N",))
nondiff("np.shape", np.shape, ("a",), batch="query_shape", metadata=True, gives_shape=True)
nondiff("np.ndim", np.ndim, ("a",), emit="rt.ndim", shape="scalar",   # Numba has no np.ndim
        batch="query_ndim", gives_rank=True, metadata=True)
nondiff("np.size", np.size, ("a",), shape="scalar", batch="query_size", metadata=True)
nondiff("len", len, ("obj",), shape="scalar", batch="query_len", metadata=True, cheap=True)
nondiff("int", int, ("x",), shape="scalar", cheap=True)
nondiff("np.argmax", np.argmax, ("a", "axis"), defaults={"axis": None}, operands=("a",),
        methods=("argmax",), shape="reduced", batch="axis_required")
nondiff("np.argmin", np.argmin, ("a", "axis"), defaults={"axis": None}, operands=("a",),
        methods=("argmin",), shape="reduced", batch="axis_required")
nondiff("np.argsort", np.argsort, ("a",), methods=("argsort",))
nondiff("dtype", None, ("a",), emit="attribute", shape="same", batch="query")


def _registered(name):
    from .registry import RULES
    return RULES[name]


# -- output ranks: (operand ranks, params) -> the result's rank (None: unknown) ----------
# Read by s2s_ad/analyses/ranks.py through Rule.rank, like every rule's other facts.

def _product_rank(args, params):
    """np.dot / np.matmul: a scalar factor keeps the other's rank."""
    a, b = args[0], args[1]
    if a is None or b is None:
        return None
    return a + b if a == 0 or b == 0 else a + b - 2


def _inner_rank(args, params):
    return None if None in args[:2] else max(args[0] + args[1] - 2, 0)


def _expanded_rank(args, params):
    """np.expand_dims: one more axis per entry of ``axis`` (an int or a tuple)."""
    axis = params.get("axis")
    items = getattr(axis, "items", None)
    value = getattr(axis, "value", None)
    count = len(items) if items is not None else len(value) if isinstance(value, tuple) else 1
    return None if args[0] is None else args[0] + count


for _name, _rank_rule in (("np.eye", lambda args, params: 2),
                          ("np.arange", lambda args, params: 1),
                          ("np.shape", lambda args, params: 1),   # indexes like a 1-D array
                          ("np.outer", lambda args, params: 2),
                          ("np.ravel", lambda args, params: 1),
                          ("np.expand_dims", _expanded_rank),
                          ("np.dot", _product_rank), ("np.matmul", _product_rank),
                          ("np.inner", _inner_rank)):
    _registered(_name).rank = _rank_rule
