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


# -- matrix functions: np.linalg and friends ------------------------------------
# One source for NumPy and Numba (``_nb_linalg`` registers each with
# ``register_jitable``): per-example matrices are 2-D (``ad.vmap`` batches
# them), vectors 1-D.  Derivatives of eigh/svd assume distinct eigenvalues /
# singular values: a repeated one divides by zero (inf/nan, never a finite
# wrong value).  eigh and cholesky read the lower triangle only, as NumPy's
# do, so their adjoints are lower triangular (the upper entries have no
# influence).

def _c(x):
    return np.ascontiguousarray(x)


def _matrix(a):
    if a.ndim != 2:
        raise ValueError("s2s_ad: np.linalg functions are differentiated for 2-D matrices; "
                         "batch a stack of them with ad.vmap")


def _eye_like(n, x):
    return np.eye(n).astype(x.dtype)


def _cols(x):
    """x as a 2-D array of columns (a vector is one column)."""
    x = _c(x)
    return x.reshape(x.shape[0], -1)


def _sym_lower(m):
    """The adjoint of a function reading only the lower triangle, from the
    symmetric one ``m``: the upper entries add to the lower ones."""
    s = 0.5 * (m + m.T)
    return np.tril(2.0 * s) - np.diag(np.diag(s))


def _from_lower(d):
    """The symmetric matrix NumPy's eigh/cholesky see: the lower triangle mirrored."""
    return np.tril(d) + np.tril(d, -1).T


def _triangle(a):
    """1 if square ``a`` is lower triangular with a non-zero diagonal, -1 if upper
    triangular, 0 otherwise (an O(n^2) check; Numba's stops at the first entry that
    rules a triangle out)."""
    n = a.shape[0]
    if n == 0 or a.shape[1] != n or not np.all(np.diagonal(a) != 0):
        return 0
    if not np.any(np.triu(a, 1)):
        return 1
    if not np.any(np.tril(a, -1)):
        return -1
    return 0


def lin_solve(a, b):
    """np.linalg.solve(a, b); a triangular ``a`` (found by ``_triangle`` at run time)
    is solved by substitution (BLAS trsm), O(n^2) per column instead of an LU."""
    kind = _triangle(a)
    if kind != 0:
        from scipy.linalg import solve_triangular
        return solve_triangular(a, b, lower=kind > 0, check_finite=False)
    return np.linalg.solve(_c(a), _c(b))


def solve(a, b):
    _matrix(a)
    return lin_solve(a, b)


def solve_grad_b(g, a):
    return lin_solve(a.T, g)


def solve_grad_a(g, a, out):
    gb = lin_solve(a.T, g)
    return -(_cols(gb) @ _cols(out).T)


def solve_jvp_a(da, a, out):
    return -lin_solve(a, da @ out)


def inv(a):
    _matrix(a)
    return np.linalg.inv(_c(a))


def inv_grad(g, out):
    return -(out.T @ g @ out.T)


def inv_jvp(da, out):
    return -(out @ da @ out)


def det(a):
    _matrix(a)
    return np.linalg.det(_c(a))


def det_grad(g, a, out):
    return (g * out) * inv_t(a)


def det_jvp(da, a, out):
    return out * np.trace(np.linalg.solve(_c(a), _c(da)))


def slogdet_sign(a):
    _matrix(a)
    return np.linalg.slogdet(_c(a))[0]


def slogdet_logabsdet(a):
    _matrix(a)
    c, ok = spd_factor(a)
    if ok:
        return _logdet_factor(c)
    return np.linalg.slogdet(_c(a))[1]


def slogdet_grad(g, a):
    return g * inv_t(a)


def spd_factor(a):
    """(c, True), the Cholesky factor of ``a`` in c's lower triangle, when ``a`` is real,
    exactly symmetric and positive definite; (anything, False) otherwise.  The O(n^2)
    symmetry check rules most other matrices out before any factorisation."""
    if a.dtype.kind == "f" and a.shape[0] > 0 and np.array_equal(a, a.T):
        try:
            return np.linalg.cholesky(a), True
        except np.linalg.LinAlgError:
            pass
    return a, False


def spd_inverse(c):
    """The inverse of the matrix whose Cholesky factor is c's lower triangle (LAPACK potri)."""
    from scipy.linalg import get_lapack_funcs
    potri, = get_lapack_funcs(("potri",), (c,))
    lower, info = potri(c, lower=True)
    if info != 0:
        raise np.linalg.LinAlgError("Singular matrix")
    return _from_lower(lower)


