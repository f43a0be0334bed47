"""A Python float argument is a float64: its unit tangents are float64 too.

Found by the in-place fuzz run (program 6399 of seed 46): under
``vmap(jacfwd(f, 1), in_axes=(0, None))`` a Python float ``a`` got float32
unit tangents (NumPy 2 lets a Python float adopt a float32's dtype), and
``python_float * float32_tangent`` is float32: the Jacobian came back
right to 4e-8 only."""
import numpy as np
import pytest

import s2s_ad as ad


def scalar_loop(x, a):
    s = 0.036
    k = 0
    while k < 2:
        s = np.tanh(0.23 * s + np.sqrt(a ** 2 + 1.0))
        k += 1
    return s * np.ones(4) + 0.1 * x


X = np.linspace(-1.0, 1.0, 12).reshape(3, 4)
A = -0.5216191641011816


def _fd(a, h=1e-4):
    f = lambda v: scalar_loop(X[0], v)       # noqa: E731
    return (-f(a + 2 * h) + 8 * f(a + h) - 8 * f(a - h) + f(a - 2 * h)) / (12 * h)


@pytest.mark.parametrize("method", ["loop", "vectorize"])
def test_vmap_jacfwd_of_an_unbatched_python_float(method):
    got = ad.vmap(ad.jacfwd(scalar_loop, 1), (0, None), method=method)(X, A)
    per = ad.jacfwd(scalar_loop, 1)(X[0], np.float64(A))
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, np.broadcast_to(per, got.shape), rtol=1e-14, atol=0)
    np.testing.assert_allclose(per, _fd(A), rtol=1e-9)


def test_jacfwd_and_hessian_of_a_python_float():
    for jac in (ad.jacfwd(scalar_loop, 1)(X[0], A),
                ad.jacrev(scalar_loop, 1)(X[0], A)):
        np.testing.assert_allclose(jac, ad.jacfwd(scalar_loop, 1)(X[0], np.float64(A)),
                                   rtol=1e-14, atol=0)
