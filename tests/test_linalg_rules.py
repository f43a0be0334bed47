"""np.linalg and the linear-algebra array functions, in every mode, against
central finite differences (well-conditioned SPD matrices, well-separated
spectra)."""
import numpy as np
import pytest

import s2s_ad as ad

RNG = np.random.default_rng(17)
N = 4


def _spd(n=N, seed=0):
    r = np.random.default_rng(seed)
    q, _ = np.linalg.qr(r.normal(size=(n, n)))
    return (q * np.linspace(1.0, 3.0, n)) @ q.T + 0.05 * r.normal(size=(n, n))


A = _spd()
SPD = (lambda m: 0.5 * (m + m.T))(_spd(seed=1))
B = RNG.normal(size=(N, 3))
b = RNG.normal(size=N)
TALL = RNG.normal(size=(5, 3))
V3, W3 = RNG.normal(size=3), RNG.normal(size=3)
C = RNG.normal(size=(2, 3))


def f_solve(a, y):
    return np.sum(np.sin(np.linalg.solve(a, y)))


def f_solve_mat(a, y):
    return np.sum(np.linalg.solve(a, y) ** 2)


def f_inv(a):
    return np.sum(np.cos(np.linalg.inv(a)))


def f_det(a):
    return np.linalg.det(a)


def f_slogdet(a):
    s, ld = np.linalg.slogdet(a)
    return s * ld


def f_cholesky(a):
    return np.sum(np.sin(np.linalg.cholesky(a)))


def f_eigh(a):
    w, v = np.linalg.eigh(a)
    return np.sum(w * np.arange(1.0, 5.0)) + np.sum((v ** 2) * np.arange(16.0).reshape(4, 4))


def f_svd(a):
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    return np.sum(s ** 2 * np.arange(1.0, 4.0)) + np.sum(u ** 2 * np.cos(a)) + \
        np.sum(vh ** 2 * np.arange(9.0).reshape(3, 3))


def f_svd_s(a):
    return np.sum(np.linalg.svd(a, compute_uv=False) * np.arange(1.0, 4.0))


def f_qr(a):
    q, r = np.linalg.qr(a)
    return np.sum(np.sin(q)) + np.sum(r * r * np.arange(9.0).reshape(3, 3))


def f_pinv(a):
    return np.sum(np.sin(np.linalg.pinv(a)))


def f_lstsq(a, y):
    x, res, rank, sv = np.linalg.lstsq(a, y, rcond=None)
    return np.sum(np.sin(x))


def f_norms(x):
    return (np.linalg.norm(x) + np.linalg.norm(x, 1) + np.linalg.norm(x, np.inf)
            + np.linalg.norm(x, -np.inf) + np.linalg.norm(x, 3) + np.linalg.norm(x, ord=2))


def f_matnorms(a):
    return (np.linalg.norm(a, "fro") + np.linalg.norm(a, "nuc") + np.linalg.norm(a, 1)
            + np.linalg.norm(a, np.inf) + np.linalg.norm(a, 2))


def f_norm_axis(a):
    return np.sum(np.linalg.norm(a, axis=1) * np.arange(1.0, 5.0)) + \
        np.sum(np.linalg.norm(a, 1, axis=0, keepdims=True))


def f_matrix_power(a):
    return np.sum(np.linalg.matrix_power(a, 3)) + np.sum(np.linalg.matrix_power(a, -2))


def f_trace(a):
    return np.trace(a * a) + np.trace(a, 1)


def f_diag(a):
    return np.sum(np.diag(a) ** 2) + np.sum(np.sin(np.diag(np.diag(a), 1)))


def f_diagonal(a):
    return np.sum(np.diagonal(a) ** 3) + np.sum(np.diagonal(a, -1))


def f_tri(a):
    return np.sum(np.tril(a) ** 2) + np.sum(np.sin(np.triu(a, 1)))


def f_kron(a, c):
    return np.sum(np.sin(np.kron(a, c)))


def f_tensordot(a, c):
    return np.sum(np.sin(np.tensordot(a, c, axes=([1], [1]))))


