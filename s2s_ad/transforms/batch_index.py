"""Batching rules of indexing at per-example positions (used by transforms/batch.py).

``x[index]`` where ``index`` holds integer arrays (or integers) that differ
per example, or arrays NumPy would move in front (``x[ia, :, ib]``), is one
NumPy gather over the batch:

- batched ``x``: ``X[ar, i1, ..., in]`` with ``ar = np.arange(batch)`` on its
  own leading axis, so each example reads its own row;
- shared ``x``: ``x[i1, ..., in]`` itself (a batched index array's leading
  axis is the batch);
- a batched index array gets axes after its batch axis up to the rank of the
  broadcast index arrays (``rt.lift``), as NumPy broadcasts the examples'.

NumPy puts the broadcast index axes where the first index array stands when
the index arrays are adjacent, in front otherwise; where that differs from
one example's layout (``x[:, idx]`` with a batched ``idx``) one
``np.transpose`` puts the batch axis first and the rest in the example's
order.  ``x[index] = value`` writes through the same index (the value moved
to the gather's layout), and ``np.add.at`` (``rt.add_at``) scatters through
it.  Each index array passes through ``rt.batch_positions``, which turns a
shared 1-D boolean mask into positions and refuses, at run time with the
user's line, a boolean mask that differs per example (a ragged batch).
"""
from dataclasses import dataclass

from .. import rules
from ..ir import Const, Prim, Slice, Tup, Var
from ..rules.internal import BATCH_POSITIONS, LIFT
from ..rules.registry import Unvectorizable


@dataclass
class Plan:
    """The batched index and how its result is laid out."""
    items: tuple          # the batched index
    perm: tuple           # np.transpose axes taking the gather to batch-first order, or None
    region: int           # the per-example rank of x[index]


def _where(loc):
    return f"{loc.filename}:{loc.lineno}" if loc else "vmap"


def _is_slice(p):
    return isinstance(p, Slice) or (isinstance(p, Const) and isinstance(p.value, slice))


def plan(vz, x, index, s, body, x_batched):
    """The batched form of ``x[index]`` (``x`` batched or shared) at statement ``s``."""
    parts = list(index.items if isinstance(index, Tup) else (index,))
    x_rank = vz.rank(x, s.loc)
    kinds = []                      # per part: "slice", "new", "ellipsis" or its rank
    for p in parts:
        if _is_slice(p):
            if vz.is_b(p):
                raise Unvectorizable("indexing at batched positions (a slice whose bounds "
                                     "differ per example)", s.loc)
            kinds.append("slice")
        elif isinstance(p, Const) and p.value is None:
            kinds.append("new")
        elif isinstance(p, Const) and p.value is Ellipsis:
            kinds.append("ellipsis")
        elif isinstance(p, Const) and isinstance(p.value, int):
            kinds.append(0)
        elif isinstance(p, Var):
            kinds.append(vz.rank(p, s.loc))
        else:
            raise Unvectorizable(f"an index {p!r} with no batched form", s.loc)
    advanced = [k for k, kind in enumerate(kinds) if isinstance(kind, int)]
    if "ellipsis" in kinds:         # the full slices it stands for
        k = kinds.index("ellipsis")
        fill = x_rank - sum(1 for kind in kinds if kind == "slice") - len(advanced)
        parts[k:k + 1] = [Slice()] * fill
        kinds[k:k + 1] = ["slice"] * fill
        advanced = [k for k, kind in enumerate(kinds) if isinstance(kind, int)]
    rank = max(kinds[k] for k in advanced)
    region = x_rank - len(advanced) + kinds.count("new") + rank
    items = []
    for p, kind in zip(parts, kinds):
        item = p
        if isinstance(kind, int) and isinstance(p, Var):
            if kind > 0:
                item = vz.emit(body, BATCH_POSITIONS, [p], {
                    "batched": Const(vz.is_b(p)), "where": Const(_where(s.loc))}, s.loc)
            if vz.is_b(p) and rank > kind:
                item = vz.emit(body, LIFT, [item], {"rank": Const(rank)}, s.loc)
        items.append(item)
    first = advanced[0]
    adjacent = advanced == list(range(first, advanced[-1] + 1))
    perm = None
    if x_batched:
        batch = vz.emit(body, rules.RULES["np.arange"], [vz.batch_size(x, body, s.loc)], {},
                        s.loc)
        if rank:
            batch = vz.emit(body, LIFT, [batch], {"rank": Const(rank)}, s.loc)
        items.insert(0, batch)
        if adjacent and first > 0:  # NumPy moved the index axes in front of the first ones
            perm = ((0,) + tuple(range(rank + 1, rank + 1 + first)) + tuple(range(1, rank + 1))
                    + tuple(range(rank + 1 + first, region + 1)))
    elif adjacent and first > 0:    # x[:, idx]: the batch axis sits after the first axes
        perm = ((first,) + tuple(range(first)) + tuple(range(first + 1, region + 1)))
    return Plan(tuple(items), perm, region)


def _inverse(perm):
    return tuple(sorted(range(len(perm)), key=perm.__getitem__))


def gather(vz, s, body):
    """``x[index]`` with per-example index arrays (or ones NumPy moves in front)."""
    x = s.args[0]
    p = plan(vz, x, s.params["index"], s, body, vz.is_b(x))
    target = s.targets[0]
    got = vz.emit(body, s.rule, [x], {"index": Tup(p.items)}, s.loc,
                  None if p.perm else target)
    if p.perm:
        vz.emit(body, rules.RULES["np.transpose"], [got], {"axes": Const(p.perm)}, s.loc,
                target)


def _value(vz, value, p, body, loc):
    """The written value in the gather's layout (before its transpose)."""
    if p.perm is None and not vz.is_b(value):
        return value                # broadcasts against the trailing axes as it is
    value = vz.batch(value, body, loc)
    if p.region:
        value = vz.emit(body, LIFT, [value], {"rank": Const(p.region)}, loc)
    if p.perm:
        value = vz.emit(body, rules.RULES["np.transpose"], [value],
                        {"axes": Const(_inverse(p.perm))}, loc)
    return value


def write(vz, s, body):
    """``x[index] = value`` (x batched) at per-example positions."""
    x, value = s.args
    p = plan(vz, x, s.params["index"], s, body, True)
    value = _value(vz, value, p, body, s.loc)
    body.append(Prim([], s.rule, [x, value], {"index": Tup(p.items)}, s.loc))


def scatter(vz, s, body):
    """``rt.add_at(a, indices, b)`` (np.add.at): ``a`` with ``b`` added at ``indices``
    in each example, through the same batched index (every repeat counted)."""
    a, b = s.args
    indices = s.params["indices"]
    if isinstance(b, Const) and b.value is None:
        raise Unvectorizable(f"{s.rule.name} without values to add", s.loc)
    parts = indices.items if isinstance(indices, Tup) else (indices,)
    if any(not isinstance(q, (Var, Const)) or _is_slice(q) or
           (isinstance(q, Const) and not isinstance(q.value, int)) for q in parts):
        raise Unvectorizable(f"{s.rule.name} with slices or newaxis in its index", s.loc)
    a = vz.batch(a, body, s.loc)
    p = plan(vz, a, indices, s, body, True)
    value = _value(vz, b, p, body, s.loc)
    vz.emit(body, s.rule, [a, value], {"indices": Tup(p.items)}, s.loc, s.targets[0])
