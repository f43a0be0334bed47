"""Shared by the vmap modules: in_axes checks and broadcasting, leaf paths,
result dtypes, what a function is (plain, compiled, looping).
"""
import inspect
import numbers

import numpy as np

METHODS = (None, "loop", "vectorize")


#: Batches at least this large run their compiled loop on all cores
#: (``parallel=None``); smaller ones are not worth waking the thread pool.
PARALLEL_MIN_BATCH = 64


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
    from ..pipeline import element_params
    elements = element_params(st)
    return {(1, j) for j, i in enumerate(st.request.argnums) if i in elements}


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
