"""scalarize: small arrays of static length become one local per element.

Numba puts every array on the heap, so code that builds ``np.array((dx,
dy))`` in each stage of an ODE step spends its time allocating: a
Lotka-Volterra RK4 step makes 15 two-element arrays, and its adjoint twice
as many.  A person writing the same thing by hand for Numba uses scalars.
This pass does that rewrite on the lowered function, before any derivative
is taken, so the derivatives of scalarised code are scalar code too.

A *vector* is a name that provably holds a 1-D array of a small static
length (at most :data:`SMALL`) on every path:

* ``np.array((a, b, ...))`` of scalars, ``np.zeros(n)``, ``np.ones(n)``;
* an argument whose length the compiled call specialises on (see
  ``api``: small 1-D float arguments are part of the compiled signature);
* elementwise arithmetic of vectors of one length with scalars, copies,
  slices with constant bounds (``cam[0:3]``), and results of user
  functions that return vectors.

Each vector name ``v`` becomes ``v_0, v_1, ...``; elementwise statements are
repeated per element; ``v[k]`` with a constant ``k`` is element ``k``;
``np.sum(v)``, ``np.dot(v, w)`` and ``len(v)`` are unrolled.  A called user
function gets a specialised copy that takes and returns elements.  Any
other use (a matrix product, a slice, an output of the entry function)
reads a materialised ``np.array((v_0, v_1, ...))``, so the rewrite is always
exact.  Arrays that are ever written into (through any alias) are left
alone.
"""
from ..analyses.ranks import infer, rank_of
from ..ir import (
    Call,
    Const,
    For,
    Function,
    If,
    Prim,
    Return,
    Rewriter,
    Slice,
    Tup,
    Var,
    While,
    map_leaves,
    walk,
)
from ..rules import RULES
from .reverse import VIEWS

#: The longest array split into scalars (a bundle-adjustment camera has 11).
SMALL = 16

def scalarize(program, fn, param_ranks, param_lengths):
    """``fn`` with its small vectors split (``fn`` itself when there are none)."""
    lengths = [n if n is not None and 1 <= n <= SMALL else None for n in param_lengths]
    lengths += [None] * (len(fn.params) - len(lengths))
    ctx = _Context(program)
    an = ctx.analysis(fn, tuple(lengths), tuple(param_ranks))
    if not an.changes():
        return fn
    return _Rewrite(ctx, an, entry=True).function()


class _Context:
    """Analyses and specialised copies shared by every function of one request."""

    def __init__(self, program):
        self.program = program
        self.analyses = {}
        self.active = set()
        self.specialised = {}
        self.mutating = {}

    def analysis(self, fn, lengths, ranks):
        key = (fn.key, lengths, ranks)
        if key not in self.analyses:
            self.active.add(key)
            self.analyses[key] = _Analysis(self, fn, lengths, ranks)
            self.active.discard(key)
        return self.analyses[key]

    def mutated_params(self, fn):
        """Parameters of ``fn`` it (or a function it calls) writes into."""
        if fn.key not in self.mutating:
            self.mutating[fn.key] = set()       # a guard for recursion
            self.mutating[fn.key] = _mutated(self, fn) & set(fn.params)
        return self.mutating[fn.key]


def _mutated(ctx, fn):
    """Names whose array is written into, closed over views and aliases."""
    roots, edges = set(), {}
    for s in walk(fn.body):
        if isinstance(s, Prim) and s.rule.mutates:
            roots.add(s.args[0].name)
        elif isinstance(s, Prim) and s.rule.name in VIEWS:
            if isinstance(s.args[0], Var):
                edges.setdefault(s.targets[0], set()).add(s.args[0].name)
                edges.setdefault(s.args[0].name, set()).add(s.targets[0])
        elif isinstance(s, Call):
            written = ctx.mutated_params(s.callee)
            roots.update(a.name for p, a in zip(s.callee.params, s.args)
                         if p in written and isinstance(a, Var))
    out, todo = set(), list(roots)
    while todo:
        n = todo.pop()
        if n not in out:
            out.add(n)
            todo.extend(edges.get(n, ()))
    return out


