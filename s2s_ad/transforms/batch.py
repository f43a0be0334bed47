"""transform (batching): a lowered function -> the same function over a batch.

Receives a lowered :class:`~s2s_ad.ir.Function`, the parameter leaves that
carry a leading batch axis, and every parameter's per-example rank.
Produces a function over the whole batch at once, from each primitive's
batching rule: elementwise operations broadcast (a batched operand of lower
rank gets axes inserted after its batch axis), reductions and shape
operations shift their axes by one, ``np.dot`` and friends become one
``einsum`` over the batch (matrix-vector products turn into matrix-matrix
products), indexing keeps the batch axis in front, and a value that only
some paths batch is broadcast where it is defined.  Control flow stays as
it is, so it must not depend on batched values: a branch or loop bound that
does raises :class:`Unvectorizable` (``ad.vmap`` then runs the per-sample
loop).  Only values that depend on a batched input are batched.

The result runs on NumPy: it is array code, and NumPy's kernels and BLAS
are what make it fast (the helpers in ``runtime/batching.py`` have no
Numba versions).
"""
from dataclasses import replace

from .. import rules
from ..analyses import ranks as rank_inference
from ..frontend import custom
from ..ir import (
    Call,
    Const,
    Function,
    Prim,
    Return,
    Rewriter,
    Slice,
    Tup,
    Var,
    leaves_of,
    walk,
)
from ..rules.internal import (
    BATCH_BROADCAST_LIKE,
    BATCH_RESHAPE,
    BROADCAST_BATCH,
    BROADCAST_LIKE,
    LIFT,
    TAKE,
    ZEROS_LIKE,
)
from ..rules.registry import Unvectorizable
from . import batch_index

_MATH = {"asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh",
         "acosh": "arccosh", "atanh": "arctanh", "fabs": "abs", "pow": "power",
         "atan2": "arctan2"}


def vectorize_function(program, fn, batched, param_ranks, cache=None):
    """``fn`` over a batch: parameters in ``batched`` have a leading batch axis."""
    cache = program.__dict__.setdefault("_batched", {}) if cache is None else cache
    key = ("vmap", fn.key, tuple(batched), tuple(param_ranks))
    if key not in cache:
        vec = cache[key] = Vectorizer(program, fn, batched, param_ranks, cache).build(key)
        if fn.custom is not None:      # its rules are batched alike (never its body instead)
            vec.custom, vec.custom_trees = fn.custom, fn.custom_trees
            vec.rule_lowering = _batched_rules(program, fn, batched, param_ranks, cache)
    return cache[key]


def _batched_rules(program, fn, batched, param_ranks, cache):
    """How the rules of batched custom function ``fn`` are lowered: each rule
    of ``fn`` batched like the call.  ``f_fwd`` and the JVP rule's primals and
    tangents are batched where ``fn``'s arguments are; ``f_bwd`` everywhere
    (a batched function's outputs, residuals included, all are)."""
    positions = [i for i, p in enumerate(fn.params) if p in set(batched)]

    def lower(which, trees):
        rule = custom.lower_rule(program, fn, which, trees)
        if which == "fwd":
            inner, ranks = [rule.params[i] for i in positions], list(param_ranks)
        elif which == "jvp":
            n = len(fn.params)
            inner = [rule.params[i] for i in positions] + [rule.params[n + i] for i in positions]
            ranks = list(param_ranks) * 2
        else:
            fwd = custom.lower_rule(program, fn, "fwd", custom.trees_of_args(fn))
            known = rank_inference.infer(fwd, list(param_ranks))
            leaf_ranks = [rank_inference.rank_of(leaf, known) for leaf in leaves_of(fwd.out_tree)]
            n_out = len(leaves_of(fwd.out_tree.items[0]))
            nondiff = custom.nondiff_leaves(fn)
            inner = [rule.params[k] for k, i in enumerate(nondiff) if i in positions]
            inner += list(rule.params[len(nondiff):])
            ranks = [param_ranks[i] for i in nondiff] + leaf_ranks[n_out:] + leaf_ranks[:n_out]
        return vectorize_function(program, rule, inner, ranks, cache)
    return lower


