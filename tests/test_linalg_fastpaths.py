"""The fast paths of the linear-algebra runtime (docs/linalg.md, "Fast paths"):
triangular `solve` by substitution, the Cholesky route of `slogdet` and of the
inverses in the det/slogdet adjoints, BLAS trsm/trmm in `cholesky`'s adjoint,
and einsum contractions that read transposed operands in place -- against
NumPy's results and central finite differences, in Python and under Numba."""
import numba
import numpy as np
import pytest

from s2s_ad import runtime as rt
from s2s_ad.testing import check_grad

N = 5
RNG = np.random.default_rng(3)
_M = RNG.normal(size=(N, N))
SPD = _M @ _M.T + N * np.eye(N)
LOWER = np.linalg.cholesky(SPD)
UPPER = np.ascontiguousarray(LOWER.T)
GENERAL = _M + N * np.eye(N)
INDEFINITE = SPD - 2.0 * np.max(np.linalg.eigvalsh(SPD)) * np.eye(N)   # symmetric, not PD
VEC = RNG.normal(size=N)
MAT = RNG.normal(size=(N, 3))
MATRICES = {"lower": LOWER, "upper": UPPER, "lower_F": np.asfortranarray(LOWER),
            "upper_view": LOWER.T, "general": GENERAL, "spd": SPD}


@numba.njit
def _nb_solve(a, b):
    return rt.solve(a, b)


@numba.njit
def _nb_slogdet(a):
    return rt.slogdet_logabsdet(a), rt.slogdet_grad(0.5, a), rt.det_grad(0.5, a, 2.0)


@pytest.mark.parametrize("name", sorted(MATRICES))
@pytest.mark.parametrize("rhs", [VEC, MAT], ids=["vector", "matrix"])
def test_solve_dispatch_matches_numpy(name, rhs):
    a = MATRICES[name]
    want = np.linalg.solve(a, rhs)
    for got in (rt.solve(a, rhs), _nb_solve(a, rhs)):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("solve", [rt.solve, _nb_solve], ids=["python", "numba"])
def test_singular_triangular_solve_raises(solve):
    a = LOWER.copy()
    a[2, 2] = 0.0                  # a zero pivot: not dispatched, LU reports it
    with pytest.raises(np.linalg.LinAlgError):
        solve(a, VEC)


def test_triangle_detection():
    assert rt._linalg._triangle(LOWER) == 1
    assert rt._linalg._triangle(UPPER) == -1
    assert rt._linalg._triangle(GENERAL) == 0
    nan = LOWER.copy()
    nan[0, 3] = np.nan             # a NaN above the diagonal is not a zero
    assert rt._linalg._triangle(nan) == 0


@pytest.mark.parametrize("a", [SPD, INDEFINITE, GENERAL], ids=["spd", "indefinite", "general"])
def test_slogdet_and_inverse_paths_match_numpy(a):
    logdet = np.linalg.slogdet(a)[1]
    inv_t = np.linalg.inv(a).T
    for got in ((rt.slogdet_logabsdet(a), rt.slogdet_grad(0.5, a), rt.det_grad(0.5, a, 2.0)),
                _nb_slogdet(a)):
        np.testing.assert_allclose(got[0], logdet, rtol=1e-12)
        np.testing.assert_allclose(got[1], 0.5 * inv_t, rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(got[2], 1.0 * inv_t, rtol=1e-10, atol=1e-14)


def test_spd_factor_rejects_asymmetric_and_indefinite():
    for a in (GENERAL, INDEFINITE):
        assert not rt._linalg.spd_factor(a)[1]
    c, ok = rt._linalg.spd_factor(SPD)
    assert ok and np.allclose(np.tril(c), LOWER)


# -- derivatives through the fast paths, against central differences ---------------

def tri_fit(a, y):
    """solve with a lower and an upper triangular matrix built from ``a``."""
    lower = np.tril(a) + 3.0 * np.eye(a.shape[0])
    z = np.linalg.solve(lower, y)
    w = np.linalg.solve(lower.T, z)
    return np.sum(w * w) + np.sum(np.sin(z))


def cho_nll(a, y):
    """A Gaussian negative log likelihood: cholesky, two solves, slogdet."""
    k = a @ a.T + 2.0 * np.eye(a.shape[0])
    lower = np.linalg.cholesky(k)
    z = np.linalg.solve(lower, y)
    alpha = np.linalg.solve(lower.T, z)
    return 0.5 * np.dot(y, alpha) + 0.5 * np.linalg.slogdet(k)[1]


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_triangular_solve_grads(target):
    check_grad(tri_fit, (_M, VEC), argnums=(0, 1), target=target)


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_cholesky_slogdet_nll_grad(target):
    check_grad(cho_nll, (_M, VEC), argnums=(0, 1), target=target)


# -- einsum: operands and results read transposed, in place -------------------------

def einsums(x, w, u):
    s = np.einsum("bqe,bke->bqk", x, x)            # right operand transposed
    p = np.einsum("bqk,bqe->bke", s, x)            # left operand transposed
    r = np.einsum("bqe,bqk->bke", x, s)            # result transposed
    g = np.einsum("bte,btd->de", x, x)             # batch letters summed, result transposed
    m = np.einsum("ij,jk->ki", w, u)               # a matrix product, result transposed
    c = np.einsum("bij,bjk,bkl->bil", x, x, x)     # three operands
    return np.sum(np.sin(p)) + np.sum(r * r) + np.sum(np.cos(g)) + np.sum(m ** 3) \
        + np.sum(np.tanh(c))


X3 = RNG.normal(size=(2, 3, 3)) * 0.5
W2, U2 = RNG.normal(size=(3, 4)), RNG.normal(size=(4, 2))


def test_einsum_layouts_match_numpy():
    specs = ["bqe,bke->bqk", "bqk,bqe->bke", "bqe,bqk->bke", "bte,btd->de", "ij,jk->ki",
             "ij,kj->ik", "bij,bjk,bkl->bil", "abc,cb->a"]
    ops = {"bqe,bke->bqk": (X3, X3), "bqk,bqe->bke": (X3, X3), "bqe,bqk->bke": (X3, X3),
           "bte,btd->de": (X3, X3), "ij,jk->ki": (W2, U2), "ij,kj->ik": (W2, W2),
           "bij,bjk,bkl->bil": (X3, X3, X3), "abc,cb->a": (X3, X3[0])}
    src = "def f(ops):\n    return (" + "".join(
        f"rt.einsum({s!r}, ops[{k}]), " for k, s in enumerate(specs)) + ")"
    ns = {"rt": rt}
    exec(src, ns)
    got = numba.njit(ns["f"])(tuple(ops[s] for s in specs))
    for s, g in zip(specs, got):
        np.testing.assert_allclose(g, np.einsum(s, *ops[s]), rtol=1e-12, atol=1e-12,
                                   err_msg=s)


def test_einsum_layout_grads_jit():
    check_grad(einsums, (X3, W2, U2), argnums=(0, 1, 2), target="cpu")


def test_gp_workload_gradient_jit():
    from benchmarks import gp_nll
    check_grad(gp_nll.gp_nll, gp_nll.inputs("tiny"), argnums=(0, 1, 2), target="cpu")
