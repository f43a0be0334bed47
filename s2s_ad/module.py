"""Assembles the generated module: the entry function, the user functions
it calls (once each) and their VJPs (once per activity pattern)."""
import ast
import re

from . import codegen, custom, reverse
from .ir import Call, walk


class ModuleBuilder:
    def __init__(self, program):
        self.program = program
        self.names = program.module_names
        self.fn_names = {}    # Function.key -> printed primal name
        self.parts = []
        self.defined = []     # every printed function name, for the backends
        self._vjps = {}
        self._joint = {}
        self.rows_width = 1   # rows per adjoint sweep of a vjp_rows entry
        self._defs = []       # per part: its function definitions (see pure)

    def primal(self, fn, fname=None):
        """Print ``fn`` and every user function it calls, each once."""
        if fn.key in self.fn_names and fname is None:
            return self.fn_names[fn.key]
        fname = fname or fn.name
        self.fn_names[fn.key] = fname
        for callee in _callees(fn):
            self.primal(callee)
        w = codegen.Writer()
        codegen.primal(fn, fname, w, self.fn_names)
        self._add(fname, w.text())
        return fname

    def helper_vjp(self, callee, in_names, seeds, ranks):
        """(fwd name, bwd name, residual names) of a called function's VJP."""
        key = (callee.key, in_names, seeds, ranks)
        if key not in self._vjps and custom.has_vjp_rule(callee):
            fwd = self.names.fresh("fwd_" + callee.name)
            bwd = self.names.fresh("bwd_" + callee.name)
            fwd_fn, bwd_fn, residuals = custom.vjp_adapters(self, callee, fwd, bwd)
            self.primal(fwd_fn, fwd)
            self.primal(bwd_fn, bwd)
            self._vjps[key] = (fwd, bwd, residuals)
        if key not in self._vjps:
            self.primal(callee)
            fwd = self.names.fresh("fwd_" + callee.name)
            bwd = self.names.fresh("bwd_" + callee.name)
            text, residuals = reverse.helper_vjp_source(self, callee, in_names, seeds, ranks,
                                                        fwd, bwd)
            self._vjps[key] = (fwd, bwd, residuals)
            self.defined += [fwd, bwd]
            self.parts.append(text)
        return self._vjps[key]

    def helper_joint_vjp(self, callee, in_names, seeds, ranks):
        """The name of a called function's VJP in one piece (recomputing its primal)."""
        key = (callee.key, in_names, seeds, ranks)
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
            text, self.rows_width = reverse.rows_source(self, fn, argnums, fname, param_ranks,
                                                        width)
            self._add(fname, text)
            return fname
        self._add(fname, reverse.entry_source(self, fn, argnums, fname, mode, has_aux,
                                              param_ranks, element_grads))
        return fname

    def _add(self, fname, text):
        self.defined.append(fname)
        self.parts.append(text)

    def pure(self, fname, seen=()):
        """Whether calling generated function ``fname`` changes nothing outside it
        (so a vector-mode sweep may call it once per cotangent): no stack pops
        or pushes, no restores, element writes only into arrays it made
        itself, and only pure calls."""
        if len(self._defs) != len(self.parts):
            self._defs = [{d.name: d for d in ast.parse(part).body
                           if isinstance(d, ast.FunctionDef)} for part in self.parts]
        node = next((defs[fname] for defs in self._defs if fname in defs), None)
        if node is None:
            return False
        text = ast.unparse(node)
        if _EFFECTS.search(text) or not _writes_only_own_arrays(node.body, set()):
            return False
        called = set(_CALLS.findall(text)) & set(self.defined) - {fname} - set(seen)
        return all(self.pure(c, seen + (fname,)) for c in called)

    def source(self, header):
        consts = ", ".join(f"{k} ({_describe(v)})" for k, v in self.program.consts.items())
        lines = [f"# {line}" for line in header]
        if consts:
            lines.append(f"# module constants bound at import: {consts}")
        return "\n".join(lines) + "\n" + codegen.HEADER + "\n\n" + "\n".join(self.parts)


_EFFECTS = re.compile(r"\.pop\(|\.append\(|rt\.copy_into\(")
_FRESH = ("np.copy", "rt.zeros_like", "np.zeros", "np.empty", "np.zeros_like", "np.empty_like",
          "rt.snapshot")


def _writes_only_own_arrays(body, own):
    """Whether every element write in ``body`` (in order) goes into an array
    made in the function (``own``: names bound to a fresh array so far)."""
    for s in body:
        if isinstance(s, (ast.For, ast.While, ast.If)):
            if not (_writes_only_own_arrays(s.body, own)
                    and _writes_only_own_arrays(s.orelse, own)):
                return False
            continue
        targets = s.targets if isinstance(s, ast.Assign) else \
            [s.target] if isinstance(s, (ast.AugAssign, ast.AnnAssign)) else []
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and \
                ast.unparse(s.value.func) == "rt.index_add":
            targets = [ast.Subscript(s.value.args[0], ast.Constant(0), ast.Store())]
        for t in targets:
            if isinstance(t, ast.Subscript):
                root = t
                while isinstance(root, ast.Subscript):
                    root = root.value
                if not (isinstance(root, ast.Name) and root.id in own):
                    return False
            elif isinstance(t, ast.Name) and isinstance(s, ast.Assign):
                value = s.value
                made = isinstance(value, ast.BinOp) or (
                    isinstance(value, ast.Call) and ast.unparse(value.func) in _FRESH)
                (own.add if made else own.discard)(t.id)
    return True
_CALLS = re.compile(r"\b([A-Za-z_]\w*)\(")


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