def batched_names(fn, start):
    """Names that depend on a batched parameter (to a fixed point around loops)."""
    found = set(start)
    stmts = [s for s in walk(fn.body) if isinstance(s, (Prim, Call))]
    while True:
        before = len(found)
        for s in stmts:
            if isinstance(s, Prim) and _is_query(s.rule):
                continue
            reads = _reads(s)
            if reads & found:
                found.update([s.args[0].name] if isinstance(s, Prim) and s.rule.mutates
                             else s.targets)
        if len(found) == before:
            return found


def _reads(s):
    from ..ir import var_names
    if isinstance(s, Prim):
        return set(var_names(list(s.args) + list(s.params.values())))
    return set(var_names(s.args))


class Vectorizer(Rewriter):
    def __init__(self, program, fn, batched, param_ranks, cache):
        self.program, self.fn, self.cache = program, fn, cache
        self.names = fn.names
        self.params = [p for p in fn.params if p in set(batched)]
        if not self.params:
            raise Unvectorizable("no batched argument")
        self.like = Var(self.params[0])
        self.batched = batched_names(fn, self.params)
        self.ranks = rank_inference.infer(fn, list(param_ranks))

    # -- helpers --------------------------------------------------------------
    def is_b(self, atom):
        if isinstance(atom, Tup):
            return any(self.is_b(x) for x in atom.items)
        if isinstance(atom, Slice):
            return any(self.is_b(x) for x in (atom.lo, atom.hi, atom.step) if x is not None)
        return isinstance(atom, Var) and atom.name in self.batched

    def rank(self, atom, loc):
        r = rank_inference.rank_of(atom, self.ranks)
        if r is None:
            raise Unvectorizable("the number of dimensions of a value here is not known", loc)
        return r

    def emit(self, body, rule, args, params, loc, target=None):
        target = target or self.names.temp()
        body.append(Prim([target], rule, list(args), dict(params), loc))
        return Var(target)

    def batch(self, atom, body, loc):
        """An unbatched value as a batched one (repeated over the batch)."""
        if self.is_b(atom):
            return atom
        return self.emit(body, BROADCAST_BATCH, [atom, self.like], {}, loc)

    def lift(self, atom, rank, body, loc):
        if not self.is_b(atom) or self.rank(atom, loc) >= rank:
            return atom
        return self.emit(body, LIFT, [atom], {"rank": Const(rank)}, loc)

    def batch_size(self, atom, body, loc):
        shape = self.emit(body, rules.RULES["np.shape"], [atom], {}, loc)
        return self.emit(body, rules.RULES["getitem"], [shape], {"index": Const(0)}, loc)

    # -- the function -----------------------------------------------------------
    def build(self, key):
        body = []
        for p in self.fn.params:       # a shared argument written with batched values
            if p in self.batched and p not in self.params:
                self.emit(body, BROADCAST_BATCH, [Var(p), self.like], {}, None, p)
        ret = None
        for s in self.fn.body:
            if isinstance(s, Return):
                ret = s
            else:
                self.stmt(s, body)
        value = self.out_tree(ret.value, body, ret.loc)
        body.append(Return(value, ret.loc))
        name = self.program.module_names.fresh("vmap_" + self.fn.name)
        return Function(name, list(self.fn.params), list(self.fn.param_trees), body,
                        self.fn.consts, self.fn.source, names=self.names, key=key,
                        none_params=self.fn.none_params)

    def out_tree(self, value, body, loc):
        if isinstance(value, Tup):
            return Tup(tuple(self.out_tree(v, body, loc) for v in value.items))
        if isinstance(value, Const) and value.value is None:
            return value
        return self.batch(value, body, loc)

    # -- statements (see ir.Rewriter) ----------------------------------------------
    def stmt_If(self, s, body):
        if self.is_b(s.cond):
            raise Unvectorizable("a branch depends on batched values", s.loc)
        super().stmt_If(s, body)

    def stmt_For(self, s, body):
        if any(self.is_b(a) for a in (s.start, s.stop, s.step)):
            raise Unvectorizable("a loop's bounds depend on batched values", s.loc)
        super().stmt_For(s, body)

    def stmt_While(self, s, body):
        test = self.block(s.test)
        if self.is_b(s.cond):
            raise Unvectorizable("a while loop's condition depends on batched values", s.loc)
        body.append(replace(s, test=test, body=self.block(s.body)))

    def stmt_Call(self, s, body):
        self.call(s, body)

    def stmt_Prim(self, s, body):
        self.prim(s, body)

    def stmt_Return(self, s, body):
        raise TypeError(f"cannot batch {s!r}")

    def call(self, s, body):
        if not any(self.is_b(a) for a in s.args):
            body.append(replace(s))
            return
        callee = s.callee
        inner = [p for p, a in zip(callee.params, s.args) if self.is_b(a)]
        arg_ranks = [self.rank(a, s.loc) for a in s.args]
        vec = vectorize_function(self.program, callee, inner, arg_ranks, self.cache)
        body.append(Call(list(s.targets), vec, list(s.args), s.loc))

    def prim(self, s, body):
        rule = s.rule
        if rule.mutates:
            return self.setitem(s, body)
        target = s.targets[0] if len(s.targets) == 1 else None
        reads_batched = any(self.is_b(a) for a in list(s.args) + list(s.params.values()))
        if _is_query(rule):
            return self.query(s, body, reads_batched)
        if not reads_batched:
            if target in self.batched:        # batched on another path: broadcast here
                temp = self.emit(body, rule, s.args, s.params, s.loc)
                self.emit(body, BROADCAST_BATCH, [temp, self.like], {}, s.loc, target)
            else:
                body.append(replace(s))
            return
        handler = _HANDLERS.get(rule.name)
        if handler is not None:
            return handler(self, s, body)
        if callable(rule.batch):           # declared by the rule
            return rule.batch(self, s, body)
        if rule.batch is not None:         # a batching kind (_KINDS)
            return _KINDS[rule.batch](self, s, body)
        if rule.name.startswith("math."):      # math functions take Python floats only
            np_rule = rules.RULES.get("np." + _MATH.get(rule.name[5:], rule.name[5:]))
            if np_rule is None or not np_rule.elementwise:
                raise Unvectorizable(f"{rule.name} has no batching rule (no NumPy "
                                     f"equivalent)", s.loc)
            return self.elementwise(s, body, np_rule)
        if rule.elementwise or (rule.pointwise and rule.name.startswith("np.")):
            return self.elementwise(s, body, rule)
        raise Unvectorizable(f"{rule.name} has no batching rule", s.loc)

    def elementwise(self, s, body, rule):
        out_rank = self.rank(Var(s.targets[0]), s.loc)
        args = [self.lift(a, out_rank, body, s.loc) for a in s.args]
        self.emit(body, rule, args, s.params, s.loc, s.targets[0])

    def query(self, s, body, reads_batched):
        target = s.targets[0]
        if not reads_batched or s.rule.batch == "query":
            body.append(replace(s))
            return
        (a,) = s.args[:1]
        kind, loc = s.rule.batch, s.loc
        if kind == "query_shape":
            full = self.emit(body, s.rule, [a], {}, loc)
            self.emit(body, rules.RULES["getitem"], [full], {"index": Slice(Const(1))}, loc,
                      target)
        elif kind == "query_len":
            full = self.emit(body, rules.RULES["np.shape"], [a], {}, loc)
            self.emit(body, rules.RULES["getitem"], [full], {"index": Const(1)}, loc, target)
        elif kind == "query_ndim":
            full = self.emit(body, s.rule, [a], {}, loc)
            self.emit(body, rules.RULES["np.subtract"], [full, Const(1)], {}, loc, target)
        else:      # np.size
            full = self.emit(body, s.rule, [a], {}, loc)
            size = self.batch_size(a, body, loc)
            self.emit(body, rules.RULES["np.floor_divide"], [full, size], {}, loc, target)

    def setitem(self, s, body):
        x, value = s.args
        index = s.params["index"]
        if self.is_b(index) or _split_advanced(self, index):
            return batch_index.write(self, s, body)
        if not self.is_b(x):           # an unbatched array written with unbatched values
            body.append(replace(s))
            return
        region = rank_inference.indexed_rank(self.rank(x, s.loc), index, self.ranks)
        if region is None:
            raise Unvectorizable("an element write whose shape is not known", s.loc)
        value = self.lift(value, region, body, s.loc)
        body.append(Prim([], s.rule, [x, value], {"index": _batched_index(index)}, s.loc))


