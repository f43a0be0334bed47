"""The public transforms: grad, value_and_grad, jit, source (vjp: see vjp_function).

A transform returns a :class:`Transformed` callable.  Nothing is generated
until the first call, when the argument structure is known; the generated
function is then cached per structure, so later calls cost only a dispatch.
"""
import functools
import os
import threading
import time
import types
import weakref

import numpy as np

from .. import pipeline
from ..backends import TARGETS, tiers
from ..frontend import custom
from ..frontend.parse import FunctionSource, closure_cells, read_closure
from ..ir import leaf_count, pytree
from . import buildcache, dtypes
from .arguments import (
    _arg_count,
    _as_dtype,
    _check_arity,
    _describe_value,
    _hashable,
    _layered_arg_count,
    _like_arg,
    _normalize_argnums,
    _output_lists,
    _signature,
    _small_lengths,
    _type_key,
    _unit_like,
    _with_keywords,
    _with_lists,
    fast_key,
)
from .library_functions import as_function
from .static_args import StaticJit, is_static, remap_argnums

_BUILDING = buildcache.BUILDING    # held while a pipeline is built


#: Kinds whose entry takes the output's cotangent(s) as its last argument.
_COTANGENT_KINDS = ("vjp", "vjp_rows")


#: Transforms built by :meth:`Transformed.derived`, kept so that a composition
#: called again (``ad.hvp(f, ...)`` in a loop) reuses its generated code.
_DERIVED = {}


def _choose_execution(st, leaves, rounds=7):
    """Run loop-free code where it measured faster: Numba or plain NumPy.

    Numba's scalar exp/tanh lose to NumPy's vectorised ones on large
    arrays, while Numba wins on small ones (no interpreter overhead); the
    first call with a new argument structure times both on its arguments,
    interleaved so that machine noise hits both alike, and keeps the best.
    """
    candidates = {"numba": getattr(st.compiled, st.entry),
                  "numpy": getattr(st.alternative, st.entry)}
    for fn in candidates.values():
        fn(*leaves)                                   # compiles, warms caches
    best = dict.fromkeys(candidates, float("inf"))
    for _ in range(rounds):
        for name, fn in candidates.items():
            start = time.perf_counter()
            fn(*leaves)
            best[name] = min(best[name], time.perf_counter() - start)
    st.execution = min(best, key=best.get)
    st.function = candidates[st.execution]
    st.timings = best


def _plain(f):
    """The user function beneath ``ad.jit``, and the target it asked for.

    The source is read and fenced here, so unsupported code is reported when
    the transform is applied, at the user's line.
    """
    f = as_function(f, "s2s_ad")
    if is_static(f):
        raise TypeError(f"{f!r}: this transform does not take a jitted function with static "
                        f"arguments (ad.grad, ad.value_and_grad, ad.jacfwd, ad.jacrev, "
                        f"ad.hessian, ad.jvp and ad.vmap do); close over the static values "
                        f"instead (lambda x: f(x, 3))")
    if getattr(type(f), "__s2s_ad_object__", None) == "batched":      # ad.vmap(...)
        return f.as_function()
    if isinstance(f, Transformed):
        if f.kind != "primal":
            raise TypeError(f"{f!r} is already a derivative; differentiating it again needs "
                            f"forward mode over reverse mode (ad.hessian, ad.hvp)")
        return f.fun, f.target, f.options
    if not callable(f):
        raise TypeError(f"expected a function, got {f!r}")
    FunctionSource(f.fun if custom.rule_of(f) else f)
    return f, "python", {}


def grad(fun, argnums=0, has_aux=False, holomorphic=False):
    """Gradient of ``fun``'s scalar output with respect to ``args[argnums]``.

    A complex argument ``z = x + iy`` of a real output gets JAX's gradient
    ``df/dx - i df/dy``; ``holomorphic=True`` (complex arguments and output)
    gives ``f'(z)``.  A complex output without it is a TypeError, as in JAX.
    """
    return _grad(fun, argnums, has_aux, "grad", holomorphic)


def value_and_grad(fun, argnums=0, has_aux=False, holomorphic=False):
    """``(value, grad)``, or ``((value, aux), grad)`` with ``has_aux``."""
    return _grad(fun, argnums, has_aux, "value_and_grad", holomorphic)


