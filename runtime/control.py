"""Helpers for the reverse sweep of loops and element writes.

``range_last`` gives the last value a ``range`` produces, so the adjoint
sweep can walk a loop's indices backwards; ``snapshot`` copies what an
element write is about to overwrite (a copy for array views, the value
itself for scalars); ``float_stack`` is the storage for the values a loop's
adjoint reads when the number of iterations is known before the loop.  All
run in plain Python and inside ``numba.njit``.
"""
import numpy as np
from numba import from_dtype, types
from numba.extending import overload, register_jitable

from . import _nbutil
from ._common import grad_dtype


@register_jitable
def range_last(start, stop, step):
    """The last element of ``range(start, stop, step)``; ``start - step`` if empty.

    ``range(range_last(a, b, s), a - s, -s)`` visits ``range(a, b, s)`` in
    reverse.
    """
    if step > 0:
        if stop <= start:
            return start - step
        return start + ((stop - start - 1) // step) * step
    if stop >= start:
        return start - step
    return start + ((start - stop - 1) // -step) * step


def snapshot(x):
    """``x`` if it is a scalar, else a copy of the array (view) ``x``."""
    if isinstance(x, np.ndarray):
        return x.copy()
    return x


@overload(snapshot)
def _snapshot(x):
    if isinstance(x, types.Array):
        return lambda x: x.copy()
    return lambda x: x


def rows_like(x, m):
    """An empty stack of ``m`` cotangents of ``x`` (its shape, its cotangent dtype)."""
    return np.empty((m,) + np.shape(x), dtype=grad_dtype(x))


def lanes(arrays):
    """The arrays (one per cotangent of a vector-mode sweep, all of one shape)
    side by side on a new last axis: ``lanes(a)[..., q]`` is ``a[q]``."""
    return np.stack(arrays, -1)


@overload(lanes)
def _lanes(arrays):
    if not (isinstance(arrays, types.UniTuple) and isinstance(arrays.dtype, types.Array)
            and arrays.dtype.ndim == 1):
        return lambda arrays: np.stack(arrays, -1)

    # Vectors (a Jacobian's rows): a loop, cheaper to compile than Numba's np.stack.
    def impl(arrays):
        n = arrays[0].shape[0]
        out = np.empty((n, len(arrays)), arrays[0].dtype)
        for q in range(len(arrays)):
            a = arrays[q]
            if a.shape[0] != n:
                raise ValueError("lanes: arrays of different shapes")
            for i in range(n):
                out[i, q] = a[i]
        return out
    return impl


@register_jitable
def zeros_lanes(x, k):
    """``lanes`` of ``k`` arrays ``np.zeros_like(x)``."""
    return np.zeros(x.shape + (k,), x.dtype)


def set_row(out, row, value):
    """``out[row] = value`` for a scalar or an array of ``out[row]``'s shape."""
    out[row] = value


@overload(rows_like)
def _rows_like(x, m):
    dtype = from_dtype(_nbutil.grad_dtype(x))
    if isinstance(x, types.Array):
        return lambda x, m: np.empty((m,) + x.shape, dtype=dtype)
    return lambda x, m: np.empty(m, dtype=dtype)


@overload(set_row)
def _set_row(out, row, value):
    # Element loops over the row as it is (no contiguous copy or reshape of
    # a strided value to compile).
    if isinstance(value, types.Array) and value.ndim == 1:
        def impl(out, row, value):
            dst = out[row]
            if dst.shape != value.shape:
                raise ValueError("set_row: a row of another shape")
            for k in range(value.shape[0]):
                dst[k] = value[k]
        return impl
    if isinstance(value, types.Array) and value.ndim == 0:
        def impl(out, row, value):          # a 0-d array's cotangent: one number per row
            out[row] = value[()]
        return impl
    if isinstance(value, types.Array):
        def impl(out, row, value):
            dst = out[row]
            if dst.shape != value.shape:
                raise ValueError("set_row: a row of another shape")
            for idx in np.ndindex(value.shape):
                dst[idx] = value[idx]
        return impl
    def impl(out, row, value):
        out[row] = value
    return impl


def copy_into(dst, src):
    """``dst[...] = src`` for two arrays of one shape (restores an array in place)."""
    dst[...] = src


@overload(copy_into)
def _copy_into(dst, src):
    def impl(dst, src):
        for idx in np.ndindex(dst.shape):
            dst[idx] = src[idx]
    return impl


def float_stack(n):
    """Storage for ``n`` scalars a loop pushes and its adjoint pops, by index.

    In compiled code a float64 array (a float32 value is kept exactly; an
    array store and load cost a fraction of a Numba list's append and pop,
    and the storage is allocated once instead of growing); in plain Python
    a list, which keeps every value as it is.
    """
    return [0.0] * n


@overload(float_stack)
def _float_stack(n):
    return lambda n: np.empty(n, dtype=np.float64)


@register_jitable
def trip_count(start, stop, step):
    """The number of iterations of ``range(start, stop, step)``, which builds a
    list by ``.append`` (its storage is shaped after the first element): a
    loop that runs none is an error, as ``np.stack`` of the empty list is."""
    n = len(range(start, stop, step))
    if n == 0:
        raise ValueError("a loop that builds a list with .append ran no iteration, "
                         "so the list is empty")
    return n


def stack_like(x, n):
    """Uninitialised storage for ``n`` values shaped like ``x`` (``x``'s dtype)."""
    if isinstance(x, np.ndarray):
        return np.empty((n,) + x.shape, dtype=x.dtype)
    return np.empty(n, dtype=np.result_type(x))


@overload(stack_like)
def _stack_like(x, n):
    if isinstance(x, types.Array):
        return lambda x, n: np.empty((n,) + x.shape, dtype=x.dtype)
    dtype = x if isinstance(x, (types.Float, types.Integer, types.Boolean)) else types.float64
    return lambda x, n: np.empty(n, dtype=dtype)
