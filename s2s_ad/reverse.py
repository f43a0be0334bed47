"""reverse: lowered function -> VJP source (primal sweep + adjoint sweep).

Receives a lowered :class:`~s2s_ad.ir.Function`, which of its parameters to
differentiate and which output leaves are seeded.  Writes one function that
runs the primal statements the adjoint needs (dead code is dropped), then the
adjoint of every active statement in reverse order, each from its rule's
template.  Adjoints are named after their primal (``x`` -> ``bx``); the first
contribution binds the name, later ones add to it; adjoints of broadcasting
operands are un-broadcast to the operand's shape by the rule; reading
``x[i]`` accumulates into ``bx[i]`` in place.  Gradients are returned with
their parameter's type and dtype (``rt.like``).

Calls to user functions become calls to their own VJP function, generated
once per (function, active inputs, active outputs) in the same module.
"""
import ast
import copy
import textwrap

from . import codegen, ranks, widen
from .activity import analyse, diff_args
from .adjoints import Adjoints, Subst, assign, call, instantiate, simplify
from .custom import has_vjp_rule
from .dce import keep, read_counts, reads
from .ir import (
    Call,
    Const,
    For,
    If,
    Prim,
    Return,
    Tup,
    Var,
    While,
    all_blocks,
    blocks,
    var_names,
    walk,
)
from .ranks import rank_of
from .rules.registry import _parse


