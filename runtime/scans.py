"""Scans and permutations along an axis: cumsum, cumprod, argsort,
take_along_axis, and their adjoints.

Each helper takes NumPy's ``axis`` (None: the flattened array).  The Numba
versions (_nb_scans.py) run a 1-D kernel on each line along a literal axis.
Guarantees: values and shapes are NumPy's; adjoints have the shape of the
operand they belong to and its float dtype.

``cumprod``'s adjoint and tangent never divide: they run the product rule's
recursion ``dout[k] = dout[k-1] * a[k] + out[k-1] * da[k]`` (forward) and
its transpose (reverse), so zeros in ``a`` get exact derivatives.
"""

import numpy as np

from ._common import grad_dtype


def _lines(x, axis):
    """``x`` with ``axis`` first (the flattened array for None)."""
    if axis is None:
        return np.ravel(x)
    return np.moveaxis(np.asarray(x), axis, 0)


def _back(r, x, axis):
    """Undo :func:`_lines` for an array shaped like ``x`` (or the scan of it)."""
    if axis is None:
        return np.reshape(r, np.shape(x))
    return np.moveaxis(r, 0, axis)


def cumsum(a, axis=None):
    """np.cumsum(a, axis)."""
    return np.cumsum(a, axis=axis)


def cumsum_grad(g, a, axis=None):
    """Adjoint of cumsum: the cumulative sum of g from the end, shaped like a."""
    lines = _lines(g, axis)
    r = np.flip(np.cumsum(np.flip(lines, 0), axis=0), 0)
    return _back(r, a, axis).astype(grad_dtype(a), copy=False)


def cumprod(a, axis=None):
    """np.cumprod(a, axis)."""
    return np.cumprod(a, axis=axis)


def cumprod_grad(g, a, out, axis=None):
    """Adjoint of cumprod: ``s[k] = g[k] + a[k+1] s[k+1]``, ``b[k] = out[k-1] s[k]``."""
    gl, al, ol = _lines(g, axis), _lines(a, axis), _lines(out, axis)
    n = al.shape[0]
    b = np.empty(al.shape, dtype=np.result_type(gl, al, grad_dtype(a)))
    acc = np.zeros(al.shape[1:], dtype=b.dtype)
    for k in range(n - 1, -1, -1):
        acc = gl[k] + (al[k + 1] * acc if k + 1 < n else acc)
        b[k] = acc * ol[k - 1] if k > 0 else acc
    return _back(b, a, axis).astype(grad_dtype(a), copy=False)


def cumprod_jvp(da, a, out, axis=None):
    """Tangent of cumprod: ``t[k] = t[k-1] a[k] + out[k-1] da[k]``."""
    dl, al, ol = _lines(da, axis), _lines(a, axis), _lines(out, axis)
    t = np.empty(al.shape, dtype=np.result_type(dl, al, grad_dtype(a)))
    for k in range(al.shape[0]):
        t[k] = t[k - 1] * al[k] + ol[k - 1] * dl[k] if k > 0 else dl[k]
    return _back(t, ol if axis is None else a, axis)


def argsort(a, axis=-1):
    """np.argsort(a, axis)."""
    return np.argsort(a, axis=axis)


def take_along_axis(arr, indices, axis):
    """np.take_along_axis(arr, indices, axis)."""
    return np.take_along_axis(arr, indices, axis)


def take_along_axis_grad(g, arr, indices, axis):
    """Adjoint of take_along_axis: g added at the positions read (repeats add up)."""
    if axis is None:
        flat = np.zeros(np.size(arr), dtype=grad_dtype(arr))
        np.add.at(flat, indices, g)
        return np.reshape(flat, np.shape(arr))
    arr = np.asarray(arr)
    ax = axis % arr.ndim
    indices = np.asarray(indices)
    shape = np.broadcast_shapes(*(tuple(s for d, s in enumerate(x.shape) if d != ax)
                                  for x in (arr, indices)))
    full_i = np.broadcast_to(indices, shape[:ax] + (indices.shape[ax],) + shape[ax:])
    grids = np.ogrid[tuple(slice(n) for n in full_i.shape)]
    index = tuple(full_i if d == ax else grids[d] for d in range(arr.ndim))
    out = np.zeros(shape[:ax] + (arr.shape[ax],) + shape[ax:], dtype=grad_dtype(arr))
    np.add.at(out, index, np.broadcast_to(g, full_i.shape))
    # arr broadcast along some axis: sum those back
    extra = tuple(d for d in range(arr.ndim) if arr.shape[d] == 1 and out.shape[d] != 1)
    return np.sum(out, axis=extra, keepdims=True) if extra else out


EXPORTS = ("cumsum", "cumsum_grad", "cumprod", "cumprod_grad", "cumprod_jvp", "argsort",
           "take_along_axis", "take_along_axis_grad")
