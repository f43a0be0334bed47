"""Primitives that only generated derivative code uses.

Forward mode writes its tangent statements with these and with the public
rules, so a JVP is ordinary lowered code that reverse mode can
differentiate again (reverse-over-forward gives Hessian-vector products).
They live outside :data:`RULES`: users never call them, and the
documentation table lists only what users write.
"""
from .registry import Rule

INTERNAL: dict = {}      # printed name (rt.X) -> Rule


def _internal(rule):
    INTERNAL[rule.emit] = rule
    return rule


#: A zero of ``x``'s type and shape: 0.0 for scalars, zeros for arrays.
ZEROS_LIKE = _internal(Rule(name="rt.zeros_like", params=("x",), operands=("x",),
                            emit="rt.zeros_like", nondiff=True, fresh=True))

#: Uninitialised storage for ``n`` values shaped like ``x`` (``ad.vmap`` in user code).
STACK_LIKE = _internal(Rule(name="rt.stack_like", params=("x", "n"), operands=("x", "n"),
                            emit="rt.stack_like", nondiff=True,
                            rank=lambda args, params: None if args[0] is None else args[0] + 1))

#: ``print(a, b, ...)`` in a transformed function: prints the values each time
#: the statement runs (no derivative); its value is a dummy 0 nothing reads.
PRINT = _internal(Rule(name="rt.debug_print", params=("values", "sep", "end"),
                       operands=("values",), defaults={"sep": " ", "end": "\n"},
                       emit="rt.debug_print", nondiff=True, effect=True, batch="same",
                       rank=lambda args, params: 0))

#: ``len(range(start, stop, step))`` of a loop that appends to a list: an error when 0.
TRIP_COUNT = _internal(Rule(name="rt.trip_count", params=("start", "stop", "step"),
                            operands=("start", "stop", "step"), emit="rt.trip_count",
                            nondiff=True, rank=lambda args, params: 0))

#: A tangent broadcast to the shape of the value it belongs to.
BROADCAST_LIKE = _internal(Rule(name="rt.broadcast_like", params=("t", "x"), operands=("t", "x"),
                                emit="rt.broadcast_like", vjp={"t": "rt.unbroadcast(g, t)"},
                                linear=True, rank=lambda args, params: args[1]))

#: Weights of a max/min reduction's input (ties share): piecewise constant.
MINMAX_GRAD = _internal(Rule(name="rt.minmax_grad", params=("g", "a", "out", "axis", "keepdims"),
                             operands=("g", "a", "out"), emit="rt.minmax_grad",
                             defaults={"axis": None, "keepdims": False},
                             vjp={"g": "rt.minmax_grad(g, a, out, axis, keepdims)"},
                             linear=True, piecewise=("a", "out")))

#: d prod / d a, scaled by ``g``.  Its own derivative in ``a`` has no rule.
PROD_GRAD = _internal(Rule(name="rt.prod_grad", params=("g", "a", "axis", "keepdims"),
                           operands=("g", "a"), emit="rt.prod_grad",
                           defaults={"axis": None, "keepdims": False},
                           vjp={"g": "rt.prod_grad(g, a, axis, keepdims)"}, linear=True,
                           undiff=("a",)))


# -- vectorized (batched) code: values with a leading batch axis --------------------
# Their VJPs let reverse mode run over batched code (vmap of grad, vectorized).
def _batching(name, params, vjp=None, operands=None):
    return _internal(Rule(name=f"rt.{name}", params=params,
                          operands=params if operands is None else operands,
                          emit=f"rt.{name}", nondiff=vjp is None, vjp=dict(vjp or {}),
                          linear=vjp is not None))


def _product(name, grad):
    return _batching(name, ("a", "b", "a_batched", "b_batched"),
                     {"a": f"rt.{grad}(g, a, b, a_batched, b_batched, 'a')",
                      "b": f"rt.{grad}(g, a, b, a_batched, b_batched, 'b')"},
                     operands=("a", "b"))


LIFT = _batching("lift", ("x", "rank"), {"x": "rt.reshape_like(g, x)"}, operands=("x",))
BROADCAST_BATCH = _batching("broadcast_batch", ("x", "like"), {"x": "rt.unbroadcast(g, x)"},
                            operands=("x", "like"))