class ReverseWriter:
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
        self.classes = ranks.shape_classes(fn, [("param", p) for p in fn.params], self.ranks)
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
        self.kept_sums = _kept_sums(fn, self.ranks)   # see rev_prim
        self.row_summed = _row_sums(fn, self.act, self.ranks)   # see rev_prim
        self._carrying = {}    # array -> its neighbour carry in the loop being reversed
        self._depth = 0        # how many loops and branches the adjoint being written is in

    # -- driver --------------------------------------------------------------
    def write(self, fname, cot_params, returns, seed_exprs, value_first=True):
        """Print ``def fname(params + cot_params)`` returning ``returns(adj)``.

        With ``value_first`` the returned tuple starts with the function's
        value, which is taken before the adjoint sweep can change it.
        """
        fwd, back, ret = self._sweeps(seed_exprs, returns)
        out = codegen.Writer()
        codegen.def_line(out, fname, self.fn.params + cot_params)
        out.indent = 1
        out.lines.extend(fwd.lines)
        if value_first:
            ret.value.elts[0] = self._capture_mutated_outputs(out, ret.value.elts[0], back)
        out.lines.extend(back.lines)
        out.node(ret)
        out.blank()
        return out.text()

    def write_rows(self, fname, rows_params, seeds, value, wrt_trees, width=1):
        """One primal sweep, then one adjoint sweep per row of the cotangents.

        ``fname(params, rows_params)`` takes cotangents stacked on a leading
        axis (``seeds``: (output name, its rows parameter, the per-row seed
        name)) and returns ``(value,
        grads)`` with every gradient leaf stacked the same way: the rows of a
        Jacobian at the cost of one primal sweep and ``m`` adjoint sweeps.
        The adjoint sweep pops stacks, rebinds loop variables and writes
        overwritten elements back into arrays, so each row starts from copies
        of the stacks and of the primal sweep's final values and arrays.

        With ``width`` K > 1 one adjoint sweep carries K rows at once (see
        :mod:`s2s_ad.widen`; the number of rows must then be a multiple of
        K), unless the sweep cannot be shared, when it is one row per sweep.
        """
        seed_exprs = [(v, codegen.name(seed)) for v, _, seed in seeds]
        returns = lambda adj: ast.Return(ast.Tuple(                      # noqa: E731
            [codegen.atom(value), grads_expr(self.fn, wrt_trees, adj)], ast.Load()))
        fwd, back, ret = self._sweeps(seed_exprs, returns)
        sweep, per_row = back.lines, [{}]
        if width > 1:
            known = dict(self.ranks)
            known.update((adj, self.ranks.get(var)) for var, adj in self._named.items()
                         if isinstance(var, str))
            widened = widen.widen(back.lines, [seed for _, _, seed in seeds], width,
                                  self.names, self.module.pure, known,
                                  codegen.names_in(ret.value.elts[1]))
            if widened is None:
                width = 1
            else:
                sweep, per_row = widened
        restored = sorted({s.args[0].name for s in walk(self.fn.body)
                           if isinstance(s, Prim) and s.rule.mutates and id(s) in self.saves})
        out = codegen.Writer()
        codegen.def_line(out, fname, self.fn.params + rows_params)
        out.indent = 1
        out.lines.extend(fwd.lines)
        captured = self._capture_mutated_outputs(out, ret.value.elts[0], back)
        # Names the adjoint sweep rebinds and may read before it does.
        rebound = sorted(codegen.stored_names(back.nodes) & self._forward_defs()
                         & _read_first(back.lines))
        stacks = sorted(n for n in self.stacks.values() if n in self.used and n not in self.tops)
        count = self.names.fresh("m")
        out.node(assign(count, ast.parse(f"{rows_params[0]}.shape[0]").body[0].value))
        leaves = list(var_names(wrt_trees))
        stacked = [self.names.fresh(f"b{leaf}_rows") for leaf in leaves]
        for name, leaf in zip(stacked, leaves):
            out.node(assign(name, call("rt.rows_like", codegen.name(leaf), codegen.name(count))))
        final = {n: self.names.fresh(f"{n}_final") for n in rebound + stacks + restored}
        for n in rebound + stacks:
            out.node(assign(final[n], codegen.name(n)))
        for n in restored:      # the adjoint sweep writes old values back into these
            out.node(assign(final[n], call("rt.snapshot", codegen.name(n))))
        row = self.names.fresh("row")
        out.line(f"for {row} in range({count}):" if width == 1 else
                 f"for {row} in range(0, {count}, {width}):")
        out.indent = 2
        rows_at = [codegen.name(row)] + [ast.parse(f"{row} + {q}").body[0].value
                                         for q in range(1, width)]
        for _, rows, seed in seeds:
            for q in range(width):
                out.node(assign(per_row[q].get(seed, seed), call("rt.snapshot", ast.Subscript(
                    codegen.name(rows), rows_at[q], ast.Load()))))
        for n in rebound:
            out.node(assign(n, codegen.name(final[n])))
        # The last sweep pops the recorded lists themselves (a sweep reads an
        # allocated stack without changing it: its top is rebound); the first
        # finds the arrays it restores as the primal sweep left them.
        later = ast.parse(f"{row} + {width} < {count}").body[0].value
        for n in stacks:
            copied = ast.Call(ast.Attribute(codegen.name(final[n]), "copy", ast.Load()), [], [])
            out.node(assign(n, ast.IfExp(later, copied, codegen.name(final[n]))))
        if restored:
            out.line(f"if {row} > 0:")
            out.indent += 1
            for n in restored:
                out.node(ast.Expr(call("rt.copy_into", codegen.name(n), codegen.name(final[n]))))
            out.indent -= 1
        out.lines.extend("    " * (2 if width > 1 else 1) + line if line.strip() else line
                         for line in sweep)
        for name, expr in zip(stacked, _flat([ret.value.elts[1]])):
            for q in range(width):
                out.node(ast.Expr(call("rt.set_row", codegen.name(name), rows_at[q],
                                       widen.renamed(expr, per_row[q]))))
        out.indent = 1
        self.width = width
        grads = _rebuild_tuple(ret.value.elts[1], iter(stacked))
        out.node(ast.Return(ast.Tuple([captured, grads], ast.Load())))
        out.blank()
        return out.text()

    def write_split(self, fwd_name, bwd_name, cot_params, returns, seed_exprs):
        """The primal sweep and the adjoint sweep as two functions.

        ``fwd_name(params)`` returns the outputs and then the residuals, the
        values its adjoint sweep reads; ``bwd_name(params, residuals,
        cotangents)`` returns the cotangents.  A caller runs the first in its
        own primal sweep and the second in its adjoint sweep, so nothing is
        computed twice.  Returns (source, residual names).
        """
        self.split = True
        fwd, back, ret = self._sweeps(seed_exprs, returns, set(var_names([self.fn.out_tree])))
        wanted = (codegen.read_names(back.nodes) | codegen.names_in(ret)) - self.recomputed
        residuals = [n for n in sorted(self._forward_defs() & wanted) if n not in self.fn.params]
        out = codegen.Writer()
        codegen.def_line(out, fwd_name, self.fn.params)
        out.indent = 1
        for r in residuals:
            if r not in self._top_level_defs():
                # Set on some paths only (a branch, a loop that may not run); the
                # adjoint reads it on those paths alone, but it is always returned.
                out.node(assign(r, ast.Constant(None)))
        out.indent = 0
        out.lines.extend(fwd.lines)
        outs = self._capture_mutated_outputs(out, codegen.atom(self.fn.out_tree))
        outs = outs.elts if isinstance(outs, ast.Tuple) else [outs]
        out.indent = 1
        out.node(ast.Return(ast.Tuple(_flat(outs) + [codegen.name(r) for r in residuals],
                                      ast.Load())))
        out.blank()
        codegen.def_line(out, bwd_name, self.fn.params + residuals + cot_params)
        if self.module.repeated:
            out.indent = 1
            self._keep_residuals(out, residuals)
        out.lines.extend(back.lines)
        out.indent = 1
        out.node(ret)
        out.blank()
        return out.text(), residuals

    def _keep_residuals(self, out, residuals):
        """Where the caller's adjoint sweep runs more than once (one per row of a
        Jacobian), the bwd function works on copies of the residuals it changes:
        the lists it pops and the arrays it writes overwritten values back into."""
        popped = {n for n in self.stacks.values() if n in self.used and n not in self.tops}
        restored = {s.args[0].name for s in walk(self.fn.body)
                    if isinstance(s, Prim) and s.rule.mutates and id(s) in self.saves}
        for r in residuals:
            if r in popped:
                out.node(assign(r, ast.Call(ast.Attribute(codegen.name(r), "copy", ast.Load()),
                                            [], [])))
            elif r in restored:
                out.node(assign(r, call("rt.snapshot", codegen.name(r))))

    def _sweeps(self, seed_exprs, returns, live_out=()):
        """(primal sweep writer, adjoint sweep writer, return statement)."""
        # Pass 1 finds what the adjoint reads, which decides the element saves;
        # pass 2 writes the adjoint with the restores in place.
        self._sweep(seed_exprs, returns)
        saved_arrays = self._storage_read(self._reads)
        read_before = self._read_before_written()
        # One stack per element write: a scalar write and a slice write into
        # the same array save values of different types.
        self.saves = {id(s): self._stack(s.args[0].name, ("saved", id(s)))
                      for s in walk(self.fn.body)
                      if isinstance(s, Prim) and s.rule.mutates and s.args[0].name in saved_arrays
                      and id(s) in read_before}
        self.push_end, self.push_top, self.used = {}, {}, set(self.saves.values())
        back, ret = self._sweep(seed_exprs, returns)
        fwd = codegen.Writer()
        fwd.indent = 1
        for stack in self.stacks.values():
            if stack in self.used and stack not in self.tops:
                fwd.node(assign(stack, ast.List([], ast.Load())))
        body = [s for s in self.fn.body if not isinstance(s, Return)]
        self.kept = keep(body, self._reads | set(live_out), self._call_defs(),
                         [k for k in self.counters if k in self._reversed_loops])
        hooks = _ForwardHooks(self, self.kept)
        hooks.fuse_squares(self.fn.body, self._reads | set(live_out))
        self.kept = hooks.kept
        codegen.block(fwd, body, self.module.fn_names, hooks)
        if fwd.lines and fwd.lines[-1] == "    " * fwd.indent + "pass":
            fwd.lines.pop()        # an empty primal sweep: the adjoint sweep follows it
        return fwd, back, ret

    def _read_before_written(self):
        """Element writes that some read of the same array may precede.

        The adjoint of a read runs after the restores of the writes that
        follow it, so only a write that a read may precede (earlier in the
        code, or in an earlier iteration of a loop the array outlives)
        needs to save what it overwrites.  An array filled in place and read
        afterwards (``out = np.zeros(n)`` filled in a loop, a matrix built
        element by element and then used) keeps nothing.  Returns statement
        ids.
        """
        root = self._view_roots()
        roots = lambda names: {root.get(n, n) for n in names}       # noqa: E731
        places, defs, called = [], {}, set()

        def visit(body, path, loops):
            for k, s in enumerate(body):
                here = path + (k,)
                if isinstance(s, (Prim, Call)):
                    for t in s.targets:
                        defs.setdefault(t, []).append(loops)
                    read = reads(s) if not (isinstance(s, Prim) and s.rule.mutates) \
                        else set(var_names([s.args[1]] + list(s.params.values())))
                    places.append((s, here, loops, roots(read)))
                    if isinstance(s, Call):
                        called.update(roots(var_names(s.args)))
                else:
                    heads = [getattr(s, a, None) for a in ("cond", "start", "stop", "step")]
                    places.append((s, here, loops, roots(var_names([h for h in heads if h]))))
                    inner = loops + (id(s),) if isinstance(s, (For, While)) else loops
                    for j, b in enumerate(blocks(s)):
                        visit(b, here + (j,), inner)
        visit(self.fn.body, (), ())
        out = set()
        for w, wpath, wloops, wreads in places:
            if not (isinstance(w, Prim) and w.rule.mutates):
                continue
            a = root.get(w.args[0].name, w.args[0].name)
            made = defs.get(a, [])
            fresh = set(made[0]) if len(made) == 1 and a not in self.fn.params else set()
            if a in called or a in wreads:
                out.add(id(w))
                continue
            for r, rpath, rloops, rreads in places:
                if a not in rreads or r is w:
                    continue
                shared = set(rloops) & set(wloops)
                if rpath < wpath or shared - fresh:
                    out.add(id(w))
                    break
        return out

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

    def _stack_names(self):
        """The stacks the sweeps use, and the indices of their tops."""
        used = {n for n in self.stacks.values() if n in self.used}
        return used | {self.tops[n] for n in used if n in self.tops}

    def _sweep(self, seed_exprs, returns):
        w = codegen.Writer()
        w.indent = 1
        self.w = w
        self.adj = Adjoints(self.names, w, self._named)
        for var, expr in seed_exprs:
            if isinstance(expr, ast.Name) and self.adj.get(var) is None:
                self.adj.bind(var, expr.id)
            else:
                self.adj.add(var, expr)
        self.recomputed = set()
        self.split_calls = {}
        self._reversed_loops = set()
        self.rev_block(self.fn.body, in_loop=False)
        ret = returns(self.adj)
        if self.split:       # what the bwd function can recompute is not a residual
            self._prepend_recomputed(w, self._recompute(
                self.fn.body, codegen.read_names(w.nodes) | codegen.names_in(ret), self.fn.params))
        self._reads = (codegen.read_names(w.nodes) - self.recomputed) | codegen.names_in(ret)
        return w, ret

    # -- adjoint sweep ---------------------------------------------------------
    def rev_block(self, body, in_loop):
        for s in reversed(body):
            if isinstance(s, Prim):
                self.rev_prim(s)
            elif isinstance(s, Call):
                self.rev_call(s, in_loop)
            elif isinstance(s, If) and self._has_work(s):
                self.rev_if(s, in_loop)
            elif isinstance(s, (For, While)) and self._has_work(s):
                self.rev_loop(s)

    def rev_prim(self, s):
        if s.rule.mutates:
            return self.rev_setitem(s)
        target = s.targets[0] if len(s.targets) == 1 else None
        g = self.adj.get(target) if target in self.act else None
        was_owned = self.adj.owned(target)
        if g is not None:
            self.w.loc(s.loc, "adjoint of: ")
            env = {"g": codegen.name(g), "out": codegen.name(target)}
            env.update((p, codegen.atom(a)) for p, a in zip(s.rule.operands, s.args))
            env.update((p, codegen.atom(v)) for p, v in s.params.items())
            for arg, param in diff_args(s):
                if isinstance(arg, Tup):
                    self._sequence(s, arg, param, env)
                elif isinstance(arg, Var) and arg.name in self.increments.values():
                    continue                    # see rev_setitem: x[i] keeps its adjoint
                elif self.act.is_active(arg):
                    if s.rule.name == "getitem":
                        index = s.params["index"]
                        carry = self._carrying.get(arg.name)
                        if carry is not None:       # see _neighbour_carries
                            local = carry[2][index.name]
                            self.w.node(ast.AugAssign(ast.Name(local, ast.Store()), ast.Add(),
                                                      env["g"]))
                            continue
                        self.adj.add_at(arg.name, codegen.atom(index), env["g"],
                                        scatter=self._index_array(index))
                    else:
                        template = s.rule.template(param, self._reduction(s, arg, target))
                        if target in self.kept_sums and _unary_partial(s) is not None:
                            # g has the reduced axes at length 1 (rt.sum_grad_kept):
                            # a loop scales the partial's rows, in place when the
                            # partial is a new array.
                            template = _times_kept(_parse(s.rule.partials[param]))
                        if s.rule.name in _KEPT and arg.name in self.kept_sums:
                            # Its only use is the elementwise function that made
                            # the operand, whose adjoint multiplies it into a
                            # full-size partial: no full-size broadcast first.
                            template = _KEPT[s.rule.name]
                        if s.rule.name == "np.matmul" and param == "x1" and \
                                arg.name in self.row_summed:
                            # Only the sum of its rows is read (the adjoint of
                            # adding a vector to it): sum the cotangent's rows
                            # first, a vector-matrix product instead of a
                            # matrix product.
                            template = _parse("rt.matmul(rt.sum(g, axis=0), np.transpose(x2))")
                        if s.rule.name in _SHAPE_ONLY and arg.name in self.same_shape:
                            # The reduction's adjoint reads its operand for the
                            # shape alone: the operand of the elementwise function
                            # that made it has that shape, and the adjoint of that
                            # function reads it anyway (np.sum(np.square(Lx))
                            # keeps Lx, not Lx squared too).
                            env = dict(env, a=codegen.name(self.same_shape[arg.name]))
                        self.adj.add(arg.name, instantiate(template, env))
        if target in self.carried:
            self.adj.drop(target)
        elif g is not None and not self._depth:
            # Straight-line code defines ``target`` once: its adjoint is read no more.
            self.adj.release(target, was_owned)

    def _index_array(self, index):
        """Whether an index may hold an integer array (so positions can repeat)."""
        parts = index.items if isinstance(index, Tup) else (index,)
        return any(isinstance(p, Var) and self.ranks.get(p.name) != 0 for p in parts)

    def _reduction(self, s, arg, target):
        """How a broadcasting operand's cotangent returns to its shape."""
        others = [a for a in s.args if a is not arg and isinstance(a, Var)]
        if not others:
            return None           # the other operands are Python scalars
        mine, out = rank_of(arg, self.ranks), self.ranks.get(target)
        same = ranks.class_of(arg, self.classes)
        if same is not None and same == self.classes.get(target):
            return None
        if mine == 0:
            return None if out == 0 else "sum" if out is not None else "unbroadcast"
        return "unbroadcast"

    def rev_setitem(self, s):
        x, value = s.args
        index = codegen.atom(s.params["index"])
        bx = self.adj.get(x.name) if x.name in self.act else None
        if bx is not None:
            self.w.loc(s.loc, "adjoint of: ")
            if self.act.is_active(value):
                part = ast.Subscript(codegen.name(bx), index, ast.Load())
                repeats = self._index_array(s.params["index"])
                if repeats:      # of repeated positions only the last write reaches x
                    part = call("rt.written", codegen.name(bx), copy.deepcopy(index))
                written = ranks.indexed_rank(rank_of(x, self.ranks), s.params["index"], self.ranks)
                fresh = None
                if rank_of(value, self.ranks) == 0 and written == 0:
                    contribution, fresh = part, True      # a scalar: a value, not a view
                elif rank_of(value, self.ranks) == 0 and written is not None:
                    contribution = call("np.sum", part)
                else:
                    contribution = call("rt.unbroadcast", part if repeats else
                                        call("rt.snapshot", part), codegen.name(value.name))
                self.adj.add(value.name, contribution, fresh)
            if id(s) not in self.increments:
                self.adj.prepare(x.name, True)
                target = ast.Subscript(codegen.name(self.adj.get(x.name)),
                                       copy.deepcopy(index), ast.Store())
                self.w.node(ast.Assign([target], ast.Constant(0.0), lineno=0))
        stack = self.saves.get(id(s))
        if stack is not None:
            self.w.loc(s.loc, "restore: ")
            target = ast.Subscript(codegen.name(x.name), copy.deepcopy(index), ast.Store())
            for p in self._pop(target, stack):
                self.w.node(p)

    def _sequence(self, s, arg, param, env):
        build = s.rule.vjp[param]
        statics = {k: v.value for k, v in s.params.items() if isinstance(v, Const)}
        for i, item in enumerate(arg.items):
            if self.act.is_active(item):
                self.adj.add(item.name, build(i, arg.items, env["g"], statics, codegen.atom))

    def rev_call(self, s, in_loop=False):
        adj, w = self.adj, self.w
        outs = [t for t in s.targets if t in self.act and adj.get(t) is not None]
        ins = [i for i, a in enumerate(s.args) if self.act.is_active(a)]
        if not outs or not ins:
            return
        w.loc(s.loc, "adjoint of: ")
        callee = s.callee
        in_names = [callee.params[i] for i in ins]
        out_leaves = list(var_names([callee.out_tree]))
        seeds = [leaf for leaf, t in zip(out_leaves, s.targets) if t in outs]
        arg_ranks = tuple(rank_of(a, self.ranks) for a in s.args)
        rule = has_vjp_rule(callee)
        if rule:        # a user rule takes every output's cotangent, gives every input's
            seeds = out_leaves
        if in_loop and not rule and _scalar_code(callee, arg_ranks):
            # Inside a loop, a stack per residual costs more than running a
            # loop-free scalar helper again, as a hand-written adjoint does:
            # the primal sweep calls the plain helper and keeps only its
            # arguments; the adjoint sweep calls one function that recomputes
            # what it needs and pulls the cotangents back.
            vjp_name = self.module.helper_joint_vjp(callee, tuple(in_names), tuple(seeds),
                                                    arg_ranks)
            held = []
        else:
            fwd_name, vjp_name, residuals = self.module.helper_vjp(
                callee, tuple(in_names), tuple(seeds), arg_ranks)
            held = [self._local(("residual", id(s), r), f"{callee.name}_{r.lstrip('_')}")
                    for r in residuals]
            self.split_calls[id(s)] = (fwd_name, held)
        # A cotangent lands directly in its adjoint's name when it is the first.
        results, fresh = [], set()
        for i in ins:
            var = s.args[i].name
            if adj.get(var) is None and var not in fresh:
                fresh.add(var)
                results.append(adj.name_of(var))
            else:
                results.append(self._local(("call", id(s), i), None))
        cots = [codegen.name(adj.get(t)) for t in outs]
        unpacked = results
        if rule:
            cots = [codegen.name(adj.get(t)) if t in outs
                    else call("rt.zeros_like", codegen.name(t)) for t in s.targets]
            by_arg = dict(zip(ins, results))
            unpacked = [by_arg.get(i) or self._local(("unused", id(s), i), None)
                        for i in range(len(s.args))]
        args = ([codegen.atom(a) for a in s.args] + [codegen.name(r) for r in held] + cots)
        unpack = ast.Tuple([ast.Name(r, ast.Store()) for r in unpacked], ast.Store())
        w.node(ast.Assign([unpack], ast.Call(codegen.name(vjp_name), args, []), lineno=0))
        for i, r in zip(ins, results):
            var = s.args[i].name
            if adj.get(var) is None:
                adj.bind(var, r)       # may be the very array the caller passed in
            else:
                adj.add(var, codegen.name(r))

    def _local(self, key, base):
        """A name for a generated local, the same in both passes."""
        if key not in self._named:
            self._named[key] = self.names.fresh(base) if base else self.names.temp()
        return self._named[key]

    def rev_if(self, s, in_loop):
        self._prepare(s)
        self.w.loc(s.loc, "adjoint of: ")
        cond = codegen.atom(s.cond)
        self.w.line(f"if {ast.unparse(cond)}:", cond)
        before = self.adj.state()
        self._nested(s.body, in_loop, joins=s.joins)
        paths = [before]           # the branch not taken, unless an else runs
        if self._has_work_in(s.orelse):
            mark = len(self.w.lines)
            taken = self.adj.state()
            self.adj.merge(before)
            self.w.line("else:")
            self._nested(s.orelse, in_loop, joins=s.joins)
            if all(line.strip() in ("pass", "") or line.strip().startswith("#")
                   for line in self.w.lines[mark + 1:]):
                del self.w.lines[mark:]            # nothing to undo on that path
            else:
                paths = [taken]
        # An adjoint rebound (so owned) on one path may still share the
        # cotangent's or another adjoint's array on the other.
        self.adj.merge(*paths)

    def rev_loop(self, s):
        self._prepare(s)
        self.w.loc(s.loc, "adjoint of: ")
        carries = self._neighbour_carries(s) if isinstance(s, For) else {}
        for x, (low, carry, _) in carries.items():
            self.adj.prepare(x, True)
            self.w.node(assign(carry, ast.Constant(0.0)))
        if isinstance(s, For):
            rng = _reversed_range(s)
            self.w.line(f"for {s.index} in {ast.unparse(rng)}:", rng)
        else:
            counter = self.counters.setdefault(id(s), self.names.fresh("_trips"))
            self._reversed_loops.add(id(s))
            self.w.line(f"for _ in range({counter}):", codegen.name(counter))
        self._carrying.update(carries)
        before = self.adj.state()
        self._nested(s.body, True, carried=s.carried, loop=s, carries=carries)
        self.adj.merge(before)           # the loop may not run at all
        for x in carries:
            del self._carrying[x]
        for x, (low, carry, _) in carries.items():     # the last element's carry lands
            ran = ast.Compare(codegen.atom(s.stop), [ast.Gt()], [codegen.atom(s.start)])
            target = ast.Subscript(codegen.name(self.adj.get(x)),
                                   _offset(codegen.atom(s.start), low), ast.Store())
            self.w.node(ast.If(ran, [ast.AugAssign(target, ast.Add(), codegen.name(carry))], []))
        for h in s.carried:
            if h in self.act and self.adj.get(h) is not None:
                self.adj.vars[h][1] = False

    def _neighbour_carries(self, s):
        """Arrays whose adjoint a loop updates at ``i + k`` and ``i + k + 1`` only.

        Reversed, iteration ``i`` adds to elements ``i + k + 1`` and ``i + k``,
        and the next one adds to ``i + k`` again: a read-modify-write of the
        element just stored, which serialises the loop through memory.  As a
        hand-written adjoint does, the contribution to ``i + k`` is carried in
        a local to the next iteration instead, so each element is written
        once.  Returns {array: (k, carry name, {index name: offset local})}.
        """
        if not (isinstance(s.step, Const) and s.step.value == 1):
            return {}
        offsets = {s.index: 0}
        for x in _outside_loops(s.body):
            if isinstance(x, Prim) and len(x.targets) == 1 and x.rule.name in (
                    "np.add", "np.subtract") and len(x.args) == 2:
                a, b = x.args
                sign = 1 if x.rule.name == "np.add" else -1
                if a == Var(s.index) and isinstance(b, Const) and type(b.value) is int:
                    offsets[x.targets[0]] = sign * b.value
                elif sign == 1 and b == Var(s.index) and isinstance(a, Const) and \
                        type(a.value) is int:
                    offsets[x.targets[0]] = a.value
        uses = {}
        nested = {n for x in s.body if isinstance(x, (For, While)) for y in walk(blocks_of(x))
                  if isinstance(y, (Prim, Call)) for n in reads(y)}
        bad = set(nested)
        for x in walk(s.body):
            if not isinstance(x, (Prim, Call)):
                continue
            if isinstance(x, Prim) and x.rule.name == "getitem" and isinstance(x.args[0], Var):
                index = x.params["index"]
                name = x.args[0].name
                if isinstance(index, Var) and index.name in offsets:
                    uses.setdefault(name, set()).add(offsets[index.name])
                    continue
            bad.update(reads(x))
            if isinstance(x, Prim) and x.rule.mutates:
                bad.add(x.args[0].name)
        carries = {}
        for name, ks in uses.items():
            if name in bad or name not in self.act or self.ranks.get(name) != 1 or \
                    name in s.carried or len(ks) != 2 or max(ks) - min(ks) != 1:
                continue
            low = min(ks)
            carry = self._local(("carry", id(s), name), f"b{name.lstrip('_')}_carry")
            local = {k: self._local(("carry", id(s), name, k), f"g{name.lstrip('_')}_{k - low}")
                     for k in ks}
            index_locals = {n: local[k] for n, k in offsets.items() if k in ks}
            carries[name] = (low, carry, index_locals)
        return carries

    def _nested(self, body, in_loop, carried=(), joins=(), loop=None, carries=None):
        """Reverse a nested block into its own writer, then pop what it reads.

        Inside a loop, a value the reversed block reads comes back off its
        stack first: names defined in the block (and the join names of the
        ifs in it) were pushed at the block's end, loop-carried names at the
        top of the body; a name only one branch of an if defines was pushed
        in that branch and is popped under the same condition.
        """
        outer = self.w
        sub = codegen.Writer()
        sub.indent = outer.indent + 1
        self.w = self.adj.w = sub
        defined = {h for h in carried if h in self.act and self.adj.get(h) is not None}
        for x, (low, carry, locals_) in (carries or {}).items():
            for local in sorted(set(locals_.values())):
                sub.node(assign(local, ast.Constant(0.0)))
        self._depth += 1
        self.rev_block(body, in_loop)
        self._depth -= 1
        for x, (low, carry, locals_) in (carries or {}).items():
            near, far = (self._local(("carry", id(loop), x, k), None) for k in (low, low + 1))
            target = ast.Subscript(codegen.name(self.adj.get(x)),
                                   _offset(codegen.name(loop.index), low + 1), ast.Store())
            total = ast.BinOp(codegen.name(far), ast.Add(), codegen.name(carry))
            sub.node(ast.AugAssign(target, ast.Add(), total))
            sub.node(assign(carry, codegen.name(near)))
        for h in defined:     # loop-carried adjoints start the next iteration defined
            if self.adj.get(h) is None:
                self.adj.prepare(h, False)
        self.w = self.adj.w = outer
        pad = "    " * sub.indent
        lines, pops = [], []
        if loop is not None:
            index = [loop.index] if isinstance(loop, For) else []
            self._prepend_recomputed(sub, self._recompute(
                loop.body, codegen.read_names(sub.nodes), index + list(loop.carried), loop.carried))
        if in_loop:
            reads = codegen.read_names(sub.nodes) - self.recomputed
            guarded = []
            for x in body:
                for name, sides in getattr(x, "joins", {}).items():
                    if name in reads and not all(sides):
                        branch = x.body if sides[0] else x.orelse
                        self.push_end.setdefault(id(branch), []).append(name)
                        cond = codegen.atom(x.cond)
                        test = cond if sides[0] else ast.UnaryOp(ast.Not(), cond)
                        guarded.append(ast.If(test, self._pop(name, self._stack(name)), []))
                        reads |= set(var_names([x.cond]))
            local = [n for n in self._block_defs(body) if n in reads and n not in carried
                     and n not in joins]
            self.push_end.setdefault(id(body), []).extend(local)
            self.push_top[id(body)] = [h for h in carried if h in reads]
            pops = [p for n in local + self.push_top[id(body)]
                    for p in self._pop(n, self._stack(n))]
            pops += guarded
            lines = [pad + line for p in pops for line in ast.unparse(p).splitlines()]
        outer.lines.extend(lines)
        outer.lines.extend(sub.lines)
        outer.nodes.extend(pops + sub.nodes)
        if not lines and all(x.lstrip().startswith("#") for x in sub.lines):
            outer.lines.append(pad + "pass")

    def _recompute(self, body, reads, available=(), carried=()):
        """Cheap scalar statements of ``body`` that the adjoint recomputes.

        A hand-written adjoint recomputes ``x[i] ** 2`` from ``x`` and ``i``
        rather than storing it; so do we, for scalar arithmetic and element
        reads whose inputs are ``available`` (a loop's index and carried
        values, popped anyway; a split function's parameters), values that do
        not change while ``body`` runs, or other recomputed values.
        """
        inside = {t for x in walk(body) for t in _targets(x)}
        inside |= {x.index for x in walk(body) if isinstance(x, For)}
        inside |= set(carried)
        written = self._storage_read({x.args[0].name for x in walk(body)
                                      if isinstance(x, Prim) and x.rule.mutates})
        roots = self._storage_read
        available = set(available)
        chosen = {}
        for x in body:
            # Loop-carried names have two definitions: never recomputed.
            if not (isinstance(x, Prim) and x.rule.name in _CHEAP and len(x.targets) == 1
                    and self.ranks.get(x.targets[0]) == 0 and x.targets[0] not in self.carried):
                continue
            ins = set(var_names(list(x.args) + list(x.params.values())))
            if x.rule.name == "getitem" and roots(ins) & written:
                continue
            if all(n in available or n in chosen or (n not in inside and not roots({n}) & written)
                   for n in ins):
                chosen[x.targets[0]] = x
        needed, order = set(), []
        for x in reversed(body):
            if isinstance(x, Prim) and x.targets and x.targets[0] in chosen and (
                    x.targets[0] in reads or x.targets[0] in needed):
                order.append(x)
                needed |= set(var_names(list(x.args) + list(x.params.values())))
        return order[::-1]

    def _prepend_recomputed(self, writer, stmts):
        """Print ``stmts`` at the top of ``writer``'s block."""
        if not stmts:
            return
        head = codegen.Writer()
        head.indent = writer.indent
        for x in stmts:
            head.node(codegen.stmt(x, self.module.fn_names))
        writer.lines[:0] = ["    " * writer.indent + "# recomputed, not stored"] + head.lines
        writer.nodes[:0] = head.nodes
        self.recomputed.update(t for x in stmts for t in x.targets)

    def _prepare(self, s):
        """Define the outside adjoints a compound statement contributes to."""
        inside = {t for x in walk(blocks_of(s)) for t in _targets(x)}
        inside |= {x.index for x in walk([s]) if isinstance(x, For)}
        inside -= set(getattr(s, "carried", ()))
        for var, inplace in self._touched(s).items():
            if var not in inside:
                self.adj.prepare(var, inplace)

    def _touched(self, s):
        """Adjoints that statements inside ``s`` add to: {name: updated in place}."""
        out = {}
        for x in walk(blocks_of(s)):
            if isinstance(x, Prim) and x.rule.mutates:
                storage, value = x.args
                if storage.name in self.act:
                    out[storage.name] = True
                    if self.act.is_active(value):
                        out.setdefault(value.name, False)
            elif isinstance(x, (Prim, Call)) and any(t in self.act for t in x.targets):
                inplace = isinstance(x, Prim) and x.rule.name == "getitem"
                for name in var_names(a for a, _ in diff_args(x)):
                    if name in self.act:
                        out[name] = out.get(name, False) or inplace
        return out

    def _has_work(self, s):
        return self._has_work_in(blocks_of(s))

    def _has_work_in(self, body):
        for x in walk(body):
            if isinstance(x, Prim) and x.rule.mutates:
                if id(x) in self.saves or x.args[0].name in self.act:
                    return True
            elif isinstance(x, (Prim, Call)) and any(t in self.act for t in x.targets):
                return True
        return False

    def _block_defs(self, body):
        """Names a block defines at its own level (an if defines its complete joins)."""
        out = []
        for x in body:
            out.extend(_targets(x) if isinstance(x, (Prim, Call)) else [])
            out.extend(self.split_calls.get(id(x), ("", ()))[1])
            if isinstance(x, While) and id(x) in self.counters:
                out.append(self.counters[id(x)])
            if isinstance(x, If):
                out.extend(n for n, sides in x.joins.items() if all(sides))
        return out

    def _stack(self, name, kind="stack"):
        key = (name, kind)
        if key not in self.stacks:
            label = kind if isinstance(kind, str) else kind[0]
            stack = self.stacks[key] = self.names.fresh(f"{name.lstrip('_')}_{label}")
            sized = self._allocation(name, kind)
            if sized is not None:
                loop, size = sized
                self.tops[stack] = self.names.fresh(f"{stack.removesuffix('_stack')}_top")
                self.allocs.setdefault(id(loop), []).append((stack, size))
        self.used.add(self.stacks[key])
        return self.stacks[key]

    def _allocation(self, name, kind):
        """(top-level loop, size) when the stack of ``name`` (a scalar float
        the adjoint reads, or a saved element of a float vector) can be
        allocated before that loop, else None: a list."""
        names, writes = self._push_sites()
        if kind == "stack":
            if name not in self.act or self.ranks.get(name) != 0:
                return None
            return _capacity(names.get(name, []))
        s, chain = writes[kind[1]]
        index = s.params.get("index")
        scalar = isinstance(index, Const) and type(index.value) is int or \
            isinstance(index, Var) and self.ranks.get(index.name) == 0
        if name not in self.act or self.ranks.get(name) != 1 or not scalar:
            return None
        return _capacity([chain])

    def _push_sites(self):
        """Where a stack may be pushed: (name -> the enclosing statements of
        each block that may push it, id(element write) -> (the write, its
        enclosing statements)), outermost first.  A block pushes a name at
        most once each time it runs: at its end the names it defines (and
        its ifs' complete joins) but not the names pushed elsewhere (a loop's
        carried names, at its body's top; an if's joins, at the end of the
        block holding the if, or of the branch that alone sets them)."""
        if self._sites is None:
            names, writes = {}, {}

            def visit(body, chain, elsewhere=()):
                for s in body:
                    if isinstance(s, (Prim, Call)):
                        for t in _targets(s):
                            if t not in elsewhere:
                                names.setdefault(t, []).append(chain)
                        if isinstance(s, Prim) and s.rule.mutates:
                            writes[id(s)] = (s, chain)
                    elif isinstance(s, If):
                        for n, sides in s.joins.items():
                            names.setdefault(n, []).append(chain if all(sides) else chain + (s,))
                        for b in blocks(s):
                            visit(b, chain + (s,), s.joins)
                    elif isinstance(s, (For, While)):
                        for h in s.carried:
                            names.setdefault(h, []).append(chain + (s,))
                        for b in blocks(s):
                            visit(b, chain + (s,), s.carried)
            visit(self.fn.body, ())
            self._sites = names, writes
        return self._sites

    def _push(self, stack, value):
        """Statements pushing ``value`` (a name or an expression) on ``stack``."""
        value = codegen.name(value) if isinstance(value, str) else value
        top = self.tops.get(stack)
        if top is None:
            invoke = ast.Call(ast.Attribute(codegen.name(stack), "append", ast.Load()), [value], [])
            return [ast.Expr(invoke)]
        slot = ast.Subscript(codegen.name(stack), codegen.name(top), ast.Store())
        return [ast.Assign([slot], value, lineno=0),
                ast.AugAssign(ast.Name(top, ast.Store()), ast.Add(), ast.Constant(1))]

    def _pop(self, target, stack):
        """Statements popping ``stack`` into ``target`` (a name or a subscript)."""
        target = ast.Name(target, ast.Store()) if isinstance(target, str) else target
        top = self.tops.get(stack)
        if top is None:
            invoke = ast.Call(ast.Attribute(codegen.name(stack), "pop", ast.Load()), [], [])
            return [ast.Assign([target], invoke, lineno=0)]
        slot = ast.Subscript(codegen.name(stack), codegen.name(top), ast.Load())
        return [ast.AugAssign(ast.Name(top, ast.Store()), ast.Sub(), ast.Constant(1)),
                ast.Assign([target], slot, lineno=0)]

    def _storage_read(self, reads):
        """Arrays written in place whose contents (or a view's) the adjoint reads."""
        root = self._view_roots()
        return {root.get(n, n) for n in reads}

    def _view_roots(self):
        """Each view's (or alias's) name -> the array it looks into."""
        root = {}
        for s in walk(self.fn.body):
            if isinstance(s, Prim) and s.rule.name in VIEWS and isinstance(s.args[0], Var):
                root[s.targets[0]] = root.get(s.args[0].name, s.args[0].name)
        return root

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


