"""Reductions (sum, mean, prod, amax, amin) and their adjoints.

Plain-Python (NumPy) implementations; `_nb_reductions` and
`_nb_reduction_grads` register the Numba versions.  `axis` may be None, an
int (negative allowed) or a tuple of ints.  Guarantees: primal results
match NumPy exactly in value, shape and dtype; every adjoint returns an
array shaped like the reduction's input `a` in a's float dtype (a scalar
for scalar `a`): a new array, except that sum_grad and mean_grad return a
read-only broadcast view (no full-size copy; the Numba versions return new
arrays), so a caller that updates a cotangent in place copies these first.
The adjoints take the cotangent `g` shaped like the reduction's output,
i.e. with the reduced axes dropped unless keepdims.
"""

import numpy as np

from ._common import broadcast_view, expand_reduced, grad_dtype, is_array, norm_axes, scalar_like


def sum(a, axis=None, keepdims=False):
    """np.sum(a, axis, keepdims)."""
    return np.sum(a, axis=axis, keepdims=keepdims)


def sum_squares(a, axis=None, keepdims=False):
    """np.sum(np.square(a), axis, keepdims); compiled, one loop with no
    full-size square (what generated code calls for a square only a sum
    reads)."""
    return np.sum(np.square(a), axis=axis, keepdims=keepdims)


def mean(a, axis=None, keepdims=False):
    """np.mean(a, axis, keepdims)."""
    return np.mean(a, axis=axis, keepdims=keepdims)


def prod(a, axis=None, keepdims=False):
    """np.prod(a, axis, keepdims)."""
    return np.prod(a, axis=axis, keepdims=keepdims)


def amax(a, axis=None, keepdims=False):
    """np.amax(a, axis, keepdims) (NaN propagates, as in NumPy)."""
    return np.amax(a, axis=axis, keepdims=keepdims)


def amin(a, axis=None, keepdims=False):
    """np.amin(a, axis, keepdims) (NaN propagates, as in NumPy)."""
    return np.amin(a, axis=axis, keepdims=keepdims)


def sum_grad(g, a, axis=None, keepdims=False):
    """Adjoint of sum: `g` broadcast back to a.shape (a read-only view)."""
    if not is_array(a):
        return scalar_like(g, a)
    return broadcast_view(np.asarray(g, grad_dtype(a)), a.shape, norm_axes(axis, a.ndim))


def broadcast_total(g, a):
    """``np.sum(sum_grad(g, a))`` for a number ``g``, with no array: ``g``
    times a's element count, in a's float dtype (a scalar of a's type for
    scalar ``a``).  The cotangent of a scalar added to ``a`` in ``np.sum(a +
    s)``."""
    if not is_array(a):
        return scalar_like(g, a)
    dt = grad_dtype(a)
    return dt.type(g) * dt.type(a.size)


def mean_grad(g, a, axis=None, keepdims=False):
    """Adjoint of mean: g / count broadcast back to a.shape (a read-only view)."""
    if not is_array(a):
        return scalar_like(g, a)
    scaled, axes = _per_element(g, a, axis)
    return broadcast_view(scaled, a.shape, axes)


def _per_element(g, a, axis):
    """(g / the count of elements each output averages, in a's float dtype;
    the reduced axes).  Dividing in that dtype keeps float32 float32 (as in
    Numba)."""
    axes = norm_axes(axis, a.ndim)
    count = 1
    for ax in axes:
        count *= a.shape[ax]
    dt = grad_dtype(a)
    return np.asarray(g, dt) / dt.type(count), axes


def sum_grad_kept(g, a, axis=None, keepdims=False):
    """Adjoint of sum before the broadcast: `g` with the reduced axes put back
    with length 1, in a's float dtype.  It broadcasts against `a`; the
    adjoint sweep multiplies it straight into an elementwise partial
    (np.sum(np.square(x), 1) -> sum_grad_kept(g, ...) * (2.0 * x)) rather
    than first building a full-size broadcast of `g`."""
    if not is_array(a):
        return scalar_like(g, a)
    return expand_reduced(np.asarray(g, grad_dtype(a)), norm_axes(axis, a.ndim), keepdims)