TAKE = _batching("take", ("x", "i"), {"x": "rt.take_grad(g, x, i)"}, operands=("x", "i"))
BDOT = _product("bdot", "bdot_grad")
BMATMUL = _product("bmatmul", "bdot_grad")
BINNER = _product("binner", "binner_grad")
BOUTER = _product("bouter", "bouter_grad")
#: An index array as integer positions for a batched gather (a per-example mask: refused).
BATCH_POSITIONS = _batching("batch_positions", ("i", "batched", "where"), operands=("i",))
#: Each example reshaped to a per-example shape held in a variable.
BATCH_RESHAPE = _batching("batch_reshape", ("a", "shape"), {"a": "rt.reshape_like(g, a)"},
                          operands=("a",))
BATCH_BROADCAST_LIKE = _batching("batch_broadcast_like", ("t", "x", "x_batched"),
                                 {"t": "rt.batch_unbroadcast(g, t)"}, operands=("t", "x"))


# -- transforms inside transformed functions (see s2s_ad/transforms/nested.py) -----------------
#: Number of elements (1 for a scalar), a unit tangent, and Jacobian storage.
FLAT_SIZE = _internal(Rule(name="rt.flat_size", params=("x",), operands=("x",),
                           emit="rt.flat_size", nondiff=True))
UNIT_LIKE = _internal(Rule(name="rt.unit_like", params=("x", "j"), operands=("x", "j"),
                           emit="rt.unit_like", nondiff=True))
JAC_ZEROS = _internal(Rule(name="rt.jac_zeros", params=("out", "x"), operands=("out", "x"),
                           emit="rt.jac_zeros", nondiff=True))
GRAD_ZEROS = _internal(Rule(name="rt.grad_zeros", params=("out", "x"), operands=("out", "x"),
                            emit="rt.grad_zeros", nondiff=True))
#: A value's elements as a 1-D array, and Jacobian storage given its final shape.
FLAT = _internal(Rule(name="rt.flat", params=("v",), operands=("v",), emit="rt.flat",
                      vjp={"v": "rt.reshape_like(g, v)"}, linear=True))
JAC_SHAPE = _internal(Rule(name="rt.jac_shape", params=("J", "out", "x"),
                           operands=("J", "out", "x"), emit="rt.jac_shape",
                           vjp={"J": "rt.jac_flat(g, out, x)"}, linear=True))


# -- index arrays of two or more dimensions under ad.jit (s2s_ad/transforms/index_arrays.py) --
#: x[index] (a boolean mask over several axes, an N-d integer array), and its cotangent.
INDEX_TAKE = _internal(Rule(name="rt.index_take", params=("x", "index"), operands=("x",),
                            emit="rt.index_take", vjp={"x": "rt.index_take_grad(g, x, index)"},
                            linear=True))
INDEX_TAKE_GRAD = _internal(Rule(name="rt.index_take_grad", params=("g", "x", "index"),
                                 operands=("g", "x"), emit="rt.index_take_grad",
                                 vjp={"g": "rt.index_take(g, index)"}, linear=True,
                                 piecewise=("x",), rank=lambda args, params: args[1]))
#: A copy of a with a[index] = v (the write is a[:] = rt.index_put(a, index, v)).
INDEX_PUT = _internal(Rule(name="rt.index_put", params=("a", "index", "v"), operands=("a", "v"),
                           emit="rt.index_put",
                           vjp={"a": "rt.index_put(g, index, 0.0)",
                                "v": "rt.unbroadcast(rt.index_written(g, index), v)"},
                           jvp={"a": "rt.index_put(da, index, 0.0)",
                                "v": "rt.index_put(rt.zeros_like(a), index, dv)"},
                           rank=lambda args, params: args[0]))
#: g[index] with zeros where a later write of the same position wins: v's cotangent.
INDEX_WRITTEN = _internal(Rule(name="rt.index_written", params=("b", "index"), operands=("b",),
                               emit="rt.index_written",
                               vjp={"b": "rt.index_put(rt.zeros_like(b), index, g)"},
                               linear=True))