def _grad(fun, argnums, has_aux, kind, holomorphic=False):
    fun = as_function(fun, f"ad.{kind}")
    if is_static(fun):
        remap_argnums(fun, argnums)                  # checked now, counted at each call
        return fun.transform_with(lambda g, fixed: _grad(g, remap_argnums(fun, argnums, fixed),
                                                      has_aux, kind, holomorphic), f"ad.{kind}")
    if isinstance(fun, Transformed) and fun.kind in ("grad", "value_and_grad"):
        return _grad_of_grad(fun, argnums, has_aux, kind, holomorphic)
    f, target, options = _plain(fun)
    nums, single = _normalize_argnums(f, argnums)
    t = Transformed(f, "grad", argnums=nums, has_aux=has_aux, target=target, options=options,
                    single=single, holomorphic=bool(holomorphic))
    t.kind = kind
    return t


def _grad_of_grad(inner, argnums, has_aux, kind, holomorphic=False):
    """``grad`` of a gradient, computed reverse-over-forward.

    The inner gradient is taken with respect to a scalar argument ``a`` (or
    it would not be a scalar), so it equals the directional derivative of
    ``f`` along a unit tangent of ``a``: a forward-mode layer; the outer
    gradient is reverse mode over that layer.  Derivatives commute, so this
    is the same value as reverse-over-reverse at forward mode's cost.
    """
    if inner.kind != "grad" or not inner.single or inner.has_aux:
        returns = ("a (value, gradient) pair" if inner.kind == "value_and_grad"
                   else "a tuple of gradients" if not inner.single else "(gradient, aux)")
        raise TypeError(f"grad requires a scalar-valued function, but {inner!r} returns "
                        f"{returns}; use ad.jacfwd or ad.hessian")
    nums, single = _normalize_argnums(inner.fun, argnums)
    (a,) = inner.argnums
    return inner.derived(kind, argnums=nums, single=single, has_aux=has_aux,
                         layers=inner.layers + (((a,), "tangent"),), units=inner.units + (a,),
                         holomorphic=bool(holomorphic),
                         unit_holomorphic=inner.unit_holomorphic + (inner.holomorphic,))


def _run_primal(f, target, options, primals):
    if target == "python":
        return f(*primals)
    return Transformed(f, "primal", target=target, options=options)(*primals)


def _own_copies(st, args):
    """``args`` for running the user's own function (a check, a dtype probe):
    where it writes into an argument, copies of their arrays, so the caller's
    never change."""
    if not st.program.entry_writes:
        return args
    return tuple(pytree.unflatten([np.copy(v) if isinstance(v, np.ndarray) else v
                                   for v in leaves], tree)
                 for leaves, tree in map(pytree.flatten, args))


def _numpy_floats(args):
    """``args`` with Python floats as ``np.float64``, for running the user's
    function to look at its output: NumPy's semantics, as the generated code
    has (``1.0 / 0.0`` is inf there, see ``backends._numpy_floats``)."""
    return tuple(pytree.unflatten([np.float64(v) if type(v) is float else v for v in leaves],
                                  tree) for leaves, tree in map(pytree.flatten, args))


def _zeros_like_tree(x):
    leaves, tree = pytree.flatten(x)
    return pytree.unflatten([np.zeros_like(v) for v in leaves], tree)


def _tree_text(treedef):
    if treedef is None:
        return "*"
    kind, children = treedef
    inner = ", ".join(_tree_text(c) for c in children)
    return f"[{inner}]" if kind is list else f"({inner})"


