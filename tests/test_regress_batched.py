"""Per-example derivatives of the compiled batched path (issue 15, defects 1 and 7).

Under ``ad.jit`` a per-example vector of length at most 16 is split into
scalars by ``scalarize``; the compiled per-sample loop then asks for the
gradient of such an argument element by element (``element_grads``).  An
argument used both whole (``@``, ``np.dot``, ``np.outer``, slices, unsplit
calls) and element by element lost the whole-array part of its gradient.

Every batched result is checked against the per-example gradients of the
python backend (``ad.grad`` called once per example), and those against
finite differences.  The programs live in tests/programs/batched_mixed.py.
"""
import pathlib

import numpy as np
import pytest
from conftest import load_program

import s2s_ad as ad

P = load_program(pathlib.Path(__file__).parent / "programs" / "batched_mixed.py")
RTOL = 1e-10
B = 4
LENGTHS = (1, 2, 3, 16, 17)


def close(got, want):
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=RTOL)


def per_example(grad, args, in_axes):
    """``grad`` (python backend) once per example, stacked: the reference."""
    size = next(np.shape(a)[0] for a, ax in zip(args, in_axes) if ax is not None)
    rows = [grad(*(a if ax is None else a[b] for a, ax in zip(args, in_axes)))
            for b in range(size)]
    if isinstance(rows[0], tuple):
        return tuple(np.stack([r[k] for r in rows]) for k in range(len(rows[0])))
    return np.stack(rows)


def assert_matches_finite_differences(f, args, argnums, grads, eps=1e-6):
    """``grads`` (one per argnum) against central differences along random directions."""
    rng = np.random.default_rng(7)
    for _ in range(2):
        dirs = [rng.standard_normal(np.shape(args[i])) for i in argnums]

        def at(step):
            moved = list(args)
            for i, v in zip(argnums, dirs):
                moved[i] = args[i] + step * v
            return f(*moved)
        fd = (at(eps) - at(-eps)) / (2 * eps)
        an = sum(float(np.sum(g * v)) for g, v in zip(grads, dirs))
        assert abs(fd - an) <= 1e-6 * (1 + abs(fd)), (fd, an)


def data(n, seed=0):
    rng = np.random.default_rng(seed + n)
    return rng.standard_normal((B, n)), rng.standard_normal((n, n))


# -- defect 1: energy(x, K), x batched, K shared ------------------------------------

ENERGY_GRAD = ad.grad(P.energy)
JIT_VMAP_ENERGY = ad.jit(ad.vmap(ENERGY_GRAD, in_axes=(0, None)))
VMAP_JIT_ENERGY = ad.vmap(ad.jit(ENERGY_GRAD), in_axes=(0, None))


def energy_grad_closed_form(X, K):
    return X @ (K + K.T).T + 2 * X + K.sum()


@pytest.mark.parametrize("n", [2, 5, 16, 17])
@pytest.mark.parametrize("batched", [JIT_VMAP_ENERGY, VMAP_JIT_ENERGY],
                         ids=["jit_vmap", "vmap_jit"])
def test_energy_per_example_gradient(batched, n):
    X, K = data(n)
    close(batched(X, K), energy_grad_closed_form(X, K))


@pytest.mark.parametrize("n", [1, 5, 17])
def test_energy_gradient_of_one_small_vector(n):
    X, K = data(n)
    close(ad.jit(ENERGY_GRAD)(X[0], K), energy_grad_closed_form(X[:1], K)[0])


def test_energy_value_and_grad_and_both_argnums():
    X, K = data(5)
    vg = ad.jit(ad.vmap(ad.value_and_grad(P.energy, argnums=(0, 1)), in_axes=(0, None)))
    value, (gx, gK) = vg(X, K)
    close(value, [P.energy(x, K) for x in X])
    close(gx, energy_grad_closed_form(X, K))
    close(gK, np.stack([np.outer(x, x) + np.sum(x) for x in X]))


def test_generated_source_is_the_code_the_loop_calls():
    X, K = data(5)
    JIT_VMAP_ENERGY(X, K)
    text = ad.source(JIT_VMAP_ENERGY)
    assert "element_grads=True" in text
    assert "rt.matmul" in text and "x_0 = x[0]" in text