_CHEAP = {"np.add", "np.subtract", "np.multiply", "np.divide", "np.negative", "np.positive",
          "np.power", "np.square", "np.abs", "np.mod", "np.floor_divide", "getitem", "copy",
          "np.less", "np.less_equal", "np.greater", "np.greater_equal", "np.equal",
          "np.not_equal", "and", "or", "not", "len", "int", "float"}

#: Rules whose result may share memory with their first operand (a view or an alias).
VIEWS = {"getitem", "np.reshape", "np.ravel", "np.transpose", "np.squeeze",
         "np.expand_dims", "np.asarray", "copy", "stop_gradient"}


class _ForwardHooks(codegen.Hooks):
    """The primal sweep: kept statements, plus pushes, saves and trip counts."""

    def __init__(self, writer, kept):
        self.r = writer
        self.kept = kept
        self.loops = {id(s.body): s for s in walk(writer.fn.body) if isinstance(s, While)}

    def before(self, w, s):
        counter = self.r.counters.get(id(s))
        if counter is not None:
            w.node(assign(counter, ast.Constant(0)))
        for stack, size in self.r.allocs.get(id(s), ()):
            if stack in self.r.used:
                w.node(assign(stack, call("rt.float_stack", size)))
                w.node(assign(self.r.tops[stack], ast.Constant(0)))

    def top(self, w, body):
        for n in self.r.push_top.get(id(body), ()):
            self._push(w, self.r._stack(n), n)

    def _push(self, w, stack, value):
        for p in self.r._push(stack, value):
            w.node(p)

    def end(self, w, body):
        loop = self.loops.get(id(body))
        counter = self.r.counters.get(id(loop)) if loop is not None else None
        if counter is not None:
            w.node(assign(counter, ast.BinOp(codegen.name(counter), ast.Add(), ast.Constant(1))))
        for n in self.r.push_end.get(id(body), ()):
            self._push(w, self.r._stack(n), n)

    def simple(self, w, s):
        split = self.r.split_calls.get(id(s))
        if split is not None:
            fwd_name, residuals = split
            w.loc(s.loc)
            names = [ast.Name(n, ast.Store()) for n in s.targets + residuals]
            invoke = ast.Call(codegen.name(fwd_name), [codegen.atom(a) for a in s.args], [])
            w.node(ast.Assign([ast.Tuple(names, ast.Store())], invoke, lineno=0))
            return True
        stack = self.r.saves.get(id(s))
        if stack is None:
            return False
        w.loc(s.loc)
        x = s.args[0]
        part = ast.Subscript(codegen.name(x.name), codegen.atom(s.params["index"]), ast.Load())
        self._push(w, stack, part if stack in self.r.tops else call("rt.snapshot", part))
        w.node(codegen.stmt(s))
        return True


