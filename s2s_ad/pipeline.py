"""The compiler as one list of named passes.

``build(request)`` runs :data:`PASSES` in order over a :class:`State`.  Set
``S2S_AD_DUMP_AFTER`` to a comma-separated list of pass names (or ``all``)
to print the source after those passes to stderr, e.g.
``S2S_AD_DUMP_AFTER=normalize,reverse``; ``batch`` and ``widen`` name the
passes that run inside ``forward`` and ``reverse`` (see
:mod:`s2s_ad.ir.dump`).
"""
import ast
import copy
import os
from dataclasses import dataclass, field
from typing import Any

from . import backends
from .codegen.fusion import fuse_temporaries
from .frontend import custom
from .frontend.anf import Program
from .ir import For, Prim, Var, While, dump, leaves_of, walk
from .runtime.elementwise import TRANSCENDENTAL
from .transforms import (
    batch,
    forward,
    fuse_slices,
    index_arrays,
    mixed,
    nested_calls,  # noqa: F401  (lowers ad.grad(f)(x) & co. for the front end)
    scalarize,
    scalings,
    widen,
)
from .transforms.module import ModuleBuilder


@dataclass
class Request:
    """What to build: ``fun`` transformed by ``kind`` for argument structures ``trees``."""
    fun: Any
    kind: str                 # "primal" | "grad" | "value_and_grad" | "vjp" | "vjp_rows"
    trees: tuple
    argnums: tuple = ()
    has_aux: bool = False
    target: str = "python"
    options: dict = field(default_factory=dict)
    ranks: tuple = ()         # ndim of each argument leaf (None: unknown)
    # Forward-mode layers applied before ``kind``, innermost first: each is
    # (argument numbers that get tangents, "pair" | "tangent").  The function
    # a layer produces takes its input's arguments followed by one tangent
    # per differentiated argument.
    layers: tuple = ()
    # Static lengths of small 1-D array leaves (None for others) that the
    # compiled code specialises on (see scalarize).
    lengths: tuple = ()
    # The argument leaves known before the run, as (position, value): None
    # and strings (options, as JAX's static arguments).  The body reads the
    # constant: ``if opt is None:`` and ``if mode == "sum":`` take their branch
    # when it is built.
    known: tuple = ()
    # Vector mode: for "primal", the tangents the outermost forward layer
    # carries at once (see forward.jvp_function); for "vjp_rows", the rows
    # one adjoint sweep carries (see s2s_ad.transforms.widen).  1 otherwise.
    width: int = 1


@dataclass
class State:
    request: Request
    program: Program = None
    fn: Any = None
    module: ModuleBuilder = None
    entry: str = ""
    source: str = ""
    compiled: Any = None
    alternative: Any = None   # the same module on NumPy, when worth measuring
    function: Any = None      # the entry point, once compiled
    checked: bool = False     # grad: the output was seen to be a scalar
    execution: str = ""       # cpu target: "numba", or "numpy" when that measured faster
    timings: dict = field(default_factory=dict)     # execution: measured seconds per choice
    out_tree: Any = None      # the user's function's return structure (lists marked)
    tier: Any = None          # ad.jit(compile="tiered"): a tiers.Tier (see s2s_ad.backends.tiers)


def parse(st):
    st.program = Program()
    # A GPU thread keeps small static arrays only: an inner gradient runs there by
    # forward-mode columns over them, not as reverse code (see docs/nested_transforms.md).
    st.program.nested_columns = st.request.target == "cuda"
    fun = st.request.fun
    st.program.source(fun.fun if custom.rule_of(fun) else fun)
    return ""


def normalize(st):
    fun = st.request.fun
    if custom.rule_of(fun) is not None:
        st.fn = custom.entry_function(st.program, fun, st.request.trees, st.request.known)
    else:
        st.fn = st.program.lower(fun, st.request.trees, ranks=_example_ranks(st.request),
                                 known=st.request.known)
        st.fn = scalings.move_scalings(st.fn, _leaf_ranks(st))
        if st.request.target == "cpu" and not _batched(st.request):
            st.fn = index_arrays.lower(st.program, st.fn, _leaf_ranks(st))
    st.module = ModuleBuilder(st.program)
    st.out_tree = st.fn.out_tree
    return _anf_text(st)


def _leaf_ranks(st):
    """The rank of each parameter leaf of ``st.fn`` per example, or Nones."""
    n, ranks = len(st.fn.params), _example_ranks(st.request)
    return list(ranks[:n]) if ranks and len(ranks) >= n else [None] * n


