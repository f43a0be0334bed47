"""Tiered execution of a compiled per-sample loop (``ad.jit(ad.vmap(f))``,
``ad.jit(ad.vmap(ad.grad(f)))``, and the Jacobians built on one).

The loop is a Numba function around the compiled per-example function; both
take seconds to compile.  Under ``ad.jit(compile="tiered")`` (the default) a
call whose loop is not compiled yet answers from NumPy -- ``vmap`` of the
same transform on the NumPy backend (vectorised by batching rules where it
can be, else a loop over the examples) -- while a background thread
compiles the per-example function and the loop for this argument layout (by
running them on a one-example batch); the first call after that runs the
compiled loop.  The thread is a :class:`s2s_ad.backends.tiers.Background`:
not a daemon, waited for by a fork, its error raised by the next call.
Where the per-example function's and the loop's compiled code are in the
disk cache (a warm process), the first call loads them and runs the
compiled loop instead.
"""
import threading

import numpy as np

from ..backends import tiers
from ..ir import pytree
from .arguments import _type_key

_STARTING = threading.Lock()
#: In ``_tiered``: this layout's first call waited for the compiled loop.
WAITED = "waited"


#: From ``numpy_answer``: try the compiled loop with code from the disk cache
#: only (see :func:`from_disk`).
FROM_DISK = "from disk"


def numpy_answer(batched, args, moved, axes, size, treedefs, disk=True):
    """``(result leaves, tree)`` from NumPy while the loop compiles, or None
    when the compiled loop runs now (ready, or ``compile="eager"``), or
    :data:`FROM_DISK` for a layout's first call, which first tries code
    from the disk cache (``disk=False``: tried, and not all there)."""
    fun = batched.fun
    how = tiers.context()
    if fun.options.get("compile") != "tiered" or how == "eager":
        return None
    parallel = batched._parallel(size)
    key = _layout(batched, moved, axes, size)
    new_job = None
    with _STARTING:
        job = started = batched._tiered.get(key)
        if job is None and how != "numpy" and disk:
            return FROM_DISK
        if job is None and how != "numpy":
            # A long scalar loop per example: the NumPy answer would take
            # longer than the compile, so this call waits for it.
            seconds, why = _estimate(batched, moved, axes, size, treedefs)
            if seconds is None or seconds > tiers.NUMPY_LIMIT:
                batched._tiered[key] = WAITED
                limit = tiers.NUMPY_LIMIT
                batched.tier_note = (
                    f"compiled on the first call (waited: the NumPy answer would run {why} "
                    f"in the interpreter"
                    + (f", about {tiers.text(seconds)} by estimate, over the "
                       f"{tiers.text(limit)} a tiered first call may take"
                       if seconds is not None else "") + ")")
                return None
        if job is None and how != "numpy":       # numpy_tier(): nothing compiled
            # The first example, as a view: the same array types as this
            # call's, so the compiled code is the code the next call runs.
            sample = [x[:1] if a is not None else x for x, a in zip(moved, axes)]
            # Started once this call has its answer: the compile's typing
            # would share the interpreter lock with the NumPy answer.
            job = new_job = batched._tiered[key] = tiers.Background(
                f"s2s_ad compile vmap of {getattr(fun, '__qualname__', 'f')}",
                lambda: batched._compiled((), sample, axes, 1, treedefs, parallel=parallel),
                start=False)
            batched.tier_note = ("plain NumPy (vmap of the same transform on the NumPy "
                                 "backend) while numba.njit compiles the per-example function "
                                 "and this loop in the background, then the compiled loop"
                                 + (f" (estimated for its loops: {why}, about "
                                    f"{tiers.text(seconds)})" if why else ""))
    if started is WAITED:
        return None
    if started is not None and job.done:         # (the call starting it answers from NumPy)
        if job.error is not None:
            raise job.error
        return None
    try:
        result = _twin(batched)(*args)
    finally:
        if new_job is not None:
            new_job.start()
    leaves, tree = pytree.flatten(result)
    return [np.asarray(x) for x in leaves], tree


def _layout(batched, moved, axes, size):
    return (tuple(a is None for a in axes), tuple(map(_type_key, moved)),
            batched._parallel(size))


def from_disk(batched, run, args, moved, axes, size, treedefs):
    """A layout's first call: ``run()`` (the compiled loop) when the
    per-example function and the loop need no compile -- compiled in this
    process, or in the disk cache (a warm process), where they are loaded
    now -- else the NumPy answer (or None, see :func:`numpy_answer`)."""
    try:
        with tiers.disk_only():
            result = run()
    except tiers.NotOnDisk:
        return numpy_answer(batched, args, moved, axes, size, treedefs, disk=False)
    with _STARTING:
        batched._tiered.setdefault(_layout(batched, moved, axes, size), WAITED)
    batched.tier_note = ("compiled code: the per-example function and the loop loaded from "
                         "the disk cache (or already compiled) by the first call")
    return result


def per_example(t):
    """The transform the compiled loop calls for each example."""
    if getattr(t, "kind", None) in ("grad", "value_and_grad", "vjp"):
        # Gradients of small arguments come back as scalars, written
        # straight into the output: no array per example.
        return t.derived(options={**t.options, "element_grads": True})
    return t


def _twin(batched):
    """``vmap`` of the same transform on the NumPy backend, batch axis first
    (the caller places it where ``out_axes`` says)."""
    if batched._numpy is None:
        batched._numpy = type(batched)(batched.fun.with_target("python", {}), batched.in_axes,
                                       0, batched.method)
    return batched._numpy


def _estimate(batched, moved, axes, size, treedefs):
    """``(seconds, what)`` the NumPy answer would spend interpreting the
    per-example function's scalar loops over the whole batch: the batch
    size times one example's estimate (:func:`s2s_ad.backends.tiers.estimate`,
    on the first example), as a loop over the examples calling the NumPy
    per-example function takes; ``(0.0, None)`` without a scalar loop;
    ``(None, what)`` when a scalar loop's trip count is not computable.
    """
    example = [x[0] if a is not None else x for x, a in zip(moved, axes)]
    # The build of the compiled per-example function that the first call
    # tried to load from the disk cache (see from_disk): the same user code,
    # so no second transformation (of the NumPy twin) just to estimate.
    st = getattr(batched._per_example, "_last", None)
    leaves = [leaf for x in example for leaf in pytree.flatten(x)[0]]
    if st is None or getattr(batched._per_example, "_cells", ()) or \
            tuple(map(pytree.rank, leaves)) != tuple(st.request.ranks[:len(leaves)]):
        # (not tried for this layout: another one's build, or none)
        fun = _twin(batched).fun
        if not hasattr(fun, "entry"):            # vmap of vmap: the inner one decides
            return 0.0, None
        _, leaves, _ = fun.entry(tuple(pytree.unflatten_all(example, treedefs)))
        st = fun._last
    if tiers.scalar_loop(st) is None:
        return 0.0, None
    seconds, why = tiers.estimate(st, list(leaves))
    what = f"{size:,} examples, each {why}"
    return (None if seconds is None else seconds * size), what
