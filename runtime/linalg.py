"""Linear algebra for generated code: dot, matmul and inner here, the rest re-exported.

This module is what generated code and the Numba registrations see as the
linear-algebra runtime (``rt.solve``, ``linalg._triangle``...): it defines
the products and the adjoints of each operand, and re-exports the matrix
functions of :mod:`runtime.linalg_matrix` (np.linalg and their derivatives)
and the linear maps, einsum and norms of :mod:`runtime.linalg_linear`, so
every name stays importable from here.  It also holds :func:`map_rule`,
whose ``RULE_RUNNER`` the rules layer sets on this module.

Products: plain-Python (NumPy) implementations; `_nb_linalg` registers the Numba
versions.  A scalar (or 0-d) operand makes the product an elementwise
multiply in which the scalar is "weak": it takes the array's float dtype,
so float32 stays float32 in both backends.  Guarantees for the adjoints:
the result has the operand's shape and float dtype (a scalar for a scalar
operand); `g` must be shaped like the product's output.
"""

import math

import numpy as np

from ._common import grad_dtype, is_array, scalar_like, weak_scalar
from .linalg_linear import (  # noqa: F401  (re-exported: rt.NAME and the Numba registrations)
    _as2d,
    _cross_check,
    _diagonal_index,
    _kron_blocks,
    _kron_check,
    _norm_axes,
    _tensordot_axes,
    _ties,
    _to_end,
    cross,
    cross_grad_a,
    cross_grad_b,
    diag,
    diag_grad,
    diagonal,
    diagonal_grad,
    einsum,
    einsum_grad,
    einsum_jvp,
    einsum_parse,
    kron,
    kron_grad_a,
    kron_grad_b,
    norm,
    norm_grad,
    tensordot,
    tensordot_grad_a,
    tensordot_grad_b,
    trace,
    trace_grad,
    vdot,
)
from .linalg_matrix import (  # noqa: F401  (re-exported: rt.NAME and the Numba registrations)
    _c,
    _cols,
    _copyltu,
    _eye_like,
    _fold_lower,
    _from_lower,
    _gaps,
    _logdet_factor,
    _lt_times,
    _matrix,
    _phi,
    _pinv_cutoff,
    _pinv_truncation,
    _power_base,
    _powers,
    _qr_check,
    _qr_jvp,
    _svd_check,
    _svd_gaps,
    _svd_jvp,
    _sym_lower,
    _triangle,
    cholesky,
    cholesky_grad,
    cholesky_jvp,
    det,
    det_grad,
    det_jvp,
    eigh_v,
    eigh_v_grad,
    eigh_v_jvp,
    eigh_w,
    eigh_w_grad,
    eigh_w_jvp,
    inv,
    inv_grad,
    inv_jvp,
    inv_t,
    lin_solve,
    lstsq,
    lstsq_grad_a,
    lstsq_grad_b,
    lstsq_jvp_a,
    lstsq_jvp_b,
    lstsq_rank,
    lstsq_residuals,
    lstsq_sv,
    lstsq_x,
    matrix_power,
    matrix_power_grad,
    matrix_power_jvp,
    pinv,
    pinv_grad,
    pinv_jvp,
    qr_grad,
    qr_q,
    qr_q_grad,
    qr_q_jvp,
    qr_r,
    qr_r_grad,
    qr_r_jvp,
    slogdet_grad,
    slogdet_jvp,
    slogdet_logabsdet,
    slogdet_sign,
    solve,
    solve_grad_a,
    solve_grad_b,
    solve_jvp_a,
    spd_factor,
    spd_inverse,
    svd_s,
    svd_s_grad,
    svd_s_jvp,
    svd_u,
    svd_u_grad,
    svd_u_jvp,
    svd_vh,
    svd_vh_grad,
    svd_vh_jvp,
    tri_solve,
    tri_solve_right,
)
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


# -- vmap of a rule with no vectorized form: once per example ---------------------

#: Runs a rule (or one of its VJP templates) over the examples of a batch:
#: ``s2s_ad.rules.linalg.apply_rule``, which sets it here when it is imported
#: -- before the compiler can have generated a module that calls map_rule.
#: (The runtime is below the rules; it is handed the function, never imports it.)
RULE_RUNNER = None


def map_rule(rule, batched, *args, **kwargs):
    """The rule named ``rule`` applied to each example (``batched`` flags the operands)."""
    return RULE_RUNNER(rule, batched, None, args, kwargs)


def map_rule_vjp(rule, batched, which, g, out, *args, **kwargs):
    """Per-example VJP of ``rule`` for operand ``which``, summed over the batch if unbatched."""
    return RULE_RUNNER(rule, batched, (which, g, out), args, kwargs)


#: The matrix functions generated code calls as rt.NAME (exported by the package).
EXPORTS = (
    "solve", "solve_grad_a", "solve_grad_b", "solve_jvp_a", "inv", "inv_grad", "inv_jvp",
    "det", "det_grad", "det_jvp", "slogdet_sign", "slogdet_logabsdet", "slogdet_grad",
    "slogdet_jvp", "cholesky", "cholesky_grad", "cholesky_jvp", "tri_solve",
    "eigh_w", "eigh_v", "eigh_w_grad", "eigh_v_grad", "eigh_w_jvp", "eigh_v_jvp",
    "pinv", "pinv_grad", "pinv_jvp", "lstsq_x", "lstsq_residuals", "lstsq_rank", "lstsq_sv",
    "lstsq_grad_a", "lstsq_grad_b", "lstsq_jvp_a", "lstsq_jvp_b",
    "qr_q", "qr_r", "qr_q_grad", "qr_r_grad", "qr_q_jvp", "qr_r_jvp",
    "svd_u", "svd_s", "svd_vh", "svd_u_grad", "svd_s_grad", "svd_vh_grad", "svd_u_jvp",
    "svd_s_jvp", "svd_vh_jvp", "matrix_power", "matrix_power_grad", "matrix_power_jvp",
    "trace", "trace_grad", "diagonal", "diagonal_grad", "diag", "diag_grad", "vdot",
    "kron", "kron_grad_a", "kron_grad_b", "cross", "cross_grad_a", "cross_grad_b",
    "tensordot", "tensordot_grad_a", "tensordot_grad_b", "einsum", "einsum_grad",
    "einsum_jvp", "norm", "norm_grad", "map_rule", "map_rule_vjp",
)
