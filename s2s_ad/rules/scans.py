"""Scans and permutations along an axis: ``cumsum``, ``cumprod``,
``argsort``, ``take_along_axis``.

Each is one declaration: printed as a runtime helper (``rt.cumsum``...,
runtime/scans.py, with Numba versions in runtime/_nb_scans.py), its VJP and
JVP templates, its output rank and its batching rule (the axis moves past
the batch axis; ``axis=None`` runs once per example).  ``np.sort``,
``np.median`` and ``np.quantile``/``np.percentile`` are written over these in
s2s_ad/rules/library/statistics.py.

``cumprod``'s derivatives run the product rule's recursion instead of
dividing by ``a``, so they are exact where ``a`` has zeros.
"""
import numpy as np

from ..ir import Const
from . import arrays  # noqa: F401  (np.argsort is declared there first)
from .internal import INTERNAL
from .linalg import batch_loop
from .registry import RULES, Rule, register


def _axis_value(params, default=None):
    axis = params.get("axis")
    return getattr(axis, "value", default) if axis is not None else default


def _scan_rank(args, params):
    """Same rank along an axis; 1 for axis None (the flattened array)."""
    if _axis_value(params) is None:
        return 1
    return args[0]


def _take_rank(args, params):
    if _axis_value(params) is None:
        return 1
    return args[1]


def batch_axis(vz, s, body):
    """vmap of a function along ``axis``: the same function one axis further
    (every array operand made batched); axis None loops over the examples."""
    axis = s.params.get("axis")
    if not isinstance(axis, Const) or axis.value is None:
        return batch_loop(vz, s, body)
    ref = next(a for a in s.args if vz.is_b(a))
    rank = vz.rank(ref, s.loc)
    args = [vz.batch(a, body, s.loc) if vz.rank(a, s.loc) > 0 or vz.is_b(a) else a
            for a in s.args]
    params = dict(s.params, axis=Const(axis.value % rank + 1))
    vz.emit(body, s.rule, args, params, s.loc, s.targets[0])


def _declare(rule, *objects, methods=()):
    rule.batch = batch_axis
    return register(rule, *objects, methods=methods)


_AXIS = {"axis": None}
_declare(Rule(name="np.cumsum", params=("a", "axis"), operands=("a",), emit="rt.cumsum",
              defaults=_AXIS, vjp={"a": "rt.cumsum_grad(g, a, axis)"}, linear=True,
              rank=_scan_rank), np.cumsum, methods=("cumsum",))
_declare(Rule(name="np.cumprod", params=("a", "axis"), operands=("a",), emit="rt.cumprod",
              defaults=_AXIS, vjp={"a": "rt.cumprod_grad(g, a, out, axis)"},
              jvp={"a": "rt.cumprod_jvp(da, a, out, axis)"}, rank=_scan_rank),
         np.cumprod, methods=("cumprod",))
_declare(Rule(name="np.take_along_axis", params=("arr", "indices", "axis"),
              operands=("arr", "indices"), emit="rt.take_along_axis",
              vjp={"arr": "rt.take_along_axis_grad(g, arr, indices, axis)"}, linear=True,
              piecewise=("indices",), rank=_take_rank), np.take_along_axis)

# argsort takes NumPy's axis (default -1): it orders np.sort's permutation.
_ARGSORT = RULES["np.argsort"]
_ARGSORT.params, _ARGSORT.defaults, _ARGSORT.emit = ("a", "axis"), {"axis": -1}, "rt.argsort"
_ARGSORT.rank, _ARGSORT.batch = _scan_rank, batch_axis


# -- the helpers the derivative templates call ---------------------------------------------
def _helper(rule):
    rule.batch = batch_axis
    INTERNAL[rule.emit] = rule
    return rule


#: Reversed cumulative sum: linear in g (its transpose is cumsum again).
_helper(Rule(name="rt.cumsum_grad", params=("g", "a", "axis"), operands=("g", "a"),
             emit="rt.cumsum_grad", defaults=_AXIS,
             vjp={"g": "rt.cumsum(g, axis)"}, linear=True,
             piecewise=("a",), rank=lambda args, p: args[1]))
_helper(Rule(name="rt.cumprod_grad", params=("g", "a", "out", "axis"),
             operands=("g", "a", "out"), emit="rt.cumprod_grad", defaults=_AXIS,
             nondiff=True, undiff=("g", "a", "out"), rank=lambda args, p: args[1]))
_helper(Rule(name="rt.cumprod_jvp", params=("da", "a", "out", "axis"),
             operands=("da", "a", "out"), emit="rt.cumprod_jvp", defaults=_AXIS,
             nondiff=True, undiff=("da", "a", "out"), rank=lambda args, p: args[2]))
_helper(Rule(name="rt.take_along_axis_grad", params=("g", "arr", "indices", "axis"),
             operands=("g", "arr", "indices"), emit="rt.take_along_axis_grad",
             vjp={"g": "rt.take_along_axis(g, indices, axis)"}, linear=True,
             piecewise=("arr", "indices"), rank=lambda args, p: args[1]))

