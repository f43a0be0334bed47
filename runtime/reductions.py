"""Reductions (sum, mean, prod, amax, amin) and their adjoints.

Plain-Python (NumPy) implementations; `_nb_reductions` and
`_nb_reduction_grads` register the Numba versions.  `axis` may be None, an
int (negative allowed) or a tuple of ints.  Guarantees: primal results
match NumPy exactly in value, shape and dtype; every adjoint returns a new
array shaped like the reduction's input `a` in a's float dtype (a scalar
for scalar `a`).  The adjoints take the cotangent `g` shaped like the
reduction's output, i.e. with the reduced axes dropped unless keepdims.
"""

import numpy as np

from ._common import expand_reduced, grad_dtype, is_array, norm_axes, scalar_like


def sum(a, axis=None, keepdims=False):
    """np.sum(a, axis, keepdims)."""
    return np.sum(a, axis=axis, keepdims=keepdims)


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
    """Adjoint of sum: `g` broadcast back to a.shape (a new array)."""
    if not is_array(a):
        return scalar_like(g, a)
    g = expand_reduced(g, norm_axes(axis, a.ndim), keepdims)
    return np.broadcast_to(g, a.shape).astype(grad_dtype(a))


def mean_grad(g, a, axis=None, keepdims=False):
    """Adjoint of mean: sum_grad divided by the number of reduced items."""
    if not is_array(a):
        return scalar_like(g, a)
    out = sum_grad(g, a, axis, keepdims)
    count = 1
    for ax in norm_axes(axis, a.ndim):
        count *= a.shape[ax]
    # Divide in the result dtype so float32 stays float32 (as in Numba).
    out /= out.dtype.type(count)
    return out


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
    axes = norm_axes(axis, a.ndim)
    g = expand_reduced(g, axes, keepdims)
    mask = a == expand_reduced(out, axes, keepdims)
    count = np.maximum(mask.sum(axis=axes, keepdims=True), 1)
    return np.where(mask, g / count, 0.0).astype(grad_dtype(a), copy=False)