def _logdet_factor(c):
    """log det of the matrix whose Cholesky factor is c's lower triangle."""
    d = np.sum(np.log(np.diag(c)))
    return d + d


def inv_t(a):
    """inv(a).T: by Cholesky (potrf, potri: half an LU inverse's work) for an exactly
    symmetric positive definite ``a``, else by LU."""
    c, ok = spd_factor(a)
    if ok:
        return spd_inverse(c)
    return np.linalg.inv(_c(a)).T


def slogdet_jvp(da, a):
    return np.trace(np.linalg.solve(_c(a), _c(da)))


def cholesky(a):
    _matrix(a)
    return np.linalg.cholesky(_c(a))


def tri_solve(lower, b, trans):
    """X with L X = B (``trans``: L.T X = B), L lower triangular, B 2-D."""
    from scipy.linalg import solve_triangular
    return solve_triangular(lower, b, lower=True, trans=1 if trans else 0)


def _phi(x):
    """The lower triangle with the diagonal halved."""
    return np.tril(x) - 0.5 * np.diag(np.diag(x))


def tri_solve_right(lower, b, trans):
    """X with X L = B (``trans``: X L.T = B), L lower triangular, B 2-D."""
    return tri_solve(lower, _c(b.T), not trans).T


def _fold_lower(s):
    """``_sym_lower(0.5 * (s + s.T))``: s + s.T below the diagonal, s's diagonal."""
    return np.tril(s + s.T) - np.diag(np.diag(s))


def _lt_times(lower, g):
    """lower.T @ g for lower triangular ``lower`` (Numba: BLAS trmm, half a gemm)."""
    return lower.T @ g


def cholesky_grad(g, out):
    p = _phi(_lt_times(out, g))
    x = tri_solve(out, _c(p), True)               # L^-T P
    s = tri_solve_right(out, x, False)            # L^-T P L^-1
    return _fold_lower(s)


def cholesky_jvp(da, out):
    d = _from_lower(da)
    x = tri_solve(out, _c(d), False)              # L^-1 dA
    y = tri_solve(out, _c(x.T), False)            # L^-1 dA L^-T
    return out @ _phi(y)


def eigh_w(a):
    _matrix(a)
    return np.linalg.eigh(_c(a))[0]


def eigh_v(a):
    _matrix(a)
    return np.linalg.eigh(_c(a))[1]


def _gaps(w):
    """F[i, j] = 1 / (w[j] - w[i]) off the diagonal, 0 on it (inf for a repeat)."""
    n = w.shape[0]
    eye = _eye_like(n, w)
    d = w.reshape(1, n) - w.reshape(n, 1)
    return 1.0 / (d + eye) - eye


def eigh_w_grad(g, a):
    v = np.linalg.eigh(_c(a))[1]
    return _sym_lower((v * g.reshape(1, -1)) @ v.T)


def eigh_v_grad(g, a):
    w, v = np.linalg.eigh(_c(a))
    return _sym_lower(v @ (_gaps(w) * (v.T @ g)) @ v.T)


def eigh_w_jvp(da, a):
    v = np.linalg.eigh(_c(a))[1]
    return np.diag(v.T @ _from_lower(da) @ v).copy()


def eigh_v_jvp(da, a):
    w, v = np.linalg.eigh(_c(a))
    return v @ (_gaps(w) * (v.T @ _from_lower(da) @ v))


def pinv(a):
    _matrix(a)
    return np.linalg.pinv(_c(a))


def pinv_grad(g, a, out):
    """For full-rank a (the pseudo-inverse is not differentiable where the rank drops)."""
    m, n = a.shape
    p = out
    return (-(p.T @ g @ p.T) + (_eye_like(m, a) - a @ p) @ g.T @ (p @ p.T)
            + (p.T @ p) @ g.T @ (_eye_like(n, a) - p @ a))


def pinv_jvp(da, a, out):
    m, n = a.shape
    p = out
    return (-(p @ da @ p) + (p @ p.T) @ da.T @ (_eye_like(m, a) - a @ p)
            + (_eye_like(n, a) - p @ a) @ da.T @ (p.T @ p))


def lstsq(a, b, rcond=None):
    """np.linalg.lstsq (its Numba version reads rcond=None as NumPy does)."""
    return np.linalg.lstsq(_c(a), _c(b), rcond=rcond)