# -- defect 7: a GMM data point, batched over points --------------------------------

GMM_GRAD = ad.grad(P.gmm_point, argnums=(0, 1, 2))
GMM_AXES = (None, None, None, 0)
GMM_BATCHED = {
    "jit_vmap": ad.jit(ad.vmap(GMM_GRAD, in_axes=GMM_AXES)),
    "vmap_jit": ad.vmap(ad.jit(GMM_GRAD), in_axes=GMM_AXES),
    "jit_vmap_vectorize": ad.jit(ad.vmap(GMM_GRAD, in_axes=GMM_AXES, method="vectorize")),
}


def gmm_data(d, k, seed=1):
    rng = np.random.default_rng(seed + 10 * d + k)
    return (rng.standard_normal(k), rng.standard_normal((k, d)),
            0.3 * rng.standard_normal((k, d * (d + 1) // 2)), rng.standard_normal((B, d)))


@pytest.mark.parametrize("d,k", [(2, 2), (3, 3), (4, 2)])
def test_gmm_reference_matches_finite_differences(d, k):
    alphas, means, icf, X = gmm_data(d, k)
    args = (alphas, means, icf, X[0])
    assert_matches_finite_differences(P.gmm_point, args, (0, 1, 2), GMM_GRAD(*args))


@pytest.mark.parametrize("d,k", [(2, 2), (3, 3), (4, 2)])
@pytest.mark.parametrize("how", sorted(GMM_BATCHED))
def test_gmm_per_point_gradients(how, d, k):
    args = gmm_data(d, k)
    want = per_example(GMM_GRAD, args, GMM_AXES)
    got = GMM_BATCHED[how](*args)
    for g, w in zip(got, want):
        close(g, w)


def test_gmm_unbatched_jit():
    alphas, means, icf, X = gmm_data(3, 2)
    for g, w in zip(ad.jit(GMM_GRAD)(alphas, means, icf, X[1]),
                    GMM_GRAD(alphas, means, icf, X[1])):
        close(g, w)


# -- whole-array and element uses, every batched lowering -----------------------------

def _variants(grad, in_axes):
    """Each batched lowering of ``grad``: loop or vectorized, jit outside or inside,
    parallel or serial loop."""
    out = {}
    for method in ("loop", "vectorize"):
        out[f"jit_vmap_{method}_parallel"] = ad.jit(
            ad.vmap(grad, in_axes=in_axes, method=method), parallel=True)
        out[f"jit_vmap_{method}_serial"] = ad.jit(
            ad.vmap(grad, in_axes=in_axes, method=method), parallel=False)
        out[f"vmap_jit_{method}"] = ad.vmap(ad.jit(grad), in_axes=in_axes, method=method)
    return out


MIXED = {f.__name__: f for f in P.MIXED}
GRADS = {name: ad.grad(f, argnums=(0, 1)) for name, f in MIXED.items()}
BATCHED = {name: _variants(g, (0, None)) for name, g in GRADS.items()}
BATCHED_K = {name: ad.jit(ad.vmap(g, in_axes=(0, 0))) for name, g in GRADS.items()}


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("name", sorted(MIXED))
def test_mixed_use_per_example_gradients(name, n):
    X, K = data(n)
    want = per_example(GRADS[name], (X, K), (0, None))
    assert_matches_finite_differences(MIXED[name], (X[0], K), (0, 1), (want[0][0], want[1][0]))
    for how, batched in BATCHED[name].items():
        got = batched(X, K)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=RTOL, atol=RTOL, err_msg=how)


@pytest.mark.parametrize("n", [1, 3])
@pytest.mark.parametrize("name", sorted(MIXED))
def test_mixed_use_both_arguments_batched(name, n):
    X, _ = data(n)
    KB = np.random.default_rng(n).standard_normal((B, n, n))
    want = per_example(GRADS[name], (X, KB), (0, 0))
    for g, w in zip(BATCHED_K[name](X, KB), want):
        close(g, w)