def jit(fun=None, *, target="cpu", parallel=None, cache=True, fastmath=False,
        compile=None, static_argnums=None, static_argnames=None):
    """``fun`` compiled with Numba; a transform of a jitted function is compiled too.

    ``static_argnums``/``static_argnames``: arguments hashed and built into
    the compiled code as constants, one build per distinct value (see
    :mod:`s2s_ad.api.static_args`).

    ``compile="tiered"``: a call whose compiled code is not ready runs the
    generated module on NumPy while Numba compiles it in the background
    (see :mod:`s2s_ad.backends.tiers`); ``"eager"``: the first call compiles.
    ``None``: ``$S2S_AD_COMPILE``, by default ``"tiered"``.
    """
    if target not in TARGETS:
        raise ValueError(f"target must be one of {TARGETS}, got {target!r}")
    if compile is None:
        compile = os.environ.get("S2S_AD_COMPILE") or tiers.DEFAULT
        if compile not in tiers.MODES:
            raise ValueError(f"S2S_AD_COMPILE must be one of {tiers.MODES}, got {compile!r}")
    if compile not in tiers.MODES:
        raise ValueError(f"compile must be one of {tiers.MODES}, got {compile!r}")
    options = {"cache": cache, "fastmath": fastmath, "parallel": bool(parallel),
               "compile": compile}
    if fun is None:
        return lambda f: jit(f, target=target, parallel=parallel, cache=cache, fastmath=fastmath,
                             compile=compile, static_argnums=static_argnums,
                             static_argnames=static_argnames)
    if static_argnums not in (None, ()) or static_argnames not in (None, ()):
        return _static_jit(fun, target, static_argnums, static_argnames,
                           dict(parallel=parallel, cache=cache, fastmath=fastmath,
                                compile=compile))
    if target == "cuda" and type(fun).__name__ != "Batched":
        raise ValueError("target='cuda' compiles batched functions, one GPU thread per "
                         "example: ad.jit(ad.vmap(f, in_axes=...), target='cuda'); use "
                         "target='cpu' for this function")
    fun = as_function(fun, "ad.jit")
    if is_static(fun):
        return fun              # its specializations are jitted already
    if isinstance(fun, Transformed) or hasattr(fun, "with_target"):
        return fun.with_target(target, dict(options, parallel_request=parallel))
    if not callable(fun):
        raise TypeError(f"jit expects a function, got {fun!r}")
    FunctionSource(fun.fun if custom.rule_of(fun) else fun)
    return Transformed(fun, "primal", target=target, options=options)


def _static_jit(fun, target, static_argnums, static_argnames, options):
    """``ad.jit`` with static arguments: a :class:`StaticJit` whose
    specializations are jitted with the same options."""
    if target == "cuda":
        raise ValueError("static_argnums/static_argnames are not supported with "
                         "target='cuda'; close over the static values instead")
    if is_static(fun):
        raise TypeError(f"{fun!r} already has static arguments; pass them all in one ad.jit")
    if not callable(fun):
        raise TypeError(f"jit expects a function, got {fun!r}")
    if not isinstance(fun, Transformed):
        FunctionSource(fun.fun if custom.rule_of(fun) else fun)
    return StaticJit(fun, static_argnums, static_argnames,
                     lambda g: jit(g, target=target, **options))


def source(fun, *example_args):
    """The generated Python source behind a transformed function.

    With example arguments the source is generated for their structure;
    otherwise for the last call's, or for every argument being one array
    (None for a parameter whose default is None and that is not
    differentiated: the code a call leaving it out runs).
    """
    fun = getattr(fun, "transformed", fun)     # the vjp_fn that ad.vjp returns
    if is_static(fun):                         # the specialization for these arguments
        fn, dynamic, _ = fun.specialize(example_args, {})
        return source(fn, *dynamic)
    if hasattr(fun, "generated_source"):       # vmap, jacfwd, jacrev, hessian
        return fun.generated_source(*example_args)
    if not isinstance(fun, Transformed):
        fun = Transformed(_plain(fun)[0], "primal")
    if not example_args and fun._last is None and fun._cells:
        n = _arg_count(fun.fun) or 0                 # one array each, and the hidden ones
        hidden = fun._with_hidden((None,) * n)[n:]
        trees = (None,) * n + tuple(pytree.structure(pytree.flatten(h)[1]) for h in hidden)
        return _with_execution(fun.state(trees))
    if example_args:
        if len(example_args) < (_arg_count(fun.fun) or 0):          # defaults, as a call
            example_args = _check_arity(fun.fun, tuple(example_args))
        flat = [pytree.flatten(a) for a in fun._with_hidden(example_args)]
        trees = tuple(pytree.structure(t) for _, t in flat)
        leaves = [leaf for ls, _ in flat for leaf in ls]
        ranks = tuple(pytree.rank(leaf) for leaf in leaves)
        lengths = _small_lengths(leaves) if fun.target != "python" else ()
        return _with_execution(fun.state(trees, ranks, lengths, _known_leaves(leaves)))
    if fun._last is not None:
        return _with_execution(fun._last)
    n = _arg_count(fun.fun) or 0
    defaults = getattr(fun.fun, "__defaults__", None) or ()
    known = tuple((i, d) for i, d in enumerate(defaults, n - len(defaults))
                  if (d is None or type(d) is str) and i not in fun.argnums)
    return _with_execution(fun.state((None,) * n, (), (), known))