def f_einsum(a, c):
    return (np.sum(np.sin(np.einsum("ij,kj->ik", a, c))) + np.einsum("ii", a)
            + np.sum(np.einsum("ij,jk,kl->il", a, a, a)) + np.sum(np.einsum("ij->j", c) ** 2))


def f_outer_cross_vdot(u, w):
    return np.sum(np.sin(np.outer(u, w))) + np.sum(np.cross(u, w) ** 2) + np.vdot(u, w) ** 2


CASES = [
    (f_solve, (A, b)), (f_solve_mat, (A, B)), (f_inv, (A,)), (f_det, (A,)),
    (f_slogdet, (A,)), (f_cholesky, (SPD,)), (f_eigh, (SPD,)), (f_svd, (TALL,)),
    (f_svd_s, (TALL,)), (f_qr, (TALL,)), (f_pinv, (TALL,)), (f_lstsq, (TALL, TALL[:, 0] + 1)),
    (f_norms, (b,)), (f_matnorms, (A,)), (f_norm_axis, (A,)), (f_matrix_power, (A,)),
    (f_trace, (A,)), (f_diag, (A,)), (f_diagonal, (A,)), (f_tri, (A,)), (f_kron, (A, C)),
    (f_tensordot, (A, C[:, :1] * np.ones((2, 4)))), (f_einsum, (A, C[:, :1] * np.ones((2, 4)))),
    (f_outer_cross_vdot, (V3, W3)),
]
IDS = [f.__name__ for f, _ in CASES]


def fd_grad(f, args, i, eps=1e-6):
    x = np.array(args[i], dtype=float)
    out = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        hi, lo = x.copy(), x.copy()
        hi[idx] += eps
        lo[idx] -= eps
        a1, a2 = list(args), list(args)
        a1[i], a2[i] = hi, lo
        out[idx] = (f(*a1) - f(*a2)) / (2 * eps)
    return out


def _close(got, want, tol=2e-5):
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("f,args", CASES, ids=IDS)
def test_grad(f, args):
    argnums = tuple(range(len(args)))
    got = ad.grad(f, argnums=argnums)(*args)
    for i in argnums:
        _close(got[i], fd_grad(f, args, i))


@pytest.mark.parametrize("f,args", CASES, ids=IDS)
def test_jvp(f, args):
    tangents = tuple(np.random.default_rng(3).normal(size=np.shape(a)) for a in args)
    value, tangent = ad.jvp(f, args, tangents)
    eps = 1e-6
    hi = f(*[a + eps * t for a, t in zip(args, tangents)])
    lo = f(*[a - eps * t for a, t in zip(args, tangents)])
    _close(value, f(*args))
    _close(tangent, (hi - lo) / (2 * eps))


@pytest.mark.parametrize("f,args", CASES[:8] + CASES[16:], ids=IDS[:8] + IDS[16:])
def test_jacrev_of_vector_output(f, args):
    if len(args) == 1:
        def g(x):
            return np.stack([f(x), 2.0 * f(x)])
    else:
        def g(x, y):
            return np.stack([f(x, y), 2.0 * f(x, y)])
    jac = ad.jacrev(g)(*args)
    want = fd_grad(f, args, 0)
    _close(jac[0], want)
    _close(jac[1], 2.0 * want)


@pytest.mark.parametrize("method", ["loop", "vectorize"])
@pytest.mark.parametrize("f,args", CASES, ids=IDS)
def test_vmap(f, args, method):
    batch = np.stack([args[0], args[0] * 1.01, args[0] * 0.99])
    got = ad.vmap(f, in_axes=(0,) + (None,) * (len(args) - 1), method=method)(batch, *args[1:])
    _close(got, [f(x, *args[1:]) for x in batch], 1e-10)
    grads = ad.vmap(ad.grad(f), in_axes=(0,) + (None,) * (len(args) - 1), method=method)(
        batch, *args[1:])
    for x, gx in zip(batch, grads):
        _close(gx, fd_grad(f, (x,) + tuple(args[1:]), 0))


def test_degenerate_eigenvalues_are_not_finite():
    with np.errstate(all="ignore"):
        g = ad.grad(lambda a: np.sum(np.linalg.eigh(a)[1][0]))(np.eye(3))
    assert not np.all(np.isfinite(g))