def lstsq_x(a, b, rcond=None):
    _matrix(a)
    return lstsq(a, b, rcond)[0]


def lstsq_residuals(a, b, rcond=None):
    return lstsq(a, b, rcond)[1]


def lstsq_rank(a, b, rcond=None):
    return lstsq(a, b, rcond)[2]


def lstsq_sv(a, b, rcond=None):
    return lstsq(a, b, rcond)[3]


def lstsq_grad_a(g, a, b, out):
    """x = pinv(a) @ b, for a of full column rank."""
    p = np.linalg.pinv(_c(a))
    return pinv_grad(_cols(g) @ _cols(b).T, a, p)


def lstsq_grad_b(g, a, out):
    p = np.linalg.pinv(_c(a))
    return p.T @ g


def lstsq_jvp_a(da, a, b, out):
    p = np.linalg.pinv(_c(a))
    return pinv_jvp(da, a, p) @ b


def lstsq_jvp_b(db, a, out):
    return np.linalg.pinv(_c(a)) @ db


def qr_q(a):
    _matrix(a)
    return np.linalg.qr(_c(a))[0]


def qr_r(a):
    _matrix(a)
    return np.linalg.qr(_c(a))[1]


def _copyltu(m):
    return np.tril(m, -1) + np.tril(m, -1).T + np.diag(np.diag(m))


def _qr_check(a):
    if a.shape[0] < a.shape[1]:
        raise ValueError("s2s_ad: the derivative of np.linalg.qr needs a matrix with at least "
                         "as many rows as columns")


def qr_grad(gq, gr, a):
    """Adjoint of (Q, R) = qr(a) (reduced, m >= n); gq or gr may be zeros."""
    _qr_check(a)
    q, r = np.linalg.qr(_c(a))
    m = r @ gr.T - gq.T @ q
    b = gq + q @ _copyltu(m)
    return tri_solve(_c(r.T), _c(b.T), True).T       # B R^-T


def qr_q_grad(g, a):
    return qr_grad(g, np.zeros((a.shape[1], a.shape[1]), dtype=g.dtype), a)


def qr_r_grad(g, a):
    return qr_grad(np.zeros((a.shape[0], a.shape[1]), dtype=g.dtype), g, a)


def _qr_jvp(da, a):
    _qr_check(a)
    q, r = np.linalg.qr(_c(a))
    dx_rinv = tri_solve(_c(r.T), _c(da.T), False).T   # dA R^-1
    qt = q.T @ dx_rinv
    low = np.tril(qt, -1)
    do = low - low.T
    return q, r, dx_rinv, qt, do


def qr_q_jvp(da, a):
    q, r, dx_rinv, qt, do = _qr_jvp(da, a)
    return q @ (do - qt) + dx_rinv


def qr_r_jvp(da, a):
    q, r, dx_rinv, qt, do = _qr_jvp(da, a)
    return (qt - do) @ r


def _svd_check(a, full_matrices):
    if full_matrices and a.shape[0] != a.shape[1]:
        raise ValueError("s2s_ad: the derivative of np.linalg.svd of a non-square matrix "
                         "needs full_matrices=False (the extra singular vectors are not "
                         "unique)")


def svd_u(a, full_matrices=True):
    _matrix(a)
    _svd_check(a, full_matrices)
    return np.linalg.svd(_c(a), full_matrices=False)[0]


def svd_s(a, full_matrices=True):
    _matrix(a)
    return np.linalg.svd(_c(a), full_matrices=False)[1]


def svd_vh(a, full_matrices=True):
    _matrix(a)
    _svd_check(a, full_matrices)
    return np.linalg.svd(_c(a), full_matrices=False)[2]


def _svd_gaps(s):
    """F[i, j] = 1 / (s[j]**2 - s[i]**2) off the diagonal (inf for a repeat)."""
    return _gaps(s * s)


def svd_s_grad(g, a):
    u, s, vh = np.linalg.svd(_c(a), full_matrices=False)
    return (u * g) @ vh


def svd_u_grad(g, a):
    u, s, vh = np.linalg.svd(_c(a), full_matrices=False)
    m = a.shape[0]
    f = _svd_gaps(s)
    ut_g = u.T @ g
    inner = (f * (ut_g - ut_g.T)) * s.reshape(1, -1)
    rest = ((_eye_like(m, a) - u @ u.T) @ g) / s.reshape(1, -1)
    return (u @ inner + rest) @ vh