def _known_leaves(leaves):
    """(position, value) of the argument leaves known before the run: None,
    strings, Python bools and functions (options, flags and callbacks: code
    is built for each value, as for JAX's static arguments, so ``if flag:``
    and ``assert flag`` are decided when it is built, and ``f(x)`` calls the
    function passed)."""
    return tuple((i, leaf) for i, leaf in enumerate(leaves)
                 if leaf is None or type(leaf) is str or type(leaf) is bool
                 or isinstance(leaf, types.FunctionType))


def _with_execution(st):
    """The source, with the measured choice of execution when one was made
    (and, under tiered execution, how the first call ran)."""
    if st.tier is not None and st.tier.note:
        st = _copy_with_source(st, f"# First call (tiered execution): {st.tier.note}.\n"
                               + st.source)
    if not st.execution:
        return st.source
    t = {k: f"{v * 1e6:.0f} us" for k, v in st.timings.items()}
    note = (f"# Execution: {'plain NumPy' if st.execution == 'numpy' else 'numba.njit'} "
            f"(measured on the first call: numba.njit {t['numba']}, NumPy {t['numpy']}).\n")
    return note + st.source


def _copy_with_source(st, text):
    import copy
    st = copy.copy(st)
    st.source = text
    return st


def _as_transformed(fun):
    """``fun`` as a :class:`Transformed` (a plain function: its primal transform)."""
    if isinstance(fun, Transformed):
        return fun
    fun = as_function(fun, "s2s_ad")
    t = _PLAIN.get(fun)
    if t is None:
        f, target, options = _plain(fun)
        t = _PLAIN[fun] = Transformed(f, "primal", target=target, options=options)
    return t


_PLAIN = weakref.WeakKeyDictionary()     # a plain function -> its primal transform


