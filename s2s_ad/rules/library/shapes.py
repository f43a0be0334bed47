"""Shape functions written over slicing, transpose, reshape and concatenate."""
import numpy as np

from ._axes import flip_index, moved, normalize, one_axis, swapped, unsupported
from .registry import implements, static


@implements(np.flip)
def flip(m, axis=None):
    """A reversed slice along each axis in ``axis`` (all axes: None)."""
    return m[flip_index(axis, np.ndim(m))]


@implements(np.fliplr)
def fliplr(m):
    """``np.flip(m, 1)``."""
    return m[:, ::-1]


@implements(np.flipud)
def flipud(m):
    """``np.flip(m, 0)``."""
    return m[::-1]


@implements(np.moveaxis)
def moveaxis(a, source, destination):
    """``np.transpose`` with the permutation that moves the axes."""
    return np.transpose(a, moved(np.ndim(a), source, destination))


@implements(np.swapaxes, methods=("swapaxes",))
def swapaxes(a, axis1, axis2):
    """``np.transpose`` with two axes exchanged."""
    return np.transpose(a, swapped(np.ndim(a), axis1, axis2))


@implements(np.rot90)
def rot90(m, k=1, axes=(0, 1)):
    """Rotation by 90 degrees ``k`` times in the plane of ``axes``."""
    k = k % 4
    if k == 0:
        result = m
    elif k == 2:
        result = np.flip(np.flip(m, axes[0]), axes[1])
    elif k == 1:
        result = np.swapaxes(np.flip(m, axes[1]), axes[0], axes[1])
    else:
        result = np.flip(np.swapaxes(m, axes[0], axes[1]), axes[1])
    return result


@implements(np.atleast_1d)
def atleast_1d(a):
    """A scalar becomes a 1-element array (one array argument)."""
    if np.ndim(a) == 0:
        result = np.reshape(a, (1,))
    else:
        result = np.asarray(a)
    return result


@implements(np.atleast_2d)
def atleast_2d(a):
    """A vector becomes a row; a scalar a 1x1 array (one array argument)."""
    if np.ndim(a) == 0:
        result = np.reshape(a, (1, 1))
    elif np.ndim(a) == 1:
        result = np.expand_dims(a, 0)
    else:
        result = np.asarray(a)
    return result


@implements(np.atleast_3d)
def atleast_3d(a):
    """As NumPy: (n,) -> (1, n, 1), (m, n) -> (m, n, 1)."""
    if np.ndim(a) == 0:
        result = np.reshape(a, (1, 1, 1))
    elif np.ndim(a) == 1:
        result = np.expand_dims(a, (0, 2))
    elif np.ndim(a) == 2:
        result = np.expand_dims(a, 2)
    else:
        result = np.asarray(a)
    return result


@implements(np.hstack)
def hstack(tup, dtype=None, casting="same_kind"):
    """Concatenation along axis 1 (axis 0 for vectors)."""
    _ = unsupported(dtype=dtype)
    if np.ndim(tup[0]) == 1:
        result = np.concatenate(tup, axis=0)
    else:
        result = np.concatenate(tup, axis=1)
    return result


@implements(np.vstack, also=(np.row_stack,) if hasattr(np, "row_stack") else ())
def vstack(tup, dtype=None, casting="same_kind"):
    """Concatenation along axis 0 of the arrays made at least 2-D."""
    _ = unsupported(dtype=dtype)
    return np.concatenate(_rows(tup), axis=0)


@implements(np.dstack)
def dstack(tup):
    """Concatenation along axis 2 of the arrays made at least 3-D."""
    return np.concatenate(_planes(tup), axis=2)


@implements(np.column_stack)
def column_stack(tup):
    """Vectors become columns; then concatenation along axis 1."""
    return np.concatenate(_columns(tup), axis=1)


def _column(a):
    if np.ndim(a) < 2:
        result = np.reshape(a, (-1, 1))
    else:
        result = np.asarray(a)
    return result


def _rows(tup):
    """Each array of ``tup`` made at least 2-D (the tuple is static)."""
    return (np.atleast_2d(tup[0]),) + (_rows(tup[1:]) if len(tup) > 1 else ())


def _planes(tup):
    return (np.atleast_3d(tup[0]),) + (_planes(tup[1:]) if len(tup) > 1 else ())


def _columns(tup):
    return (_column(tup[0]),) + (_columns(tup[1:]) if len(tup) > 1 else ())


