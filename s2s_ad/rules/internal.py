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
                            emit="rt.zeros_like", nondiff=True))

#: A tangent broadcast to the shape of the value it belongs to.
BROADCAST_LIKE = _internal(Rule(name="rt.broadcast_like", params=("t", "x"), operands=("t", "x"),
                                emit="rt.broadcast_like", vjp={"t": "rt.unbroadcast(g, t)"}))

#: Weights of a max/min reduction's input (ties share): piecewise constant.
MINMAX_GRAD = _internal(Rule(name="rt.minmax_grad", params=("g", "a", "out", "axis", "keepdims"),
                             operands=("g", "a", "out"), emit="rt.minmax_grad",
                             defaults={"axis": None, "keepdims": False},
                             vjp={"g": "rt.minmax_grad(g, a, out, axis, keepdims)"},
                             piecewise=("a", "out")))

#: d prod / d a, scaled by ``g``.  Its own derivative in ``a`` has no rule.
PROD_GRAD = _internal(Rule(name="rt.prod_grad", params=("g", "a", "axis", "keepdims"),
                           operands=("g", "a"), emit="rt.prod_grad",
                           defaults={"axis": None, "keepdims": False},
                           vjp={"g": "rt.prod_grad(g, a, axis, keepdims)"}, undiff=("a",)))


# -- vectorized (batched) code: values with a leading batch axis --------------------
def _batching(name, params):
    return _internal(Rule(name=f"rt.{name}", params=params, operands=params,
                          emit=f"rt.{name}", nondiff=True))


LIFT = _batching("lift", ("x", "rank"))
BROADCAST_BATCH = _batching("broadcast_batch", ("x", "like"))
TAKE = _batching("take", ("x", "i"))
BDOT = _batching("bdot", ("a", "b", "a_batched", "b_batched"))
BMATMUL = _batching("bmatmul", ("a", "b", "a_batched", "b_batched"))
BINNER = _batching("binner", ("a", "b", "a_batched", "b_batched"))
BOUTER = _batching("bouter", ("a", "b", "a_batched", "b_batched"))
BATCH_BROADCAST_LIKE = _batching("batch_broadcast_like", ("t", "x", "x_batched"))
