"""Assembles the generated module: the entry function, the user functions
it calls (once each) and their VJPs (once per activity pattern).

Every part arrives as a tree (a list of ``ast.FunctionDef``, comments as
:func:`~s2s_ad.codegen.printer.comment` statements): the printed primal
functions, and the VJPs reverse mode writes (widened ones included).  The
module is unparsed once, in :meth:`ModuleBuilder.source`."""
import ast

from ..analyses import ranks as rank_analysis
from ..codegen import printer as codegen
from ..frontend import custom
from ..ir import Call, Var, leaves_of, var_names, walk
from ..ir.names import Names
from . import forward, reverse, widen


class ModuleBuilder:
    def __init__(self, program):
        self.program = program
        self.names = program.module_names
        self.fn_names = {}    # Function.key -> printed primal name
        self.parts = []       # per part: its functions, a list of ast statements
        self.defined = []     # every printed function name, for the backends
        self._vjps = {}
        self._joint = {}
        self.rows_width = 1   # rows per adjoint sweep of a vjp_rows entry
        self.repeated = False  # whether adjoint sweeps run more than once (vjp_rows)
        self._defs = []       # per part: its function definitions (see pure)
        self.entry_ranks = None   # (entry function, its parameters' ranks), for argument_ranks
        self._call_ranks = None

    def primal(self, fn, fname=None):
        """Print ``fn`` and every user function it calls, each once."""
        if fn.key in self.fn_names and fname is None:
            return self.fn_names[fn.key]
        fname = fname or fn.name
        self.fn_names[fn.key] = fname
        if fn.gradient is not None:        # its reverse code, not its body
            for callee in _callees(fn.gradient.fn):
                self.primal(callee)
            self._add(fname, reverse.gradient_source(self, fn, fname))
            return fname
        for callee in _callees(fn):
            self.primal(callee)
        w = codegen.Writer()
        codegen.primal(fn, fname, w, self.fn_names)
        self._add(fname, w.tree())
        return fname

    def argument_ranks(self, callee):
        """The ranks of ``callee``'s arguments where the entry calls it (see
        :func:`~s2s_ad.analyses.ranks.argument_ranks`, run once, when a
        gradient helper first asks), or None."""
        if self._call_ranks is None:
            self._call_ranks = {} if self.entry_ranks is None else \
                rank_analysis.argument_ranks(*self.entry_ranks)
        return self._call_ranks.get(callee.key)

    def helper_vjp(self, callee, in_names, seeds, ranks):
        """(fwd name, bwd name, residual names) of a called function's VJP."""
        key = (callee.key, in_names, seeds, ranks)
        if key not in self._vjps and callee.gradient is not None:
            fwd = self.names.fresh("fwd_" + callee.name)
            self.primal(custom.primal_adapter(callee, fwd), fwd)
            self._vjps[key] = (fwd, self._gradient_vjp(callee, in_names, seeds, ranks), [])
        if key not in self._vjps and custom.has_vjp_rule(callee):
            fwd = self.names.fresh("fwd_" + callee.name)
            bwd = self.names.fresh("bwd_" + callee.name)
            fwd_fn, bwd_fn, residuals = custom.vjp_adapters(self, callee, fwd, bwd)
            self.primal(fwd_fn, fwd)
            self.primal(bwd_fn, bwd)
            self._vjps[key] = (fwd, bwd, residuals)
        if key not in self._vjps and custom.has_jvp_rule(callee):
            self._vjps[key] = self._transposed_jvp(callee, ranks)
        if key not in self._vjps:
            self.primal(callee)
            fwd = self.names.fresh("fwd_" + callee.name)
            bwd = self.names.fresh("bwd_" + callee.name)
            tree, residuals = reverse.helper_vjp_source(self, callee, in_names, seeds, ranks,
                                                        fwd, bwd)
            self._vjps[key] = (fwd, bwd, residuals)
            self.defined += [fwd, bwd]
            self.parts.append(tree)
        return self._vjps[key]

    def _transposed_jvp(self, callee, ranks):
        """(fwd name, bwd name, no residuals) of a custom_jvp function's VJP: its
        JVP rule transposed.  ``fwd`` runs the function; ``bwd(params,
        cotangents)`` pulls the cotangents back through the rule's tangent
        output (:func:`~s2s_ad.frontend.custom.tangent_map`) at zero tangents,
        so the body is never differentiated."""
        fwd = self.names.fresh("fwd_" + callee.name)
        self.primal(custom.primal_adapter(callee, fwd), fwd)
        tangents_fn, tangents = custom.tangent_map(self.program, callee)
        self.primal(tangents_fn)
        outs = [leaf for leaf in tangents_fn.out_tree.items]
        seeds = tuple(o.name for o in outs if isinstance(o, Var))
        nondiff = set(custom.nondiff_leaves(callee))
        wrt = tuple(t for i, t in enumerate(tangents) if i not in nondiff)
        vjp = self.helper_joint_vjp(tangents_fn, wrt, seeds, tuple(ranks) * 2)
        bwd = self.names.fresh("bwd_" + callee.name)
        self._add(bwd, _transpose_source(bwd, vjp, callee, outs, nondiff))
        return fwd, bwd, []

    def _gradient_vjp(self, helper, in_names, seeds, ranks):
        """The VJP of a gradient helper ``g = grad f`` (its outputs ``seeds``
        seeded, pulled back to its parameters ``in_names``), as reverse over
        forward mode: with cotangents ``bg`` for gradients and ``by`` for
        outputs of ``f``, the cotangents are those of ``<by, y> + dy``, where
        ``dy`` is ``f``'s tangent output along ``bg`` -- one VJP of ``f``'s
        JVP, never a derivative of ``f``'s reverse sweep.  Returns the name of
        ``bwd(params, cotangents)``."""
        grad, fn = helper.gradient, helper.gradient.fn
        meaning = dict(zip(var_names([helper.out_tree]), grad.outputs))
        along = {meaning[s][1] for s in seeds if meaning[s][0] == "grad"}
        tangents = [p for p in fn.params if p in along]
        names = Names(helper.params)
        cots = [names.fresh("b_" + s.lstrip("_")) for s in seeds]
        by_tangent = {meaning[s][1]: c for s, c in zip(seeds, cots) if meaning[s][0] == "grad"}
        outs = list(leaves_of(fn.out_tree))
        seeded = {}           # the VJP's seeded output name -> cotangent terms
        for s, c in zip(seeds, cots):
            if meaning[s][0] == "out" and isinstance(outs[meaning[s][1]], Var):
                seeded.setdefault(outs[meaning[s][1]].name, []).append(c)
        rank = dict(zip(fn.params, ranks))
        vjp_of, vjp_ranks = fn, list(ranks)
        if tangents:
            vjp_of = forward.jvp_function(self.program, fn, tangents, list(ranks), "flat")
            vjp_ranks += [rank[p] for p in tangents]
            dseed = leaves_of(vjp_of.out_tree)[len(outs) + grad.seed]
            if isinstance(dseed, Var):
                seeded.setdefault(dseed.name, []).append("1.0")
        bwd = self.names.fresh("bwd_" + helper.name)
        w = codegen.Writer()
        codegen.def_line(w, bwd, list(helper.params) + cots)
        w.indent += 1
        w.comment(f"the adjoint of {helper.name}: the VJP of "
                  + (f"{fn.name}'s JVP along the gradients' cotangents" if tangents else
                     f"{fn.name}"))
        if not seeded:
            zeros = ", ".join(f"rt.zeros_like({p})" for p in in_names)
            w.lines.append("    " * w.indent + f"return ({zeros},)")
        else:
            vjp = self.helper_joint_vjp(vjp_of, tuple(in_names), tuple(seeded),
                                        tuple(vjp_ranks))
            args = list(fn.params) + [by_tangent[p] for p in tangents] + [
                " + ".join(terms) for terms in seeded.values()]
            w.lines.append("    " * w.indent + f"return {vjp}({', '.join(args)})")
        self._add(bwd, w.tree())
        return bwd

    def helper_joint_vjp(self, callee, in_names, seeds, ranks):
        """The name of a called function's VJP in one piece (recomputing its primal)."""
        key = (callee.key, in_names, seeds, ranks)
        if key not in self._joint and callee.gradient is not None:
            self._joint[key] = self._gradient_vjp(callee, in_names, seeds, ranks)
        if key not in self._joint:
            self.primal(callee)
            name = self._joint[key] = self.names.fresh("vjp_" + callee.name)
            self._add(name, reverse.helper_joint_source(self, callee, in_names, seeds, ranks,
                                                        name))
        return self._joint[key]

    def entry_vjp(self, fn, argnums, mode, has_aux, param_ranks=None, element_grads=False,
                  width=1):
        fname = self.names.fresh(f"{mode}_{fn.name}")
        for callee in _callees(fn):
            self.primal(callee)
        if mode == "vjp_rows":
            self.repeated = True
            tree, self.rows_width = reverse.rows_source(self, fn, argnums, fname, param_ranks,
                                                        width)
            self._add(fname, tree)
            return fname
        self._add(fname, reverse.entry_source(self, fn, argnums, fname, mode, has_aux,
                                              param_ranks, element_grads))
        return fname

    def _add(self, fname, tree):
        self.defined.append(fname)
        self.parts.append(tree)

    def pure(self, fname, seen=()):
        """Whether calling generated function ``fname`` changes nothing outside it
        (see :func:`s2s_ad.transforms.widen.pure_function`); calls back into ``seen``
        count as pure."""
        if len(self._defs) != len(self.parts):
            self._defs = [{d.name: d for d in part if isinstance(d, ast.FunctionDef)}
                          for part in self.parts]
        node = next((defs[fname] for defs in self._defs if fname in defs), None)
        seen = seen + (fname,)
        return node is not None and widen.pure_function(
            node, lambda callee: callee in seen or self.pure(callee, seen))

    def source(self, header, parts=None):
        """The module's text: ``header`` as comments, the imports, ``parts`` (the
        module's trees by default, or a rewrite of them) unparsed."""
        consts = ", ".join(f"{k} ({_describe(v)})" for k, v in self.program.consts.items())
        lines = [f"# {line}" for line in header]
        if consts:
            lines.append(f"# module constants bound at import: {consts}")
        return "\n".join(lines) + "\n" + codegen.HEADER + "\n\n" + self.text(parts)

    def text(self, parts=None):
        """The functions of the module, unparsed (two blank lines between parts)."""
        return "\n".join(codegen.unparse(part) + "\n\n"
                         for part in (self.parts if parts is None else parts))