def _capacity(chains):
    """(loop, size) for a stack that blocks inside the statements ``chains``
    (each the statements enclosing one block, outermost first) push at most
    once each time they run: the top-level ``for`` loop they all lie in,
    and the most pushes it can make (``len(range(n)) * len(range(k))`` for a
    block inside two loops), when that is known before the loop runs.  None
    for a block inside a ``while`` loop or in more than one top-level loop,
    or inside a loop whose bounds the outermost loop changes.
    """
    chains = [c for c in chains if any(isinstance(x, (For, While)) for x in c)]
    if not chains or not isinstance(chains[0][0], For):
        return None
    outer = chains[0][0]
    changed = {outer.index} | set(outer.carried)
    for x in walk(outer.body):
        changed.update(_targets(x))
        if isinstance(x, (For, While)):
            changed.update(x.carried)
        if isinstance(x, For):
            changed.add(x.index)
        elif isinstance(x, If):
            changed.update(x.joins)
    terms = {}
    for chain in chains:
        loops = [x for x in chain if isinstance(x, (For, While))]
        if chain[0] is not outer or any(isinstance(x, While) for x in loops) or any(
                set(var_names([x.start, x.stop, x.step])) & changed for x in loops[1:]):
            return None
        trips = [ast.Call(codegen.name("len"), [codegen.range_expr(x.start, x.stop, x.step)], [])
                 for x in loops]
        term = trips[0]
        for t in trips[1:]:
            term = ast.BinOp(term, ast.Mult(), t)
        key = ast.unparse(term)
        terms[key] = (terms.get(key, (0, term))[0] + 1, term)
    size = None
    for count, term in terms.values():
        term = term if count == 1 else ast.BinOp(ast.Constant(count), ast.Mult(), term)
        size = term if size is None else ast.BinOp(size, ast.Add(), term)
    return outer, size


