"""cumsum, cumprod, sort, quantiles, take_along_axis, scipy.special and the
remaining math functions, in every mode, against finite differences.

Python target for the wide checks; one compiled gradient (ad.jit) covers
the scans and sorts together, and the Numba kernels of digamma, polygamma
and erfinv are checked against SciPy directly (they are plain Python too).
"""
import math

import numpy as np
import pytest
import scipy.special as sc
from conftest import fd_jacobian
from s2s_ad.runtime import scans, special

import s2s_ad as ad
from s2s_ad.testing import check_jvp
from tests.programs import coverage_more as cm

RNG = np.random.default_rng(11)
X = RNG.uniform(0.2, 1.8, (3, 4))


ARRAY_CASES = ["scans", "orders", "quantiles", "specials"]


@pytest.mark.parametrize("name", ARRAY_CASES)
def test_reverse_and_forward(name):
    f = getattr(cm, name)
    expected = fd_jacobian(f, X)
    np.testing.assert_allclose(ad.jacrev(f)(X), expected, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(ad.jacfwd(f)(X), expected, rtol=1e-5, atol=1e-7)
    check_jvp(f, (X,))


@pytest.mark.parametrize("method", ["loop", "vectorize"])
@pytest.mark.parametrize("name", ARRAY_CASES)
def test_vmap(name, method):
    f = getattr(cm, name)
    xs = RNG.uniform(0.2, 1.8, (2, 3, 4))
    np.testing.assert_allclose(ad.vmap(f, method=method)(xs), np.stack([f(x) for x in xs]),
                               rtol=1e-12)
    np.testing.assert_allclose(ad.vmap(ad.jacrev(f), method=method)(xs),
                               np.stack([fd_jacobian(f, x) for x in xs]),
                               rtol=1e-5, atol=1e-7)


def test_math_functions():
    for x in (0.4, 1.3):
        np.testing.assert_allclose(ad.grad(cm.maths)(x), fd_jacobian(cm.maths, x),
                                   rtol=1e-6)


def test_values_match_numpy():
    np.testing.assert_allclose(cm.quantiles(X), np.quantile(X, [0.1, 0.5, 0.9], axis=0) +
                               np.percentile(X, 40.0, axis=1, keepdims=True)[:1] +
                               np.median(X, keepdims=True))


def test_cumprod_adjoint_is_exact_at_zeros():
    a = np.array([[0.5, 0.0, 2.0, 0.0], [1.5, -1.0, 0.0, 3.0]])
    g = RNG.normal(size=a.shape)
    for axis in (None, 0, 1):
        out = np.cumprod(a, axis=axis)
        gg = g.reshape(out.shape)
        jac = fd_jacobian(lambda x: np.sum(gg * np.cumprod(x, axis=axis)), a)
        np.testing.assert_allclose(scans.cumprod_grad(gg, a, out, axis), jac, atol=1e-8)


@pytest.mark.slow
def test_compiled():
    """One ad.jit gradient through cumsum, cumprod, sort, median, quantile,
    percentile, argsort and take_along_axis."""
    got = ad.jit(ad.grad(cm.scans_loss))(X)
    np.testing.assert_allclose(got, fd_jacobian(cm.scans_loss, X), rtol=1e-5, atol=1e-7)


def test_numba_kernels_match_scipy():
    xs = np.linspace(-5.7, 30.0, 1501)
    xs = xs[np.abs(xs - np.round(xs)) > 1e-3]
    got = np.array([special.digamma_scalar(x) for x in xs])
    ref = sc.digamma(xs)
    assert np.max(np.abs(got - ref) / np.maximum(np.abs(ref), 1.0)) < 1e-12
    for n in (1, 2, 5):
        got = np.array([special.polygamma_scalar(n, x) for x in xs])
        ref = sc.polygamma(n, xs)
        assert np.max(np.abs(got - ref) / np.abs(ref)) < 1e-12
    ys = np.concatenate([np.linspace(-0.999, 0.999, 999), 1 - np.logspace(-16, -2, 50)])
    got = np.array([special.erfinv_scalar(y) for y in ys])
    ref = sc.erfinv(ys)
    assert np.max(np.abs(got - ref) / np.maximum(np.abs(ref), 1e-300)) < 1e-14
    assert special.remainder_scalar(7.0, 2.0) == math.remainder(7.0, 2.0)