def _transpose_source(fname, vjp, callee, outs, nondiff):
    """``def fname(params, cotangents): return vjp(params, zeros, cotangents)``:
    the VJP of a custom_jvp call from the VJP of its tangent map (the
    cotangents of constant tangent outputs are not passed).  A nondiff
    argument (leaf positions ``nondiff``, perhaps a string) has no tangent:
    its own value stands in, unread, and its cotangent is 0.0."""
    cots = [f"g_{i}" for i in range(len(outs))]
    zeros = [p if i in nondiff else f"rt.zeros_like({p})" for i, p in enumerate(callee.params)]
    passed = [c for c, o in zip(cots, outs) if isinstance(o, Var)]
    w = codegen.Writer()
    codegen.def_line(w, fname, list(callee.params) + cots)
    w.indent += 1
    w.comment(f"the JVP rule of {callee.custom.fun.__qualname__} transposed, at zero tangents")
    call = f"{vjp}({', '.join(list(callee.params) + zeros + passed)})"
    if not nondiff:
        w.lines.append("    " * w.indent + f"return {call}")
        return w.tree()
    got = [f"ct_{i}" for i in range(len(callee.params)) if i not in nondiff]
    w.lines.append("    " * w.indent + f"{', '.join(got)}, = {call}")
    it = iter(got)
    result = ["0.0" if i in nondiff else next(it) for i in range(len(callee.params))]
    w.lines.append("    " * w.indent + f"return ({', '.join(result)},)")
    return w.tree()


def _callees(fn):
    seen = []
    for s in walk(fn.body):
        if isinstance(s, Call) and s.callee not in seen:
            seen.append(s.callee)
    return seen


def _describe(v):
    shape = getattr(v, "shape", None)
    if shape is not None:
        return f"{type(v).__name__} {getattr(v, 'dtype', '')} {shape}"
    return getattr(v, "__qualname__", type(v).__name__)