def svd_vh_grad(g, a):
    u, s, vh = np.linalg.svd(_c(a), full_matrices=False)
    n = a.shape[1]
    v, gv = vh.T, g.T
    f = _svd_gaps(s)
    vt_g = v.T @ gv
    inner = s.reshape(-1, 1) * (f * (vt_g - vt_g.T))
    rest = (u / s.reshape(1, -1)) @ (gv.T @ (_eye_like(n, a) - v @ vh))
    return u @ inner @ vh + rest


def _svd_jvp(da, a):
    u, s, vh = np.linalg.svd(_c(a), full_matrices=False)
    dp = u.T @ da @ vh.T
    return u, s, vh, dp


def svd_s_jvp(da, a):
    u, s, vh, dp = _svd_jvp(da, a)
    return np.diag(dp).copy()


def svd_u_jvp(da, a):
    u, s, vh, dp = _svd_jvp(da, a)
    m = a.shape[0]
    f = _svd_gaps(s)
    sr = s.reshape(1, -1)
    du = u @ (f * (dp * sr + sr.T * dp.T))
    return du + ((_eye_like(m, a) - u @ u.T) @ da @ vh.T) / sr


def svd_vh_jvp(da, a):
    u, s, vh, dp = _svd_jvp(da, a)
    n = a.shape[1]
    f = _svd_gaps(s)
    sr = s.reshape(1, -1)
    v = vh.T
    dv = v @ (f * (sr.T * dp + dp.T * sr))
    dv = dv + ((_eye_like(n, a) - v @ vh) @ da.T @ u) / sr
    return dv.T


def matrix_power(a, n):
    _matrix(a)
    return np.linalg.matrix_power(_c(a), n)


def _power_base(a, n):
    """b with out = b^|n|: a (n >= 0) or inv(a) (n < 0)."""
    return _c(a) if n >= 0 else np.linalg.inv(_c(a))


def _powers(b, m):
    """[b^0, b^1, ..., b^(m-1)] (at least [I])."""
    out = [_eye_like(b.shape[0], b)]
    for _ in range(m - 1):
        out.append(out[-1] @ b)
    return out


def matrix_power_jvp(da, a, n):
    b, m = _power_base(a, n), abs(n)
    db = _c(da) if n >= 0 else -(b @ da @ b)
    p = _powers(b, m)
    out = np.zeros_like(db)
    for k in range(m):            # sum_k b^k db b^(m-1-k)
        out = out + p[k] @ db @ p[m - 1 - k]
    return out


def matrix_power_grad(g, a, n):
    b, m = _power_base(a, n), abs(n)
    p = _powers(b, m)
    gb = np.zeros_like(_c(g))
    for k in range(m):            # sum_k (b^k)^T g (b^(m-1-k))^T
        gb = gb + p[k].T @ g @ p[m - 1 - k].T
    if n >= 0:
        return gb
    return -(b.T @ gb @ b.T)


# -- linear matrix functions -------------------------------------------------------

def _to_end(a, axis1, axis2):
    return np.moveaxis(a, (axis1, axis2), (-2, -1))


def _diagonal_index(n, m, offset):
    size = max(0, min(n + min(offset, 0), m - max(offset, 0)))
    i = np.arange(size)
    return i - min(offset, 0), i + max(offset, 0)


def trace(a, offset=0, axis1=0, axis2=1):
    return np.trace(a, offset, axis1, axis2)


def diagonal(a, offset=0, axis1=0, axis2=1):
    return np.diagonal(a, offset, axis1, axis2).copy()


def diagonal_grad(g, a, offset=0, axis1=0, axis2=1):
    """Cotangent of np.diagonal: g on the diagonal of a zero array shaped like a."""
    moved = np.zeros(_to_end(a, axis1, axis2).shape, dtype=np.result_type(g, a, 0.0))
    rows, cols = _diagonal_index(moved.shape[-2], moved.shape[-1], offset)
    moved[..., rows, cols] = g
    return np.moveaxis(moved, (-2, -1), (axis1, axis2))


def trace_grad(g, a, offset=0, axis1=0, axis2=1):
    ones = np.ones(np.diagonal(a, offset, axis1, axis2).shape)
    return diagonal_grad(np.asarray(g)[..., None] * ones, a, offset, axis1, axis2)


def diag(v, k=0):
    return np.diag(v, k)


