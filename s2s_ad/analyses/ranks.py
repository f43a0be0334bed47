"""Rank inference: the number of dimensions of every name, where it is known.

Receives a lowered function and the rank of each parameter leaf (0 for
Python and NumPy scalars; None when unknown, as for called helpers).
Guarantees: ``ranks[name]`` is an int only when every path gives the name
that rank.  The reverse transform uses it to leave out ``unbroadcast`` where
an operand already has the output's shape (scalars above all), and to keep
scalar values that are cheap to recompute off the stacks.
"""
from ..ir import Call, Const, For, Prim, Slice, Tup, Var, leaves_of, walk

_CALLS = {}


def infer(fn, param_ranks):
    ranks = dict(zip(fn.params, param_ranks))
    ranks.update((s.index, 0) for s in walk(fn.body) if isinstance(s, For))
    for name in fn.consts:
        ranks[name] = getattr(fn.consts[name], "ndim", None)
    shapes = _shapes_of(fn)
    return _settle(fn, ranks, lambda s: call_ranks(s, ranks) if isinstance(s, Call)
                   else [_shape_rank_of(s, shapes, ranks)], lambda t, r: None)


def _shapes_of(fn):
    """{name: array} for names assigned once, from a rule giving the array's shape."""
    defs = {}
    for s in walk(fn.body):
        if isinstance(s, Prim):
            for t in s.targets:
                defs[t] = None if t in defs else s
    return {t: s.args[0] for t, s in defs.items()
            if s is not None and s.rule.gives_shape and isinstance(s.args[0], Var)}


def _shape_rank_of(s, shapes, ranks):
    """``prim_rank``; a reshape to another array's shape (np.reshape(y, np.shape(x)))
    has that array's rank."""
    shape = s.params.get("shape")
    if s.rule.shape == "reshaped" and isinstance(shape, Var) and shape.name in shapes:
        return ranks.get(shapes[shape.name].name)
    return prim_rank(s, ranks)


def _settle(fn, facts, outputs, conflict):
    """Run ``outputs(statement)`` over the body until ``facts`` settle.

    A name given two different facts (a loop-carried name whose rank or
    shape changes around the loop) gets ``conflict(name, fact)`` and keeps
    it.  Loops settle after a pass or two.
    """
    stmts = [s for s in walk(fn.body)
             if isinstance(s, (Prim, Call)) and not (isinstance(s, Prim) and s.rule.mutates)]
    fixed = set()
    for _ in range(3):
        changed = False
        for s in stmts:
            for t, fact in zip(s.targets, outputs(s)):
                if t in fixed:
                    continue
                if t in facts and facts[t] != fact:
                    fixed.add(t)
                    facts[t] = conflict(t, fact)
                    changed = True
                elif t not in facts:
                    facts[t] = fact
                    changed = True
        if not changed:
            break
    return facts


def call_ranks(s, ranks):
    """Ranks of a user function's outputs, inferred from the call's arguments."""
    args = tuple(rank_of(a, ranks) for a in s.args)
    key = (s.callee.key, args)
    if key not in _CALLS:
        _CALLS[key] = [None] * len(s.targets)     # a guard while inferring
        inner = infer(s.callee, list(args))
        _CALLS[key] = [rank_of(leaf, inner) for leaf in leaves_of(s.callee.out_tree)]
    return _CALLS[key]


def argument_ranks(fn, param_ranks, out=None):
    """Callee key -> the rank of each argument at its calls, for every function
    ``fn`` calls (to any depth; through a gradient helper into the function it
    differentiates), None where unknown or where two calls differ."""
    out = {} if out is None else out
    known = infer(fn, list(param_ranks))
    for s in walk(fn.body):
        if not isinstance(s, Call):
            continue
        args = tuple(rank_of(a, known) for a in s.args)
        seen = out.get(s.callee.key)
        if seen is not None:
            merged = tuple(a if a == b else None for a, b in zip(args, seen))
            if merged == seen:
                continue
            args = merged
        out[s.callee.key] = args
        grad = s.callee.gradient
        argument_ranks(grad.fn if grad is not None else s.callee, args, out)
    return out


def rank_of(atom, ranks):
    if isinstance(atom, Const):
        v = atom.value
        return 0 if isinstance(v, (bool, int, float)) else None
    if isinstance(atom, Var):
        return ranks.get(atom.name)
    return None


