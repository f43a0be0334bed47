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
import numbers
import os
import textwrap

import numpy as np

from .. import backends
from ..backends import fastcall
from ..ir import Var, pytree
from .core import _as_transformed, _type_key

METHODS = (None, "loop", "vectorize")
#: Batches at least this large run their compiled loop on all cores
#: (``parallel=None``); smaller ones are not worth waking the thread pool.
PARALLEL_MIN_BATCH = 64


def vmap(fun, in_axes=0, out_axes=0, *, method=None):
    """``fun`` mapped over an axis of its arguments (see API.md)."""
    if not callable(fun):
        raise TypeError(f"vmap expects a function, got {fun!r}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    _check_axes_spec(in_axes, "in_axes")
    _check_axes_spec(out_axes, "out_axes")
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


class Batched:
    """``fun`` batched by ``in_axes``/``out_axes``; see :func:`vmap`."""

    # Read by the front end (which never imports the API) and by ad.jit.
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
        self.source = None
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
    def __call__(self, *args):
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
        if hasattr(self.fun, "over_batch") and all(t is None for t in treedefs):
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

    def _vectorized(self, moved, axes, treedefs):
        """The whole batch in one call of code built from batching rules, or None.

        None when the function is a gradient (reverse-mode code is batched by
        the per-sample loop), when its control flow depends on batched
        values, or -- with ``method=None`` under ``ad.jit`` -- when it loops
        (a compiled loop per example beats NumPy over small batched values).
        """
        from ..rules.registry import Unvectorizable
        from .core import Transformed
        t = self.fun
        if not isinstance(t, Transformed):
            if isinstance(t, Batched) or hasattr(t, "generated_source") or \
                    getattr(t, "__s2s_ad_function__", None) is None and not _plain_function(t):
                return self._refuse("it is itself a batched or Jacobian transform")
            t = _as_transformed(t)
        if t.kind in ("grad", "value_and_grad"):
            return self._vectorized_grad(t, moved, axes, treedefs)
        if t.kind != "primal" or t.units:
            return self._refuse("gradients are batched by the per-sample loop")
        positions = tuple(i for i, a in enumerate(axes) if a is not None)
        key = (positions, tuple(map(_type_key, moved)))
        if self._choices.get(key) == "loop":
            return None
        vec = t.derived("primal", layers=t.layers + (("vmap", positions),), target="python",
                        options={})
        try:
            out = vec(*pytree.unflatten_all(moved, treedefs))
        except Unvectorizable as exc:
            self._choices[key] = "loop"
            return self._refuse(str(exc))
        if self.method is None and t.target == "cpu" and _has_loops(vec):
            self._choices[key] = "loop"
            return None
        self._choices[key] = "vectorize"
        self._vector = vec
        leaves, tree = pytree.flatten(out)
        return [np.asarray(x) for x in leaves], tree

    def _vectorized_grad(self, t, moved, axes, treedefs):
        """Per-example gradients as one reverse sweep over the batched function.

        Every differentiated argument is made batched (a shared one is
        repeated per example); the examples are then independent, so the
        gradient of the sum of the batched outputs holds each example's
        gradient in its own row.  Used on the NumPy backend (or when forced):
        under ``ad.jit`` the compiled per-sample loop is kept.
        """
        from ..rules.registry import Unvectorizable
        if t.has_aux or t.units or (self.method is None and t.target != "python"):
            return self._refuse("gradients with has_aux or nested gradients are batched by "
                                "the per-sample loop")
        size = next(np.shape(x)[0] for x, a in zip(moved, axes) if a is not None)
        starts = np.cumsum([0] + [_count(tree) for tree in treedefs])
        leaves, axes = list(moved), list(axes)
        for i in t.argnums:
            for k in range(starts[i], starts[i + 1]):
                if axes[k] is None:
                    leaves[k] = np.repeat(np.asarray(leaves[k])[np.newaxis], size, axis=0)
                    axes[k] = 0
        positions = tuple(i for i, a in enumerate(axes) if a is not None)
        key = ("grad", positions, tuple(map(_type_key, leaves)))
        if self._choices.get(key) == "loop":
            return None
        vec = t.derived("vjp", argnums=t.argnums, single=False, target="python", options={},
                        layers=t.layers + (("vmap", positions),))
        args = tuple(pytree.unflatten_all(leaves, treedefs))
        floats = [x for x in leaves if isinstance(x, (np.ndarray, np.floating))
                  and np.result_type(x).kind == "f"]
        ones = np.ones(size, dtype=np.result_type(*floats) if floats else np.float64)
        try:
            entry, flat, post = vec._prepare(args + (ones,))
        except Unvectorizable as exc:
            self._choices[key] = "loop"
            return self._refuse(str(exc))
        raw = entry(*flat)
        grads = post(raw, batched=True)
        grads = grads[0] if t.single else grads
        result = (raw[0], grads) if t.kind == "value_and_grad" else grads
        self._choices[key] = "vectorize"
        self._vector = vec
        out_leaves, tree = pytree.flatten(result)
        return [np.asarray(x) for x in out_leaves], tree

    def _refuse(self, why):
        if self.method == "vectorize":
            raise ValueError(f"vmap(method='vectorize') cannot batch {_name(self.fun)} with "
                             f"batching rules: {why}; use method='loop' (or method=None to "
                             f"choose)")
        return None

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

    def _python(self, moved, axes, size, treedefs):
        """The per-sample loop in Python (any callable)."""
        results = []
        for b in range(size):
            sample = [x[b] if a is not None else x for x, a in zip(moved, axes)]
            results.append(self.fun(*pytree.unflatten_all(sample, treedefs)))
        if size == 0:
            raise ValueError("vmap over an empty batch")
        flat = [pytree.flatten(r) for r in results]
        out_tree = flat[0][1]
        outs = [np.stack([np.asarray(ls[k]) for ls, _ in flat]) for k in range(len(flat[0][0]))]
        return outs, out_tree

    def _compiled(self, args, moved, axes, size, treedefs):
        """The per-sample loop as a Numba function around the compiled entry."""
        if size == 0:
            raise ValueError("vmap over an empty batch")
        sample = [x[0] if a is not None else x for x, a in zip(moved, axes)]
        t = self.fun
        if t.kind in ("grad", "value_and_grad", "vjp"):
            # Gradients of small arguments come back as scalars, written
            # straight into the output: no array per example.
            t = t.derived(options={**t.options, "element_grads": True})
        self._per_example = t
        entry, leaves0, post = _compiled_entry(t, pytree.unflatten_all(sample, treedefs))
        if getattr(t, "_cells", ()):
            # A lambda's closed-over values, after its own arguments (see
            # Transformed._with_hidden): the same for every example.
            own = sum(_count(tree) for tree in treedefs[:t._own])
            count = sum(len(pytree.flatten(h)[0]) for h in t._with_hidden(()))
            moved = list(moved[:own]) + list(leaves0[own:own + count]) + list(moved[own:])
            axes = tuple(axes[:own]) + (None,) * count + tuple(axes[own:])
        raw = entry(*leaves0)
        elements = _element_paths(t)
        raw_leaves, raw_paths = _raw_leaves(raw, elements=elements)
        parallel = self._parallel(size)
        key = (tuple(a is None for a in axes), tuple(map(_type_key, leaves0)),
               tuple(raw_paths), parallel)
        loop = self._loops.get(key)
        if loop is None:
            loop = self._loops[key] = _LoopBuilder(entry, axes, raw_paths, parallel).build()
        self.source = loop.source
        floats = _float_dtype(leaves0)
        outs = [np.empty((size, int(np.size(v))),
                         dtype=floats if type(v) is float or ndim == "elements"
                         else np.result_type(v))
                for v, (_, ndim) in zip(raw_leaves, raw_paths)]
        inputs = [np.ascontiguousarray(x) if a is not None and isinstance(x, np.ndarray) else x
                  for x, a in zip(moved, axes)]
        misfit = np.full(1, -1, dtype=np.int64)    # an example whose output does not fit
        loop.function(*inputs, *outs, misfit)
        if misfit[0] >= 0:
            raise ValueError(f"vmap: an output of {_name(self.fun)} has a different shape for "
                             f"example {int(misfit[0])} than for example 0; every "
                             f"example must give outputs of one shape")
        batched = [o.reshape((size,) + np.shape(v)) for o, v in zip(outs, raw_leaves)]
        result = post(_rebuild_raw(raw, iter(batched), elements=elements), batched=True)
        if all(tree is None for tree in treedefs) and not getattr(t, "_cells", ()):
            self._remember_loop(args, axes, loop, parallel, raw, elements, post,
                                [(np.shape(v), o.shape[1], o.dtype)
                                 for o, v in zip(outs, raw_leaves)], batched, result)
        return [np.asarray(x) for x in pytree.flatten(result)[0]], pytree.flatten(result)[1]

    def _remember_loop(self, args, axes, loop, parallel, raw, elements, post, outputs,
                       batched, result):
        """Keep what this call learnt for later calls with plain arrays of the
        same shapes and dtypes (see :mod:`s2s_ad.backends.fastcall`)."""
        if len(args) != len(axes) or not all(
                type(x) is np.ndarray or (type(x) in (float, int) and a is None)
                for x, a in zip(args, axes)):
            return
        key = fastcall.plan_key(args)
        plan = self._plans.get(key)
        if plan is not None:
            plan.loops[parallel], plan.sources[parallel] = loop.function, loop.source
            return
        if len(self._plans) >= fastcall.MAX_PLANS:
            self._plans.clear()

        def finish(outs, size):
            result = post(_rebuild_raw(raw, iter(outs), elements=elements), batched=True)
            leaves, tree = pytree.flatten(result)
            return self._place([np.asarray(x) for x in leaves], tree, size)
        if type(self.out_axes) is int and self.out_axes == 0:
            finish = fastcall.selector(batched, result) or finish
        plan = self._plans[key] = fastcall.LoopPlan(fastcall.loop_inputs, tuple(axes),
                                                    self._parallel, loop.function, parallel,
                                                    outputs, finish)
        plan.sources[parallel], plan.state = loop.source, self._per_example._last

    def _parallel(self, size):
        if self.parallel is not None:
            return self.parallel
        return size >= PARALLEL_MIN_BATCH and (os.cpu_count() or 1) > 1

    def _place(self, outs, out_tree, size):
        """Move each output's batch axis to where ``out_axes`` says."""
        return pytree.unflatten(self._placed(outs, out_tree, size), out_tree)

    def _placed(self, outs, out_tree, size, lead=0):
        """The output leaves with their batch axis (axis ``lead``, after ``lead``
        outer batch axes) moved to where ``out_axes`` says among the axes after
        those outer ones."""
        spec = self.out_axes
        if isinstance(spec, (tuple, list)) and out_tree is None:
            raise ValueError(f"vmap out_axes={spec!r} is a tuple but the function returns a "
                             f"single value")
        axes = _broadcast_axes(spec, out_tree, None)
        placed = []
        for k, (x, a) in enumerate(zip(outs, axes)):
            if x is None or (isinstance(x, np.ndarray) and x.dtype == object
                             and all(v is None for v in x.flat)):
                placed.append(None)       # a None output stays None, as in JAX
                continue
            if a is None:
                first = np.take(x, 0, axis=lead)
                if not all(np.array_equal(first, np.take(x, b, axis=lead))
                           for b in range(1, size)):
                    raise ValueError(f"vmap out_axes=None for output {k}, but it differs "
                                     f"between examples")
                placed.append(first)
                continue
            nd = x.ndim - lead
            if not -nd <= a < nd:
                raise ValueError(f"vmap out_axes={a} is out of range for output {k}, which "
                                 f"has {nd} dimensions once batched")
            placed.append(np.moveaxis(x, lead, lead + a % nd))
        return placed


def _name(fun):
    return getattr(fun, "__qualname__", repr(fun))


def _leaf_text(tree, j):
    return "" if tree is None else f" (leaf {j})"


def _broadcast_axes(spec, tree, argnum):
    """One axis per leaf of ``tree`` from an in_axes/out_axes entry."""
    if tree is None:
        if isinstance(spec, (tuple, list, dict)):
            where = f"argument {argnum}" if argnum is not None else "the output"
            raise ValueError(f"vmap axes {spec!r} are a {type(spec).__name__} but {where} is "
                             f"a single value")
        return [spec]
    kind, children = tree
    if isinstance(spec, dict):            # a dict prefix, as in JAX: one entry per key
        keys = getattr(kind, "keys", None)
        if getattr(kind, "cls", None) is not dict or set(spec) != set(keys):
            where = f"argument {argnum}" if argnum is not None else "the output"
            what = (f"a dict with keys {sorted(keys)!r}" if getattr(kind, "cls", None) is dict
                    else f"a {kind.__name__}")
            raise ValueError(f"vmap axes {spec!r} do not match the structure of {where}, "
                             f"{what}")
        return [a for k, c in zip(keys, children) for a in _broadcast_axes(spec[k], c, argnum)]
    if isinstance(spec, (tuple, list)):
        if len(spec) != len(children):
            where = f"argument {argnum}" if argnum is not None else "the output"
            raise ValueError(f"vmap axes {spec!r} do not match the structure of {where}, a "
                             f"{kind.__name__} of {len(children)} values")
        return [a for s, c in zip(spec, children) for a in _broadcast_axes(s, c, argnum)]
    return [a for c in children for a in _broadcast_axes(spec, c, argnum)]


def _count(tree):
    return 1 if tree is None else sum(_count(c) for c in tree[1])


def _float_dtype(leaves):
    """The float type of a scalar result Numba returned as a Python float.

    Numba returns float32 scalars as Python floats; a result computed from
    float32 inputs alone is float32, as the un-batched transform returns it.
    """
    kinds = [np.result_type(x) for x in leaves
             if isinstance(x, (np.ndarray, np.floating)) and np.result_type(x).kind == "f"]
    return np.result_type(*kinds) if kinds and all(k == np.float32 for k in kinds) \
        else np.dtype(np.float64)


def _negative(axes):
    if isinstance(axes, dict):
        return any(_negative(a) for a in axes.values())
    if isinstance(axes, (tuple, list)):
        return any(_negative(a) for a in axes)
    return axes is not None and axes < 0


def _plain_function(fun):
    import types

    from ..frontend.custom import rule_of
    return isinstance(fun, types.FunctionType) or rule_of(fun) is not None or (
        inspect.ismethod(fun) and isinstance(fun.__func__, types.FunctionType))


def _has_loops(t):
    from ..pipeline import has_loops
    return has_loops(t._last.program)


def _is_compiled(fun):
    from .core import Transformed
    return isinstance(fun, Transformed) and fun.target == "cpu"


def _compiled_entry(fun, args):
    """(Numba entry, its leaf arguments, post-processing) of a jitted transform."""
    return fun.compiled_call(list(args))


def _element_paths(t):
    """Where the raw result of ``t``'s last build holds a gradient as a tuple
    of element scalars (see reverse.entry_source's ``element_grads``)."""
    st = t._last
    if not st.request.options.get("element_grads"):
        return set()
    return {(1, j) for j, i in enumerate(st.request.argnums)
            if isinstance(st.fn.param_trees[i], Var) and st.fn.param_trees[i].name in
            st.fn.elements}


def _raw_leaves(raw, path=(), elements=()):
    """Leaves of a nested result (None skipped) and their index paths.

    A path in ``elements`` holds a tuple of scalars that is one 1-D leaf
    (ndim "elements").
    """
    if path in elements:
        return [np.asarray(raw)], [(path, "elements")]
    if isinstance(raw, tuple):
        leaves, paths = [], []
        for k, item in enumerate(raw):
            ls, ps = _raw_leaves(item, path + (k,), elements)
            leaves += ls
            paths += ps
        return leaves, paths
    if raw is None:
        return [], []
    if not isinstance(raw, (np.ndarray, numbers.Number, np.generic)):
        raise TypeError(f"vmap: cannot batch an output of type {type(raw).__name__}")
    return [raw], [(path, np.ndim(raw))]


def _rebuild_raw(raw, batched, path=(), elements=()):
    if path in elements:
        return next(batched)
    if isinstance(raw, tuple):
        return tuple(_rebuild_raw(item, batched, path + (k,), elements)
                     for k, item in enumerate(raw))
    return None if raw is None else next(batched)


class _LoopBuilder:
    """Source of the compiled per-sample loop for one argument/result layout."""

    def __init__(self, entry, axes, raw_paths, parallel):
        self.entry, self.axes, self.raw_paths, self.parallel = entry, axes, raw_paths, parallel

    def build(self):
        args = [f"a{i}" for i in range(len(self.axes))]
        outs = [f"out{k}" for k in range(len(self.raw_paths))]
        sample = ", ".join(f"{a}[b]" if ax is not None else a
                           for a, ax in zip(args, self.axes))
        first = next(a for a, ax in zip(args, self.axes) if ax is not None)
        body = [f"r = entry({sample})"]
        for out, (path, ndim) in zip(outs, self.raw_paths):
            value = "r" + "".join(f"[{k}]" for k in path)
            if ndim == 0:
                body.append(f"{out}[b, 0] = {value}")
            elif ndim == "elements":       # a tuple of scalars of one static length
                body += [f"v = {value}",
                         "for k in range(len(v)):",
                         f"    {out}[b, k] = v[k]"]
            else:
                body += [f"v = np.ravel({value})",
                         f"if v.shape[0] != {out}.shape[1]:",
                         "    misfit[0] = b",
                         "else:",
                         "    for k in range(v.shape[0]):",
                         f"        {out}[b, k] = v[k]"]
        loop = "prange" if self.parallel else "range"
        py_func = self.entry.py_func
        self.source = (f"@numba.njit(parallel={self.parallel}, cache={backends.on_disk()})\n"
                       f"def vmap_loop({', '.join(args + outs + ['misfit'])}):\n"
                       f"    # one call of {py_func.__name__} per example, outputs written "
                       f"in place\n"
                       f"    for b in {loop}({first}.shape[0]):\n"
                       + textwrap.indent("\n".join(body), " " * 8) + "\n")
        # A module file beside the function it calls, so that Numba's disk
        # cache keeps the compiled loop across processes.
        module = (f"import numba\nimport numpy as np\nfrom numba import prange\n\n"
                  f"from {py_func.__module__} import {py_func.__name__} as entry\n\n\n"
                  + self.source)
        path = backends.write_module(module, {}, "vmap_loop")
        name = f"s2s_ad_generated.{backends.module_name(module, {}, 'vmap_loop')}"
        loaded = backends.import_file(path, name, source=module, reuse=True)
        self.function = loaded.vmap_loop
        return self
