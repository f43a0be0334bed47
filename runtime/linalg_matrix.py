"""np.linalg's matrix functions and their derivatives (VJPs and JVPs).

solve, inv, det, slogdet, cholesky and triangular solves, eigh, pinv,
lstsq, qr, svd and matrix_power: each value and the adjoint/tangent of each
operand, as plain NumPy on one 2-D matrix (``ad.vmap`` batches them).  The
same source runs in Numba: ``_nb_linsolve`` and ``_nb_matfun`` register these
functions with ``register_jitable`` (or overload the few that need another
form), so a helper here must stay within what Numba compiles.  Generated code
reaches them as ``rt.NAME`` through :mod:`runtime.linalg`, which re-exports
every name (and lists them in its ``EXPORTS``).
"""

import numpy as np

# -- matrix functions: np.linalg and friends ------------------------------------
# One source for NumPy and Numba (``_nb_linsolve`` registers each with
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


# np.linalg.pinv(a, rcond) is pinv(a_k), a_k the SVD of ``a`` truncated to
# the k singular values above rcond * the largest (NumPy's cutoff: rcond, or
# rtol, see _pinv_cutoff).  Where k is locally constant (the pseudo-inverse is
# not differentiable where it changes), its derivative is the constant-rank
# formula (Golub & Pereyra) at a_k in the direction d(a_k) = T(da): in the
# bases of a's full SVD, T keeps the kept-kept block, zeroes the dropped-dropped
# one, and mixes each kept p / dropped q pair as
#     T(C)[p, q] = (s_p^2 C[p, q] + s_p s_q C[q, p]) / (s_p^2 - s_q^2)
# (and [q, p] likewise).  T is its own adjoint, and the identity when no
# singular value is dropped (full rank) or every dropped one is zero.
# hermitian=True (NumPy's eigh of the lower triangle mirrored, |eigenvalues| as the
# singular values) is pinv of that mirrored matrix: s2s_ad/rules/library/linalg.py.

def _pinv_cutoff(a, rcond, rtol):
    """NumPy's relative cutoff of pinv's singular values: ``rcond``, else
    ``rtol`` (1e-15 unless given), and ``rtol=None`` is max(M, N) * eps."""
    if rcond is not None:
        return rcond
    if rtol is not None:
        return rtol
    eps = 1.1920928955078125e-07 if a.itemsize == 4 else 2.220446049250313e-16
    return max(a.shape[0], a.shape[1]) * eps


def pinv(a, rcond=None, hermitian=False, rtol=1e-15):
    """np.linalg.pinv(a, rcond, hermitian, rtol=rtol) (NumPy 2's keyword; rcond None
    and rtol not given: NumPy's 1e-15).  Generated code calls it with hermitian
    False (True is the library's form); True here is pinv of the mirrored lower
    triangle, as NumPy's."""
    _matrix(a)
    s = _c(_from_lower(a)) if hermitian else _c(a)
    return np.linalg.pinv(s, _pinv_cutoff(a, rcond, rtol))


def _pinv_truncation(h, a, p):
    """T(h) (see above) for ``h`` a matrix shaped like ``a``; ``p`` is
    pinv(a, rcond), so a @ p projects onto the k kept singular vectors and
    k = trace(a @ p): no SVD unless a singular value was cut."""
    r = min(a.shape[0], a.shape[1])
    k = int(np.round(np.sum(a * p.T)))
    if k == r:
        return h
    u, s, vh = np.linalg.svd(_c(a), True)
    c = u.T @ h @ vh.T
    d = np.zeros_like(c)
    d[:k, :] = c[:k, :]
    d[:, :k] = c[:, :k]
    for i in range(k):             # kept
        for j in range(k, r):      # cut
            den = s[i] * s[i] - s[j] * s[j]
            w, x = s[i] * s[i] / den, s[i] * s[j] / den
            d[i, j] = w * c[i, j] + x * c[j, i]
            d[j, i] = w * c[j, i] + x * c[i, j]
    return u @ d @ vh


def pinv_grad(g, a, out):
    """Where the number of kept singular values is locally constant (see above)."""
    m, n = a.shape
    p = out
    h = (-(p.T @ g @ p.T) + (_eye_like(m, a) - a @ p) @ g.T @ (p @ p.T)
         + (p.T @ p) @ g.T @ (_eye_like(n, a) - p @ a))
    return _pinv_truncation(h, a, p)


def pinv_jvp(da, a, out):
    m, n = a.shape
    p = out
    dk = _pinv_truncation(da, a, p)
    return (-(p @ dk @ p) + (p @ p.T) @ dk.T @ (_eye_like(m, a) - a @ p)
            + (_eye_like(n, a) - p @ a) @ dk.T @ (p.T @ p))


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