def prim_rank(s, ranks):
    """The rank of a primitive's output, from its rule's declared ``rank`` or
    ``shape`` kind (rules/registry.py ``SHAPES``)."""
    name = s.rule.name
    args = [rank_of(a, ranks) if not isinstance(a, Tup) else None for a in s.args]
    p = s.params
    if s.rule.unknown:
        return None
    if s.rule.rank is not None:       # declared by the rule
        return s.rule.rank(args, p)
    if name == "getitem":
        return _indexed(args[0], p["index"], ranks)
    kind = s.rule.shape
    if s.rule.pointwise:
        return None if None in args else max(args, default=0)
    if kind == "scalar" or name.startswith("math."):
        return 0
    if kind in ("same", "permuted"):
        return args[0] if args else None
    if kind == "reduced":
        return _reduced(args[0], p.get("axis"), p.get("keepdims"))
    if kind in ("from_shape", "reshaped"):
        return _shape_rank(p.get("shape"), ranks)
    if kind in ("stacked", "joined") and isinstance(s.args[0], Tup):
        items = [rank_of(x, ranks) for x in s.args[0].items]
        if not items or None in items:
            return None
        return items[0] + (kind == "stacked")
    return None


def _reduced(rank, axis, keepdims):
    keep = isinstance(keepdims, Const) and keepdims.value is True
    every_axis = axis is None or (isinstance(axis, Const) and axis.value is None)
    if keep:
        return rank
    if every_axis:
        return 0        # a scalar, whatever the operand's rank
    if rank is None:
        return None
    if isinstance(axis, Const) and isinstance(axis.value, int):
        return rank - 1
    if isinstance(axis, Const) and isinstance(axis.value, tuple):
        return rank - len(axis.value)
    return None


def indexed_rank(rank, index, ranks):
    """The rank of ``x[index]`` for an ``x`` of rank ``rank`` (None: unknown)."""
    return _indexed(rank, index, ranks)


def _indexed(rank, index, ranks):
    if rank is None:
        return None
    parts = index.items if isinstance(index, Tup) else (index,)
    out = rank
    vectors = 0
    for part in parts:
        if isinstance(part, Slice) or (isinstance(part, Const) and isinstance(part.value, slice)):
            continue
        if isinstance(part, Const) and part.value is None:
            out += 1
        elif isinstance(part, Const) and part.value is Ellipsis:
            continue
        elif rank_of(part, ranks) == 0:
            out -= 1
        elif rank_of(part, ranks) == 1:     # a 1-D index array or mask: one axis in, and
            out -= 1                        # the index arrays broadcast to one axis out
            vectors += 1
        else:
            return None        # an index array: the result's rank depends on it
    out += 1 if vectors else 0
    return out if out >= 0 else None


def _shape_rank(shape, ranks):
    if isinstance(shape, Tup):
        return len(shape.items)
    if isinstance(shape, Const):
        return len(shape.value) if isinstance(shape.value, tuple) else 1
    if isinstance(shape, Var) and ranks.get(shape.name) == 0:
        return 1
    return None


# -- shape classes --------------------------------------------------------------
# Two names share a class when their shapes are provably equal at run time:
# the same parameter's shape, the same constant shape, or arrays built from
# the same shape variables.  An elementwise operand whose class is the
# output's needs no un-broadcasting, so its adjoint reads nothing but g.

SCALAR = ("scalar",)
_FRESH = iter(range(1 << 62))
_CALL_CLASSES = {}


def shape_classes(fn, param_classes, ranks):
    classes = dict(zip(fn.params, param_classes))
    for name, value in fn.consts.items():
        if getattr(value, "shape", None) is not None:
            classes[name] = ("const", value.shape)
    classes.update((s.index, SCALAR) for s in walk(fn.body) if isinstance(s, For))
    def outputs(s):
        found = (_call_classes(s, classes, ranks) if isinstance(s, Call)
                 else [_class(s, classes, ranks)])
        return [SCALAR if ranks.get(t) == 0 else c for t, c in zip(s.targets, found)]
    return _settle(fn, classes, outputs, lambda t, c: ("unknown", next(_FRESH)))


def class_of(atom, classes):
    if isinstance(atom, Const):
        return SCALAR if isinstance(atom.value, (bool, int, float)) else None
    if isinstance(atom, Var):
        return classes.get(atom.name)
    return None