def _example_ranks(req):
    """The rank of each of the user function's parameter leaves, per example
    (a vmap layer batches some of them), or None where not known."""
    if not req.ranks:
        return None
    ranks = list(req.ranks)
    for argnums, output in req.layers:
        if argnums == "vmap":
            for i in output:
                if i < len(ranks) and ranks[i] is not None:
                    ranks[i] -= 1
    return None if any(r is not None and r < 0 for r in ranks) else ranks


def _batched(req):
    """Whether a vmap layer batches the function (its code is vectorized)."""
    return any(argnums == "vmap" for argnums, _ in req.layers)


def scalarize_small(st):
    """Compiled code: small arrays of static length become scalars."""
    req = st.request
    if req.target not in ("cpu", "cuda") or _batched(req):
        return ""
    n = len(st.fn.params)
    ranks = list(req.ranks[:n]) if req.ranks else [None] * n
    fn = scalarize.scalarize(st.program, st.fn, ranks, list(req.lengths[:n]))
    if fn is st.fn:
        return ""
    st.fn = fn
    return _anf_text(st)


def forward_mode(st):
    """Apply the request's forward-mode layers (each a JVP of the last)."""
    req = st.request
    # Forward layers under a reverse transform make a second derivative (see
    # forward.Forward.call on custom_vjp functions).
    st.program.reverse_outer = req.kind != "primal" and any(a != "vmap" for a, _ in req.layers)
    for depth, (argnums, output) in enumerate(req.layers, 1):
        fn = st.fn
        param_ranks = req.ranks[:len(fn.params)] if req.ranks else None
        if argnums == "vmap":       # batch the leaves at positions ``output``
            per_example = [r - 1 if i in output else r for i, r in enumerate(param_ranks)]
            st.fn = batch.vectorize_function(st.program, fn,
                                                 [fn.params[i] for i in output], per_example)
            dump.after("batch", lambda: _anf_text(st))
            continue
        wrt = _wrt_leaves(fn, argnums)
        width = req.width if depth == len(req.layers) and req.kind == "primal" else 1
        st.fn = forward.jvp_function(st.program, fn, wrt, param_ranks, output, width=width)
    return _anf_text(st) if req.layers else ""


def mixed_mode(st):
    """Reverse-mode kinds: scalar while loops with few differentiated inputs run
    forward mode in the primal sweep (see s2s_ad.transforms.mixed)."""
    req, fn = st.request, st.fn
    if req.kind == "primal" or req.layers:
        return ""
    wrt = _wrt_leaves(fn, req.argnums)
    wrt += [e for name in wrt for e in fn.elements.get(name, ())]
    seeds = [leaf.name for leaf in leaves_of(fn.out_tree) if isinstance(leaf, Var)]
    n = len(fn.params)
    new = mixed.forward_loops(st.program, fn, wrt, seeds,
                              req.ranks[:n] if req.ranks else [None] * n)
    if new is fn:
        return ""
    st.fn = new
    return _anf_text(st)


def _wrt_leaves(fn, argnums):
    """The parameter leaves of the arguments ``argnums``."""
    return [leaf.name for i in argnums for leaf in leaves_of(fn.param_trees[i])]


def transform(st):
    req = st.request
    n = len(st.fn.params)
    given = list(req.ranks[:n]) if req.ranks else []
    st.module.entry_ranks = (st.fn, given + [None] * (n - len(given)))
    if req.kind == "primal":
        st.entry = st.module.primal(st.fn)
    else:
        _check_aux(st.fn, req)
        st.entry = st.module.entry_vjp(st.fn, req.argnums, req.kind, req.has_aux,
                                       req.ranks or None, req.options.get("element_grads"),
                                       req.width)
    return st.module.text()


def generate(st):
    req = st.request
    what = {"primal": "the function", "grad": "gradient", "value_and_grad": "value and gradient",
            "vjp": "vector-Jacobian product",
            "vjp_rows": "vector-Jacobian products for stacked cotangents"}[req.kind]
    if req.kind == "vjp_rows" and st.module.rows_width > 1:
        what += f", {st.module.rows_width} rows per adjoint sweep"
    for argnums, output in req.layers:
        if argnums == "vmap":
            what = f"batched {what}" if what != "the function" else "the batched function"
            continue
        jvp = "Jacobian-vector product" if output == "pair" else "directional derivative"
        if req.width > 1 and req.kind == "primal":
            jvp = f"{jvp}s along {req.width} tangents at once"
        what = f"{jvp} of the function" if what == "the function" else f"{what} of the {jvp}"
    header = [f"Generated by s2s_ad: {what} of {req.fun.__qualname__} "
              f"({st.fn.source.filename}:{st.fn.source.first_lineno}).",
              f"Entry point: {st.entry}.  Target: {_target_text(req)}."]
    parts = st.module.parts
    if req.target == "cpu":      # rewrites of the module's trees, before their one unparse
        if os.environ.get("S2S_AD_FUSE_SLICES", "1") != "0":
            parts = [fuse_slices.fuse_part(part) for part in parts]
        parts = fuse_temporaries([simd_calls(part) for part in parts])
    st.source = st.module.source(header, parts)
    return st.source


