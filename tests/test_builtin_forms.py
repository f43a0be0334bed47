"""Builtins and call forms of issue 17's list that the audit found missing
(tests/programs/builtin_forms.py), in every mode against finite differences:
grad of a weighted sum, vjp, jvp, jacfwd, jacrev, vmap (both methods, in_axes 0
and 1), float32, and one compiled loss for jit."""
import numpy as np
import pytest
from conftest import fd_jacobian

import s2s_ad as ad
from s2s_ad.testing import check_jvp
from tests.programs import builtin_forms as prog

RNG = np.random.default_rng(2017)
X = RNG.uniform(0.2, 1.8, (3, 4))          # away from kinks, ties and half-integers
XS = RNG.uniform(0.2, 1.8, (2, 3, 4))

# round(x) without ndigits is int(np.round(x)): a batch of them is no one Python int,
# so the vectorized lowering refuses it (the loop and method=None run).
REFUSED = ("builtins_pow_round",)
CASES = ["builtins_sum", "builtins_pow_round", "builtins_abs_min_max", "cross_axes", "spectra",
         "methods", "average_along"]


@pytest.mark.parametrize("name", CASES)
def test_reverse_and_forward(name):
    f = getattr(prog, name)
    jac = fd_jacobian(f, X)
    np.testing.assert_allclose(ad.jacrev(f)(X), jac, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(ad.jacfwd(f)(X), jac, rtol=1e-6, atol=1e-8)
    w = RNG.uniform(-1.0, 1.0, np.shape(f(X)))
    np.testing.assert_allclose(ad.vjp(f, X)[1](w)[0], np.tensordot(w, jac, axes=np.ndim(w)),
                               rtol=1e-6, atol=1e-8)
    check_jvp(f, (X,))


@pytest.mark.parametrize("name", CASES)
def test_float32(name):
    f = getattr(prog, name)
    jac = ad.jacrev(f)(X.astype(np.float32))
    assert jac.dtype == np.float32
    np.testing.assert_allclose(jac, fd_jacobian(f, X), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("method", ["loop", "vectorize", None])
@pytest.mark.parametrize("name", CASES)
def test_vmap(name, method):
    f = getattr(prog, name)
    expected = np.stack([f(x) for x in XS])
    if method == "vectorize" and name in REFUSED:
        with pytest.raises(ValueError, match="cannot batch"):
            ad.vmap(f, method=method)(XS)
        return
    np.testing.assert_allclose(ad.vmap(f, method=method)(XS), expected, rtol=1e-12)
    np.testing.assert_allclose(ad.vmap(f, in_axes=1, method=method)(np.moveaxis(XS, 0, 1)),
                               expected, rtol=1e-12)
    np.testing.assert_allclose(ad.vmap(ad.jacrev(f), method=method)(XS),
                               np.stack([fd_jacobian(f, x) for x in XS]), rtol=1e-6, atol=1e-8)


@pytest.mark.slow
def test_jit_of_every_case():
    got = ad.jit(ad.grad(prog.loss))(X)
    np.testing.assert_allclose(got, fd_jacobian(prog.loss, X), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(ad.jit(prog.loss)(X), prog.loss(X), rtol=1e-12)


def test_out_on_a_rule_says_to_assign_the_result():
    with pytest.raises(SyntaxError, match=r"np.sum\(\.\.\., out=\.\.\.\).*assign the result") as e:
        ad.jacrev(prog.out_on_rule)(X)
    assert e.value.filename.endswith("builtin_forms.py")
