"""Shape operations and the adjoints of shape-changing primals.

Plain-Python (NumPy) implementations; `_nb_shapes` registers the Numba
versions.  Axes may be negative.  Guarantees: squeeze and transpose_grad
return views like NumPy does; split_grad, stack_grad and index_grad
return new arrays (the caller may accumulate into them in place).
"""

import numpy as np
from numpy.lib.array_utils import normalize_axis_index, normalize_axis_tuple

from ._common import grad_dtype


def ndim(a):
    """np.ndim(a) (Numba has no np.ndim; its overload reads the type's rank)."""
    return np.ndim(a)


def squeeze(a, axis=None):
    """np.squeeze(a, axis) (axis: None, int or tuple of ints)."""
    return np.squeeze(a, axis=axis)


def transpose_grad(g, axes=None):
    """Adjoint of np.transpose(x, axes): g transposed by the inverse axes."""
    if axes is None:
        return np.transpose(g)
    return np.transpose(g, np.argsort(normalize_axis_tuple(axes, g.ndim)))


def split_grad(g, offset, size, axis):
    """Copy of g[..., offset:offset + size, ...] (slice along `axis`).

    The adjoint of one piece of np.concatenate: the piece that started at
    `offset` along `axis` and had `size` entries there.
    """
    idx = [slice(None)] * g.ndim
    idx[normalize_axis_index(axis, g.ndim)] = slice(offset, offset + size)
    return g[tuple(idx)].copy()


def stack_grad(g, i, axis):
    """np.take(g, i, axis): the adjoint of the i-th input of np.stack."""
    return np.take(g, i, axis=axis)


def _is_basic(index):
    """True for an int/slice/None/Ellipsis index or a tuple of those."""
    parts = index if isinstance(index, tuple) else (index,)
    return all(isinstance(p, (int, np.integer, slice, type(None),
                              type(Ellipsis))) for p in parts)


def index_grad(g, x, index):
    """Adjoint of x[index]: zeros shaped like x with g added at index.

    Basic indices address each element at most once, so `+=` is exact;
    other (integer-array) indices go through np.add.at so that repeated
    positions accumulate.
    """
    z = np.zeros(np.shape(x), grad_dtype(x))
    if _is_basic(index):
        z[index] += g
    else:
        np.add.at(z, index, g)
    return z