def _offset(index, k):
    """``index + k`` (``index`` itself for 0)."""
    if k == 0:
        return index
    if isinstance(index, ast.Constant) and type(index.value) is int:
        return ast.Constant(index.value + k)
    op = ast.Add() if k > 0 else ast.Sub()
    return ast.BinOp(index, op, ast.Constant(abs(k)))


#: Reductions whose adjoint template reads the operand ``a`` for its shape only.
_SHAPE_ONLY = {"np.sum", "np.mean"}
#: Their adjoints with the reduced axes kept at length 1 (see _kept_sums).
_KEPT = {"np.sum": ast.parse("rt.sum_grad_kept(g, a, axis, keepdims)", mode="eval").body,
         "np.mean": ast.parse("rt.mean_grad_kept(g, a, axis, keepdims)", mode="eval").body}


def _kept_sums(fn, known):
    """Arrays whose only reader is one sum or mean and which a unary elementwise
    function with an array-valued partial made (``t = np.square(x)``, then
    ``np.sum(t, 1)``): the reduction's adjoint for them may stay unbroadcast
    (``rt.sum_grad_kept``), since the one adjoint reading it multiplies it
    into the partial, which has the full shape."""
    count = _use_counts(fn)
    summed = {s.args[0].name for s in walk(fn.body)
              if isinstance(s, Prim) and s.rule.name in _KEPT and isinstance(s.args[0], Var)}
    out = set()
    for s in walk(fn.body):
        partial = _unary_partial(s)
        if partial is not None and (s.rule.operands[0] in partial or "out" in partial):
            t = s.targets[0]
            if t in summed and count.get(t) == 1 and known.get(t) not in (0, None):
                out.add(t)
    return out


