"""Lean repeat calls of a compiled ``vmap``.

The first call of ``ad.jit(ad.vmap(f))`` with some argument layout does the
checked work: flattening, axis normalisation, the choice of lowering, one
example run to learn the per-example results' shapes, building the compiled
per-sample loop.  What it learnt depends only on the arguments' types and
shapes, so a :class:`LoopPlan` keeps it, keyed by those, and a later call
with plain arrays of the same types and shapes only allocates the outputs
and calls the loop (a few microseconds over the loop itself).  Anything the
plan did not see -- another batch size for a loop that runs in parallel, a
per-example output of another shape -- takes the checked path again.
"""
import numpy as np

from ..ir import pytree

#: Plans kept per vmap (distinct argument shapes); past this they are dropped.
MAX_PLANS = 32

_MISFIT = np.full(1, -1, dtype=np.int64)


def plan_key(args):
    """What a plan depends on: each argument's shape and dtype (or type)."""
    return tuple((a.shape, a.dtype) if type(a) is np.ndarray else type(a) for a in args)


class LoopPlan:
    """One argument layout of a compiled vmap: moves, outputs, the loop, results."""

    def __init__(self, batched, axes, parallel_of, loop, parallel, outputs, finish):
        self.axes = axes                     # each argument's batch axis (None: shared)
        self.first = next(i for i, a in enumerate(axes) if a is not None)
        self.others = [i for i, a in enumerate(axes) if a is not None and i != self.first]
        self.parallel_of = parallel_of       # batch size -> run the loop in parallel?
        self.loops = {parallel: loop}
        self.sources = {}                    # parallel -> the loop's source (ad.source)
        self.source = None                   # the source of the loop the last call ran
        self.outputs = outputs               # [(per-example shape, element count, dtype)]
        self.finish = finish                 # (batched outputs, size) -> the user's result
        self.batched = batched               # callable: (args, axes) -> loop inputs

    def __call__(self, args):
        """The vmap's result, or None when this call needs the checked path."""
        axes = self.axes
        size = args[self.first].shape[axes[self.first]]
        for i in self.others:
            if args[i].shape[axes[i]] != size:
                return None                  # the checked path raises the error
        parallel = self.parallel_of(size)
        loop = self.loops.get(parallel) if size else None
        if loop is None:
            return None
        self.source = self.sources[parallel]
        outs = [np.empty((size, n), dtype) for _, n, dtype in self.outputs]
        misfit = _MISFIT.copy()
        loop(*self.batched(args, axes), *outs, misfit)
        if misfit[0] >= 0:
            return None                      # an output shape the plan did not see
        return self.finish([o.reshape((size,) + shape)
                            for o, (shape, _, _) in zip(outs, self.outputs)], size)


def selector(batched, result):
    """``finish`` for a result whose leaves are ``batched`` outputs as they
    are (out_axes=0): picks them by position, or None."""
    leaves, tree = pytree.flatten(result)
    where = [next((j for j, b in enumerate(batched) if b is leaf), None) for leaf in leaves]
    if None in where:
        return None
    if tree is None:
        (j,) = where
        return lambda outs, size: outs[j]
    return lambda outs, size: pytree.unflatten([outs[j] for j in where], tree)


def loop_inputs(args, axes):
    """The loop's arguments: batched arrays with the batch axis first, contiguous."""
    return [x if a is None else np.ascontiguousarray(x) if a == 0
            else np.ascontiguousarray(np.moveaxis(x, a, 0)) for x, a in zip(args, axes)]
