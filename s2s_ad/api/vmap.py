"""vmap: a function batched over a leading (or any) axis of its arguments.

The *per-sample loop* lowering runs the function once per example.  When
the function is compiled (``ad.jit``), the loop is generated source too --
a Numba function that calls the compiled function for each example inside
a ``numba.prange`` loop and writes each result into outputs allocated once
for the whole batch -- so a batched gradient costs what a hand-written
parallel loop costs.  Otherwise the loop runs in Python over whatever the
function is (any transform, nested ``vmap`` included).
"""
import inspect

import numpy as np

from .. import backends
from ..backends import fastcall
from ..ir import pytree
from .arguments import _arg_count, _check_arity, _with_keywords
from .library_functions import as_function
from .static_args import is_static, remap_in_axes
from .vmap_common import (
    METHODS,
    _broadcast_axes,
    _is_compiled,
    _leaf_text,
    _name,
    _negative,
    _plain_function,
)
from .vmap_loop import Loop
from .vmap_vectorized import Vectorized


def vmap(fun, in_axes=0, out_axes=0, *, method=None):
    """``fun`` mapped over an axis of its arguments (see API.md)."""
    if not callable(fun):
        raise TypeError(f"vmap expects a function, got {fun!r}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    _check_axes_spec(in_axes, "in_axes")
    _check_axes_spec(out_axes, "out_axes")
    fun = as_function(fun, "ad.vmap")
    if is_static(fun):              # ad.jit(f, static_argnums=...): batch each specialization
        return fun.transform_with(lambda g, fixed: vmap(g, remap_in_axes(fun, in_axes, fixed),
                                                     out_axes, method=method), "ad.vmap")
    return Batched(fun, in_axes, out_axes, method)


def _check_axes_spec(spec, what):
    if spec is None or (isinstance(spec, int) and not isinstance(spec, bool)):
        return
    if isinstance(spec, (tuple, list)) or isinstance(spec, dict) and all(
            isinstance(k, str) for k in spec):
        for s in (spec.values() if isinstance(spec, dict) else spec):
            _check_axes_spec(s, what)
        return
    raise TypeError(f"{what} must be an int, None, or a tuple or dict (string keys) of those "
                    f"(nested for pytree arguments), got {spec!r}")


#: What vmap hands work to, installed by the modules above it when
#: ``s2s_ad.api`` is imported: "dask" (s2s_ad.api.dask: a batch of Dask arrays,
#: pickling for workers) and "cuda" (s2s_ad.api.cuda_jacobians: ``ad.jit(ad.vmap(F),
#: target="cuda")``).
PLUGINS = {}


class Batched(Vectorized, Loop):
    """``fun`` batched by ``in_axes``/``out_axes``; see :func:`vmap`."""

    __s2s_ad_object__ = "batched"

    def __init__(self, fun, in_axes, out_axes, method, parallel=None):
        self.fun = fun
        self.in_axes = in_axes
        self.out_axes = out_axes
        self.method = method
        self.parallel = parallel
        self._loops = {}
        self._choices = {}        # (batched leaves, layout) -> "loop" | "vectorize"
        self._vector = None
        self._per_example = None  # the transform the compiled loop calls (see _compiled)
        self._function = None     # see as_function
        self._plans = {}          # argument shapes and dtypes -> fastcall.LoopPlan
        self._tiered = {}         # argument layout -> its loop's background compile
        self._numpy = None        # the NumPy twin answering meanwhile (see vmap_tiered)
        self.tier_note = ""
        self.source = None
        self._arity = None        # see _positional
        self._keyword_variants = {}   # (positional, full) argument counts -> its vmap
        self.__wrapped__ = fun
        self.__name__ = f"vmap_{getattr(fun, '__name__', 'f')}"
        self.__qualname__ = self.__name__

    def __repr__(self):
        return f"<s2s_ad vmap of {self.fun!r}, in_axes={self.in_axes}>"

    def __reduce__(self):
        # Pickled (for a Dask worker) as the transforms that build it, not as
        # compiled code; see dask_support.
        return PLUGINS["dask"].reduce_batched(self)

    @property
    def target(self):
        return getattr(self.fun, "target", "python")

    def with_target(self, target, options):
        from .core import jit
        if target == "cuda":               # one CUDA thread per example
            return PLUGINS["cuda"](self, options)
        inner = jit(self.fun, target=target, cache=options.get("cache", True),
                    fastmath=options.get("fastmath", False),
                    compile=options.get("compile"))
        parallel = options.get("parallel_request")
        return Batched(inner, self.in_axes, self.out_axes, self.method, parallel)

    def generated_source(self, *example_args):
        """The code that runs: the vectorized function, or the per-sample loop
        (once compiled) and the function it calls.

        With example arguments the batch is run once on them, so the lowering
        is the one chosen for arguments like these.
        """
        from .core import source
        if example_args:
            self(*example_args)
        batched = getattr(self.fun, "batched_source", None)
        if batched is not None and batched() is not None and self.method != "loop":
            return batched()                     # vmap(vjp_fn): the rows function it ran
        if self._vector is not None and self.method != "loop" and "loop" not in \
                self._choices.values():
            return (f"# vmap (lowering: vectorized by batching rules, run on NumPy; in_axes="
                    f"{self.in_axes!r}, out_axes={self.out_axes!r}):\n" + source(self._vector))
        inner = source(self._per_example or self.fun)
        if _is_compiled(self.fun):
            loop = self.source or ("# (the compiled prange loop is generated on the first "
                                   "call, for the argument layout it sees)\n")
            head = (f"# vmap (lowering: per-sample loop, compiled with Numba; in_axes="
                    f"{self.in_axes!r}, out_axes={self.out_axes!r}):\n")
            if self.tier_note:
                head = f"# First call (tiered execution): {self.tier_note}.\n" + head
            return head + loop + "\n# the function called once per example:\n" + inner
        if not self._choices and self.method is None:
            head = (f"# vmap (lowering chosen on the first call: vectorized by batching rules "
                    f"when control flow does not depend on batched values, else a per-sample "
                    f"loop; pass example arguments to ad.source to see it; in_axes="
                    f"{self.in_axes!r}, out_axes={self.out_axes!r}); the function per "
                    f"example:\n")
            return head + inner
        head = (f"# vmap (lowering: per-sample loop in Python; in_axes={self.in_axes!r}, "
                f"out_axes={self.out_axes!r}); the function called once per example:\n")
        return head + inner

    def _positional(self):
        """The number of positional parameters of the function batched."""
        if self._arity is None:
            self._arity = _arg_count(inspect.unwrap(self.fun)) or 0
        return self._arity

    def _completed_call(self, args, kwargs):
        """A call with keyword arguments, or with parameters left at their
        defaults: each in its parameter's place (defaults fill the gaps),
        unbatched (in_axes None) and, as in every transform, never
        differentiated; the batch of the positional arguments as ``in_axes``
        says.  Runs a vmap of these axes, kept per call layout."""
        fun = inspect.unwrap(self.fun)
        full = _with_keywords(fun, args, kwargs) if kwargs else _check_arity(fun, args)
        n, m = len(args), len(full)
        axes = self.in_axes
        if not isinstance(axes, tuple):
            axes = (axes,) * n
        if len(axes) == n:
            axes = axes + (None,) * (m - n)
        variant = self._keyword_variants.get((n, m))
        if variant is None:
            variant = self._keyword_variants[n, m] = Batched(self.fun, axes, self.out_axes,
                                                             self.method, self.parallel)
        return variant(*full)

    def as_function(self):
        """A def function whose body calls this vmap, for transforms of it.

        ``ad.jacrev(ad.vmap(f, in_axes=(0, None)))`` differentiates
        ``def vmap_f(x, W): return vmap(f, in_axes=(0, None), out_axes=0)(x, W)``,
        written to a generated module so that its source can be read; the
        vmap inside it is lowered as a loop over the examples, like one the
        user wrote.  Returns ``(function, target, jit options)``.
        """
        if self._function is None:
            self._function = self._wrapper()
        inner = self.fun.fun if isinstance(self.fun, Batched) else self.fun
        target = getattr(inner, "target", "python")
        return self._function, target, dict(getattr(inner, "options", {}))

    def _wrapper(self):
        from .core import Transformed
        fun = self.fun
        if isinstance(fun, Batched):
            fun = fun.as_function()[0]
        elif isinstance(fun, Transformed) and fun.kind == "primal" and not fun.layers:
            fun = fun.fun
        if not _plain_function(fun):
            raise TypeError(f"a transform of ad.vmap needs the vmapped function to be a def "
                            f"function (or ad.jit of one), got {fun!r}; take the transform "
                            f"inside instead (ad.vmap(ad.jacrev(f)) rather than "
                            f"ad.jacrev(ad.vmap(f)))")
        if self.out_axes != 0 or _negative(self.in_axes):
            raise TypeError(f"a transform of ad.vmap needs out_axes=0 and in_axes of "
                            f"non-negative ints or None, got in_axes={self.in_axes!r}, "
                            f"out_axes={self.out_axes!r}; move the axes with np.moveaxis "
                            f"around the call instead")
        params = list(inspect.signature(fun).parameters)
        own = fun.__name__ if fun.__name__.isidentifier() else "lambda_"
        inner = "fun" if own in params + ["vmap"] else own
        name = f"vmap_{own}"
        text = (f"def {name}({', '.join(params)}):\n"
                f"    return vmap({inner}, in_axes={self.in_axes!r}, out_axes=0)"
                f"({', '.join(params)})\n")
        consts = {"vmap": vmap, inner: fun}
        path = backends.write_module(text, consts, name)
        module = backends.import_file(
            path, f"s2s_ad_generated.{backends.module_name(text, consts, name)}.{id(fun)}",
            consts, text)
        return getattr(module, name)

    # -- calls ----------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        if kwargs or len(args) < self._positional():
            return self._completed_call(args, kwargs)
        if self._plans:                    # a compiled loop seen before: see fastcall
            plan = self._plans.get(fastcall.plan_key(args))
            if plan is not None:
                result = plan(args)
                if result is not None:
                    # What ad.source shows: the code this call ran.
                    self.source, self._per_example._last = plan.source, plan.state
                    return result
        leaves, treedefs, axes, size = self._batch(args)
        if any(type(x).__module__.startswith("dask.") for x in leaves):
            return PLUGINS["dask"].batched_call(self, leaves, treedefs, axes, size)
        moved = [np.moveaxis(x, a, 0) if a not in (None, 0) else x
                 for x, a in zip(leaves, axes)]
        result = None
        if hasattr(self.fun, "over_batch") and (getattr(self.fun, "batches_trees", False) or
                                                 all(t is None for t in treedefs)):
            jac = self.fun.over_batch(pytree.unflatten_all(moved, treedefs), axes, size,
                                      self.method)
            if jac is not None:
                leaves, tree = pytree.flatten(jac)
                return self._place([np.asarray(x) for x in leaves], tree, size)
        if isinstance(self.fun, Batched) and self.method != "loop" and size > 0:
            nested = self._nested(moved, axes, size, treedefs)
            if nested is not None:
                return nested
        if self.method != "loop" and size > 0:
            result = self._vectorized(moved, axes, treedefs)
        if result is not None:
            outs, out_tree = result
        elif _is_compiled(self.fun):
            outs, out_tree = self._compiled(args, moved, axes, size, treedefs)
        else:
            outs, out_tree = self._python(moved, axes, size, treedefs)
        return self._place(outs, out_tree, size)

    def _nested(self, moved, axes, size, treedefs):
        """``vmap(vmap(f))`` as one vectorized call over both batch axes, or None.

        Each leaf gets the outer batch axis first and the inner one second
        (an unbatched level is broadcast), the two are merged into one, and
        ``f`` runs once, vectorized; the outputs are split back and placed
        by the inner, then the outer ``out_axes``.  None when the inner
        level is forced to loop or ``f`` does not vectorize (the caller then
        runs the inner vmap per example).
        """
        inner = self.fun
        if inner.method == "loop" or isinstance(inner.fun, Batched) or size == 0:
            return None
        example = [x[0] if a is not None else x for x, a in zip(moved, axes)]
        _, _, inner_axes, inner_size = inner._batch(pytree.unflatten_all(example, treedefs))
        merged, merged_axes = [], []
        for x, a, i in zip(moved, axes, inner_axes):
            if a is None and i is None:
                merged.append(x)
                merged_axes.append(None)
                continue
            x = np.asarray(x)
            if a is not None and i is not None:
                x = np.moveaxis(x, i + 1, 1)
            elif a is not None:
                x = np.broadcast_to(x[:, None], (size, inner_size) + x.shape[1:])
            else:
                x = np.moveaxis(x, i, 0)
                x = np.broadcast_to(x[None], (size,) + x.shape)
            merged.append(x.reshape((size * inner_size,) + x.shape[2:]))
            merged_axes.append(0)
        flat = Batched(inner.fun, 0, 0, inner.method or self.method, inner.parallel)
        result = flat._vectorized(merged, merged_axes, treedefs)
        if result is None:
            return None
        self._vector = flat._vector
        outs, out_tree = result
        outs = [np.asarray(o).reshape((size, inner_size) + np.shape(o)[1:]) for o in outs]
        placed = inner._placed(outs, out_tree, inner_size, lead=1)
        return self._place(placed, out_tree, size)

    def _batch(self, args):
        """Flat leaves, their batch axes (normalised) and the batch size."""
        spec = self.in_axes
        if isinstance(spec, (tuple, list)):
            if len(spec) != len(args):
                raise ValueError(f"vmap in_axes has {len(spec)} entries but "
                                 f"{_name(self.fun)} was called with {len(args)} positional "
                                 f"arguments")
        else:
            spec = (spec,) * len(args)
        leaves, treedefs, axes, owners = [], [], [], []
        for i, (arg, ax) in enumerate(zip(args, spec)):
            ls, tree = pytree.flatten(arg)
            treedefs.append(tree)
            for j, (leaf, a) in enumerate(zip(ls, _broadcast_axes(ax, tree, i))):
                if leaf is None:
                    a = None                 # None holds no leaves (JAX): nothing to batch
                if a is not None:
                    nd = np.ndim(leaf)
                    if not -nd <= a < nd:
                        raise ValueError(f"vmap in_axes={a} is out of range for argument {i}"
                                         f"{_leaf_text(tree, j)}, which has {nd} "
                                         f"dimension{'s' if nd != 1 else ''}")
                    a %= nd
                leaves.append(leaf)
                axes.append(a)
                owners.append((i, j, tree))
        sizes = {}
        for leaf, a, (i, j, tree) in zip(leaves, axes, owners):
            if a is not None:
                sizes.setdefault(np.shape(leaf)[a], []).append(f"argument {i}"
                                                               f"{_leaf_text(tree, j)}")
        if not sizes:
            raise ValueError("vmap needs at least one batched argument: every in_axes entry "
                             "is None")
        if len(sizes) > 1:
            detail = "; ".join(f"{', '.join(who)} {'has' if len(who) == 1 else 'have'} size "
                               f"{n}" for n, who in sizes.items())
            raise ValueError(f"vmap got arguments with different batch sizes: {detail}")
        return leaves, treedefs, axes, next(iter(sizes))
