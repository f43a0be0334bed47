"""The adjoint of each kind of simple statement: a primitive (from its rule's
template), an element or slice write, a call of a user function (its own VJP),
and a branch.
"""
import ast
import copy

from ...analyses import ranks
from ...analyses.activity import diff_args
from ...analyses.ranks import rank_of
from ...codegen import printer as codegen
from ...codegen.adjoints import call, instantiate
from ...errors import UnsupportedSyntaxError
from ...frontend.custom import has_reverse_rule, has_vjp_rule, nondiff_leaves, recomputed
from ...ir import (
    Call,
    Const,
    For,
    If,
    Prim,
    Tup,
    Var,
    While,
    var_names,
    walk,
)
from ...rules import RULES
from ...rules.registry import parse_template
from .common import _scalar_code, blocks_of
from .peepholes import _times_kept, _unary_partial
from .shape_only import SHAPE_ARGS


class Statements:
    """Adjoints of primitives, element writes, calls and branches."""

    # -- adjoint sweep ---------------------------------------------------------
    def rev_block(self, body, in_loop):
        for s in reversed(body):
            # (fold_into_slice may delete a node printed just before: compare ids.)
            first = max(len(self.w.nodes) - 16, 0)
            before = {id(n) for n in self.w.nodes[first:]}
            if isinstance(s, Prim):
                self.rev_prim(s)
            elif isinstance(s, Call):
                self.rev_call(s, in_loop)
            elif isinstance(s, If) and self._has_work(s):
                self.rev_if(s, in_loop)
            elif isinstance(s, (For, While)) and self._has_work(s):
                self.rev_loop(s)
            # What the adjoint of ``s`` itself printed, not its statements'
            # (see shape_only.adjoint_reads).
            inner = {id(n) for x in walk(blocks_of(s)) for n in self.emitted.get(id(x), ())}
            self.emitted.setdefault(id(s), []).extend(
                n for n in self.w.nodes[first:] if id(n) not in inner and id(n) not in before)

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
                                        scatter=self._index_array(index),
                                        view=self._slice_view(s))
                    else:
                        template = s.rule.template(param, self._reduction(s, arg, target))
                        if target in self.kept_sums and _unary_partial(s) is not None:
                            # g has the reduced axes at length 1 (rt.sum_grad_kept):
                            # a loop scales the partial's rows, in place when the
                            # partial is a new array.
                            template = _times_kept(parse_template(s.rule.partials[param]))
                        if param in s.rule.kept_vjp and arg.name in self.kept_sums:
                            # Its only use is the elementwise function that made
                            # the operand, whose adjoint multiplies it into a
                            # full-size partial: no full-size broadcast first.
                            template = parse_template(s.rule.kept_vjp[param])
                        if param in s.rule.row_sum_vjp and arg.name in self.row_summed:
                            # Only the sum of its rows is read (the adjoint of
                            # adding a vector to it): sum the cotangent's rows
                            # first, a vector-matrix product instead of a
                            # matrix product.
                            template = parse_template(s.rule.row_sum_vjp[param])
                        self.adj.add(arg.name, self._shapes_from_operands(
                            instantiate(template, env)))
        if target in self.carried:
            self.adj.drop(target)
        elif g is not None and not self._depth:
            # Straight-line code defines ``target`` once: its adjoint is read no more.
            self.adj.release(target, was_owned)

    def _shapes_from_operands(self, expr):
        """``expr`` with each value read for its shape alone (see
        shape_only.SHAPE_ARGS) that an operand shaped like it stands for
        (``self.same_shape``: ``2.0 * a`` for ``a``) replaced by the operand,
        so that the value need not be kept (``rt.unbroadcast(g, a)``).  A
        reduction's adjoint (``rt.sum_grad(g, t)``) reads its operand so: for
        ``np.sum(np.square(Lx))`` the adjoint of the square reads ``Lx``
        anyway, so ``Lx`` is kept, not ``Lx`` squared too."""
        for node in ast.walk(expr):
            if isinstance(node, ast.Call):
                for k in SHAPE_ARGS.get(ast.unparse(node.func), ()):
                    if k < len(node.args) and isinstance(node.args[k], ast.Name):
                        name, seen = node.args[k].id, set()
                        while name in self.same_shape and name not in seen:
                            seen.add(name)                   # S * S -> S, 2.0 * A -> A
                            name = self.same_shape[name]
                        node.args[k] = codegen.name(name)
        return expr

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
                    contribution = call(RULES["np.sum"].name, part)
                else:
                    # The value's shape, from a view of that shape when there is one
                    # (see shape_only): the value itself is then not kept.
                    shape = self.shape_source.get(value.name, value.name)
                    contribution = call("rt.unbroadcast", part if repeats else
                                        call("rt.snapshot", part), codegen.name(shape))
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
        rule = has_reverse_rule(callee)
        if has_vjp_rule(callee):
            _check_nondiff(callee, ins, s.loc)
        if rule:        # a user rule (or a JVP rule transposed) takes every output's
            # cotangent, gives every input's
            seeds = out_leaves
        remat = recomputed(callee)
        if remat or (in_loop and not rule and _scalar_code(callee, arg_ranks)):
            # Inside a loop, a stack per residual costs more than running a
            # loop-free scalar helper again, as a hand-written adjoint does;
            # and ad.checkpoint asks for it: the primal sweep calls the plain
            # helper and keeps only its arguments; the adjoint sweep calls one
            # function that recomputes what it needs and pulls the cotangents
            # back.
            if remat:
                what = callee.custom.fun.__qualname__ if callee.custom else callee.name
                w.comment(f"{what} is checkpointed (ad.checkpoint): "
                          f"run again here, its intermediates were not kept")
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


def _check_nondiff(callee, ins, loc):
    """A differentiated value passed in a nondiff position of a custom_vjp
    function is an error, as in JAX: its f_bwd gives that argument no cotangent."""
    bad = sorted(set(ins) & set(nondiff_leaves(callee)))
    if bad:
        name = callee.custom.fun.__qualname__
        raise UnsupportedSyntaxError(
            f"a differentiated value is passed to {name}() in a position its nondiff_argnums "
            f"marks as not differentiated ({', '.join(map(str, callee.custom.nondiff_argnums))}):"
            f" f_bwd gives it no cotangent (JAX refuses this too); pass it in a "
            f"differentiated position", loc and loc.filename, loc and loc.lineno,
            loc and loc.col + 1, loc and loc.text)