def _split_advanced(vz, index):
    """Integer-array indices with other indices between them: NumPy moves their axes
    in front (of the batch axis too), so the batched form is a gather
    (transforms/batch_index.py)."""
    parts = index.items if isinstance(index, Tup) else (index,)
    arrays = [p for p in parts if isinstance(p, Var) and rank_inference.rank_of(
        p, vz.ranks) != 0]
    advanced = [k for k, p in enumerate(parts) if not isinstance(p, Slice) and not (
        isinstance(p, Const) and (isinstance(p.value, slice) or p.value is None
                                  or p.value is Ellipsis))]
    return bool(arrays and advanced and advanced[-1] - advanced[0] + 1 != len(advanced))


def _batched_index(index):
    items = index.items if isinstance(index, Tup) else (index,)
    return Tup((Slice(),) + tuple(items))


def _is_query(rule):
    """A question about a value's type or shape (np.shape, len, dtype): its
    answer does not make a value batched."""
    return isinstance(rule.batch, str) and rule.batch.startswith("query")


# -- batching rules of the primitives that are not elementwise ----------------------

def _const_axis(v, s):
    """An axis parameter as a Const (a literal tuple of ints arrives as a Tup)."""
    if isinstance(v, Tup) and all(isinstance(x, Const) for x in v.items):
        return Const(tuple(x.value for x in v.items))
    if not isinstance(v, Const):
        raise Unvectorizable("an axis that is not a constant", s.loc)
    return v


