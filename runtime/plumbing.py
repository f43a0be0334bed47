"""Adjoint plumbing: moving cotangents between shapes and dtypes.

Plain-Python (NumPy) implementations; `_nb_plumbing` registers the Numba
versions.  Guarantees: an array result has exactly the shape the caller
asked for; a scalar primal always gets a scalar cotangent; nothing is
copied when the input already has the requested form.
"""

import math

import numpy as np

from ._common import grad_dtype, is_array, scalar_like


def unbroadcast(g, x):
    """Sum cotangent `g` down to the shape of `x`, undoing broadcasting.

    Leading axes of `g` are summed away; axes where `x` has length 1 are
    summed with keepdims.  Scalar `x` gives a scalar (the sum of `g`).  A
    0-d `g` is broadcast to `x`'s shape (in x's float dtype).  When the
    shapes already agree `g` itself is returned; otherwise g's dtype is kept.
    A complex `g` for a real `x` gives its real part (the cotangent of a real
    operand of a complex product, in JAX's convention; see fft.py).
    """
    if _complex_for_real(g, x):
        g = np.real(g)
    if not is_array(x):
        return np.sum(g) if is_array(g) else g
    if np.ndim(g) == 0:
        if x.ndim == 0:
            return g
        return np.full(x.shape, g, dtype=grad_dtype(x))
    if g.shape == x.shape:
        return g
    lead = g.ndim - x.ndim
    if lead < 0:
        raise ValueError(f"unbroadcast: cannot sum {g.shape} to {x.shape}")
    axes = list(range(lead))
    for j, n in enumerate(x.shape):
        if n == 1:
            axes.append(lead + j)
        elif n != g.shape[lead + j]:
            raise ValueError(
                f"unbroadcast: cannot sum {g.shape} to {x.shape}")
    return _sum_axes(g, tuple(axes)).reshape(x.shape)


def _complex_for_real(g, x):
    """Whether cotangent `g` is complex while its primal `x` is real."""
    return (isinstance(g, complex) or (is_array(g) and g.dtype.kind == "c")) and \
        not np.iscomplexobj(x)


def _sum_axes(g, axes):
    """``g.sum(axis=axes, keepdims=True)``, for adjoints.

    Summing the leading or the trailing axes of a contiguous float array is
    a matrix-vector product with ones: BLAS does it several times faster
    than NumPy's reduction over many short rows (a bias's or a row-wise
    reduction's cotangent), in a different but no less accurate order.
    """
    n = len(axes)
    if g.dtype in _BLAS_DTYPES and g.flags.c_contiguous and g.size and 0 < n < g.ndim:
        if axes == tuple(range(n)):
            k = math.prod(g.shape[:n])
            return (np.ones(k, g.dtype) @ g.reshape(k, -1)).reshape((1,) * n + g.shape[n:])
        if axes == tuple(range(g.ndim - n, g.ndim)):
            k = math.prod(g.shape[-n:])
            return (g.reshape(-1, k) @ np.ones(k, g.dtype)).reshape(g.shape[:-n] + (1,) * n)
    return g.sum(axis=axes, keepdims=True)


_BLAS_DTYPES = (np.dtype(np.float64), np.dtype(np.float32))


def zeros_like(x):
    """Zero cotangent for `x`: np.zeros_like for arrays, else a 0.0 scalar.

    NumPy float scalars give a zero of their own type; anything else
    (Python numbers, integer scalars) gives the Python float 0.0.
    """
    if is_array(x):
        return np.zeros_like(x)
    return scalar_like(0.0, x)


def like(b, x):
    """Cotangent `b` cast to the type and shape of primal `x`.

    Array `x`: an array of x.dtype and x.shape; `b` is either a scalar
    (filled in, e.g. a 0.0 zero adjoint) or an array of x's shape, returned
    as is when it already has x's dtype and is writeable, and copied
    otherwise (a read-only broadcast view, see sum_grad).  (No general
    broadcasting: adjoints have their primal's shape, and a broadcasting
    copy is slow to compile in Numba.)  Scalar `x`: a scalar of x's type
    (a Python float for Python numbers).  A complex `b` for a real `x` gives
    its real part (see :func:`unbroadcast`).
    """
    if _complex_for_real(b, x):
        b = np.real(b)
    if not is_array(x):
        return scalar_like(b, x)
    if not is_array(b):
        return np.full(x.shape, b, dtype=x.dtype)
    if b.shape != x.shape:
        raise ValueError("like: the cotangent has the wrong shape")
    return b if b.dtype == x.dtype and b.flags.writeable else b.astype(x.dtype)


def writable(b):
    """Cotangent ``b`` where it may be updated in place: ``b`` itself, or a
    copy of it when it is read-only (an adjoint that may be
    :func:`~s2s_ad.runtime.sum_grad`'s broadcast view; compiled, that is a
    new array and nothing is copied)."""
    if isinstance(b, np.ndarray) and b.flags.writeable:
        return b
    return np.copy(b)


def astype(a, dtype):
    """``a.astype(dtype)``, for arrays and for scalars (a NumPy scalar of ``dtype``)."""
    if is_array(a):
        return a.astype(dtype)
    return np.dtype(dtype).type(a)


def reshape_like(g, x):
    """`g` reshaped to np.shape(x); the adjoint of reshape/ravel/squeeze.

    The result is a view of `g` whenever NumPy can make one.  Scalar `x`
    gives a NumPy scalar of g's dtype (g must then have size 1).
    """
    if is_array(x):
        return np.reshape(g, x.shape)
    return np.reshape(g, ())[()]


def broadcast_like(t, x):
    """Tangent `t` broadcast to the shape of primal `x` (forward mode).

    The transpose of :func:`unbroadcast`: a scalar or lower-rank tangent of
    an operand becomes a tangent of the broadcast result.  Scalar `x` gives
    `t` itself; `t` already of x's shape is returned as is.
    """
    if not is_array(x):
        return t
    if is_array(t) and t.shape == x.shape:
        return t
    return np.broadcast_to(t, x.shape).astype(np.result_type(t, grad_dtype(x)))
