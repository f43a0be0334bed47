"""Scatter-add: the adjoint of reading with an integer-array index.

``x[idx]`` with repeated indices reads the same element several times, so
its adjoint must add every contribution: ``b[idx] += g`` would keep only
one.  ``index_add(b, index, g)`` adds in place, in plain Python (NumPy's
``np.add.at``) and inside ``numba.njit`` (a loop over a 1-D index array).
"""
import numpy as np
from numba import types
from numba.core.errors import TypingError
from numba.extending import overload, register_jitable

from ._nbutil import compile_impl


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
    if _array_tuple(index, b):
        return _tuple_add(index, g)
    if _sliced_array(index, b):
        return _sliced_add(index, g)
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


def _array_tuple(index, b):
    """An index of 1-D integer arrays (one per leading axis, at least one) and integers."""
    return isinstance(index, types.BaseTuple) and len(index) <= b.ndim and all(
        isinstance(t, types.Integer) or (isinstance(t, types.Array) and t.ndim == 1 and
                                         isinstance(t.dtype, types.Integer)) for t in index) \
        and any(isinstance(t, types.Array) for t in index)


def _sliced_array(index, b):
    """An index of slices then one 1-D integer array (``x[:, cols]``, ``x[1:, :, k]``)."""
    return isinstance(index, types.BaseTuple) and 1 < len(index) <= b.ndim and all(
        isinstance(t, types.SliceType) for t in index[:-1]) and isinstance(
        index[-1], types.Array) and index[-1].ndim == 1 and isinstance(index[-1].dtype,
                                                                        types.Integer)


def _sliced_add(index, g):
    """``b[:, cols] += g`` adding every repeat: a loop over the index array, each
    position's slab of g added to b's (g's axes: the slices' selections, then k)."""
    m = len(index) - 1
    slices = "".join(f"index[{i}], " for i in range(m))
    value = "g[" + ":, " * m + "k]" if isinstance(g, types.Array) else "g"
    src = ("def impl(b, index, g):\n"
           f"    for k in range(index[{m}].shape[0]):\n"
           f"        b[{slices}index[{m}][k]] += {value}\n")
    return compile_impl(src)


def _tuple_positions(index):
    """Source of the k-th position an array-tuple index reads: ``index[0][k], index[1]``."""
    first = next(i for i, t in enumerate(index) if isinstance(t, types.Array))
    parts = [f"index[{i}][k]" if isinstance(t, types.Array) else f"index[{i}]"
             for i, t in enumerate(index)]
    return first, ", ".join(parts)


def _tuple_add(index, g):
    """``b[rows, cols] += g`` adding every repeat: a loop over the index arrays."""
    first, pos = _tuple_positions(index)
    value = "g[k]" if isinstance(g, types.Array) else "g"
    src = ("def impl(b, index, g):\n"
           f"    for k in range(index[{first}].shape[0]):\n"
           f"        b[{pos}] += {value}\n")
    return compile_impl(src)


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


def written(b, index):
    """``b[index]`` with zeros where a later element of the index writes the same
    position: the cotangent of the value in ``x[index] = value``.

    With repeated indices NumPy keeps the last write, so only that element of
    the value reaches the result (``a[idx] += v`` adds ``v``'s last entry per
    position).  Without an integer-array index nothing repeats: a copy of
    ``b[index]``.
    """
    part = np.array(b[index], copy=True)
    parts = index if isinstance(index, tuple) else (index,)
    if not any(isinstance(p, np.ndarray) and p.dtype.kind in "iu" for p in parts):
        return part
    if isinstance(index, np.ndarray) and index.dtype.kind in "iu":
        positions = index % b.shape[0]           # a row per index element
        size = b.shape[0]
    else:
        size = b.size
        positions = np.arange(size).reshape(b.shape)[index]
    order = np.arange(positions.size).reshape(positions.shape)
    winner = np.full(size, -1)
    winner[positions] = order                   # NumPy's own rule picks the same writer
    part[winner[positions] != order] = 0
    return part


@overload(written)
def _written(b, index):
    if isinstance(index, (types.Integer, types.SliceType)) or (
            isinstance(index, types.BaseTuple)
            and all(isinstance(t, (types.Integer, types.SliceType)) for t in index)):
        ints = sum(isinstance(t, types.Integer) for t in
                   (index if isinstance(index, types.BaseTuple) else (index,)))
        if ints == b.ndim:
            return lambda b, index: b[index]          # one element
        return lambda b, index: b[index].copy()
    if isinstance(index, types.Array) and isinstance(index.dtype, types.Boolean):
        return lambda b, index: b[index]              # a mask selects each position once
    if _array_tuple(index, b):
        first, pos = _tuple_positions(index)
        src = ("def impl(b, index):\n"
               "    part = b[index]\n"
               f"    seen = np.zeros(b.shape[:{len(index)}], np.bool_)\n"
               f"    for k in range(index[{first}].shape[0] - 1, -1, -1):\n"
               f"        if seen[{pos}]:\n"
               "            part[k] = 0\n"
               f"        seen[{pos}] = True\n"
               "    return part\n")
        return compile_impl(src)
    if not (isinstance(index, types.Array) and index.ndim == 1
            and isinstance(index.dtype, types.Integer)):
        raise TypingError("s2s_ad: under ad.jit, differentiating x[idx] = v with an index "
                          "array supports one 1-D integer index array; got an index of type "
                          f"{index}")

    def impl(b, index):
        part = b[index]                               # a copy (advanced indexing)
        n = b.shape[0]
        seen = np.zeros(n, np.bool_)
        for k in range(index.shape[0] - 1, -1, -1):  # the last write of a position wins
            row = index[k] % n
            if seen[row]:
                part[k] = 0
            seen[row] = True
        return part
    return impl


