"""The :class:`ReverseWriter`: activity and ranks of one function, its two
sweeps, and what the primal sweep keeps.  Statements, loops, stacks and the
printed functions are its mixins (see the package docstring).
"""
import ast

from ...analyses import ranks
from ...analyses.activity import analyse
from ...analyses.dce import reads
from ...analyses.shape_live import keep_values
from ...codegen import printer as codegen
from ...codegen.adjoints import Adjoints, Subst, assign, call
from ...ir import (
    Call,
    For,
    If,
    Prim,
    Return,
    Var,
    While,
    blocks,
    var_names,
    walk,
)
from .common import VIEWS, _targets, rooted
from .functions import Functions
from .loops import Loops
from .peepholes import _increments, _kept_sums, _row_sums, _same_shape, _shifted_same_shape
from .shape_only import adjoint_reads, primal_reads, shape_sources
from .stacks import Stacks, _ForwardHooks
from .statements import Statements


class ReverseWriter(Stacks, Statements, Loops, Functions):
    """Writes the VJP function of one lowered function into a module.

    The adjoint sweep is generated first, so that the primal sweep can keep
    exactly what it reads: dead primal statements are dropped, and inside
    loops the values an adjoint reads are pushed on per-name stacks at the
    end of their block (loop-carried values at the top of the body) and
    popped at the start of the reversed block.  Element writes save what
    they overwrite when an adjoint reads that array, and the adjoint sweep
    restores it.

    A stack is a list, or, for a float that only ``for ... in range`` loops
    with bounds known before the outermost loop push, an array of the most
    pushes that loop can make with an index to its top (``rt.float_stack``,
    see :func:`_capacity`): no growth, and an adjoint sweep that runs again
    (one per row of a Jacobian) only resets the index.
    """

    def __init__(self, module, fn, wrt, seeds, param_ranks=None):
        self.module = module
        self.fn = fn
        self.names = fn.names
        self.act = analyse(fn, wrt, seeds)
        self.ranks = ranks.infer(fn, param_ranks or [None] * len(fn.params))
        self.classes = ranks.shape_classes(
            fn, [ranks.SCALAR if self.ranks.get(p) == 0 else ("param", p) for p in fn.params],
            self.ranks)
        self.carried = {h for s in walk(fn.body) if isinstance(s, (For, While)) for h in s.carried}
        self.push_end = {}     # id(block) -> names pushed at its end
        self.push_top = {}     # id(loop body) -> loop-carried names pushed at its top
        self.counters = {}     # id(While) -> trip counter name
        self.stacks = {}       # (primal name, kind) -> stack name
        self.tops = {}         # stack allocated before its loop -> its top's index
        self.allocs = {}       # id(top-level for loop) -> [(its stack, size expression)]
        self._sites = None     # see _push_sites
        self.used = set()      # stacks the final pass uses
        self.saves = {}        # id(element write) -> stack of overwritten values
        self.recomputed = set()  # names the adjoint sweep recomputes
        self.split = False       # printing a fwd/bwd pair (see write_split)
        self._named = {}       # primal name -> adjoint name
        self.increments = _increments(fn)   # id(element write) -> the read it increments
        self.same_shape = _same_shape(fn)   # value -> an operand shaped like it
        self.same_shape.update(_shifted_same_shape(fn, self.ranks, self.act))
        self.kept_sums = _kept_sums(fn, self.ranks)   # see rev_prim
        self.row_summed = _row_sums(fn, self.act, self.ranks)   # see rev_prim
        self._carrying = {}    # array -> its neighbour carry in the loop being reversed
        self.emitted = {}      # id(statement) -> the adjoint nodes printed for it
        # value -> a view of its shape, read by adjoints that need only the shape
        self.shape_source = shape_sources(fn, self.classes, self._slice_view)
        self._depth = 0        # how many loops and branches the adjoint being written is in
        self._roots = self._earlier = None   # see _view_roots, _earlier_iterations
        self.split_calls = {}  # id(call) -> (its forward function, residual names)

    def _sweeps(self, seed_exprs, returns, live_out=()):
        """(primal sweep writer, adjoint sweep writer, return statement)."""
        # Pass 1 finds what the adjoint reads, which decides the element saves;
        # pass 2 writes the adjoint with the restores in place.
        _, first_ret = self._sweep(seed_exprs, returns)
        saved_arrays = self._storage_read(self._reads)
        read_before = self._read_before_written(self._adjoint_reads(first_ret))
        # One stack per element write: a scalar write and a slice write into
        # the same array save values of different types.
        self.saves = {id(s): self._stack(s.args[0].name, ("saved", id(s)))
                      for s in walk(self.fn.body)
                      if isinstance(s, Prim) and s.rule.mutates
                      and self._storage_read({s.args[0].name}) & saved_arrays
                      and id(s) in read_before}
        self.push_end, self.push_top, self.used = {}, {}, set(self.saves.values())
        back, ret = self._sweep(seed_exprs, returns)
        fwd = codegen.Writer()
        fwd.indent = 1
        for stack in self.stacks.values():
            if stack in self.used and stack not in self.tops:
                fwd.node(assign(stack, ast.List([], ast.Load())))
        body = [s for s in self.fn.body if not isinstance(s, Return)]
        self.kept = self._keep_primal(body, back.nodes + [ret], live_out)
        hooks = _ForwardHooks(self, self.kept)
        hooks.fuse_squares(self.fn.body, self._reads | set(live_out))
        self.kept = hooks.kept
        codegen.block(fwd, body, self.module.fn_names, hooks)
        if fwd.lines and fwd.lines[-1] == "    " * fwd.indent + "pass":
            fwd.lines.pop()        # an empty primal sweep: the adjoint sweep follows it
        return fwd, back, ret

    def _keep_primal(self, body, adjoint, live_out):
        """The primal statements the adjoint sweep ``adjoint`` (printed nodes)
        and ``live_out`` need: writes into an array the adjoint reads for its
        shape alone are dropped (see analyses.shape_live)."""
        roots = self._view_roots()
        view_bases = {s.targets[0]: s.args[0].name for s in walk(self.fn.body)
                      if isinstance(s, Prim) and s.rule.name == "getitem"
                      and isinstance(s.args[0], Var)}
        values, shapes = primal_reads(adjoint, self.recomputed, view_bases, roots, self._reads)
        saved = {s.args[0].name for s in walk(self.fn.body)
                 if isinstance(s, Prim) and s.rule.mutates and id(s) in self.saves}
        is_array = lambda n: (self.ranks.get(n) or 0) >= 1     # noqa: E731
        counted = [k for k in self.counters if k in self._reversed_loops]
        return keep_values(body, values | saved | set(live_out), shapes, roots, is_array,
                           self._call_defs(), counted)

    def _adjoint_reads(self, ret):
        """Where the adjoint sweep just written reads arrays for their values
        (see shape_only.adjoint_reads)."""
        placed = {id(n) for nodes in self.emitted.values() for n in nodes}
        unplaced = [n for n in self.w.nodes if id(n) not in placed] + [ret]
        view_bases = {s.targets[0]: s.args[0].name for s in walk(self.fn.body)
                      if isinstance(s, Prim) and s.rule.name == "getitem"
                      and isinstance(s.args[0], Var)}
        return adjoint_reads(self.emitted, self._view_roots(), view_bases, unplaced)

    def _read_before_written(self, adjoint=None):
        """Element writes that some read of the same array may precede.

        The adjoint of a read runs after the restores of the writes that
        follow it, so only a write that a read may precede (earlier in the
        code, or in an earlier iteration of a loop the array outlives)
        needs to save what it overwrites.  An array filled in place and read
        afterwards (``out = np.zeros(n)`` filled in a loop, a matrix built
        element by element and then used) keeps nothing.  Returns statement
        ids.

        ``adjoint`` (from :meth:`_adjoint_reads`): the reads are those of
        each statement's adjoint, not of the statement, so a read for the
        shape alone (``rt.unbroadcast(g, A[:-2])``) or no read at all keeps
        nothing.
        """
        placed, anywhere = adjoint if adjoint is not None else (None, set())
        root = self._view_roots()
        roots = lambda names: rooted(root, names)       # noqa: E731
        earlier = self._earlier_iterations()
        places, defs, called = [], {}, set()

        def visit(body, path, loops):
            for k, s in enumerate(body):
                here = path + (k,)
                if isinstance(s, (Prim, Call)):
                    for t in s.targets:
                        defs.setdefault(t, []).append(loops)
                    read = reads(s) if not (isinstance(s, Prim) and s.rule.mutates) \
                        else set(var_names([s.args[1]] + list(s.params.values())))
                    read = roots(read) if placed is None else placed.get(id(s), set())
                    places.append((s, here, loops, read))
                    if isinstance(s, Call):
                        called.update(roots(var_names(s.args)))
                else:
                    heads = [getattr(s, a, None) for a in ("cond", "start", "stop", "step")]
                    read = roots(var_names([h for h in heads if h]))
                    places.append((s, here, loops, read | (placed or {}).get(id(s), set())))
                    inner = loops + (id(s),) if isinstance(s, (For, While)) else loops
                    for j, b in enumerate(blocks(s)):
                        visit(b, here + (j,), inner)
        visit(self.fn.body, (), ())
        out = set()
        for w, wpath, wloops, wreads in places:
            if not (isinstance(w, Prim) and w.rule.mutates):
                continue
            if any(self._read_before(a, w, wpath, wloops, wreads, places, defs,
                                     called | anywhere, earlier.get(w.args[0].name, ()))
                   for a in root.get(w.args[0].name, (w.args[0].name,))):
                out.add(id(w))
        return out

    def _read_before(self, a, w, wpath, wloops, wreads, places, defs, always, earlier):
        """Whether a read of the array ``a`` may precede the write ``w`` into
        it.  An array made once inside a loop is new in every iteration:
        a read in an earlier iteration saw another array, unless the write
        goes through a name carried from an earlier iteration (``earlier``,
        the loops whose earlier iterations may have made what it holds)."""
        made = defs.get(a, [])
        fresh = set(made[0]) if len(made) == 1 and a not in self.fn.params else set()
        fresh -= set(earlier)
        if a in always or a in wreads:
            return True
        for r, rpath, rloops, rreads in places:
            if a in rreads and r is not w and (rpath < wpath or set(rloops) & set(wloops) - fresh):
                return True
        return False

    def _call_defs(self):
        """Residual names each split helper call defines, by statement id."""
        return {k: residuals for k, (_, residuals) in self.split_calls.items()}

    def _top_level_defs(self):
        """Names every path through the printed primal sweep assigns."""
        out = set(self.fn.params) | self._stack_names()
        out |= set(self.counters.values())
        for x in self.fn.body:
            if isinstance(x, (Prim, Call)):
                out.update(_targets(x))
                out.update(self.split_calls.get(id(x), ("", ()))[1])
            elif isinstance(x, If):
                out.update(x.joins)
        return out

    def _forward_defs(self):
        """Names the printed primal sweep assigns."""
        out = self._stack_names()
        for x in walk(self.fn.body):
            if id(x) not in self.kept:
                continue
            if isinstance(x, (Prim, Call)):
                out.update(_targets(x))
                out.update(self.split_calls.get(id(x), ("", ()))[1])
            elif isinstance(x, For):
                out.add(x.index)
            elif isinstance(x, While) and id(x) in self.counters:
                out.add(self.counters[id(x)])
            elif isinstance(x, If):
                out.update(x.joins)
        return out

    def _sweep(self, seed_exprs, returns):
        w = codegen.Writer()
        w.indent = 1
        self.w = w
        self.adj = Adjoints(self.names, w, self._named, self._sharing)
        for var, expr in seed_exprs:
            if isinstance(expr, ast.Name) and self.adj.get(var) is None:
                self.adj.bind(var, expr.id)
            else:
                self.adj.add(var, expr)
        self.recomputed = set()
        self.emitted = {}
        self.split_calls = {}
        self._reversed_loops = set()
        self.rev_block(self.fn.body, in_loop=False)
        ret = returns(self.adj)
        if self.split:       # what the bwd function can recompute is not a residual
            self._prepend_recomputed(w, self._recompute(
                self.fn.body, codegen.read_names(w.nodes) | codegen.names_in(ret), self.fn.params))
        self._reads = (codegen.read_names(w.nodes) - self.recomputed) | codegen.names_in(ret)
        return w, ret

    def _view_roots(self):
        """Each view's (or alias's) name -> the arrays it may look into.

        A set, not one array: a loop-carried name holds the value it entered
        with or one an earlier iteration made, and an if's join either
        branch's value, so a write through it may reach any of them.  A
        helper's result is an array of its own or one of the arrays it was
        passed, and the residuals a split helper returns beside it (see
        ``split_calls``) may be any of those: its own ``np.tanh`` output is
        its result.
        """
        key = (id(self.split_calls), len(self.split_calls))
        if self._roots is None or self._roots[0] != key:
            parents, own = {}, {}
            for s in walk(self.fn.body):
                if isinstance(s, Prim) and s.rule.name in VIEWS and isinstance(s.args[0], Var):
                    parents.setdefault(s.targets[0], set()).add(s.args[0].name)
                elif isinstance(s, Call):
                    arrays = {a for a in var_names(s.args) if self.ranks.get(a) != 0}
                    made = [t for t in s.targets if self.ranks.get(t) != 0]
                    for t in made:
                        own[t] = {t}
                        parents.setdefault(t, set()).update(arrays)
                    for r in self.split_calls.get(id(s), ("", ()))[1]:
                        parents.setdefault(r, set()).update(arrays | set(made))
            roots = _closure(parents, lambda p: {p}, own)
            self._roots = key, {n: r or frozenset({n}) for n, r in roots.items()}
        return self._roots[1]

    def _sharing(self, names):
        """``names`` and every name whose array may share memory with one of
        them (a view, a join copy or a helper's result): a write through any of
        them changes what ``names`` hold."""
        roots = self._view_roots()
        storage = rooted(roots, names)
        return set(names) | storage | {n for n, r in roots.items() if r & storage}

    def _earlier_iterations(self):
        """Name -> the loops an earlier iteration of which may have made the
        array it holds (or looks into): a loop's carried names, and views and
        aliases of them, and what a helper returns from them.  A write
        through such a name reaches values that reads in earlier iterations
        saw."""
        if self._earlier is None:
            parents, own = {}, {}
            for s in walk(self.fn.body):
                if isinstance(s, (For, While)):
                    for h in s.carried:
                        own.setdefault(h, set()).add(id(s))
                if isinstance(s, Prim) and s.rule.name in VIEWS and isinstance(s.args[0], Var):
                    parents.setdefault(s.targets[0], set()).add(s.args[0].name)
                elif isinstance(s, Call):       # a helper may return an array it was passed
                    arrays = {a for a in var_names(s.args) if self.ranks.get(a) != 0}
                    for t in s.targets:
                        if self.ranks.get(t) != 0:
                            parents.setdefault(t, set()).update(arrays)
            for h in own:
                parents.setdefault(h, set())
            closed = _closure(parents, lambda p: set(), own)
            self._earlier = {n: loops for n, loops in closed.items() if loops}
        return self._earlier

    def _capture_mutated_outputs(self, out, value, back=None):
        """``value`` with the names the adjoint sweep changes captured first.

        The adjoint sweep pops earlier values back into loop variables and
        restores overwritten array elements; a returned value must be taken
        before that (a copy, for an array restored in place).
        """
        restored = {s.args[0].name for s in walk(self.fn.body)
                    if isinstance(s, Prim) and s.rule.mutates and id(s) in self.saves}
        rebound = codegen.stored_names(back.nodes) if back is not None else set()
        renames = {}
        for name in sorted(codegen.names_in(value)):
            if name in restored or name in rebound:
                renames[name] = self._local(("value", name), f"{name}_value")
                copy_ = call("rt.snapshot", codegen.name(name)) if name in restored else \
                    codegen.name(name)
                out.indent = 1
                out.node(assign(renames[name], copy_))
        if renames:
            value = Subst({k: codegen.name(v) for k, v in renames.items()}).visit(value)
        return value


def _closure(parents, leaf, own=None):
    """name -> the union, over the names ``parents[name]`` it is made from,
    of ``leaf(p)`` for a ``p`` that has no parents and of its closure for one
    that has, plus ``own[name]``; settled by iteration (loop-carried names
    make the graph cyclic)."""
    out = {n: set((own or {}).get(n, ())) for n in parents}
    changed = True
    while changed:
        changed = False
        for n, ps in parents.items():
            new = set(out[n])
            for p in ps:
                new |= out[p] if p in parents else leaf(p)
            if new != out[n]:
                out[n], changed = new, True
    return {n: frozenset(v) for n, v in out.items()}
