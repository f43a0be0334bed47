"""``np.i0`` and the scatter primitive behind ``np.add.at`` / ``np.put``.

``np.i0`` is elementwise with partial ``scipy.special.i1`` (runtime/bessel.py
has both for Numba).  ``rt.add_at(a, indices, b)`` is ``a`` with ``b`` added at
``indices`` (every repeat counted, as ``np.add.at`` does), returned as a new
array; the lowering of ``np.add.at(a, idx, b)`` writes it back into ``a``
(s2s_ad/rules/library/indexing.py).
"""
import numpy as np
import scipy.special as sc

from .. import runtime as rt
from .internal import INTERNAL
from .linalg import batch_loop
from .registry import _BY_OBJECT, RULES, Rule, elementwise, register
from .scans import _scan_rank, batch_axis

elementwise("np.i0", np.i0, ("x",), {"x": "rt.i1(x)"}, emit="rt.i0", also=(sc.i0,))
#: i0's derivative; its own derivative has no rule (a second derivative of i0 says so).
INTERNAL["rt.i1"] = Rule(name="rt.i1", params=("x",), operands=("x",), emit="rt.i1",
                         nondiff=True, undiff=("x",))


# -- scatter primitives: np.add.at and np.put (their lowering: library/scatter.py) -----------

def _same_rank(args, params):
    return args[0]


def _scatter(rule, obj):
    """Internal (not in RULES, not in the docs table), yet callable by the library."""
    INTERNAL[rule.emit] = rule
    _BY_OBJECT[id(obj)] = rule
    rule.obj = obj
    return rule


_scatter(Rule(name="rt.add_at", params=("a", "indices", "b"), operands=("a", "b"),
              emit="rt.add_at", vjp={"a": "g", "b": "rt.unbroadcast(rt.take_at(g, indices), b)"},
              jvp={"a": "da", "b": "rt.add_at(rt.zeros_like(a), indices, db)"},
               rank=_same_rank, index_params=("indices",), batch="scatter"), rt.add_at)
_scatter(Rule(name="rt.take_at", params=("x", "indices"), operands=("x",), emit="rt.take_at",
              vjp={"x": "rt.add_at(rt.zeros_like(x), indices, g)"}, linear=True), rt.take_at)
_scatter(Rule(name="rt.put_into", params=("a", "ind", "v", "mode"), operands=("a", "v"),
              emit="rt.put_into", defaults={"mode": "raise"},
              vjp={"a": "rt.put_into(g, ind, 0.0, mode)", "v": "rt.put_grad(g, ind, v, mode)"},
              jvp={"a": "rt.put_into(da, ind, 0.0, mode)",
                   "v": "rt.put_into(rt.zeros_like(a), ind, dv, mode)"},
              rank=_same_rank, batch=batch_loop), rt.put_into)
_scatter(Rule(name="rt.put_grad", params=("c", "ind", "v", "mode"), operands=("c", "v"),
              emit="rt.put_grad", defaults={"mode": "raise"},
              vjp={"c": "rt.put_into(rt.zeros_like(c), ind, g, mode)"}, linear=True,
              piecewise=("v",), batch=batch_loop), rt.put_grad)


# -- np.argpartition: np.partition's permutation (np.partition: library/indexing.py) --------
register(Rule(name="np.argpartition", params=("a", "kth", "axis"), operands=("a",),
              emit="rt.argpartition", defaults={"axis": -1}, nondiff=True, rank=_scan_rank,
              batch=batch_axis), np.argpartition)

# np.searchsorted: where v's values go in the sorted a (an index: no derivative; np.interp
# reads it, library/numeric.py).
register(Rule(name="np.searchsorted", params=("a", "v", "side"), operands=("a", "v"),
              emit="np.searchsorted", defaults={"side": "left"}, nondiff=True,
              rank=lambda args, params: args[1], batch=batch_loop), np.searchsorted)

# np.nonzero(a) / np.where(a): one index array per axis, each one primitive (no derivative;
# usable inside differentiated code as an index).  np.nonzero: library/indexing.py.
_scatter(Rule(name="rt.nonzero_axis", params=("a", "axis"), operands=("a",),
              emit="rt.nonzero_axis", nondiff=True, rank=lambda args, params: 1),
         rt.nonzero_axis)


def _where_forms(args, kwargs):
    """``np.where(condition)`` alone is ``np.nonzero(condition)``."""
    if len(args) + len(kwargs) == 1:
        from . import library
        return library.lookup(np.nonzero)
    return None


RULES["np.where"].forms = _where_forms