# -- np.add.at and np.put as functions returning the new array ------------------------------

def add_at(a, indices, b):
    """A copy of ``a`` with ``b`` added at ``indices``, every repeat counted
    (``np.add.at``'s result)."""
    out = np.array(a, copy=True)
    np.add.at(out, indices, b)
    return out


def take_at(x, indices):
    """``x[indices]`` (a copy): the cotangent of ``b`` in :func:`add_at`."""
    return np.array(x[indices], copy=True)


def _put_positions(size, ind, mode):
    ind = np.ravel(np.asarray(ind))
    if mode == "wrap":
        return ind % size
    if mode == "clip":
        return np.clip(ind, 0, size - 1)
    if mode != "raise":
        raise ValueError(f"np.put: mode={mode!r}; NumPy takes 'raise', 'wrap' or 'clip'")
    if ind.size and (ind.max() >= size or ind.min() < -size):
        raise IndexError(f"np.put: index out of bounds for size {size}")
    return ind % size


def put_into(a, ind, v, mode="raise"):
    """A copy of ``a`` after ``np.put(a, ind, v, mode)``."""
    out = np.array(a, copy=True)
    np.put(out, ind, v, mode)
    return out


def put_grad(g, ind, v, mode="raise"):
    """Cotangent of ``v`` in :func:`put_into`: g at the positions v's elements
    were last written to (v repeats cyclically when shorter than ind, as
    np.put does), summed over an element's writes."""
    flat = np.ravel(g)
    pos = _put_positions(flat.size, ind, mode)
    v = np.asarray(v)
    order = np.arange(pos.size)
    winner = np.full(flat.size, -1)
    winner[pos] = order
    last = winner[pos] == order
    out = np.zeros(max(v.size, 1), dtype=g.dtype)
    np.add.at(out, (order % max(v.size, 1))[last], flat[pos][last])
    return out.reshape(v.shape) if v.ndim else out[0]


def _int_vector(index, what):
    if not (isinstance(index, types.Array) and index.ndim == 1
            and isinstance(index.dtype, types.Integer)):
        raise TypingError(f"s2s_ad: under ad.jit, {what} takes one 1-D integer index array; "
                          f"got an index of type {index}")


@overload(add_at)
def _add_at(a, indices, b):
    _int_vector(indices, "np.add.at")

    def impl(a, indices, b):
        out = a.copy()
        index_add(out, indices, b)
        return out
    return impl


@overload(take_at)
def _take_at(x, indices):
    _int_vector(indices, "np.add.at")
    return lambda x, indices: x[indices]


@overload(put_into)
def _put_into(a, ind, v, mode="raise"):
    _int_vector(ind, "np.put")
    scalar = not isinstance(v, types.Array)

    def impl(a, ind, v, mode="raise"):
        out = a.copy()
        flat = out.reshape(out.size)
        for k in range(ind.shape[0]):
            p = _position(ind[k], flat.shape[0], mode)
            flat[p] = v if scalar else v.ravel()[k % v.size]
        return out
    return impl


@overload(put_grad)
def _put_grad(g, ind, v, mode="raise"):
    _int_vector(ind, "np.put")
    if not isinstance(v, types.Array):
        def scalar(g, ind, v, mode="raise"):
            flat = g.ravel()
            seen = np.zeros(flat.shape[0], np.bool_)
            total = 0.0
            for k in range(ind.shape[0] - 1, -1, -1):
                p = _position(ind[k], flat.shape[0], mode)
                if not seen[p]:
                    total += flat[p]
                seen[p] = True
            return total
        return scalar

    def impl(g, ind, v, mode="raise"):
        flat = g.ravel()
        seen = np.zeros(flat.shape[0], np.bool_)
        out = np.zeros(v.size, g.dtype)
        for k in range(ind.shape[0] - 1, -1, -1):
            p = _position(ind[k], flat.shape[0], mode)
            if not seen[p]:
                out[k % v.size] += flat[p]
            seen[p] = True
        return out.reshape(v.shape)
    return impl


@register_jitable
def _position(i, size, mode):
    if mode == "wrap":
        return i % size
    if mode == "clip":
        return min(max(i, 0), size - 1)
    if i >= size or i < -size:
        raise IndexError("np.put: index out of bounds")
    return i % size
