"""np.fft (s2s_ad/rules/fft.py) in every mode, against finite differences:
real functions of real inputs with complex intermediates (np.abs, np.real,
np.imag, np.conj, .real/.imag/.conj() of the transforms' results).
The generic per-rule cases are in tests/test_rules.py (ARRAY_PROGRAMS)."""
import numpy as np
import pytest
from conftest import fd_jacobian

import s2s_ad as ad
from s2s_ad.testing import check_jvp, check_vjp
from tests.programs import fft_cases as prog

RNG = np.random.default_rng(1700)
X1 = RNG.normal(size=6)
X2 = RNG.normal(size=(3, 4))
CASES = {"power": X1, "filtered": X1, "round_trip": X1, "magnitude_with_phase": X1,
         "conj_product": X1, "shifted": X1, "ortho_2d": X2, "spectra_2d": X2,
         "hermitian": X1, "half_spectrum": X1}


@pytest.mark.parametrize("name", CASES)
def test_jacrev_and_jacfwd(name):
    f, x = getattr(prog, name), CASES[name]
    expected = fd_jacobian(f, x)
    np.testing.assert_allclose(ad.jacrev(f)(x), expected, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(ad.jacfwd(f)(x), expected, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", CASES)
def test_grad_vjp_jvp(name):
    f, x = getattr(prog, name), CASES[name]
    w = RNG.uniform(-1.0, 1.0, np.shape(f(x)))

    def weighted(x):
        return np.sum(f(x) * w)
    np.testing.assert_allclose(ad.grad(weighted)(x),
                               np.tensordot(w, fd_jacobian(f, x), axes=np.ndim(w)),
                               rtol=1e-6, atol=1e-8)
    check_vjp(f, (x,))
    check_jvp(f, (x,))


@pytest.mark.parametrize("method", ["loop", "vectorize"])
@pytest.mark.parametrize("name", CASES)
def test_vmap(name, method):
    f, x = getattr(prog, name), CASES[name]
    xs = np.stack([x, 0.5 * x + 0.1, -x])
    np.testing.assert_allclose(ad.vmap(f, method=method)(xs), np.stack([f(v) for v in xs]),
                               rtol=1e-12, atol=1e-12)
    jac = ad.vmap(ad.jacrev(f), method=method)(xs)
    np.testing.assert_allclose(jac, np.stack([fd_jacobian(f, v) for v in xs]),
                               rtol=1e-6, atol=1e-8)


def test_vmap_in_axes_none():
    """A batched signal with one shared filter, and one signal with a batch of filters."""
    hs = RNG.uniform(0.5, 1.5, (3, 6))
    xs = RNG.normal(size=(3, 6))

    def grad_x(x, h):
        return ad.grad(lambda x: np.sum(prog.learned_filter(x, h) ** 2))(x)
    for in_axes, args in (((0, None), (xs, hs[0])), ((None, 0), (xs[0], hs))):
        got = ad.vmap(grad_x, in_axes=in_axes)(*args)
        rows = [(xs[k], hs[0]) if in_axes == (0, None) else (xs[0], hs[k]) for k in range(3)]
        want = np.stack([fd_jacobian(lambda x: np.sum(prog.learned_filter(x, h) ** 2), x)
                         for x, h in rows])
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


def test_real_filter_differentiated_too():
    """The filter h is real and meets a complex spectrum: its cotangent is real."""
    x, h = X1, RNG.uniform(0.5, 1.5, 6)
    dx, dh = ad.grad(lambda x, h: np.sum(prog.learned_filter(x, h) ** 2), argnums=(0, 1))(x, h)
    assert dh.dtype == np.float64 and dx.dtype == np.float64
    np.testing.assert_allclose(dh, fd_jacobian(lambda h: np.sum(prog.learned_filter(x, h) ** 2),
                                               h), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(dx, fd_jacobian(lambda x: np.sum(prog.learned_filter(x, h) ** 2),
                                               x), rtol=1e-6, atol=1e-8)


@pytest.fixture(scope="module")
def compiled():
    return ad.jit(ad.grad(prog.loss)), ad.jit(ad.grad(prog.loss_2d))


@pytest.mark.slow
def test_jit_grad(compiled):
    """Every 1-D and 2-D case in one compiled loss each (Numba; the transforms in
    object mode), against finite differences, float64 and float32."""
    g1, g2 = compiled
    np.testing.assert_allclose(g1(X1), fd_jacobian(prog.loss, X1), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(g2(X2), fd_jacobian(prog.loss_2d, X2), rtol=1e-6, atol=1e-7)
    for g, f, x in ((g1, prog.loss, X1), (g2, prog.loss_2d, X2)):
        got = g(x.astype(np.float32))
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, fd_jacobian(f, x), rtol=2e-3, atol=2e-3)


def test_jit_vjp_and_jvp_of_the_transforms():
    f = ad.jit(lambda x: np.sum(prog.spectra_2d(x) * prog.ortho_2d(x)))
    np.testing.assert_allclose(f(X2), np.sum(prog.spectra_2d(X2) * prog.ortho_2d(X2)),
                               rtol=1e-12)
    _, tangent = ad.jvp(ad.jit(prog.round_trip), (X1,), (np.ones(6),))
    np.testing.assert_allclose(tangent, fd_jacobian(prog.round_trip, X1) @ np.ones(6),
                               rtol=1e-6, atol=1e-8)


def test_float32_keeps_its_precision():
    x = X1.astype(np.float32)
    g = ad.grad(lambda x: np.sum(prog.power(x)))(x)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, fd_jacobian(lambda x: np.sum(prog.power(x)), X1),
                               rtol=1e-4, atol=1e-4)


def test_bad_norm_names_the_argument():
    with pytest.raises(ValueError, match="norm"):
        ad.grad(lambda x: np.sum(np.abs(np.fft.fft(x, norm="unitary"))))(X1)


@pytest.mark.parametrize("name", ["power", "filtered", "round_trip", "magnitude_with_phase",
                                  "conj_product", "shifted", "ortho_2d", "spectra_2d",
                                  "hermitian", "half_spectrum"])
def test_second_derivatives(name):
    """Hessians of a weighted sum, in each order of the modes (np.abs of complex
    values included), against finite differences of the gradient."""
    f, x = getattr(prog, name), CASES[name]
    w = RNG.uniform(0.5, 1.5, np.shape(f(x)))

    def loss(x):
        return np.sum(f(x) * w)
    expected = fd_jacobian(ad.grad(loss), x)
    for hess in (ad.hessian(loss), ad.jacrev(ad.grad(loss)), ad.jacfwd(ad.jacfwd(loss)),
                 ad.jacrev(ad.jacfwd(loss))):
        np.testing.assert_allclose(hess(x), expected, rtol=1e-5, atol=1e-7)


def test_real_abs_second_derivative_is_zero():
    x = np.array([0.5, -1.5, 2.0])
    np.testing.assert_array_equal(ad.hessian(lambda x: np.sum(np.abs(x)) * 1.0)(x),
                                  np.zeros((3, 3)))
    np.testing.assert_allclose(ad.grad(ad.grad(lambda t: abs(t) * t))(-1.5), -2.0)
