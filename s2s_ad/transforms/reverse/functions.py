"""The VJP functions a module needs, written from one :class:`ReverseWriter`:
one piece (``write``), several cotangent rows per sweep (``write_rows``,
widened), or a forward/backward pair passing residuals (``write_split``).

Each returns its functions as a tree (a list of ``ast.FunctionDef``, see
:mod:`s2s_ad.codegen.printer`) for module assembly.  The sweeps are still
printed line by line into a :class:`~s2s_ad.codegen.printer.Writer`; the
lines are parsed once, where a function is finished (``Writer.tree``), and
an adjoint sweep handed to :func:`~s2s_ad.transforms.widen.widen` is parsed
once and comes back as a tree.
"""
import ast

from ...codegen import printer as codegen
from ...codegen.adjoints import assign, call
from ...ir import (
    Prim,
    Tup,
    Var,
    var_names,
    walk,
)
from .. import widen
from .common import _flat, _read_first, _rebuild_tuple, grads_expr


class Functions:
    """The printed VJP functions: whole, by rows, or split in two."""

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
        return out.tree()

    def write_gradient(self, fname, seed_exprs, values, seed, wrt, outputs, tree):
        """Print ``def fname(params)`` returning, in the structure ``tree``,
        for each of ``outputs`` in turn the function's output leaf ``values[i]``
        (``("out", i)``) or the gradient of parameter leaf ``p``
        (``("grad", p)``): a gradient helper's reverse code (see
        :func:`s2s_ad.transforms.reverse.gradient_source`), whose output
        ``values[seed]`` is seeded.  The outputs are taken before the adjoint
        sweep can change them; ``rt.check_gradient`` raises ``ad.grad``'s
        errors first."""
        wrt_trees = [Var(p) for p in wrt]
        kept = sorted({m[1] for m in outputs if m[0] == "out"} | {seed})
        returns = lambda adj: ast.Return(ast.Tuple(                      # noqa: E731
            [ast.Tuple([codegen.atom(values[i]) for i in kept], ast.Load()),
             grads_expr(self.fn, wrt_trees, adj)], ast.Load()))
        fwd, back, ret = self._sweeps(seed_exprs, returns)
        out = codegen.Writer()
        codegen.def_line(out, fname, self.fn.params)
        out.indent = 1
        out.lines.extend(fwd.lines)
        for p in wrt:
            out.node(ast.Expr(call("rt.check_gradient", codegen.atom(values[seed]),
                                   codegen.name(p))))
        captured = dict(zip(kept, self._capture_mutated_outputs(out, ret.value.elts[0],
                                                                back).elts))
        out.lines.extend(back.lines)
        grads = dict(zip(wrt, ret.value.elts[1].elts))
        leaves = iter([captured[m[1]] if m[0] == "out" else grads[m[1]] for m in outputs])
        out.indent = 1
        out.node(ast.Return(_rebuild(tree, leaves)))
        out.blank()
        return out.tree()

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
        :mod:`s2s_ad.transforms.widen`; the number of rows must then be a multiple of
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
            widened = widen.widen(codegen.parse(back.lines), [seed for _, _, seed in seeds], width,
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
        saved = self._saved_something(restored)
        for n in restored:      # the adjoint sweep writes old values back into these
            self._when(out, saved.get(n), assign(final[n], call("rt.snapshot", codegen.name(n))))
        # An array a loop creates afresh in each iteration is kept on a stack:
        # the values of each one, as the primal sweep left them.
        kept = [(self.stacks[n, "stack"], self.names.fresh(f"{n.lstrip('_')}_values"))
                for n in restored if self.stacks.get((n, "stack")) in stacks]
        for stack, values in kept:
            each = self.names.fresh("a")
            out.line(f"{values} = [rt.snapshot({each}) for {each} in {stack}]")
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
                self._when(out, saved.get(n), ast.Expr(call(
                    "rt.copy_into", codegen.name(n), codegen.name(final[n]))), final)
            for stack, values in kept:
                k = self.names.fresh("k")
                out.line(f"for {k} in range(len({final[stack]})):")
                out.line(f"    rt.copy_into({final[stack]}[{k}], {values}[{k}])")
            out.indent -= 1
        if width > 1:           # the widened sweep, a tree
            for node in sweep:
                out.node(node)
        else:
            out.lines.extend("    " + line if line.strip() else line for line in sweep)
        for name, expr in zip(stacked, _flat([ret.value.elts[1]])):
            for q in range(width):
                out.node(ast.Expr(call("rt.set_row", codegen.name(name), rows_at[q],
                                       widen.renamed(expr, per_row[q]))))
        out.indent = 1
        self.width = width
        grads = _rebuild_tuple(ret.value.elts[1], iter(stacked))
        out.node(ast.Return(ast.Tuple([captured, grads], ast.Load())))
        out.blank()
        return out.tree()

    def _saved_something(self, restored):
        """For each array in ``restored`` that only some paths of the primal
        sweep define (in a branch, a loop): the stacks its overwritten
        elements were saved on.  Non-empty ones mean it was defined (and the
        adjoint sweep writes into it); otherwise the generated code must not
        name it -- plain Python (the NumPy module run while Numba compiles)
        raises UnboundLocalError where Numba would read an undefined value."""
        everywhere = self._top_level_defs()
        out = {}
        for s in walk(self.fn.body):
            if isinstance(s, Prim) and s.rule.mutates and id(s) in self.saves and \
                    s.args[0].name in restored and s.args[0].name not in everywhere:
                out.setdefault(s.args[0].name, []).append(self.saves[id(s)])
        return out

    def _when(self, out, stacks, node, final=None):
        """``node``, under ``if <one of stacks is not empty>:`` when ``stacks``
        is given (see _saved_something; ``final``: the names the row loop
        keeps each stack's (or top's) value after the primal sweep in)."""
        if not stacks:
            out.node(node)
            return
        final = final or {}
        tests = [f"{final.get(self.tops[s], self.tops[s])} > 0" if s in self.tops else
                 f"len({final.get(s, s)}) > 0" for s in sorted(set(stacks))]
        out.line(f"if {' or '.join(tests)}:")
        out.indent += 1
        out.node(node)
        out.indent -= 1

    def write_split(self, fwd_name, bwd_name, cot_params, returns, seed_exprs):
        """The primal sweep and the adjoint sweep as two functions.

        ``fwd_name(params)`` returns the outputs and then the residuals, the
        values its adjoint sweep reads; ``bwd_name(params, residuals,
        cotangents)`` returns the cotangents.  A caller runs the first in its
        own primal sweep and the second in its adjoint sweep, so nothing is
        computed twice.  Returns (the two functions' tree, residual names).
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
        put_back = []
        if self.module.repeated:
            out.indent = 1
            put_back = self._keep_residuals(out, residuals)
        out.lines.extend(back.lines)
        out.indent = 1
        for line in put_back:
            out.line(line)
        out.node(ret)
        out.blank()
        return out.tree(), residuals

    def _keep_residuals(self, out, residuals):
        """Where the caller's adjoint sweep runs more than once (one per row of a
        Jacobian), the bwd function leaves the residuals as it found them: it
        pops copies of the lists, and the arrays it writes overwritten values
        back into -- a restored array, the arrays on the stack of a name that
        may hold one, an array another residual holds -- get their values
        back before it returns (in place: two residuals may hold one array).
        Returns the statements that put them back, for the end."""
        popped = {n for n in self.stacks.values() if n in self.used and n not in self.tops}
        written = {s.args[0].name for s in walk(self.fn.body)
                   if isinstance(s, Prim) and s.rule.mutates and id(s) in self.saves}
        roots = self._storage_read(written)
        stacked = {stack for (name, kind), stack in self.stacks.items()
                   if kind == "stack" and self._storage_read({name}) & roots}
        always = self._top_level_defs()
        back = []
        for r in residuals:
            kept, values = self.names.fresh(f"{r}_kept"), self.names.fresh(f"{r}_values")
            if r in popped:
                if r in stacked:
                    each, k = self.names.fresh("a"), self.names.fresh("k")
                    out.line(f"{kept} = {r}")
                    out.line(f"{values} = [rt.snapshot({each}) for {each} in {kept}]")
                    back += [f"for {k} in range(len({kept})):",
                             f"    rt.copy_into({kept}[{k}], {values}[{k}])"]
                out.node(assign(r, ast.Call(ast.Attribute(codegen.name(r), "copy", ast.Load()),
                                            [], [])))
            elif r in written or (r in always and (self.ranks.get(r) or 0) >= 1
                                  and self._storage_read({r}) & roots):
                out.line(f"{kept} = {r}")
                out.line(f"{values} = rt.snapshot({r})")
                back.append(f"rt.copy_into({kept}, {values})")
        return back


def _rebuild(tree, leaves):
    """The expression of ``tree``'s structure (nested tuples) with the next of
    ``leaves`` at each leaf."""
    if isinstance(tree, Tup):
        return ast.Tuple([_rebuild(t, leaves) for t in tree.items], ast.Load())
    return next(leaves)
