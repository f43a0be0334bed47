"""np.cov and np.corrcoef (s2s_ad/rules/library/statistics.py): NumPy's values and
shapes (a 0-d array for one variable, decided while lowering from the ranks), compiled,
and the run-time refusal of a 2-D array with a single variable.  Their derivatives in
every mode: tests/test_library.py (cases covariances, correlation_coefficients)."""
import numpy as np
import pytest
from conftest import fd_jacobian

import s2s_ad as ad
from tests.programs import library_cases as lib

X = np.random.default_rng(11).uniform(0.2, 1.8, (3, 4))


def spellings(x):
    """One compiled function: spellings as NumPy returns them."""
    return np.cov(x[0]), np.cov(x[0], x[1]), np.corrcoef(x, rowvar=False), np.corrcoef(x[1])


def one_variable(x):
    return np.cov(x)


def loss(x):
    return np.sum(np.sin(np.cov(x, aweights=lib.AW))) + np.sum(np.cos(np.corrcoef(x)))


def test_values_and_shapes_are_numpys():
    want = spellings(X)
    for got in (ad.jit(spellings)(X), ad.vmap(spellings)(X[None])):
        for g, w in zip(got, want):
            g = g if np.ndim(g) == np.ndim(w) else g[0]
            assert np.shape(g) == np.shape(w)
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)
    assert np.ndim(want[0]) == 0 and np.ndim(want[3]) == 0


def test_jit_grad():
    np.testing.assert_allclose(ad.jit(ad.grad(loss))(X), fd_jacobian(loss, X), rtol=1e-5,
                               atol=1e-7)


@pytest.mark.parametrize("transform", [lambda f: f, ad.jit])
def test_a_single_variable_of_a_2d_array_raises_at_run_time(transform):
    """NumPy returns a 0-d array there; the rank is the matrix's, so it is refused."""
    with pytest.raises(ValueError, match="reshape|total size"):
        transform(ad.grad(lambda x: np.sum(one_variable(x))))(X[:1])
    np.testing.assert_allclose(ad.jit(one_variable)(X[:2]), np.cov(X[:2]), rtol=1e-12)


def dtype_given(x):
    return np.cov(x, dtype=np.float32)


def test_dtype_is_refused_at_the_users_line():
    with pytest.raises(SyntaxError, match="dtype") as e:
        ad.grad(lambda x: np.sum(dtype_given(x)))(X)
    assert e.value.filename.endswith("test_cov.py")