def _row_sums(fn, act, known):
    """Matrices whose cotangent is only ever summed over rows: made by adding
    (or subtracting) a differentiated vector and a matrix that is not
    differentiated (``xc = x - means[j]``), and read only as the left
    operand of a product with a matrix (``xc @ L.T``).  The product's
    adjoint for them may sum its cotangent's rows first:
    ``sum_i (g @ B.T)[i] = (sum_i g[i]) @ B.T``."""
    count = _use_counts(fn)
    left = {s.args[0].name for s in walk(fn.body)
            if isinstance(s, Prim) and s.rule.name == "np.matmul" and len(s.args) == 2
            and all(isinstance(a, Var) and known.get(a.name) == 2 for a in s.args)}
    out = set()
    for s in walk(fn.body):
        if isinstance(s, Prim) and s.rule.name in ("np.add", "np.subtract") and \
                len(s.targets) == 1 and all(isinstance(a, Var) for a in s.args):
            t = s.targets[0]
            ranks = [known.get(a.name) for a in s.args]
            active = [a.name in act for a in s.args]
            if t in left and count.get(t) == 1 and sorted(ranks) == [1, 2] and \
                    not active[ranks.index(2)] and active[ranks.index(1)]:
                out.add(t)
    return out


def _same_shape(fn):
    """Values made by a unary elementwise function whose adjoint reads its
    operand (``t = np.square(x)``, not ``np.exp``, whose adjoint reads t):
    t -> x, which has t's shape (and, differentiated, t's float dtype)."""
    out = {}
    for s in walk(fn.body):
        partial = _unary_partial(s)
        if partial is not None and s.rule.operands[0] in partial and "out" not in partial:
            out[s.targets[0]] = s.args[0].name
    return out