class _Analysis:
    """The static length of every vector name of one function."""

    def __init__(self, ctx, fn, lengths, param_ranks):
        self.ctx, self.fn = ctx, fn
        self.key = (lengths, param_ranks)
        self.ranks = infer(fn, list(param_ranks))
        self.mutated = _mutated(ctx, fn)
        self.len = {p: n for p, n in zip(fn.params, lengths)
                    if n is not None and p not in self.mutated}
        self.calls = {}          # id(Call) -> the callee's analysis
        self._settle()

    def changes(self):
        return bool(self.vectors()) or any(a.changes() for a in self.calls.values())

    def vectors(self):
        return {n: k for n, k in self.len.items() if k is not None}

    def out_lengths(self):
        tree = self.fn.out_tree
        leaves = list(tree.leaves()) if isinstance(tree, Tup) else [tree]
        return [self.length(a) for a in leaves]

    def length(self, atom):
        return self.len.get(atom.name) if isinstance(atom, Var) else None

    def scalar(self, atom):
        if isinstance(atom, Const):
            return isinstance(atom.value, (int, float)) and not isinstance(atom.value, bool)
        return rank_of(atom, self.ranks) == 0 and self.length(atom) is None

    def _settle(self):
        stmts = [s for s in walk(self.fn.body) if isinstance(s, (Prim, Call))
                 and not (isinstance(s, Prim) and s.rule.mutates)]
        for _ in range(6):
            changed = False
            for s in stmts:
                outs = self._call(s) if isinstance(s, Call) else [self._prim(s)]
                for t, n in zip(s.targets, outs):
                    if t in self.mutated:
                        n = None
                    if t not in self.len:
                        self.len[t] = n
                        changed = True
                    elif self.len[t] is not None and self.len[t] != n:
                        self.len[t] = None      # two lengths on two paths: an array
                        changed = True
            if not changed:
                break

    def _prim(self, s):
        name, args = s.rule.name, s.args
        if s.rule.from_list:
            items = args[0].items if isinstance(args[0], Tup) else None
            if (items and len(items) <= SMALL and not s.params
                    and all(not isinstance(x, Tup) and self.scalar(x) for x in items)):
                return len(items)
            return None
        if s.rule.fill is not None:
            dtype = s.params.get("dtype")
            if dtype is not None and not (isinstance(dtype, Const) and dtype.value is None):
                return None
            return _static_length(s.params.get("shape"))
        if name in ("copy", "stop_gradient"):
            return self.length(args[0])
        if name == "getitem" and self.length(args[0]) is not None:
            picked = _static_slice(s.params["index"], self.length(args[0]))
            if picked is None:
                return None
            return len(picked) or None
        if s.rule.elementwise and not s.params and all(isinstance(a, (Var, Const)) for a in args):
            found = {self.length(a) for a in args} - {None}
            if len(found) == 1 and all(self.length(a) or self.scalar(a) for a in args):
                return found.pop()
        return None

    def _call(self, s):
        if s.callee.custom is not None or s.callee.gradient is not None:
            return [None] * len(s.targets)    # a user rule, or reverse code: kept whole
        lengths = tuple(self.length(a) for a in s.args)
        ranks = tuple(rank_of(a, self.ranks) for a in s.args)
        if (s.callee.key, lengths, ranks) in self.ctx.active:
            return [None] * len(s.targets)      # recursion: the lowering reports it
        inner = self.ctx.analysis(s.callee, lengths, ranks)
        self.calls[id(s)] = inner
        return inner.out_lengths()


def _static_slice(index, n):
    """The positions ``index`` (a slice of constants) picks from ``n`` elements, or None."""
    if not isinstance(index, Slice):
        return None
    bounds = []
    for b in (index.lo, index.hi, index.step):
        if b is None or (isinstance(b, Const) and b.value is None):
            bounds.append(None)
        elif isinstance(b, Const) and isinstance(b.value, int) and not isinstance(b.value, bool):
            bounds.append(b.value)
        else:
            return None
    if bounds[2] == 0:
        return None
    return list(range(n))[slice(*bounds)]


def _static_length(shape):
    if isinstance(shape, Tup) and len(shape.items) == 1:
        shape = shape.items[0]
    if isinstance(shape, Const):
        value = shape.value
        if isinstance(value, tuple) and len(value) == 1:
            value = value[0]
        if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= SMALL:
            return value
    return None


