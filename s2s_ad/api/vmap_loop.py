"""vmap as a loop over the examples: in Python, or one compiled Numba loop
(serial or ``prange``) that writes each example's results in place.
"""
import os
import textwrap

import numpy as np

from .. import backends
from ..backends import fastcall, tiers
from ..ir import pytree
from .arguments import _type_key
from .vmap_common import (
    PARALLEL_MIN_BATCH,
    _broadcast_axes,
    _compiled_entry,
    _count,
    _element_paths,
    _float_dtype,
    _name,
    _raw_leaves,
    _rebuild_raw,
)
from .vmap_tiered import FROM_DISK, from_disk, numpy_answer, per_example


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


class Loop:
    """The per-sample loop: in Python or compiled, serial or parallel."""

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

    def _compiled(self, args, moved, axes, size, treedefs, parallel=None):
        """The per-sample loop as a Numba function around the compiled entry
        (or, under tiered execution until it is compiled, the answer from
        NumPy: see vmap_tiered)."""
        if size == 0:
            raise ValueError("vmap over an empty batch")
        answer = numpy_answer(self, args, moved, axes, size, treedefs)
        if answer is FROM_DISK:
            answer = from_disk(self, lambda: self._run(args, moved, axes, size, treedefs,
                                                       parallel), args, moved, axes, size,
                               treedefs)
        if answer is not None:
            return answer
        return self._run(args, moved, axes, size, treedefs, parallel)

    def _run(self, args, moved, axes, size, treedefs, parallel):
        """The compiled loop's answer (built for this layout if need be)."""
        # The loop takes batched arrays C-contiguous, so each example it
        # passes is contiguous: the first example is taken from the same
        # arrays, so that the per-example function is compiled for one
        # layout (a Fortran-ordered or strided batch gave a second compile).
        moved = [np.ascontiguousarray(x) if a is not None and isinstance(x, np.ndarray) else x
                 for x, a in zip(moved, axes)]
        sample = [x[0] if a is not None else x for x, a in zip(moved, axes)]
        t = self._per_example = per_example(self.fun)
        entry, leaves0, post = _compiled_entry(t, pytree.unflatten_all(sample, treedefs))
        if getattr(t, "_cells", ()):
            # A lambda's closed-over values, after its own arguments (see
            # Transformed._with_hidden): the same for every example.
            own = sum(_count(tree) for tree in treedefs[:t._own])
            count = sum(len(pytree.flatten(h)[0]) for h in t._with_hidden(()))
            moved = list(moved[:own]) + list(leaves0[own:own + count]) + list(moved[own:])
            axes = tuple(axes[:own]) + (None,) * count + tuple(axes[own:])
        tiers.need_no_compile(entry, leaves0)
        raw = entry(*leaves0)
        elements = _element_paths(t)
        raw_leaves, raw_paths = _raw_leaves(raw, elements=elements)
        parallel = self._parallel(size) if parallel is None else parallel
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
        misfit = np.full(1, -1, dtype=np.int64)    # an example whose output does not fit
        tiers.need_no_compile(loop.function, (*moved, *outs, misfit))
        loop.function(*moved, *outs, misfit)
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