@static
def _several_axes(axis):
    return isinstance(axis, (tuple, list))


@static
def _roll_pairs(shift, axis):
    """NumPy's broadcast of ``shift`` against a tuple ``axis``: (shift, axis) pairs."""
    shifts = shift if isinstance(shift, (tuple, list)) else (shift,) * len(axis)
    if len(shifts) != len(axis):
        raise ValueError("'shift' and 'axis' should be scalars or 1D sequences of the same "
                         "length")
    return tuple(zip(shifts, axis))


def _roll_each(a, pairs, j):
    b = np.roll(a, pairs[j][0], pairs[j][1])
    return _roll_each(b, pairs, j + 1) if j + 1 < len(pairs) else b


@implements(np.roll)
def roll(a, shift, axis=None):
    """Two slices concatenated along ``axis`` (of the flattened array: None); a tuple
    of axes rolls each in turn (``shift`` a constant or one per axis)."""
    if _several_axes(axis):
        result = _roll_each(a, _roll_pairs(shift, axis), 0)
    elif axis is None:      # the new (contiguous) flat array reshaped: Numba reshapes no view
        flat = np.ravel(a)
        k = np.size(a) - shift % np.size(a)
        result = np.reshape(np.concatenate((flat[k:], flat[:k])), np.shape(a))
    else:
        ax = normalize(axis, np.ndim(a))
        b = np.moveaxis(a, ax, 0)
        n = np.shape(b)[0]
        k = n - shift % n
        result = np.moveaxis(np.concatenate((b[k:], b[:k]), axis=0), 0, ax)
    return result


@implements(np.meshgrid)
def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    """Coordinate grids: each array flattened along its own axis, broadcast to the
    shape of all (``indexing="xy"``: the first two axes exchanged)."""
    axes = _grid_axes(len(xi), indexing)
    if len(xi) == 0:
        result = ()
    elif sparse:
        result = _sparse_grids(xi, axes, 0)
    else:
        result = _dense_grids(xi, axes, 0, _ones_grid(xi, axes, 0))
    return result


@static
def _grid_axes(n, indexing):
    """The axis each of ``n`` arrays lies along."""
    if indexing not in ("xy", "ij"):
        raise ValueError("Valid values for `indexing` are 'xy' and 'ij'.")
    axes = list(range(n))
    if indexing == "xy" and n > 1:
        axes[0], axes[1] = 1, 0
    return tuple(axes)


@static
def _grid_shape(n, axis):
    """(1, ..., -1, ..., 1): ``n`` axes, the elements along ``axis``."""
    return tuple(-1 if k == axis else 1 for k in range(n))


def _along(xi, axes, k):
    return np.reshape(_flat(xi[k]), _grid_shape(len(xi), axes[k]))


def _flat(a):
    """``np.ravel(a)``, a scalar too (Numba's ravel takes arrays only)."""
    if np.ndim(a) == 0:
        result = np.array([a])
    else:
        result = np.ravel(a)
    return result


def _sparse_grids(xi, axes, k):
    g = _along(xi, axes, k)
    return (g,) + (_sparse_grids(xi, axes, k + 1) if k + 1 < len(xi) else ())


def _ones_grid(xi, axes, k):
    """Ones of the grids' shape (each array's ones along its axis, multiplied)."""
    ones = np.ones_like(_along(xi, axes, k))
    return ones * _ones_grid(xi, axes, k + 1) if k + 1 < len(xi) else ones


def _dense_grids(xi, axes, k, ones):
    g = _along(xi, axes, k) * ones
    return (g,) + (_dense_grids(xi, axes, k + 1, ones) if k + 1 < len(xi) else ())


@implements(np.broadcast_to)
def broadcast_to(array, shape, subok=False):
    """``array`` plus zeros of ``shape`` (its adjoint sums the broadcast axes)."""
    return array + np.zeros(shape)


@implements(np.take)
def take(a, indices, axis=None, out=None, mode="raise"):
    """Indexing with an integer array (of the flattened array: axis None)."""
    _ = unsupported(out=out)
    if axis is None:
        result = np.ravel(a)[indices]
    else:
        ax = normalize(axis, np.ndim(a))
        picked = np.moveaxis(a, ax, 0)[indices]
        if np.ndim(indices) == 0:
            result = picked
        else:
            rank = np.ndim(a) + one_axis(np.ndim(indices))   # x[idx] has an unknown rank
            result = np.transpose(picked, moved(rank, 0, ax))
    return result