def _axis(v, rank, s, extra=0):
    """A static axis (or None / tuple) of a per-example rank, shifted past the batch axis."""
    ax = _const_axis(v, s).value
    if ax is None:
        return tuple(range(1, rank + 1))
    if isinstance(ax, tuple):
        return tuple(a % (rank + extra) + 1 for a in ax)
    return ax % (rank + extra) + 1


def _reduction(vz, s, body):
    a = s.args[0]
    r = vz.rank(a, s.loc)
    if r == 0:
        return vz.emit(body, rules.RULES["copy"], [a], {}, s.loc, s.targets[0])
    params = dict(s.params)
    params["axis"] = Const(_axis(s.params.get("axis", Const(None)), r, s))
    vz.emit(body, s.rule, [a], params, s.loc, s.targets[0])


def _same(vz, s, body):
    rule = rules.RULES["copy"] if s.rule.name == "float" else s.rule   # float() of an array fails
    vz.emit(body, rule, s.args, s.params, s.loc, s.targets[0])


def _product(vz, s, body):
    a, b = s.args
    if max(vz.rank(a, s.loc), vz.rank(b, s.loc)) > 2:
        raise Unvectorizable(f"{s.rule.name} of arrays with more than 2 dimensions", s.loc)
    vz.emit(body, s.rule.batched, [a, b],
            {"a_batched": Const(vz.is_b(a)), "b_batched": Const(vz.is_b(b))}, s.loc,
            s.targets[0])


def _getitem(vz, s, body):
    x = s.args[0]
    index = s.params["index"]
    if not vz.is_b(index) and not _split_advanced(vz, index):
        return vz.emit(body, s.rule, [x], {"index": _batched_index(index)}, s.loc, s.targets[0])
    if isinstance(index, Var) and vz.rank(index, s.loc) == 0:
        if vz.is_b(x):
            return vz.emit(body, TAKE, [x, index], {}, s.loc, s.targets[0])
        return vz.emit(body, s.rule, [x], {"index": index}, s.loc, s.targets[0])
    return batch_index.gather(vz, s, body)


def _reshape(vz, s, body):
    a = vz.batch(s.args[0], body, s.loc)
    shape = s.params.get("shape", Const((-1,)))
    if isinstance(shape, Const):
        items = shape.value if isinstance(shape.value, tuple) else (shape.value,)
        items = tuple(Const(v) for v in items)
    elif isinstance(shape, Tup):
        items = shape.items
    elif vz.rank(shape, s.loc) == 0:
        items = (shape,)
    elif not vz.is_b(shape):        # a per-example shape tuple (np.shape(x))
        return vz.emit(body, BATCH_RESHAPE, [a, shape], {}, s.loc, s.targets[0])
    else:
        raise Unvectorizable("a reshape to a shape that differs per example", s.loc)
    size = vz.batch_size(a, body, s.loc)
    vz.emit(body, rules.RULES["np.reshape"], [a], {"shape": Tup((size,) + tuple(items))}, s.loc,
            s.targets[0])


def _ravel(vz, s, body):
    a = s.args[0]
    size = vz.batch_size(a, body, s.loc)
    vz.emit(body, rules.RULES["np.reshape"], [a], {"shape": Tup((size, Const(-1)))}, s.loc,
            s.targets[0])


