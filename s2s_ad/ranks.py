"""Rank inference: the number of dimensions of every name, where it is known.

Receives a lowered function and the rank of each parameter leaf (0 for
Python and NumPy scalars; None when unknown, as for called helpers).
Guarantees: ``ranks[name]`` is an int only when every path gives the name
that rank.  The reverse transform uses it to leave out ``unbroadcast`` where
an operand already has the output's shape (scalars above all), and to keep
scalar values that are cheap to recompute off the stacks.
"""
from .ir import Call, Const, For, Prim, Slice, Tup, Var, walk

_AXIS_REDUCTIONS = {"np.sum", "np.mean", "np.prod", "np.max", "np.min"}
_SCALAR = {"len", "int", "float", "np.ndim", "np.size", "np.argmax", "np.argmin"}
_SAME = {"copy", "stop_gradient", "np.transpose", "np.copy", "np.asarray", "np.negative",
         "np.positive", "np.zeros_like", "np.ones_like", "np.empty_like", "np.full_like",
         "np.round", "dtype"}


def infer(fn, param_ranks):
    ranks = dict(zip(fn.params, param_ranks))
    ranks.update((s.index, 0) for s in walk(fn.body) if isinstance(s, For))
    for name in fn.consts:
        ranks[name] = getattr(fn.consts[name], "ndim", None)
    stmts = [s for s in walk(fn.body) if isinstance(s, (Prim, Call))]
    conflicts = set()
    for _ in range(3):            # loops: ranks settle after a pass or two
        changed = False
        for s in stmts:
            if isinstance(s, Call) or (isinstance(s, Prim) and s.rule.mutates):
                outs = [None] * len(s.targets)
            else:
                outs = [_rank(s, ranks)]
            for t, r in zip(s.targets, outs):
                if t in conflicts:
                    continue
                if t in ranks and ranks[t] != r:
                    conflicts.add(t)
                    ranks[t] = None
                    changed = True
                elif t not in ranks:
                    ranks[t] = r
                    changed = True
        if not changed:
            break
    return ranks


def rank_of(atom, ranks):
    if isinstance(atom, Const):
        v = atom.value
        return 0 if isinstance(v, (bool, int, float)) else None
    if isinstance(atom, Var):
        return ranks.get(atom.name)
    return None


def _rank(s, ranks):
    name = s.rule.name
    args = [rank_of(a, ranks) if not isinstance(a, Tup) else None for a in s.args]
    p = s.params
    if s.rule.unknown:
        return None
    if name == "np.eye":
        return 2
    if name == "np.arange":
        return 1
    if s.rule.elementwise or s.rule.name in ("and", "or", "not") or (
            s.rule.nondiff and len(s.rule.operands) in (1, 2) and s.rule.operands == s.rule.params
            and name not in _SCALAR and name != "np.shape"):
        return None if None in args else max(args, default=0)
    if name in _SCALAR or name.startswith("math."):
        return 0
    if name in _SAME:
        return args[0] if args else None
    if name in _AXIS_REDUCTIONS:
        return _reduced(args[0], p.get("axis"), p.get("keepdims"))
    if name == "getitem":
        return _indexed(args[0], p["index"], ranks)
    if name in ("np.dot", "np.matmul"):
        a, b = args
        if a is None or b is None:
            return None
        if a == 0 or b == 0:
            return a + b
        return a + b - 2
    if name == "np.inner":
        return None if None in args else max(args[0] + args[1] - 2, 0)
    if name == "np.outer":
        return 2
    if name == "np.ravel":
        return 1
    if name == "np.expand_dims":
        return None if args[0] is None else args[0] + 1
    if name == "np.reshape" or name in ("np.zeros", "np.ones", "np.empty", "np.full"):
        return _shape_rank(p.get("shape"), ranks)
    if name == "np.stack":
        items = [rank_of(x, ranks) for x in s.args[0].items] if isinstance(s.args[0], Tup) else []
        return None if not items or None in items else items[0] + 1
    if name == "np.concatenate":
        items = [rank_of(x, ranks) for x in s.args[0].items] if isinstance(s.args[0], Tup) else []
        return None if not items or None in items else items[0]
    if name == "np.array" and isinstance(s.args[0], Tup):
        items = [rank_of(x, ranks) for x in s.args[0].items]
        return None if None in items else items[0] + 1
    return None


def _reduced(rank, axis, keepdims):
    if rank is None:
        return None
    keep = isinstance(keepdims, Const) and keepdims.value is True
    if keep:
        return rank
    if axis is None or (isinstance(axis, Const) and axis.value is None):
        return 0
    if isinstance(axis, Const) and isinstance(axis.value, int):
        return rank - 1
    if isinstance(axis, Const) and isinstance(axis.value, tuple):
        return rank - len(axis.value)
    return None


def _indexed(rank, index, ranks):
    if rank is None:
        return None
    parts = index.items if isinstance(index, Tup) else (index,)
    out = rank
    for part in parts:
        if isinstance(part, Slice) or (isinstance(part, Const) and isinstance(part.value, slice)):
            continue
        if isinstance(part, Const) and part.value is None:
            out += 1
        elif isinstance(part, Const) and part.value is Ellipsis:
            continue
        elif rank_of(part, ranks) == 0:
            out -= 1
        else:
            return None        # an index array: the result's rank depends on it
    return out if out >= 0 else None


def _shape_rank(shape, ranks):
    if isinstance(shape, Tup):
        return len(shape.items)
    if isinstance(shape, Const):
        return len(shape.value) if isinstance(shape.value, tuple) else 1
    if isinstance(shape, Var) and ranks.get(shape.name) == 0:
        return 1
    return None
