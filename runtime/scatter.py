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