class _Rewrite(Rewriter):
    """Writes the scalarised copy of one analysed function."""

    def __init__(self, ctx, an, entry):
        self.ctx, self.an, self.entry = ctx, an, entry
        self.fn = an.fn
        self.names = self.fn.names
        defs = {}
        for s in walk(self.fn.body):
            for t in getattr(s, "targets", ()):
                defs[t] = defs.get(t, 0) + 1
            if isinstance(s, For):
                defs[s.index] = defs.get(s.index, 0) + 1
        for p in self.fn.params:
            defs[p] = defs.get(p, 0) + 1
        self.multi = {n for n, k in defs.items() if k > 1}
        # Names joined after an if or carried around a loop are assigned in
        # several places: their elements must have names of their own.
        self.pinned = set(self.multi)
        for s in walk(self.fn.body):
            self.pinned.update(getattr(s, "joins", ()))
            self.pinned.update(getattr(s, "carried", ()))
        self.env = {}            # vector name -> its element atoms
        self.fixed = {}          # vector name -> its own element names
        self.arrays = {}         # vector name -> the array it was materialised in
        self.slots = {}          # vector name -> where its definition ends (a _Slot)

    # -- names ---------------------------------------------------------------
    def element_names(self, v):
        if v not in self.fixed:
            n = self.an.len[v]
            pattern = "{v}_{k}"
            if any(f"{v}_{k}" in self.names.taken for k in range(n)):
                pattern = "{v}_e{k}"
            self.fixed[v] = tuple(Var(self.names.fresh(pattern.format(v=v, k=k)))
                                  for k in range(n))
            self.env[v] = self.fixed[v]
        return self.fixed[v]

    def elem(self, atom, k):
        return self.env[atom.name][k] if self.is_vector(atom) else atom

    def is_vector(self, atom):
        return isinstance(atom, Var) and self.an.length(atom) is not None

    def stable(self, atoms):
        """Whether ``atoms`` keep their values wherever they are read (aliasable)."""
        return all(isinstance(a, Const) or a.name not in self.multi for a in atoms)

    # -- the function ----------------------------------------------------------
    def function(self):
        fn, out = self.fn, []
        params, split = [], {}
        for p in fn.params:
            n = self.an.len.get(p)
            if n is None:
                params.append(p)
            elif self.entry:          # the entry keeps its arrays; it reads their elements
                params.append(p)
                self.arrays[p] = Var(p)
                for k, e in enumerate(self.element_names(p)):
                    out.append(Prim([e.name], RULES["getitem"], [Var(p)], {"index": Const(k)}))
            else:
                elems = self.element_names(p)
                params.extend(e.name for e in elems)
                split[p] = Tup(elems)
        trees = [map_leaves(t, lambda x: split.get(x.name, x)) for t in fn.param_trees]
        body = _fill(out + self.block(fn.body))
        used = set()
        if self.entry:
            body, used = _drop_unread(body, len(out))
        new = Function(fn.name, params, trees, body, fn.consts, fn.source, names=fn.names,
                       key=fn.key if self.entry else fn.key + (("scalarized",) + self.an.key,),
                       none_params=fn.none_params)
        if self.entry:
            # A parameter is its elements only when the body reads every
            # element and never the whole array (a matrix product, an
            # argument of an unsplit call): its gradient is then theirs.
            new.elements = {p: [e.name for e in self.fixed[p]] for p in fn.params
                            if p in self.fixed and p not in used
                            and all(e.name in used for e in self.fixed[p])}
        return new

    # -- statements (see ir.Rewriter) ----------------------------------------------
    def stmt_Prim(self, s, out):
        self.prim(s, out)

    def stmt_Call(self, s, out):
        self.call(s, out)

    def stmt_If(self, s, out):
        cond = self.materialise(s.cond, out, s.loc)
        joins = {}
        for name, sides in s.joins.items():
            for e in self._names_of(name):
                joins[e] = sides
        out.append(If(cond, self.block(s.body), self.block(s.orelse), s.loc, joins))

    def stmt_For(self, s, out):
        out.append(For(s.index, s.start, s.stop, s.step, self.block(s.body), s.loc,
                       self._carried(s.carried)))

    def stmt_While(self, s, out):
        test = self.block(s.test)
        cond = self.materialise(s.cond, test, s.loc)
        out.append(While(test, cond, self.block(s.body), s.loc, self._carried(s.carried)))

    def stmt_Return(self, s, out):
        out.append(Return(self.returned(s.value, out, s.loc), s.loc))

    def _names_of(self, name):
        if self.an.len.get(name) is None:
            return [name]
        return [e.name for e in self.element_names(name)]

    def _carried(self, carried):
        return [e for h in carried for e in self._names_of(h)]

    def returned(self, tree, out, loc):
        """The entry returns its vectors as arrays; a specialised helper, as elements."""
        def leaf(x):
            if not self.is_vector(x):
                return x
            return self.materialise(x, out, loc) if self.entry else Tup(tuple(self.env[x.name]))
        return map_leaves(tree, leaf)

    # -- statements --------------------------------------------------------------
    def prim(self, s, out):
        name = s.rule.name
        t = s.targets[0] if s.targets else None
        n = self.an.len.get(t) if t is not None else None
        if n is not None:
            return self.define(s, t, n, out)
        a0 = s.args[0] if s.args else None
        if a0 is not None and self.is_vector(a0):
            m = self.an.length(a0)
            if name == "getitem":
                k = s.params["index"]
                if (isinstance(k, Const) and isinstance(k.value, int)
                        and not isinstance(k.value, bool) and -m <= k.value < m):
                    return self.copy(t, self.elem(a0, k.value % m), s.loc, out)
            elif name == "len":
                return self.copy(t, Const(m), s.loc, out)
            elif s.rule.total == "elements" and _whole(s.params):
                return self.total(t, [self.elem(a0, k) for k in range(m)], s.loc, out)
            elif s.rule.total == "products" and self.an.length(s.args[1]) == m:
                b = s.args[1]
                prods = []
                for k in range(m):
                    p = Var(self.names.temp())
                    out.append(Prim([p.name], RULES["np.multiply"],
                                    [self.elem(a0, k), self.elem(b, k)], {}, s.loc))
                    prods.append(p)
                return self.total(t, prods, s.loc, out)
        args = [self.materialise(a, out, s.loc) for a in s.args]
        params = {k: self.materialise(v, out, s.loc) for k, v in s.params.items()}
        out.append(Prim(list(s.targets), s.rule, args, params, s.loc))

    def define(self, s, t, n, out):
        """The elements of vector ``t`` from the statement that defines it."""
        self._define(s, t, n, out)
        if t not in self.pinned:
            # Where ``t`` is complete: a use that needs the whole array builds
            # it here, once (see materialise).
            self.slots[t] = _Slot(s.loc)
            out.append(self.slots[t])

    def _define(self, s, t, n, out):
        name = s.rule.name
        if s.rule.from_list:
            items = tuple(s.args[0].items)
            return self.bind(t, items, s.loc, out)
        if s.rule.fill is not None:
            return self.bind(t, (Const(s.rule.fill),) * n, s.loc, out)
        if name == "getitem":                     # a slice of a vector
            a0 = s.args[0]
            picked = _static_slice(s.params["index"], self.an.length(a0))
            return self.bind(t, tuple(self.elem(a0, k) for k in picked), s.loc, out)
        if name in ("copy", "stop_gradient"):
            src = tuple(self.elem(s.args[0], k) for k in range(n))
            if name == "copy":
                return self.bind(t, src, s.loc, out)
            for e, x in zip(self.element_names(t), src):
                out.append(Prim([e.name], s.rule, [x], {}, s.loc))
            return None
        for k, e in enumerate(self.element_names(t)):      # elementwise
            out.append(Prim([e.name], s.rule, [self.elem(a, k) for a in s.args], {}, s.loc))
        return None

    def bind(self, t, atoms, loc, out):
        """``t``'s elements are ``atoms``: an alias where safe, else copies."""
        if t not in self.pinned and self.stable(atoms):
            self.env[t] = atoms
            return
        for e, x in zip(self.element_names(t), atoms):
            out.append(Prim([e.name], RULES["copy"], [x], {}, loc))

    def copy(self, t, atom, loc, out):
        out.append(Prim([t], RULES["copy"], [atom], {}, loc))

    def total(self, t, terms, loc, out):
        acc = terms[0]
        for k, x in enumerate(terms[1:], 1):
            target = t if k == len(terms) - 1 else self.names.temp()
            out.append(Prim([target], RULES["np.add"], [acc, x], {}, loc))
            acc = Var(target)
        if len(terms) == 1:
            self.copy(t, acc, loc, out)

    def call(self, s, out):
        inner = self.an.calls.get(id(s))
        if inner is None or not inner.changes():
            args = [self.materialise(a, out, s.loc) for a in s.args]
            out.append(Call(list(s.targets), s.callee, args, s.loc))
            return
        callee = self.specialised(inner)
        args = []
        for a in s.args:
            args.extend(self.env[a.name] if self.is_vector(a) else [a])
        targets, slots = [], []
        for t, n in zip(s.targets, inner.out_lengths()):
            if n is None:
                targets.append(t)
            else:
                targets.extend(e.name for e in self.element_names(t))
                if t not in self.pinned:
                    self.slots[t] = _Slot(s.loc)
                    slots.append(self.slots[t])
        out.append(Call(targets, callee, args, s.loc))
        out.extend(slots)

    def specialised(self, inner):
        key = id(inner)
        if key not in self.ctx.specialised:
            new = _Rewrite(self.ctx, inner, entry=False).function()
            # The specialised copy takes the function's own name; the general
            # one, printed only if something still calls it, a fresh one.
            new.name = inner.fn.name
            inner.fn.name = self.ctx.program.module_names.fresh(inner.fn.name)
            self.ctx.specialised[key] = new
        return self.ctx.specialised[key]

    def materialise(self, value, out, loc):
        """``value`` with every vector in it read as a real array."""
        if isinstance(value, Tup):
            return Tup(tuple(self.materialise(x, out, loc) for x in value.items), value.is_list)
        if isinstance(value, Slice):
            return Slice(*(self.materialise(x, out, loc) if x is not None else None
                           for x in (value.lo, value.hi, value.step)))
        if not self.is_vector(value):
            return value
        if value.name in self.arrays:
            return self.arrays[value.name]
        arr = Var(self.names.fresh(f"{value.name}_array"))
        build = Prim([arr.name], RULES["np.array"], [Tup(tuple(self.env[value.name]))], {}, loc)
        slot = self.slots.get(value.name)
        if slot is None:            # assigned in several places: built where it is used
            out.append(build)
        else:
            build.loc = slot.loc
            slot.stmts.append(build)
            self.arrays[value.name] = arr
        return arr