def diag_grad(g, v, k=0):
    if np.ndim(v) == 1:
        return np.diagonal(g, k).copy()
    return diagonal_grad(g, v, k)


def vdot(a, b):
    return np.dot(np.ravel(a), np.ravel(b))


def _as2d(x):
    return x.reshape(1, -1) if x.ndim == 1 else x


def _kron_check(a, b):
    if a.ndim != b.ndim or a.ndim > 2:
        raise ValueError("s2s_ad: np.kron is differentiated for two vectors or two matrices")


def kron(a, b):
    _kron_check(a, b)
    return np.kron(a, b)


def _kron_blocks(g, a, b):
    a2, b2 = _as2d(a), _as2d(b)
    ma, na = a2.shape
    mb, nb = b2.shape
    blocks = _c(_c(g).reshape(ma, mb, na, nb).transpose(0, 2, 1, 3))
    return blocks.reshape(ma * na, mb * nb)


def kron_grad_a(g, a, b):
    return (_kron_blocks(g, a, b) @ _c(b).ravel()).reshape(a.shape)


def kron_grad_b(g, a, b):
    return (_c(a).ravel() @ _kron_blocks(g, a, b)).reshape(b.shape)


def _cross_check(a, b):
    if np.shape(a)[-1] != 3 or np.shape(b)[-1] != 3:
        raise ValueError("s2s_ad: np.cross is differentiated for 3-vectors")


def cross(a, b):
    _cross_check(a, b)
    return np.cross(a, b)


def cross_grad_a(g, a, b):
    return unbroadcast(np.cross(b, g), a)


def cross_grad_b(g, a, b):
    return unbroadcast(np.cross(g, a), b)


def _tensordot_axes(a, b, axes):
    if isinstance(axes, int):
        return list(range(a.ndim - axes, a.ndim)), list(range(axes))
    ax_a, ax_b = axes
    ax_a = [ax_a] if isinstance(ax_a, int) else list(ax_a)
    ax_b = [ax_b] if isinstance(ax_b, int) else list(ax_b)
    return [x % a.ndim for x in ax_a], [x % b.ndim for x in ax_b]


def tensordot(a, b, axes=2):
    return np.tensordot(a, b, axes)


def tensordot_grad_a(g, a, b, axes=2):
    g = np.asarray(g)          # a number when every axis is contracted
    ax_a, ax_b = _tensordot_axes(a, b, axes)
    free_a = [i for i in range(a.ndim) if i not in ax_a]
    free_b = [i for i in range(b.ndim) if i not in ax_b]
    # g has axes free_a + free_b: contract free_b with b's free axes.
    out = np.tensordot(g, b, (list(range(len(free_a), g.ndim)), free_b))
    # out has axes free_a, then b's contracted axes in b's order: name them by a's.
    order = free_a + [ax_a[ax_b.index(k)] for k in sorted(ax_b)]
    return np.transpose(out, np.argsort(order))


def tensordot_grad_b(g, a, b, axes=2):
    g = np.asarray(g)
    ax_a, ax_b = _tensordot_axes(a, b, axes)
    free_a = [i for i in range(a.ndim) if i not in ax_a]
    free_b = [i for i in range(b.ndim) if i not in ax_b]
    out = np.tensordot(a, g, (free_a, list(range(len(free_a)))))
    # out has a's contracted axes in a's order (named by b's), then free_b.
    order = [ax_b[ax_a.index(k)] for k in sorted(ax_a)] + free_b
    return np.transpose(out, np.argsort(order))


# -- einsum ----------------------------------------------------------------------

def einsum_parse(subscripts, n):
    text = subscripts.replace(" ", "")
    if "." in text:
        raise ValueError("s2s_ad: np.einsum subscripts with an ellipsis are not differentiated")
    if "->" in text:
        ins, out = text.split("->")
    else:
        ins = text
        counts = {}
        for ch in ins.replace(",", ""):
            counts[ch] = counts.get(ch, 0) + 1
        out = "".join(sorted(ch for ch, c in counts.items() if c == 1))
    ins = ins.split(",")
    if len(ins) != n:
        raise ValueError(f"np.einsum: {len(ins)} operands in the subscripts, {n} given")
    return ins, out


def einsum(subscripts, operands):
    """np.einsum(subscripts, *operands), contracting in the optimised order."""
    return np.einsum(subscripts, *operands, optimize=len(operands) > 2)