def _class(s, classes, ranks):
    name = s.rule.name
    fresh = ("unknown", next(_FRESH))
    if s.rule.unknown:
        return fresh
    args = [class_of(a, classes) if not isinstance(a, Tup) else None for a in s.args]
    kind = s.rule.shape
    if s.rule.pointwise:
        if None in args:
            return fresh
        arrays = {c for c in args if c != SCALAR}
        if not arrays:
            return SCALAR
        return arrays.pop() if len(arrays) == 1 else fresh
    if kind == "same":
        return args[0] or fresh
    if kind == "from_shape":
        return _shape_class(s.params.get("shape")) or fresh
    if kind == "stacked" and isinstance(s.args[0], Tup):
        items = s.args[0].items
        if all(class_of(x, classes) == SCALAR for x in items):
            return ("const", (len(items),))
    if name == "getitem" and args[0] is not None:
        return _sliced_class(args[0], rank_of(s.args[0], ranks), s.params["index"], ranks) \
            or fresh
    return fresh


def _sliced_class(base, rank, index, ranks):
    """The class of ``x[index]`` for an ``x`` of class ``base``, when the index
    is basic with constant slice bounds (``x[1:-1, :-2]``, ``x[i, 2:]``):
    each axis's new length is a function of the old one, named by
    :func:`_slice_length`, so ``A[:-2]``, ``A[1:-1]`` and ``A[2:]`` share a
    class (and ``A + B`` of them needs no un-broadcasting).  None otherwise."""
    parts = index.items if isinstance(index, Tup) else (index,)
    if rank is None or len(parts) > rank:
        return None
    axes = []
    for part in parts:
        if isinstance(part, Slice):
            bounds = (part.lo, part.hi, part.step)
            if not all(b is None or (isinstance(b, Const) and (
                    b.value is None or type(b.value) is int)) for b in bounds):
                return None
            lo, hi, step = (None if b is None else b.value for b in bounds)
        elif isinstance(part, Const) and isinstance(part.value, slice):
            lo, hi, step = part.value.start, part.value.stop, part.value.step
            if not all(b is None or type(b) is int for b in (lo, hi, step)):
                return None
        elif (isinstance(part, Const) and type(part.value) is int) or (
                isinstance(part, Var) and ranks.get(part.name) == 0):
            axes.append("drop")         # an integer: the axis goes (or the read raises)
            continue
        else:
            return None                 # None, Ellipsis, an index array
        length = _slice_length(lo, hi, step)
        if length is None:
            return None
        axes.append(length)
    axes += [_slice_length(None, None, None)] * (rank - len(parts))
    if all(a == _slice_length(None, None, None) for a in axes):
        return base
    return ("index", base, tuple(axes))


def _slice_length(lo, hi, step):
    """The length of ``x[lo:hi]`` along an axis of length n, as ``(c, cap)``:
    ``min(max(n - c, 0), cap)`` for every n >= 0 (cap None: no cap), which
    names the function uniquely.  None for a step other than 1 or a start
    counted from the end with a stop counted from the start (``x[-3:5]``)."""
    if step not in (None, 1):
        return None
    if lo is not None and lo < 0 and hi is not None and hi >= 0:
        return None
    if lo is None or lo >= 0:
        a = lo or 0
        if hi is None:
            c, cap = a, None
        elif hi >= 0:
            c, cap = a, max(hi - a, 0)
        else:
            c, cap = a - hi, None
    else:
        if hi is None:
            c, cap = 0, -lo
        else:
            c, cap = -hi, max(hi - lo, 0)
    return (0, 0) if cap == 0 else (c, cap)


def _shape_class(shape):
    if isinstance(shape, Const):
        value = shape.value if isinstance(shape.value, tuple) else (shape.value,)
        return ("const", value)
    parts = shape.items if isinstance(shape, Tup) else (shape,)
    if all(isinstance(p, (Var, Const)) for p in parts):
        return ("shape", tuple(p.name if isinstance(p, Var) else p.value for p in parts))
    return None


def _call_classes(s, classes, ranks):
    """Output classes of a call, in the caller's terms."""
    args = [class_of(a, classes) or ("unknown", next(_FRESH)) for a in s.args]
    tokens = [("param", i) for i in range(len(args))]
    arg_ranks = [rank_of(a, ranks) for a in s.args]
    key = (s.callee.key, tuple(arg_ranks))
    if key not in _CALL_CLASSES:
        _CALL_CLASSES[key] = None     # a guard while inferring
        inner = shape_classes(s.callee, tokens, infer(s.callee, arg_ranks))
        _CALL_CLASSES[key] = [class_of(leaf, inner) for leaf in leaves_of(s.callee.out_tree)]
    outs = _CALL_CLASSES[key]
    if outs is None:
        return [("unknown", next(_FRESH)) for _ in s.targets]
    mapping = dict(zip(tokens, args))
    return [mapping.get(c, c) if c is not None else ("unknown", next(_FRESH)) for c in outs]