class _Slot:
    """A place in a block where statements may still be added."""

    def __init__(self, loc):
        self.loc = loc
        self.stmts = []


def _fill(body):
    """``body`` with every slot replaced by its statements."""
    out = []
    for s in body:
        if isinstance(s, _Slot):
            out.extend(s.stmts)
            continue
        if isinstance(s, If):
            s.body, s.orelse = _fill(s.body), _fill(s.orelse)
        elif isinstance(s, For):
            s.body = _fill(s.body)
        elif isinstance(s, While):
            s.test, s.body = _fill(s.test), _fill(s.body)
        out.append(s)
    return out


def _whole(params):
    axis, keep = params.get("axis"), params.get("keepdims")
    return (isinstance(axis, Const) and axis.value in (None, 0, -1)
            and isinstance(keep, Const) and keep.value is False)


def _drop_unread(body, n_reads):
    """Drop the first ``n_reads`` element reads of the entry when nothing uses them.

    Returns the body and the names the rest of it reads."""
    from ..ir import var_names
    used = set()
    for s in walk(body[n_reads:]):
        used.update(var_names(getattr(s, "args", [])))
        used.update(var_names(list(getattr(s, "params", {}).values())))
        for attr in ("cond", "start", "stop", "step", "value"):
            if hasattr(s, attr):
                used.update(var_names([getattr(s, attr)]))
    kept = [s for s in body[:n_reads] if s.targets[0] in used]
    return kept + body[n_reads:], used