def einsum_grad(g, subscripts, operands, i):
    """Cotangent of operand ``i``: an einsum of g and the other operands.

    Letters of operand i found nowhere else enter as ones; a letter repeated
    in it (a diagonal) enters as an identity matrix.
    """
    ins, out = einsum_parse(subscripts, len(operands))
    mine = ins[i]
    shape = np.shape(operands[i])
    sizes = dict(zip(mine, shape))
    terms, arrays = [out], [g]
    for j, (s, x) in enumerate(zip(ins, operands)):
        if j != i:
            terms.append(s)
            arrays.append(x)
    seen = set("".join(terms))
    free = iter(ch for ch in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                if ch not in subscripts)
    target, first = [], set()
    for ch in mine:
        if ch in first:              # a repeated letter: an identity ties it to the first
            new = next(free)
            terms.append(ch + new)
            arrays.append(np.eye(sizes[ch]))
            target.append(new)
            continue
        first.add(ch)
        target.append(ch)
        if ch not in seen:
            terms.append(ch)
            arrays.append(np.ones(sizes[ch]))
            seen.add(ch)
    dtype = np.result_type(g, operands[i], 0.0)
    spec = ",".join(terms) + "->" + "".join(target)
    return np.asarray(np.einsum(spec, *arrays, optimize=len(arrays) > 2), dtype=dtype)


def einsum_jvp(subscripts, operands, tangents):
    """The sum over operands of einsum with that operand replaced by its tangent."""
    total = None
    for i in range(len(operands)):
        ops = list(operands)
        ops[i] = tangents[i]
        term = einsum(subscripts, tuple(ops))
        total = term if total is None else total + term
    return total


# -- norms -------------------------------------------------------------------------

def norm(x, ord=None, axis=None, keepdims=False):
    return np.linalg.norm(x, ord, axis, keepdims)


def _norm_axes(x, axis):
    if axis is None:
        return tuple(range(x.ndim))
    return tuple(a % x.ndim for a in ((axis,) if isinstance(axis, int) else axis))


def _ties(mask, axes):
    return mask / np.sum(mask, axis=axes, keepdims=True)


def norm_grad(g, x, out, ord=None, axis=None, keepdims=False):
    """Cotangent of np.linalg.norm (ties among maxima share; zero at a zero 2-norm is nan)."""
    x = np.asarray(x)
    axes = _norm_axes(x, axis)
    if len(axes) > 2 or (axis is None and x.ndim > 2 and ord is not None):
        raise ValueError("np.linalg.norm: improper number of dimensions to norm")
    g = np.asarray(g)
    out = np.asarray(out)
    if not keepdims and axis is not None:
        g, out = np.expand_dims(g, axes), np.expand_dims(out, axes)
    elif not keepdims:
        g, out = np.reshape(g, (1,) * x.ndim), np.reshape(out, (1,) * x.ndim)
    if len(axes) == 1 or (axis is None and ord is None):     # vector norms (and Frobenius)
        if ord is None or ord == 2 or ord == "fro":
            return g * x / out
        if ord == np.inf or ord == -np.inf:
            return g * np.sign(x) * _ties(np.abs(x) == out, axes)
        if ord == 0:
            return np.zeros_like(x * g)
        if ord == 1:
            return g * np.sign(x)
        return g * np.sign(x) * (np.abs(x) / out) ** (ord - 1)
    if ord == "fro":
        return g * x / out
    moved = np.moveaxis(x, axes, (-2, -1))
    gm = np.moveaxis(g, axes, (-2, -1))
    if ord in ("nuc", 2, -2):
        u, s, vh = np.linalg.svd(moved, full_matrices=False)
        if ord == "nuc":
            part = u @ vh
        else:
            k = 0 if ord == 2 else -1
            part = u[..., :, k:k + 1 if k == 0 else None] @ vh[..., k:k + 1 if k == 0 else None, :]
        return np.moveaxis(gm * part, (-2, -1), axes)
    sums_over = -2 if abs(ord) == 1 else -1       # 1: column sums; inf: row sums
    sums = np.sum(np.abs(moved), axis=sums_over, keepdims=True)
    best = np.max(sums, axis=-1 if sums_over == -2 else -2, keepdims=True) if ord > 0 else \
        np.min(sums, axis=-1 if sums_over == -2 else -2, keepdims=True)
    picked = _ties(sums == best, (-1, -2))
    return np.moveaxis(gm * np.sign(moved) * picked, (-2, -1), axes)


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