class Transformed:
    """``fun`` under one transform, built lazily per argument structure."""

    __s2s_ad_object__ = "transformed"

    def __init__(self, fun, kind, *, argnums=(), has_aux=False, target="python", options=None,
                 single=False, layers=(), units=(), width=1, holomorphic=False,
                 unit_holomorphic=()):
        self.fun = fun
        self.holomorphic = holomorphic          # grad: complex in and out, f'(z)
        self.unit_holomorphic = tuple(unit_holomorphic)   # per unit: its grad's holomorphic
        self.layers = tuple(layers)
        self.width = width            # tangents of the last layer per call (vector mode)
        self.units = tuple(units)     # arguments whose unit tangent each call appends
        self.kind = kind
        self.argnums = argnums
        self.single = single
        self.has_aux = has_aux
        self.target = target
        self.options = dict(options or {})
        self._built = {}
        self._latest = None           # the state the latest call in any thread used
        self._local = threading.local()
        self._nargs = _layered_arg_count(fun, self.layers, width if kind == "primal" else 1)
        if kind in _COTANGENT_KINDS and self._nargs is not None:
            self._nargs += 1          # the cotangent
        self._fast = {}           # argument signature -> lean call (see __call__)
        self._dtypes = {}         # float32 calls: NumPy's dtype of each result leaf
        # A lambda or nested def closing over values: see _with_hidden.
        self._cells = () if custom.rule_of(fun) is not None else closure_cells(fun)
        self._static, self._caches, self._hidden_count = None, {}, 0
        self._own = _arg_count(fun) if self._cells else None
        functools.update_wrapper(self, fun, updated=())
        if kind == "primal":
            self.__s2s_ad_function__ = fun

    @property
    def _last(self):
        """The built state this thread's current call uses (calls from several
        threads at once each see their own)."""
        return getattr(self._local, "state", None) or self._latest

    @_last.setter
    def _last(self, st):
        self._local.state = self._latest = st

    def __repr__(self):
        return f"<s2s_ad {self.kind} of {self.fun.__qualname__} (target={self.target})>"

    def with_target(self, target, options):
        options = {k: v for k, v in options.items() if k != "parallel_request"}
        return Transformed(self.fun, self.kind, argnums=self.argnums, has_aux=self.has_aux,
                           target=target, options=options, single=self.single,
                           layers=self.layers, units=self.units, width=self.width,
                           holomorphic=self.holomorphic,
                           unit_holomorphic=self.unit_holomorphic)

    def derived(self, kind=None, **changes):
        """This transform with other settings (same function, target and options)."""
        settings = dict(argnums=self.argnums, has_aux=self.has_aux, target=self.target,
                        options=self.options, single=self.single, layers=self.layers,
                        units=self.units, width=self.width, holomorphic=self.holomorphic,
                        unit_holomorphic=self.unit_holomorphic)
        settings.update(changes)
        kind = kind or self.kind
        key = (self.fun, kind, tuple(sorted((k, _hashable(v)) for k, v in settings.items())))
        t = _DERIVED.get(key)
        if t is None:
            t = _DERIVED[key] = Transformed(self.fun, kind, **settings)
        return t

    def _with_hidden(self, args):
        """``args`` with the closed-over arrays and floats of a lambda or nested
        def inserted after the function's own arguments: the compiled code
        takes them as hidden parameters, read at each call, so a closed-over
        array that changes between calls is seen (without building again).

        Closed-over values built in as constants (ints, functions, ...) key
        the builds: a change to one selects, or starts, another build.
        """
        if not self._cells:
            return args
        _, hidden, key = read_closure(self._cells)
        if key != self._static:
            self._static, self._hidden_count = key, len(hidden)
            self._built, self._fast, self._dtypes = self._caches.setdefault(key, ({}, {}, {}))
        n = self._own
        return tuple(args[:n]) + tuple(hidden) + tuple(args[n:])

    def _layers(self, trees):
        """The layers, with a batching layer's leaf positions past the hidden
        arguments (see _with_hidden) where they count leaves after them."""
        if not self._hidden_count:
            return self.layers
        n = _arg_count(self.fun)
        own = sum(leaf_count(t) for t in trees[:n])
        hidden = sum(leaf_count(t) for t in trees[n:n + self._hidden_count])
        return tuple((argnums, tuple(p + hidden if p >= own else p for p in output))
                     if argnums == "vmap" else (argnums, output)
                     for argnums, output in self.layers)

    def state(self, trees, ranks=(), lengths=(), known=()):
        """The built pipeline for one argument structure (leaf ranks, small
        lengths, the leaves that are None)."""
        st = self._built.get((trees, ranks, lengths, known))
        if st is None:
            with _BUILDING:
                st = self._built.get((trees, ranks, lengths, known))
                if st is None:
                    n = _arg_count(self.fun) + self._hidden_count
                    req = pipeline.Request(self.fun, self.kind, trees[:n],
                                           self.argnums, self.has_aux, self.target,
                                           self.options, ranks, self._layers(trees), lengths,
                                           known, self.width)
                    st = buildcache.build(req)
                    st.function = getattr(st.compiled, st.entry)
                    if self.target == "cpu" and self.options.get("compile") == "tiered":
                        measure = st.alternative is not None and \
                            self.kind not in _COTANGENT_KINDS
                        st.tier = tiers.Tier(_choose_execution if measure else None,
                                             tiers.scalar_loop(st))
                    self._built[trees, ranks, lengths, known] = st
        self._last = st
        return st

    def entry(self, args):
        """(compiled function, its leaf arguments, each argument's treedef)."""
        args = self._with_hidden(args)
        for a in args:
            if isinstance(a, (tuple, list, dict)):
                flat = [pytree.flatten(a) for a in args]
                treedefs = [t for _, t in flat]
                trees = tuple(pytree.structure(t) for t in treedefs)
                leaves = [leaf for ls, _ in flat for leaf in ls]
                break
        else:                      # the common case, kept cheap: no pytrees
            treedefs = trees = (None,) * len(args)
            leaves = args
        ranks = tuple(map(pytree.rank, leaves))
        lengths = _small_lengths(leaves) if self.target != "python" else ()
        known = _known_leaves(leaves) if None in ranks or bool in map(type, leaves) else ()
        if any(isinstance(v, types.FunctionType) for _, v in known):
            # built into the code; the compiled entry's parameter for one is not read
            leaves = [None if isinstance(v, types.FunctionType) else v for v in leaves]
        st = self._built.get((trees, ranks, lengths, known))
        if st is None:
            st = self.state(trees, ranks, lengths, known)
        if (self.kind != "primal" or self.layers) and not getattr(st, "complex_ok", False) \
                and any(map(pytree.is_complex_leaf, leaves)):
            dtypes.check_real_only(self.fun, st.source, args, self.kind)
            st.complex_ok = True
        # The Numba entry's own arity: st.function may already be the NumPy
        # entry that another thread's first call put there.
        if st.tier is not None and not st.tier.started and len(leaves) == \
                getattr(st.compiled, st.entry).py_func.__code__.co_argcount:
            st.tier.first_call(st, leaves)        # compiled, or NumPy while compiling
        if st.alternative is not None and not st.execution and \
                self.kind not in _COTANGENT_KINDS and (st.tier is None or not st.tier.deferred):
            _choose_execution(st, leaves)
        self._last = st
        return st.function, leaves, treedefs

    def __call__(self, *args, **kwargs):
        if kwargs:
            args = _with_keywords(self.fun, args, kwargs, self.argnums)
        if self.units:
            if len(args) != _arg_count(self.fun):
                args = _check_arity(self.fun, args)
            args = args + tuple(_unit_like(args[i], self) for i in self.units)
        full = self._with_hidden(args) if self._cells else args
        run = self._fast.get(tuple(map(_signature, full)))
        if run is not None:
            return run(full)
        result = self._call(args)
        self._remember_fast_path(args)
        return result

    def _remember_fast_path(self, args):
        """After a first call with plain arrays and floats, later calls skip the checks.

        The key holds each argument's type, rank and dtype kind, so a call
        that could need a check (an integer array, a pytree) never matches.
        """
        key = fast_key(self._with_hidden(args), self.argnums)
        st = self._last
        if key is None or st is None or (self.kind != "primal" and not st.checked) or (
                self._nargs is not None and len(args) != self._nargs):
            return
        # st.function is read at each call: tiered execution switches it to
        # compiled code when that is ready.
        single, aux, kind = self.single, self.has_aux, self.kind
        if kind == "primal":
            if _output_lists(st.out_tree, self.layers, self.width) is None:
                self._fast[key] = lambda args: st.function(*args)
            return

        shape_out = self._output_containers()

        def run(args):
            out, grads = st.function(*args)
            out = shape_out(out)
            grads = grads[0] if single else grads
            if kind == "value_and_grad":
                return out, grads
            return (grads, out) if aux else grads
        self._fast[key] = run

    def _call(self, args):
        if self._nargs is not None and len(args) != self._nargs:
            args = _check_arity(self.fun, args)
        if self.kind == "primal":
            entry, leaves, _ = self.entry(args)
            result = entry(*leaves)
            if self.target != "python" and any(
                    getattr(x, "dtype", None) == np.float32 for x in leaves):
                result = self._numpy_dtypes(args, leaves, result)
            lists = _output_lists(self._last.out_tree, self.layers, self.width)
            return result if lists is None else _with_lists(result, lists)
        entry, leaves, post = self._prepare(args)
        return post(entry(*leaves))

    def _prepare(self, args):
        """(entry point, its leaf arguments, raw result -> the user's result)."""
        for i in self.argnums:
            if self.holomorphic or not pytree.is_float_leaf(args[i]):
                dtypes.check_inputs(self.fun, args, self.argnums, self.kind, self.holomorphic)
        try:
            entry, leaves, treedefs = self.entry(args)
        except SyntaxError:
            if self.kind in ("grad", "value_and_grad"):    # a complex output Numba cannot
                self._check_output_first(args)             # take back: JAX's TypeError
            raise
        if self.kind not in _COTANGENT_KINDS:
            if not self._last.checked:
                self._check_scalar(args)
            elif self.holomorphic or dtypes.any_complex(args):
                self._check_complex_output(args)

        shape_out = self._output_containers()

        def post(raw, batched=False):
            out, grads = raw
            out = shape_out(out)
            grads = tuple(g if treedefs[i] is None else pytree.rebuild(g, treedefs[i])
                          for g, i in zip(grads, self.argnums))
            if not batched:
                grads = tuple(_like_arg(g, args[i]) for g, i in zip(grads, self.argnums))
            elif any(x is None for i in self.argnums for x in pytree.flatten(args[i])[0]):
                grads = tuple(_like_arg(g, args[i], scalars=False)
                              for g, i in zip(grads, self.argnums))
            grads = grads[0] if self.single else grads
            if self.kind == "value_and_grad":
                return out, grads
            return (grads, out) if self.has_aux else grads
        return entry, leaves, post

    def _output_containers(self):
        """A function giving the value (or aux) returned beside the gradient its
        dicts, NamedTuples and lists (generated code returns tuples)."""
        lists = _output_lists(self._last.out_tree, (), 1) if not self.layers else None
        if lists is None:
            return lambda out: out
        if self.kind == "grad":
            if not (self.has_aux and len(lists.items) == 2):
                return lambda out: out
            lists = lists.items[1]                  # grad returns (grads, aux)
        return lambda out: _with_lists(out, lists)

    def compiled_call(self, args):
        """Like :meth:`_prepare`, with the Numba entry point (for compiled callers)."""
        if self.units:
            args = list(args) + [_unit_like(args[i], self) for i in self.units]
        if self._nargs is not None and len(args) != self._nargs:
            args = _check_arity(self.fun, tuple(args))
        with tiers.eager():        # the caller calls the Numba entry point itself
            if self.kind == "primal":
                _, leaves, _ = self.entry(tuple(args))
                post = lambda raw, batched=False: raw      # noqa: E731
            else:
                _, leaves, post = self._prepare(tuple(args))
        st = self._last
        return getattr(st.compiled, st.entry), leaves, post

    def _numpy_dtypes(self, args, leaves, result):
        """Float results in the dtypes plain NumPy gives them.

        Numba returns float32 scalars as Python floats, and promotes
        ``float32 * 0.5`` to float64 where NumPy keeps float32 (a Python float
        is a "weak" scalar there).  With float32 arguments the user's function
        runs once in Python per argument structure to learn NumPy's dtypes;
        each result (and each tangent, which has its value's dtype) is cast.
        """
        key = tuple(_type_key(x) for x in leaves)
        dtypes = self._dtypes.get(key)
        if dtypes is None:
            n = _arg_count(self.fun)
            reference = self.fun(*_own_copies(self._last, args[:n])) if n is not None else None
            dtypes = [np.result_type(x) if isinstance(x, (float, np.floating, np.ndarray))
                      else None for x in pytree.flatten(reference)[0]]
            for depth, (argnums, output) in enumerate(self.layers, 1):
                if argnums != "vmap" and output in ("pair", "flat"):
                    dtypes = dtypes + dtypes * (self.width if depth == len(self.layers) else 1)
            self._dtypes[key] = dtypes
        out, tree = pytree.flatten(result)
        if len(out) != len(dtypes):
            return result
        fixed = [_as_dtype(x, dt) for x, dt in zip(out, dtypes)]
        return pytree.unflatten(fixed, tree)

    def _check_scalar(self, args):
        """grad needs a scalar output: checked once per argument structure.

        ``grad`` does not compute the value (nothing reads it), so the first
        call runs the function itself to look at its output.
        """
        n = _arg_count(self.fun)                         # a tangent has its value's shape
        out = self.fun(*_numpy_floats(_own_copies(self._last, args[:n])))
        value = out[0] if self.has_aux else out
        if pytree.is_container(value) or np.ndim(value) != 0:
            raise TypeError(f"grad requires {self.fun.__qualname__} to return a scalar, but it "
                            f"returned {_describe_value(value)}; use ad.vjp or ad.jacrev for "
                            f"non-scalar outputs")
        if self.kind in ("grad", "value_and_grad"):
            dtypes.check_output(self.fun, value, self.kind, self.holomorphic)
            self._last.output_kinds = {dtypes.kinds_key(args[:n])}
        self._last.checked = True

    def _check_output_first(self, args):
        """:meth:`_check_scalar`'s dtype check, run before anything was built."""
        n = _arg_count(self.fun)
        copies = tuple(pytree.unflatten([np.copy(v) if isinstance(v, np.ndarray) else v
                                         for v in leaves], tree)
                       for leaves, tree in map(pytree.flatten, args[:n]))
        try:
            out = self.fun(*_numpy_floats(copies))
        except Exception:           # the build's own error is the one to report
            return
        dtypes.check_output(self.fun, out[0] if self.has_aux else out, self.kind,
                            self.holomorphic)

    def _check_complex_output(self, args):
        """:meth:`_check_scalar`'s dtype check, once per dtype kinds of the
        arguments (a build serves float and complex calls alike)."""
        n = _arg_count(self.fun)
        key = dtypes.kinds_key(args[:n])
        seen = getattr(self._last, "output_kinds", None)
        if seen is not None and key in seen:
            return
        out = self.fun(*_numpy_floats(_own_copies(self._last, args[:n])))
        if self.kind in ("grad", "value_and_grad"):
            dtypes.check_output(self.fun, out[0] if self.has_aux else out, self.kind,
                                self.holomorphic)
        self._last.output_kinds = (seen or set()) | {key}
