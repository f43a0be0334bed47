"""Transforms of a vmap: ``ad.jacrev(ad.vmap(f))``, ``ad.vjp(ad.vmap(f), ...)``, ...

The vmapped function is differentiated as a whole (a function of the whole
batch); the references are closed forms: examples do not interact, so the
Jacobian is block diagonal with each example's Jacobian on the diagonal.
"""
import numpy as np
import pytest

import s2s_ad as ad

RNG = np.random.default_rng(3)
W = RNG.normal(size=(3, 3))
X = RNG.normal(size=(4, 3))


def layer(x, W):
    return np.sin(W @ x) * x[1]


def layer_jacobian(x, W):
    """d layer / dx for one example."""
    c = np.cos(W @ x)
    J = (c * x[1])[:, None] * W
    J[:, 1] += np.sin(W @ x)
    return J


def energy(x, W):
    return np.sum(layer(x, W) ** 2)


def _block_diagonal(blocks):
    B, m, n = blocks.shape
    full = np.zeros((B, m, B, n))
    for b in range(B):
        full[b, :, b, :] = blocks[b]
    return full


WANT = _block_diagonal(np.stack([layer_jacobian(x, W) for x in X]))


@pytest.mark.parametrize("jac", [ad.jacrev, ad.jacfwd])
@pytest.mark.parametrize("compiled", [False, True], ids=["python", "jit"])
def test_jacobian_of_vmap(jac, compiled):
    t = jac(ad.vmap(layer, in_axes=(0, None)))
    t = ad.jit(t) if compiled else t
    np.testing.assert_allclose(t(X, W), WANT, rtol=1e-10, atol=1e-12)


def test_jacobian_of_jitted_vmap():
    t = ad.jacrev(ad.jit(ad.vmap(layer, in_axes=(0, None))))
    np.testing.assert_allclose(t(X, W), WANT, rtol=1e-10, atol=1e-12)


def test_vjp_and_jvp_of_vmap():
    f = ad.vmap(layer, in_axes=(0, None))
    out, pull = ad.vjp(f, X, W)
    np.testing.assert_allclose(out, np.stack([layer(x, W) for x in X]), rtol=1e-12)
    g = RNG.normal(size=out.shape)
    dx, dW = pull(g)
    np.testing.assert_allclose(dx, np.einsum("bi,bibj->bj", g, WANT), rtol=1e-10, atol=1e-12)
    assert dW.shape == W.shape
    t = RNG.normal(size=X.shape)
    _, tangent = ad.jvp(f, (X, W), (t, np.zeros_like(W)))
    np.testing.assert_allclose(tangent, np.einsum("bibj,bj->bi", WANT, t), rtol=1e-10,
                               atol=1e-12)


def test_grad_of_a_sum_over_vmap_matches_per_example_grads():
    def total(X, W):
        return np.sum(ad.vmap(energy, in_axes=(0, None))(X, W))
    per_example = ad.vmap(ad.grad(energy), in_axes=(0, None))(X, W)
    want = np.stack([2 * layer(x, W) @ layer_jacobian(x, W) for x in X])
    np.testing.assert_allclose(per_example, want, rtol=1e-10, atol=1e-12)
    jac = ad.jacrev(ad.vmap(energy, in_axes=(0, None)))(X, W)
    np.testing.assert_allclose(np.einsum("bbj->bj", jac), want, rtol=1e-10, atol=1e-12)


def test_vmap_of_vmap_differentiated():
    XX = RNG.normal(size=(2, 3, 3))
    t = ad.jacrev(ad.vmap(ad.vmap(layer, in_axes=(0, None)), in_axes=(0, None)))
    got = t(XX, W)
    assert got.shape == (2, 3, 3, 2, 3, 3)
    for a in range(2):
        for b in range(3):
            np.testing.assert_allclose(got[a, b, :, a, b, :], layer_jacobian(XX[a, b], W),
                                       rtol=1e-10, atol=1e-12)
    assert np.count_nonzero(got) <= 2 * 3 * 3 * 3


@pytest.mark.parametrize("kwargs", [{"out_axes": 1}, {"in_axes": (-1, None)}])
def test_axes_a_transform_of_vmap_cannot_take_are_refused(kwargs):
    spec = {"in_axes": (0, None), **kwargs}
    with pytest.raises(TypeError, match="a transform of ad.vmap needs"):
        ad.jacrev(ad.vmap(layer, **spec))(X, W)