def _times_kept(partial):
    """``rt.times_kept(g, partial)``: a kept reduction's cotangent ``g`` scales
    the rows of an elementwise partial.  A constant factor of the partial
    (``2.0 * x``, np.square's) scales ``g`` instead, which is small, so the
    full-size product is computed once; the product is made in place when the
    partial is a new array."""
    g = codegen.name("g")
    if isinstance(partial, ast.BinOp) and isinstance(partial.op, ast.Mult):
        for c, rest in ((partial.left, partial.right), (partial.right, partial.left)):
            if isinstance(c, ast.Constant) and isinstance(c.value, (int, float)):
                g, partial = ast.BinOp(g, ast.Mult(), c), rest
                break
    fresh = not isinstance(partial, ast.Name)
    return ast.Call(codegen.name("rt.times_kept"), [g, partial],
                    [ast.keyword("temporary", ast.Constant(True))] if fresh else [])


def _unary_partial(s):
    """The names the partial derivative of ``s`` reads, if ``s`` is a unary
    elementwise primitive of a variable (else None)."""
    if isinstance(s, Prim) and s.rule.elementwise and not s.rule.vjp and \
            len(s.targets) == 1 and len(s.args) == 1 and isinstance(s.args[0], Var):
        return codegen.names_in(_parse(s.rule.partials[s.rule.operands[0]]))
    return None


def _use_counts(fn):
    """How many statements of ``fn`` use each name: its reads (see dce.reads),
    less those of values nothing reads after their loop.  A name a loop
    carries only because the user's variable outlives it (``sq = Lx * Lx``
    in a loop body), which only the loop's header lists, is not used by the
    header, nor is a value by its copy into such a name: neither has an
    adjoint."""
    count = read_counts(fn.body)
    unread = {h for s in walk(fn.body) if isinstance(s, (For, While))
              for h in s.carried if count.get(h) == 1}
    for h in unread:
        count[h] = 0
    for s in walk(fn.body):
        if isinstance(s, Prim) and s.rule.name == "copy" and s.targets[0] in unread and \
                isinstance(s.args[0], Var):
            count[s.args[0].name] -= 1
    return count


def _outside_loops(body):
    """The statements of ``body``, those in branches included, not in inner loops."""
    for s in body:
        yield s
        if isinstance(s, If):
            yield from _outside_loops(s.body)
            yield from _outside_loops(s.orelse)


def _increments(fn):
    """Element increments ``t = x[i]; ...; u = t + v; x[i] = u`` (``x[i] += v``):
    id of the write -> ``t``.

    The adjoint of such a write reads ``bu = bx[i]`` and leaves ``bx[i]``
    alone: zeroing it and adding ``bt`` (= ``bu``) back when the read is
    reached is the same value.  Only when ``t`` and ``u`` are read nowhere
    else, the three statements are in one block, and nothing between the
    read and the write can write into an array (or call a function).
    """
    counts = _use_counts(fn)
    found = {}
    for body in all_blocks(fn.body):
        for k, st in enumerate(body):
            if not (isinstance(st, Prim) and st.rule.mutates and st.rule.name == "setitem"
                    and isinstance(st.args[1], Var)):
                continue
            x, u = st.args
            for j in range(k - 1, -1, -1):
                add = body[j]
                if not isinstance(add, Prim) or add.rule.mutates:
                    break
                if add.targets != [u.name]:
                    continue
                if add.rule.name != "np.add" or counts.get(u.name) != 1:
                    break
                t = next((a for a in add.args if isinstance(a, Var) and counts.get(a.name) == 1
                          and _reads_element(body[:j], a.name, x.name, st.params["index"])),
                         None)
                if t is not None:
                    found[id(st)] = t.name
                break
    return found


def _reads_element(body, name, array, index):
    """Whether ``name`` is ``array[index]``, read in ``body`` with only pure
    statements after it."""
    for st in reversed(body):
        if isinstance(st, Prim) and st.targets == [name]:
            return st.rule.name == "getitem" and st.args[0] == Var(array) and \
                st.params.get("index") == index
        if not isinstance(st, Prim) or st.rule.mutates:
            return False
    return False