def times_kept(g, p, temporary=False):
    """``g * p`` for a cotangent ``g`` from :func:`sum_grad_kept` (``p``'s
    shape with the reduced axes at length 1) and the partial ``p`` it is
    multiplied into.  Compiled, a row (or column) of ``p`` is scaled by one
    element of ``g`` in a plain loop, several times faster than Numba's
    broadcasting product; ``temporary`` says ``p`` is the adjoint's own
    new array (``2.0 * x``), which is then scaled in place when that keeps
    its dtype."""
    if temporary and isinstance(p, np.ndarray) and np.result_type(g, p) == p.dtype:
        np.multiply(g, p, out=p)
        return p
    return g * p


def mean_grad_kept(g, a, axis=None, keepdims=False):
    """Adjoint of mean before the broadcast (see sum_grad_kept): g / count."""
    if not is_array(a):
        return scalar_like(g, a)
    scaled, axes = _per_element(g, a, axis)
    return expand_reduced(scaled, axes, keepdims)


def prod_grad(g, a, axis=None, keepdims=False):
    """Adjoint of prod, exact even when `a` holds zeros.

    d prod / d a_j is the product of all *other* reduced elements; it is
    built from exclusive prefix and suffix products rather than out / a_j,
    which would divide by zero (and lose accuracy near zero).
    """
    if not is_array(a):
        return scalar_like(g, a)
    dt = grad_dtype(a)
    axes = norm_axes(axis, a.ndim)
    g = expand_reduced(g, axes, keepdims)
    if a.size == 0:
        return np.zeros(a.shape, dt)
    # Move the reduced axes last and flatten them into one "lane" axis.
    tail = tuple(range(a.ndim - len(axes), a.ndim))
    moved = np.moveaxis(a.astype(dt, copy=False), axes, tail)
    lanes = moved.reshape(moved.shape[:moved.ndim - len(axes)] + (-1,))
    ones = np.ones(lanes.shape[:-1] + (1,), dt)
    prefix = np.cumprod(np.concatenate([ones, lanes[..., :-1]], -1), -1)
    suffix = np.cumprod(np.concatenate([ones, lanes[..., :0:-1]], -1), -1)
    excl = (prefix * suffix[..., ::-1]).reshape(moved.shape)
    return (np.moveaxis(excl, tail, axes) * g).astype(dt, copy=False)


def minmax_grad(g, a, out, axis=None, keepdims=False):
    """Adjoint of amax/amin: `g` shared equally among the tied extrema.

    Positions of `a` equal to `out` (the reduction's result) along the
    reduced axes each get g / (number of ties), as JAX does; all other
    positions get zero.  A lane whose result is NaN gets zero gradient.
    """
    if not is_array(a):
        return scalar_like(g, a)
    return add_minmax_grad(np.zeros(a.shape, grad_dtype(a)), g, a, out, axis, keepdims)


def add_minmax_grad(acc, g, a, out, axis=None, keepdims=False):
    """``acc + minmax_grad(g, a, out, axis, keepdims)``, added into array `acc`.

    `acc` (shaped like `a`) is updated in place and returned; a scalar
    `acc` gives a new value.  Usually each lane has one extremum: then only
    those positions are touched, found from one comparison pass, instead of
    building and adding a full-size array of mostly zeros.
    """
    if not is_array(a) or not is_array(acc):
        return acc + minmax_grad(g, a, out, axis, keepdims)
    axes = norm_axes(axis, a.ndim)
    out = expand_reduced(out, axes, keepdims)
    g = expand_reduced(g, axes, keepdims)
    if g.shape != out.shape:
        g = np.broadcast_to(g, out.shape)
    mask = a == out
    flat = np.flatnonzero(mask)
    hits = flat.size
    # Every lane holds its extremum at least once unless its result is NaN,
    # so one hit per lane on average and no NaN means no ties anywhere.
    if hits != out.size or np.isnan(out).any():
        g = g / np.maximum(mask.sum(axis=axes, keepdims=True), 1)
    if not hits:
        return acc
    if 8 * hits > a.size:            # dense (many ties): one masked pass
        acc += np.where(mask, g, 0.0)
        return acc
    if acc.flags.c_contiguous and axes == tuple(range(a.ndim - len(axes), a.ndim)):
        # Reduced axes last (a row-wise max): lane = flat index // lane length.
        lanes = np.ascontiguousarray(g).reshape(-1)
        acc.reshape(-1)[flat] += lanes[flat // (a.size // lanes.size)]
        return acc
    at = np.unravel_index(flat, a.shape)
    lane = tuple(np.zeros_like(i) if d in axes else i for d, i in enumerate(at))
    acc[at] += g[lane]
    return acc
