"""np.linalg.pinv as NumPy 2 spells it: rcond, hermitian=, and the keyword-only rtol=
(rtol=None: max(M, N) * eps; neither rcond nor rtol: 1e-15), in every mode, against
central finite differences of NumPy's own function.

hermitian=True is NumPy's eigh path: it reads the lower triangle only (mirrored) and
cuts by |eigenvalues|, so the gradient with respect to a general matrix is lower
triangular -- the upper entries have no influence, as finite differences of
np.linalg.pinv(a, hermitian=True) show.
"""
import numpy as np
import pytest

import s2s_ad as ad

W4 = np.arange(16.0).reshape(4, 4) / 10.0
W35 = np.arange(15.0).reshape(3, 5) / 10.0


def _spectrum(w, seed):
    """A symmetric matrix with eigenvalues ``w`` (one negative: |w| is cut, not w)."""
    q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(len(w), len(w))))
    return (q * np.asarray(w)) @ q.T


SYM_CUT = _spectrum([-3.0, 0.05, 1.0, 2.5], 1)            # |0.05| < 0.1 * 3: cut
GENERAL = SYM_CUT + np.triu(np.random.default_rng(2).normal(size=(4, 4)), 1)  # upper ignored
TALL = np.random.default_rng(4).normal(size=(5, 3))


def f_hermitian(a):
    return np.sum(np.sin(np.linalg.pinv(a, 0.1, True)) * W4)


def f_hermitian_keyword(a):
    return np.sum(np.cos(np.linalg.pinv(a, hermitian=True)) * W4)


def f_rtol(t):
    return np.sum(np.sin(np.linalg.pinv(t, rtol=0.3)) * W35) + \
        np.sum(np.cos(np.linalg.pinv(t, rtol=None)) * W35)


def f_all(a, t):
    return f_hermitian(a) + f_hermitian_keyword(a) + f_rtol(t)


def fd_grad(f, x, eps=1e-6):
    out = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        hi, lo = x.copy(), x.copy()
        hi[idx] += eps
        lo[idx] -= eps
        out[idx] = (f(hi) - f(lo)) / (2 * eps)
    return out


def _close(got, want, tol=2e-5):
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


CASES = [(f_hermitian, SYM_CUT), (f_hermitian, GENERAL), (f_hermitian_keyword, GENERAL),
         (f_rtol, TALL)]
IDS = ["hermitian-symmetric", "hermitian-general", "hermitian-keyword", "rtol"]


@pytest.mark.parametrize("f,a", CASES, ids=IDS)
def test_grad_jvp_vmap(f, a):
    ref = fd_grad(f, a)
    _close(ad.grad(f)(a), ref)
    t = np.random.default_rng(5).normal(size=a.shape)
    for direction in (t, t + t.T if a.shape[0] == a.shape[1] else t):   # general, symmetric
        _close(ad.jvp(f, (a,), (direction,))[1], np.sum(ref * direction))
    per = ad.vmap(ad.grad(f))(np.stack([a, 1.5 * a]))
    _close(per[0], ref)
    _close(per[1], fd_grad(f, 1.5 * a))


def test_hermitian_reads_the_lower_triangle():
    """The upper triangle has no influence (NumPy's eigh reads the lower one)."""
    g = ad.grad(f_hermitian)(GENERAL)
    assert np.all(np.triu(g, 1) == 0) and np.any(np.tril(g, -1) != 0)
    assert np.allclose(np.linalg.pinv(GENERAL, 0.1, True), np.linalg.pinv(SYM_CUT, 0.1))


def test_jit_grad_and_jacfwd():
    """Compiled (one function: the hermitian form, the rtol cutoffs are rt.pinv's
    arguments, checked compiled below) and by vector-mode forward."""
    _close(ad.jit(ad.grad(f_hermitian))(GENERAL), fd_grad(f_hermitian, GENERAL))
    want_a = fd_grad(lambda a: f_all(a, TALL), GENERAL)
    want_t = fd_grad(lambda t: f_all(GENERAL, t), TALL)
    got = ad.jacfwd(f_all, argnums=(0, 1))(GENERAL, TALL)
    _close(got[0], want_a)
    _close(got[1], want_t)


def p_default(a):
    return np.linalg.pinv(a)


def p_rcond_none(a):
    return np.linalg.pinv(a, None)


def p_rtol_none(a):
    return np.linalg.pinv(a, rtol=None)


def p_hermitian(a):
    return np.linalg.pinv(a, hermitian=True)


# Singular values 1, 0.5 and 4e-15: NumPy's default cutoff (1e-15) keeps the last,
# rtol=None's (40 * eps = 8.9e-15) cuts it.
_U, _ = np.linalg.qr(np.random.default_rng(6).normal(size=(40, 3)))
NEAR = _U @ np.diag([1.0, 0.5, 4e-15]) @ np.linalg.qr(np.ones((3, 3)) + np.eye(3))[0]


@pytest.mark.parametrize("p", [p_default, p_rcond_none, p_rtol_none])
def test_primal_cutoffs_are_numpys(p):
    want = p(NEAR)
    for got in (ad.jit(p)(NEAR), ad.vmap(p)(NEAR[None])[0]):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9 * np.abs(want).max())
    assert (np.abs(p_default(NEAR)).max() > 1e13) and (np.abs(p_rtol_none(NEAR)).max() < 10)


def test_primal_hermitian_is_numpys():
    np.testing.assert_allclose(ad.jit(p_hermitian)(GENERAL), p_hermitian(GENERAL),
                               rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ad.jit(p_hermitian)(GENERAL.astype(np.float32)),
                               p_hermitian(GENERAL.astype(np.float32)), rtol=1e-4, atol=1e-5)


def both(a):
    return np.sum(np.linalg.pinv(a, 0.1, rtol=0.1))


def rtol_by_position(a):
    return np.sum(np.linalg.pinv(a, 0.1, False, 0.1))


@pytest.mark.parametrize("f,match", [(both, "can't be both set"),
                                     (rtol_by_position, "too many positional")])
def test_numpys_refusals(f, match):
    with pytest.raises(Exception, match=match) as info:
        ad.grad(f)(TALL)
    assert "test_pinv_spellings.py" in str(info.value)


def hermitian_at_run_time(a, h):
    return np.sum(np.linalg.pinv(a, hermitian=h > 0))


def test_hermitian_must_be_known_while_lowering():
    with pytest.raises(Exception, match="pinv: this argument must be a constant") as info:
        ad.grad(hermitian_at_run_time)(TALL, 1.0)
    assert "test_pinv_spellings.py" in str(info.value)
