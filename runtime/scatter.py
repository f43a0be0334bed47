"""Scatter-add: the adjoint of reading with an integer-array index.

``x[idx]`` with repeated indices reads the same element several times, so
its adjoint must add every contribution: ``b[idx] += g`` would keep only
one.  ``index_add(b, index, g)`` adds in place, in plain Python (NumPy's
``np.add.at``) and inside ``numba.njit`` (a loop over a 1-D index array).
"""
import numpy as np
from numba import types
from numba.core.errors import TypingError
from numba.extending import overload


def index_add(b, index, g):
    """``b[index] += g``, counting repeated indices once each."""
    np.add.at(b, index, g)


@overload(index_add)
def _index_add(b, index, g):
    if isinstance(index, (types.Integer, types.SliceType)) or (
            isinstance(index, types.BaseTuple)
            and all(isinstance(t, (types.Integer, types.SliceType)) for t in index)):
        def basic(b, index, g):     # no index array: no repeated positions
            b[index] += g
        return basic
    if isinstance(index, types.Array) and isinstance(index.dtype, types.Boolean):
        return _mask_add(b, index, g)
    if not (isinstance(index, types.Array) and index.ndim == 1
            and isinstance(index.dtype, types.Integer)):
        raise TypingError("s2s_ad: under ad.jit, differentiating x[idx] with an index array "
                          "supports one 1-D integer index array (x[idx], not x[idx, j]); "
                          f"got an index of type {index}")
    if isinstance(g, types.Array):
        def impl(b, index, g):
            for k in range(index.shape[0]):
                b[index[k]] += g[k]
    else:
        def impl(b, index, g):
            for k in range(index.shape[0]):
                b[index[k]] += g
    return impl


def _mask_add(b, mask, g):
    """``b[mask] += g`` for a boolean mask over all of b's axes (each selected
    element in order) or over its first axis (each selected row in order)."""
    if mask.ndim == b.ndim:
        if isinstance(g, types.Array):
            def impl(b, index, g):
                if index.shape != b.shape:
                    raise IndexError("boolean index does not match the indexed array")
                flat, picks, k = b.reshape(b.size), index.ravel(), 0
                gs = g.ravel()
                for i in range(picks.shape[0]):
                    if picks[i]:
                        flat[i] += gs[k]
                        k += 1
        else:
            def impl(b, index, g):
                if index.shape != b.shape:
                    raise IndexError("boolean index does not match the indexed array")
                flat, picks = b.reshape(b.size), index.ravel()
                for i in range(picks.shape[0]):
                    if picks[i]:
                        flat[i] += g
        return impl
    if mask.ndim == 1:
        if isinstance(g, types.Array):
            def impl(b, index, g):
                if index.shape[0] != b.shape[0]:
                    raise IndexError("boolean index does not match the indexed array")
                k = 0
                for i in range(index.shape[0]):
                    if index[i]:
                        b[i] += g[k]
                        k += 1
        else:
            def impl(b, index, g):
                if index.shape[0] != b.shape[0]:
                    raise IndexError("boolean index does not match the indexed array")
                for i in range(index.shape[0]):
                    if index[i]:
                        b[i] += g
        return impl
    raise TypingError(f"s2s_ad: under ad.jit, a boolean index covers the first axis or all "
                      f"axes of the array; got a {mask.ndim}-D mask for a {b.ndim}-D array")