def simd_calls(stmts):
    """Compiled code calls the runtime's transcendental functions, which run
    NumPy's SIMD kernel on large float arrays (see runtime/elementwise.py):
    ``stmts`` (generated statements) with each ``np.f(...)`` of those an
    ``rt.f(...)``; ``stmts`` itself when there is none."""
    stack = list(stmts)
    while stack:                       # whether there is one (most parts have none)
        node = stack.pop()
        if _is_simd(node):
            return [_simd(s) for s in stmts]
        for value in node.__dict__.values():
            if type(value) is list:
                stack += [v for v in value if isinstance(v, ast.AST)]
            elif isinstance(value, ast.AST):
                stack.append(value)
    return stmts


def _is_simd(node):
    f = node.func if type(node) is ast.Call else None
    return type(f) is ast.Attribute and type(f.value) is ast.Name and f.value.id == "np" \
        and f.attr in TRANSCENDENTAL


def _simd(node):
    new = None
    for name, value in ast.iter_fields(node):
        items = value if isinstance(value, list) else [value]
        done = [_simd(v) if isinstance(v, ast.AST) else v for v in items]
        if any(a is not b for a, b in zip(done, items)):
            new = new or copy.copy(node)
            setattr(new, name, done if isinstance(value, list) else done[0])
    if _is_simd(node):
        new = new or copy.copy(node)
        new.func = ast.Attribute(ast.Name("rt", ast.Load()), node.func.attr, ast.Load())
    return new or node


def compile(st):
    st.compiled = backends.load(st.source, st.program.consts, st.module.defined, st.entry,
                                st.request.target, st.request.options,
                                superword=widen.uses_lanes(st.source))
    if st.request.target == "cpu" and not has_loops(st.program) and \
            not has_effects(st.program):
        # Array code without loops may run faster as NumPy calls than under
        # Numba (NumPy's exp/tanh are SIMD); the API measures both once.
        st.alternative = backends.load(st.source, st.program.consts, st.module.defined,
                                       st.entry, "python", like_numba=True)
    return ""


def element_params(st):
    """The parameters of ``st``'s entry whose gradient comes back as a tuple of
    element scalars (see reverse.entry_source's ``element_grads``)."""
    known = vars(st).get("element_params")       # a build restored from the disk cache
    if known is not None:
        return known
    return frozenset(i for i, t in enumerate(st.fn.param_trees)
                     if isinstance(t, Var) and t.name in st.fn.elements)


def has_effects(program):
    """Whether a statement runs for its side effect (``print``): such code is
    not run extra times to measure NumPy against Numba."""
    return any(isinstance(s, Prim) and s.rule.effect for fn in program.functions.values()
               for s in walk(fn.body))


def has_loops(program):
    known = getattr(program, "loops", None)       # a build restored from the disk cache
    if known is not None:
        return known
    return any(isinstance(s, (For, While)) for fn in program.functions.values()
               for s in walk(fn.body))


PASSES = [("parse", parse), ("normalize", normalize), ("scalarize", scalarize_small),
          ("forward", forward_mode), ("mixed", mixed_mode),
          ("reverse", transform),
          ("generate", generate), ("compile", compile)]


def build(request):
    st = State(request)
    for name, run in PASSES:
        dump.after(name, run(st))
    return st


def _anf_text(st):
    from .codegen import printer as codegen
    w = codegen.Writer()
    codegen.primal(st.fn, st.fn.name, w, None)
    return w.text()


def _check_aux(fn, req):
    if req.has_aux:
        out = fn.out_tree
        from .ir import Tup
        if not (isinstance(out, Tup) and len(out.items) == 2):
            raise TypeError(f"has_aux=True requires {req.fun.__qualname__} to return a pair "
                            f"(output, aux)")


def _target_text(req):
    if req.target == "cpu":
        # How the first call waits for compiled code changes nothing in it
        # (so eager and tiered builds share one module and disk cache entry).
        opts = ", ".join(f"{k}={v}" for k, v in sorted(req.options.items()) if k != "compile")
        return f"cpu (every function compiled with numba.njit; {opts})"
    if req.target == "cuda":
        return "cuda (the per-example functions, compiled as numba.cuda device functions)"
    return "python (plain NumPy)"
