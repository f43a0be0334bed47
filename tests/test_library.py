"""NumPy/SciPy functions written in s2s_ad/rules/library/, checked in every mode.

One table of cases (tests/programs/library_cases.py); each is checked
against central finite differences through ``ad.grad`` (of a weighted sum),
``ad.jvp`` and ``ad.jacrev`` on the Python target, batched with both vmap
methods per family, and a few under ``ad.jit``.
"""
import zlib

import numpy as np
import pytest
from conftest import fd_jacobian

import s2s_ad as ad
from s2s_ad.testing import check_jvp
from tests.programs import library_cases as lib

RNG = np.random.default_rng(7)
X = RNG.uniform(0.2, 1.8, (3, 4))          # away from kinks and ties

CASES = ["var_axis", "var_all", "std_keep", "var_method", "average_w", "average_plain",
         "ptp_axis", "nan_stats", "diff2", "diff_axis0", "trapezoids", "gradients", "logaddexps", "flips", "moves",
         "rot", "rolls", "stacks", "grids", "list_operands", "clips", "log_sigmoids", "atleasts", "takes", "broadcasts", "special", "lse",
         "xlogs", "elementwise", "convolutions", "correlations", "interpolations", "polynomials",
         "vector_products", "math_reductions", "covariances", "correlation_coefficients"]


@pytest.mark.parametrize("name", CASES)
def test_jacrev_matches_finite_differences(name):
    f = getattr(lib, name)
    np.testing.assert_allclose(ad.jacrev(f)(X), fd_jacobian(f, X), rtol=1e-5,
                               atol=1e-7)


@pytest.mark.parametrize("name", CASES)
def test_vjp_of_random_cotangent(name):
    f = getattr(lib, name)
    w = RNG.uniform(-1, 1, np.shape(f(X)))
    jac = fd_jacobian(f, X)
    expected = np.tensordot(w, jac, axes=np.ndim(w))
    got = ad.vjp(f, X)[1](w)[0]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", CASES)
def test_jvp(name):
    check_jvp(getattr(lib, name), (X,))


FAMILY = ["var_axis", "nan_stats", "trapezoids", "gradients", "flips", "stacks", "grids", "list_operands", "lse", "elementwise", "takes",
          "convolutions", "polynomials", "covariances", "correlation_coefficients"]


@pytest.mark.parametrize("method", ["loop", "vectorize"])
@pytest.mark.parametrize("name", FAMILY)
def test_vmap_matches_loop(name, method):
    f = getattr(lib, name)
    # each case its own draws, whatever runs before it (nan_stats needs no column
    # all NaN: its nanmax would be NaN, and so its finite differences)
    xs = np.random.default_rng(zlib.crc32(name.encode())).uniform(0.2, 1.8, (2, 3, 4))
    expected = np.stack([f(x) for x in xs])
    np.testing.assert_allclose(ad.vmap(f, method=method)(xs), expected, rtol=1e-12)
    jac = ad.vmap(ad.jacrev(f), method=method)(xs)
    np.testing.assert_allclose(jac, np.stack([fd_jacobian(f, x) for x in xs]),
                               rtol=1e-5, atol=1e-7)


# Compiled cases: var (via std), NaN reductions, stacking, logsumexp, ufuncs, grids.
JIT = ["std_keep", "nan_stats", "stacks", "lse", "elementwise", "grids"]


def _jit_loss(x):
    """All of JIT in one scalar loss: one Numba compile instead of one per case."""
    total = 0.0
    for k, name in enumerate(JIT):
        total = total + np.sum(np.sin(getattr(lib, name)(x) * (1.0 + 0.1 * k)))
    return total


@pytest.mark.slow
def test_jit():
    """Every JIT case under ad.jit, through one compiled gradient of their sum."""
    loss = lib.jit_cases
    got = ad.jit(ad.grad(loss))(X)
    np.testing.assert_allclose(got, fd_jacobian(loss, X), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(loss(X), _jit_loss(X), rtol=1e-12)


def test_out_argument_is_refused_at_the_users_line():
    with pytest.raises(SyntaxError, match=r"np.var\(\.\.\., out=\.\.\.\).*assign the result") as e:
        ad.grad(lib.out_kwarg)(X)
    assert e.value.filename.endswith("library_cases.py")


def test_unknown_keyword_names_the_numpy_function():
    with pytest.raises(SyntaxError, match=r"np.var\(\).*where") as e:
        ad.grad(lib.bad_kwarg)(X)
    assert e.value.filename.endswith("library_cases.py")
    assert "library/" not in str(e.value)


@pytest.mark.slow
def test_jit_of_the_numeric_cases():
    """np.convolve, np.correlate, np.polyval, np.vecdot/matvec/vecmat and math.fsum/
    prod/dist under ad.jit, through one compiled gradient."""
    loss = lib.numeric_cases
    np.testing.assert_allclose(ad.jit(ad.grad(loss))(X), fd_jacobian(loss, X), rtol=1e-5,
                               atol=1e-7)
    np.testing.assert_allclose(ad.jit(loss)(X), loss(X), rtol=1e-12)