def test_svd_full_matrices_non_square_is_an_error():
    with pytest.raises(ValueError, match="full_matrices=False"):
        ad.grad(lambda a: np.sum(np.linalg.svd(a)[0]))(TALL)


# -- a Gaussian-process negative log marginal likelihood ------------------------------

def gp_nll(log_ls, x, y):
    d = x.reshape(-1, 1) - x.reshape(1, -1)
    k = np.exp(-0.5 * d * d / np.exp(2.0 * log_ls)) + 0.1 * np.eye(x.shape[0])
    lower = np.linalg.cholesky(k)
    z = np.linalg.solve(lower, y)           # K^-1 y = L^-T L^-1 y: y.K^-1.y = z.z
    sign, logdet = np.linalg.slogdet(k)
    return 0.5 * np.dot(z, z) + 0.5 * logdet


GP_X = np.linspace(0.0, 5.0, 50)
GP_Y = np.sin(GP_X) + 0.1 * np.random.default_rng(5).normal(size=50)


def test_gp_nll_grad():
    ll = np.array(0.3)
    got = ad.grad(gp_nll)(ll, GP_X, GP_Y)
    _close(got, fd_grad(gp_nll, (ll, GP_X, GP_Y), 0), 1e-5)


# -- compiled (Numba): representative functions, one compile each -----------------------

JIT_CASES = [CASES[i] for i in (0, 2, 3, 4, 5, 6, 16)]


@pytest.mark.parametrize("f,args", JIT_CASES, ids=[f.__name__ for f, _ in JIT_CASES])
def test_jit_grad(f, args):
    _close(ad.jit(ad.grad(f))(*args), fd_grad(f, args, 0))


def test_gp_nll_jit_grad():
    ll = np.array(0.3)
    got = ad.jit(ad.grad(gp_nll))(ll, GP_X, GP_Y)
    _close(got, fd_grad(gp_nll, (ll, GP_X, GP_Y), 0), 1e-5)


# -- compiled: every other function, grouped so that few functions are compiled -----------

Y5 = TALL[:, 0] + 1.0


def jit_factorisations(t):
    u, s, vh = np.linalg.svd(t, full_matrices=False)
    q, r = np.linalg.qr(t)
    x = np.linalg.lstsq(t, Y5, rcond=None)[0]
    return (np.sum(s ** 2 * np.arange(1.0, 4.0)) + np.sum(u ** 2 * np.cos(t))
            + np.sum(vh ** 2 * np.arange(9.0).reshape(3, 3)) + np.sum(np.sin(q))
            + np.sum(r * r * np.arange(9.0).reshape(3, 3)) + np.sum(np.sin(x))
            + np.sum(np.sin(np.linalg.pinv(t))))


def jit_matrix_functions(a):
    c = np.ones((2, 4)) * np.arange(1.0, 3.0).reshape(2, 1)
    return (np.sum(np.linalg.matrix_power(a, 3)) + np.sum(np.linalg.matrix_power(a, -2))
            + np.sum(np.diagonal(a) ** 3) + np.sum(np.diagonal(a, -1)) + np.trace(a, 1)
            + np.sum(np.diag(a) ** 2) + np.sum(np.sin(np.diag(np.diag(a), 1)))
            + np.sum(np.sin(np.kron(a, C))) + np.sum(np.sin(np.tensordot(a, c, axes=([1], [1]))))
            + np.sum(np.sin(np.einsum("ij,kj->ik", a, c))) + np.einsum("ii", a)
            + np.sum(np.einsum("ij,jk,kl->il", a, a, a)) + np.sum(np.einsum("ij->j", c * a[0]) ** 2))


def jit_norms(a):
    return (np.linalg.norm(a[0]) + np.linalg.norm(a[0], 1) + np.linalg.norm(a[0], np.inf)
            + np.linalg.norm(a[0], -np.inf) + np.linalg.norm(a[0], 3)
            + np.linalg.norm(a, "fro") + np.linalg.norm(a, "nuc") + np.linalg.norm(a, 1)
            + np.linalg.norm(a, np.inf) + np.linalg.norm(a, 2)
            + np.sum(np.linalg.norm(a, axis=1) * np.arange(1.0, 5.0))
            + np.sum(np.linalg.norm(a, 1, axis=0, keepdims=True)))