def _reversed_range(s):
    """``range(...)`` visiting a for loop's indices last to first."""
    start, stop, step = (codegen.atom(a) for a in (s.start, s.stop, s.step))
    if isinstance(s.step, Const) and s.step.value == 1:
        args = [simplify(ast.BinOp(stop, ast.Sub(), ast.Constant(1))),
                simplify(ast.BinOp(start, ast.Sub(), ast.Constant(1))), ast.Constant(-1)]
    else:
        last = call("rt.range_last", start, stop, step)
        args = [last, simplify(ast.BinOp(copy.deepcopy(start), ast.Sub(), copy.deepcopy(step))),
                simplify(ast.UnaryOp(ast.USub(), copy.deepcopy(step)))]
    return ast.Call(codegen.name("range"), args, [])


def blocks_of(s):
    return [x for b in blocks(s) for x in b]


def _targets(s):
    if isinstance(s, Prim) and s.rule.mutates:
        return []
    return list(getattr(s, "targets", ()))





def grads_expr(fn, wrt_trees, adj):
    """``rt.like(bx, x)`` per differentiated leaf, in the parameters' structure."""
    def one(tree):
        if isinstance(tree, Tup):
            return ast.Tuple([one(t) for t in tree.items], ast.Load())
        b = adj.get(tree.name)
        if b is None:
            return call("rt.zeros_like", codegen.name(tree.name))
        return call("rt.like", codegen.name(b), codegen.name(tree.name))
    return ast.Tuple([one(t) for t in wrt_trees], ast.Load())


def helper_vjp_source(module, callee, in_names, seeds, ranks, fwd_name, bwd_name):
    """A called user function's VJP, split in ``fwd_name`` and ``bwd_name``.

    Returns (source, residual names) -- see :meth:`ReverseWriter.write_split`.
    """
    writer, cot, returns, seed_exprs = _helper_writer(module, callee, in_names, seeds, ranks)
    return writer.write_split(fwd_name, bwd_name, cot, returns, seed_exprs)


def helper_joint_source(module, callee, in_names, seeds, ranks, fname):
    """A called user function's VJP as one function: ``fname(params, cotangents)``
    runs the primal statements its adjoint reads, then the adjoint."""
    writer, cot, returns, seed_exprs = _helper_writer(module, callee, in_names, seeds, ranks)
    return writer.write(fname, cot, returns, seed_exprs, value_first=False)


def _helper_writer(module, callee, in_names, seeds, ranks):
    """(writer, cotangent parameters, return builder, seeds) of a called function's VJP."""
    writer = ReverseWriter(module, callee, set(in_names), set(seeds), list(ranks))
    cot = [callee.names.adjoint(s) for s in seeds]
    seed_exprs = list(zip(seeds, (codegen.name(c) for c in cot)))
    in_trees = [Var(n) for n in in_names]
    return writer, cot, lambda adj: ast.Return(grads_expr(callee, in_trees, adj)), seed_exprs


def _scalar_code(fn, arg_ranks, seen=()):
    """Whether ``fn`` (and what it calls) is loop-free code on scalars only."""
    if fn.key in seen:
        return False
    known = ranks.infer(fn, list(arg_ranks))
    for s in walk(fn.body):
        if isinstance(s, (For, While)):
            return False
        if isinstance(s, (Prim, Call)) and any(known.get(t) != 0 for t in s.targets):
            return False
        if isinstance(s, Call) and not _scalar_code(
                s.callee, [rank_of(a, known) for a in s.args], seen + (fn.key,)):
            return False
    return True


def _read_first(lines):
    """Names that some path through the code ``lines`` reads before assigning."""
    def scan(stmts, assigned):
        out = set()
        for s in stmts:
            if isinstance(s, (ast.For, ast.While)):
                head = s.iter if isinstance(s, ast.For) else s.test
                out |= codegen.loads(head) - assigned
                target = [s.target] if isinstance(s, ast.For) else []
                out |= scan(s.body, set(assigned) | codegen.stored_names(target))
            elif isinstance(s, ast.If):
                out |= codegen.loads(s.test) - assigned
                out |= scan(s.body, set(assigned)) | scan(s.orelse, set(assigned))
            else:
                out |= codegen.loads(s) - assigned
                assigned |= codegen.stored_names([s])
        return out
    tree = ast.parse(textwrap.dedent("\n".join(lines)))
    return scan(tree.body, set())



def _rebuild_tuple(node, names):
    """``node`` (a tuple expression, nested) with each leaf replaced by the next name."""
    if isinstance(node, ast.Tuple):
        return ast.Tuple([_rebuild_tuple(e, names) for e in node.elts], ast.Load())
    return codegen.name(next(names))


def _flat(exprs):
    out = []
    for e in exprs:
        out.extend(_flat(e.elts) if isinstance(e, ast.Tuple) else [e])
    return out


def rows_source(module, fn, argnums, fname, param_ranks=None, width=1):
    """The VJP of the transformed function for stacked cotangent rows (see
    :meth:`ReverseWriter.write_rows`): the rows of its Jacobian in one call.

    Returns the source and the rows each adjoint sweep carries (``width``,
    or 1 where the sweep cannot be shared)."""
    leaves_ = list(_atom_leaves(fn.out_tree))
    wrt_trees = [fn.param_trees[i] for i in argnums]
    seeds = {a.name for a in leaves_ if isinstance(a, Var)}
    writer = ReverseWriter(module, fn, set(var_names(wrt_trees)), seeds, param_ranks)
    rows = [fn.names.fresh("b_outs") for _ in leaves_]
    seeds = [(a.name, r, fn.names.fresh("b_out")) for a, r in zip(leaves_, rows)
             if isinstance(a, Var)]
    text = writer.write_rows(fname, rows, seeds, fn.out_tree, wrt_trees, width)
    return text, writer.width


def entry_source(module, fn, argnums, fname, mode, has_aux, param_ranks=None,
                 element_grads=False):
    """The VJP of the transformed function itself.

    ``mode == "vjp"`` takes one cotangent per output leaf (after the
    primals); ``"grad"`` and ``"value_and_grad"`` seed the scalar output with
    1.0.  Each returns ``(value, grads)`` with one gradient per argnum, in the
    argument's structure; ``value`` is the output (``grad``: only the aux, or
    None, so that no work is spent on a value nobody reads).  With
    ``element_grads`` the gradient of a small argument split into scalars
    (``fn.elements``) is the tuple of its elements' gradients: nothing is
    allocated (the compiled per-sample loop of vmap writes them in place).
    """
    out = fn.out_tree
    diff_out = out.items[0] if has_aux else out
    leaves_ = list(_atom_leaves(diff_out))
    wrt_trees = [fn.param_trees[i] for i in argnums]
    if element_grads:
        wrt_trees = [Tup(tuple(Var(e) for e in fn.elements[t.name]))
                     if isinstance(t, Var) and t.name in fn.elements else t for t in wrt_trees]
    wrt = set(var_names(wrt_trees))
    seeds = {a.name for a in leaves_ if isinstance(a, Var)}
    writer = ReverseWriter(module, fn, wrt, seeds, param_ranks)
    if mode == "vjp":
        cot = [fn.names.fresh("b_out") for _ in leaves_]
        seed_exprs = [(a.name, codegen.name(c)) for a, c in zip(leaves_, cot) if isinstance(a, Var)]
    else:
        cot = []
        seed_exprs = [(leaves_[0].name, ast.Constant(1.0))] if isinstance(leaves_[0], Var) else []
    value = out
    if mode == "grad":
        value = out.items[1] if has_aux else Const(None)

    def returns(adj):
        return ast.Return(ast.Tuple([codegen.atom(value), grads_expr(fn, wrt_trees, adj)],
                                    ast.Load()))
    return writer.write(fname, cot, returns, seed_exprs)


def _atom_leaves(tree):
    if isinstance(tree, Tup):
        yield from tree.leaves()
    else:
        yield tree

