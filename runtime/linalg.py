"""dot, matmul and inner, and the adjoints of each operand.

Plain-Python (NumPy) implementations; `_nb_linalg` registers the Numba
versions.  A scalar (or 0-d) operand makes the product an elementwise
multiply in which the scalar is "weak": it takes the array's float dtype,
so float32 stays float32 in both backends.  Guarantees for the adjoints:
the result has the operand's shape and float dtype (a scalar for a scalar
operand); `g` must be shaped like the product's output.
"""

import math

import numpy as np

from ._common import grad_dtype, is_array, scalar_like, weak_scalar
from .plumbing import unbroadcast


def _weak_mul(x, y):
    """x * y where a 0-d operand adopts the other's float dtype."""
    if np.ndim(x) == 0 and np.ndim(y) > 0:
        x = weak_scalar(x, y)
    elif np.ndim(y) == 0 and np.ndim(x) > 0:
        y = weak_scalar(y, x)
    return x * y


def _fit(v, x):
    """Cotangent value `v` as x's type: x's shape and float dtype."""
    if not is_array(x):
        return scalar_like(v, x)
    return np.asarray(v).astype(grad_dtype(x), copy=False)


def _is_scaling(a, b):
    return np.ndim(a) == 0 or np.ndim(b) == 0


def _scale_grad(g, x, other):
    """Adjoint of x in x * other (scalar product): unbroadcast g * other."""
    return _fit(unbroadcast(_weak_mul(g, other), x), x)


def dot(a, b):
    """np.dot(a, b); a scalar operand multiplies (keeping float32)."""
    return _weak_mul(a, b) if _is_scaling(a, b) else np.dot(a, b)


def matmul(a, b):
    """np.matmul(a, b) (the @ operator)."""
    return np.matmul(a, b)


def inner(a, b):
    """np.inner(a, b); a scalar operand multiplies (keeping float32)."""
    return _weak_mul(a, b) if _is_scaling(a, b) else np.inner(a, b)


def dot_grad_a(g, a, b):
    """Cotangent of `a` for out = np.dot(a, b), any ranks.

    out[i.., j.., l] = sum_k a[i.., k] b[j.., k, l], so the cotangent
    contracts g's b-axes with b's non-k axes.
    """
    if _is_scaling(a, b):
        return _scale_grad(g, a, b)
    free_b = list(range(b.ndim - 2)) + ([b.ndim - 1] if b.ndim > 1 else [])
    g_axes = list(range(a.ndim - 1, np.ndim(g)))
    return _fit(np.tensordot(g, b, (g_axes, free_b)), a)


def dot_grad_b(g, a, b):
    """Cotangent of `b` for out = np.dot(a, b), any ranks."""
    if _is_scaling(a, b):
        return _scale_grad(g, b, a)
    lead = list(range(a.ndim - 1))
    gb = np.tensordot(a, g, (lead, lead))  # shape (k, j.., l)
    if b.ndim > 1:
        gb = np.moveaxis(gb, 0, b.ndim - 2)
    return _fit(gb, b)


def _as_matrices(g, a, b):
    """Operands (and g) of a @ b with 1-D operands promoted to matrices.

    NumPy promotes a 1-D left operand to a row and a 1-D right operand to
    a column and drops that axis from the output; re-inserting it in g
    makes every case a (batched) matrix product.
    """
    g = np.asarray(g)
    if b.ndim == 1:
        b, g = b[:, None], g[..., None]
    if a.ndim == 1:
        a, g = a[None, :], g[..., None, :]
    return g, a, b


def matmul_grad_a(g, a, b):
    """Cotangent of `a` for out = a @ b (N-d, batch dims broadcast)."""
    g2, a2, b2 = _as_matrices(g, a, b)
    ga = np.matmul(g2, np.swapaxes(b2, -1, -2))
    return _fit(unbroadcast(ga, a2).reshape(a.shape), a)


def matmul_grad_b(g, a, b):
    """Cotangent of `b` for out = a @ b (N-d, batch dims broadcast)."""
    g2, a2, b2 = _as_matrices(g, a, b)
    gb = np.matmul(np.swapaxes(a2, -1, -2), g2)
    return _fit(unbroadcast(gb, b2).reshape(b.shape), b)


def _inner_matrices(g, a, b):
    """a, b as (M, k), (N, k) matrices and g as (M, N): inner = A @ B.T."""
    k = a.shape[-1]
    m, n = math.prod(a.shape[:-1]), math.prod(b.shape[:-1])
    return np.reshape(g, (m, n)), a.reshape(m, k), b.reshape(n, k)


def inner_grad_a(g, a, b):
    """Cotangent of `a` for out = np.inner(a, b) (last axes contracted)."""
    if _is_scaling(a, b):
        return _scale_grad(g, a, b)
    g2, _, b2 = _inner_matrices(g, a, b)
    return _fit((g2 @ b2).reshape(a.shape), a)


def inner_grad_b(g, a, b):
    """Cotangent of `b` for out = np.inner(a, b) (last axes contracted)."""
    if _is_scaling(a, b):
        return _scale_grad(g, b, a)
    g2, a2, _ = _inner_matrices(g, a, b)
    return _fit((g2.T @ a2).reshape(b.shape), b)