JIT_GROUPS = [(jit_factorisations, (TALL,)), (jit_matrix_functions, (A,)), (jit_norms, (A,)),
              (f_outer_cross_vdot, (V3, W3)), (f_pinv, (TALL,))]


@pytest.mark.parametrize("f,args", JIT_GROUPS, ids=[f.__name__ for f, _ in JIT_GROUPS])
def test_jit_grad_grouped(f, args):
    _close(ad.jit(ad.grad(f))(*args), fd_grad(f, args, 0))


def jit_spectrum(t):
    """A vector output: singular values plus column sums (einsum)."""
    return np.linalg.svd(t, compute_uv=False) + np.einsum("ij->j", t * t)


def test_jit_jacrev():
    got = ad.jit(ad.jacrev(jit_spectrum))(TALL)
    want = np.stack([fd_grad(lambda t, i=i: jit_spectrum(t)[i], (TALL,), 0) for i in range(3)])
    _close(got, want)


def jit_per_example(t):
    q, r = np.linalg.qr(t)
    return np.sum(r * r * np.arange(9.0).reshape(3, 3)) + np.sum(np.einsum("ij,ik->jk", t, q))


def test_jit_vmap_grad():
    batch = np.stack([TALL, 0.9 * TALL + 0.1, TALL[::-1]])
    got = ad.jit(ad.vmap(ad.grad(jit_per_example)))(batch)
    for t, g in zip(batch, got):
        _close(g, fd_grad(jit_per_example, (t,), 0))


def test_tensordot_unsorted_axes():
    """Contracted axes given out of order (the adjoint must pair them as given)."""
    a, c = RNG.normal(size=(3, 3, 4)), RNG.normal(size=(3, 3, 2))

    def f(x, y):
        return np.sum(np.sin(np.tensordot(x, y, axes=([0, 1], [1, 0]))))
    got = ad.grad(f, argnums=(0, 1))(a, c)
    _close(got[0], fd_grad(f, (a, c), 0))
    _close(got[1], fd_grad(f, (a, c), 1))
    got = ad.jit(ad.grad(f, argnums=(0, 1)))(a, c)
    _close(got[0], fd_grad(f, (a, c), 0))
    _close(got[1], fd_grad(f, (a, c), 1))


# -- np.linalg.pinv with rcond cutting a non-zero singular value ---------------------------

def _rank_cut():
    r = np.random.default_rng(3)
    u, _ = np.linalg.qr(r.normal(size=(5, 5)))
    v, _ = np.linalg.qr(r.normal(size=(3, 3)))
    return u[:, :3] @ np.diag([3.0, 2.0, 0.05]) @ v.T      # 0.05 < 0.1 * 3: cut


CUT = _rank_cut()


def f_pinv_cut(a):
    return np.sum(np.sin(np.linalg.pinv(a, rcond=0.1)) * np.arange(15.0).reshape(3, 5))


def test_pinv_rcond_cutting_a_singular_value():
    """pinv(a, rcond) is the pseudo-inverse of a's truncated SVD: its derivative
    moves with the truncation (the full-rank formula is off by ~1e-2 here)."""
    ref = fd_grad(f_pinv_cut, (CUT,), 0)
    _close(ad.grad(f_pinv_cut)(CUT), ref)
    _close(ad.jit(ad.grad(f_pinv_cut))(CUT), ref)
    t = RNG.normal(size=CUT.shape)
    _close(ad.jvp(f_pinv_cut, (CUT,), (t,))[1], np.sum(ref * t))
    wide = np.stack([CUT.T, 2.0 * CUT.T])
    per = ad.vmap(ad.grad(lambda a: np.sum(np.cos(np.linalg.pinv(a, 0.1)))))(wide)
    for k in range(2):
        _close(per[k], fd_grad(lambda a: np.sum(np.cos(np.linalg.pinv(a, 0.1))), (wide[k],), 0))
