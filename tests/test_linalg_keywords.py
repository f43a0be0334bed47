"""NumPy's keyword spellings of np.linalg functions (the rules' library forms,
s2s_ad/rules/library/linalg.py): cholesky(upper=), eigh(UPLO=), qr(mode=), and
einsum(optimize=), which does not change the value.  Each reads
the triangle NumPy's reads, so finite differences of NumPy's own function on a
non-symmetric matrix are the reference (grad, jvp, vmap)."""
import numpy as np
import pytest

import s2s_ad as ad

RNG = np.random.default_rng(8)
_Q, _ = np.linalg.qr(RNG.normal(size=(3, 3)))
SPD = (_Q * np.array([1.0, 2.0, 3.5])) @ _Q.T
UPPER = np.triu(SPD) + np.tril(RNG.normal(size=(3, 3)), -1)   # the lower part is ignored
GENERAL = SPD + 0.3 * np.triu(RNG.normal(size=(3, 3)), 1) + 0.2 * np.tril(RNG.normal(size=(3, 3)), -1)
TALL = RNG.normal(size=(4, 3))


def cholesky_upper(a):
    return np.sum(np.sin(np.linalg.cholesky(a, upper=True)))


def cholesky_lower(a):
    return np.sum(np.sin(np.linalg.cholesky(a, upper=False)))


def eigh_upper(a):
    w, v = np.linalg.eigh(a, UPLO="U")
    return np.sum(w * np.arange(3.0)) + np.sum(v ** 2 * np.arange(9.0).reshape(3, 3))


def eigh_lower(a):
    return np.sum(np.linalg.eigh(a, "L")[0] * np.arange(3.0))


def qr_r(a):
    return np.sum(np.sin(np.linalg.qr(a, mode="r")))


def qr_reduced(a):
    return np.sum(np.linalg.qr(a, "reduced")[0] ** 2 * np.arange(12.0).reshape(4, 3))


def einsum_optimize(a):
    return np.sum(np.sin(np.einsum("ij,jk,kl->il", a, a, a, optimize=True))) + \
        np.einsum("ii", a, optimize="greedy") + np.sum(np.einsum("ij,jk", a, a, optimize=False))


def fd_grad(f, a, eps=1e-6):
    g = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        e = np.zeros_like(a)
        e[i] = eps
        g[i] = (f(a + e) - f(a - e)) / (2 * eps)
    return g


CASES = [(cholesky_upper, UPPER), (cholesky_lower, SPD), (eigh_upper, GENERAL),
         (eigh_lower, GENERAL), (qr_r, TALL), (qr_reduced, TALL), (einsum_optimize, GENERAL)]


@pytest.mark.parametrize("f,a", CASES, ids=[f.__name__ for f, _ in CASES])
def test_against_finite_differences_of_numpy(f, a):
    ref = fd_grad(f, a)
    np.testing.assert_allclose(ad.grad(f)(a), ref, rtol=1e-5, atol=1e-7)
    t = RNG.normal(size=a.shape)
    np.testing.assert_allclose(ad.jvp(f, (a,), (t,))[1], np.sum(ref * t), rtol=1e-5, atol=1e-7)
    per = ad.vmap(ad.grad(f))(np.stack([a, a]))
    np.testing.assert_allclose(per[1], ref, rtol=1e-5, atol=1e-7)


def test_upper_triangles_are_read():
    assert np.all(np.tril(ad.grad(cholesky_upper)(UPPER), -1) == 0)
    assert np.all(np.tril(ad.grad(eigh_upper)(GENERAL), -1) == 0)


def qr_complete(a):
    return np.sum(np.linalg.qr(a, mode="complete")[0])


def eigh_bad(a):
    return np.sum(np.linalg.eigh(a, UPLO="X")[0])


@pytest.mark.parametrize("f,match", [(qr_complete, "mode='complete' is not supported"),
                                     (eigh_bad, "UPLO='X' is not supported")])
def test_other_values_are_refused_at_the_users_line(f, match):
    with pytest.raises(SyntaxError, match=match) as e:
        ad.grad(f)(TALL if f is qr_complete else SPD)
    assert e.value.filename.endswith("test_linalg_keywords.py")