def _transpose(vz, s, body):
    a = s.args[0]
    r = vz.rank(a, s.loc)
    axes = _const_axis(s.params.get("axes", Const(None)), s)
    new = (0,) + (tuple(range(r, 0, -1)) if axes.value is None
                  else tuple(x % r + 1 for x in axes.value))
    vz.emit(body, s.rule, [a], {"axes": Const(new)}, s.loc, s.targets[0])


def _expand_dims(vz, s, body):
    a = s.args[0]
    r = vz.rank(a, s.loc)
    axis = _const_axis(s.params["axis"], s)
    extra = len(axis.value) if isinstance(axis.value, tuple) else 1
    vz.emit(body, s.rule, [a], {"axis": Const(_axis(axis, r, s, extra=extra))}, s.loc,
            s.targets[0])


def _squeeze(vz, s, body):
    a = s.args[0]
    axis = _const_axis(s.params.get("axis", Const(None)), s)
    if axis.value is None:
        raise Unvectorizable("np.squeeze without an axis (it could squeeze the batch)", s.loc)
    vz.emit(body, s.rule, [a], {"axis": Const(_axis(axis, vz.rank(a, s.loc), s))}, s.loc,
            s.targets[0])


def _sequence(vz, s, body):
    items = s.args[0]
    if not isinstance(items, Tup):
        raise Unvectorizable(f"{s.rule.name} of a sequence held in a variable", s.loc)
    ranks = [vz.rank(x, s.loc) for x in items.items]
    batched = Tup(tuple(vz.batch(x, body, s.loc) for x in items.items))
    if s.rule.batch == "array":
        return vz.emit(body, rules.RULES["np.stack"], [batched], {"axis": Const(1)}, s.loc,
                       s.targets[0])
    extra = 1 if s.rule.batch == "stack" else 0
    axis = s.params.get("axis", Const(0))
    if isinstance(axis, Const) and axis.value is None:
        raise Unvectorizable(f"{s.rule.name} with axis=None", s.loc)
    vz.emit(body, s.rule, [batched], {"axis": Const(_axis(axis, ranks[0], s, extra))}, s.loc,
            s.targets[0])


def _broadcast_like(vz, s, body):
    t, x = s.args
    t = vz.batch(t, body, s.loc)
    vz.emit(body, BATCH_BROADCAST_LIKE, [t, x], {"x_batched": Const(vz.is_b(x))}, s.loc,
            s.targets[0])


def _full_like(vz, s, body):
    a, fill = s.args
    if not vz.is_b(fill):
        return vz.emit(body, s.rule, [a, fill], s.params, s.loc, s.targets[0])
    zeros = vz.emit(body, rules.RULES["np.zeros_like"], [vz.batch(a, body, s.loc)],
                    {"dtype": s.params.get("dtype", Const(None))}, s.loc)
    fill = vz.lift(fill, vz.rank(a, s.loc), body, s.loc)
    vz.emit(body, rules.RULES["np.add"], [zeros, fill], {}, s.loc, s.targets[0])


def _zeros_like(vz, s, body):
    vz.emit(body, s.rule, s.args, s.params, s.loc, s.targets[0])


def _argminmax(vz, s, body):
    a = s.args[0]
    axis = s.params.get("axis", Const(None))
    if isinstance(axis, Const) and axis.value is None:
        raise Unvectorizable(f"{s.rule.name} without an axis", s.loc)
    vz.emit(body, s.rule, [a], {"axis": Const(_axis(axis, vz.rank(a, s.loc), s))}, s.loc,
            s.targets[0])


def _no_batching(vz, s, body):
    raise Unvectorizable(f"{s.rule.name} has no batching rule", s.loc)


# The batching kinds a rule declares by name (``Rule.batch``; rules/registry.py BATCHING).
_KINDS = {"same": _same, "reduction": _reduction, "axis_required": _argminmax,
          "product": _product, "reshape": _reshape, "ravel": _ravel, "transpose": _transpose,
          "expand_dims": _expand_dims, "squeeze": _squeeze, "stack": _sequence,
          "concatenate": _sequence, "array": _sequence, "full_like": _full_like,
          "scatter": batch_index.scatter, "none": _no_batching}
# Language plumbing and internal primitives.
_HANDLERS = {"getitem": _getitem, BROADCAST_LIKE.name: _broadcast_like,
             ZEROS_LIKE.name: _zeros_like}
