"""Index arrays that differ per example under ``vmap(method="vectorize")``, and
boolean masks over several axes / N-d integer index arrays under ``ad.jit``.

Each program of ``programs/batched_indexing.py`` goes through the
differential oracle (s2s_ad/oracle.py): every witness must agree with
finite differences (per example for the batched transforms) and with the
others.  The batched programs must be vectorized (``vmap[vectorize]`` runs
its gather/scatter rules, no refusal) and agree with ``vmap[loop]``; the
mask programs run through the NumPy witnesses, the NumPy tier (the
cpu-target module, where the masks are runtime/index_arrays.py helpers, run
on NumPy) and, in one combined loss, the compiled witnesses.
"""
import pathlib

import numpy as np
import pytest
from conftest import load_program

import s2s_ad as ad
from s2s_ad import oracle

HERE = pathlib.Path(__file__).resolve().parent
bi = load_program(HERE / "programs" / "batched_indexing.py")


def _clean(report):
    assert not report.disagreements, "\n".join(map(str, report.disagreements))


def _id(entry, k):
    return f"{entry[0].__name__}-{k}"


@pytest.mark.parametrize("k", range(len(bi.BATCHED)), ids=[_id(e, k) for k, e in
                                                          enumerate(bi.BATCHED)])
@pytest.mark.parametrize("transform", ["vmap", "vmap_grad", "vmap_jacfwd"])
def test_batched_programs_vectorize(k, transform):
    fn, make, argnums = bi.BATCHED[k]
    args, axes = make(np.random.default_rng(k))
    report = oracle.check(fn, args, transform, argnums, axes, name=fn.__name__,
                          families=("python",))
    _clean(report)
    refused = [r for r in report.refusals if "vectorize" in r[1]]
    assert not refused, refused
    assert report.checks >= 2


def test_vectorized_gradient_under_jit():
    """jit(vmap[vectorize]) of per-example gradients: the same rules (the batched code runs
    on NumPy), against the loop and finite differences."""
    fn, make, argnums = bi.BATCHED[9]            # scatter_add
    args, axes = make(np.random.default_rng(9))
    report = oracle.check(fn, args, "vmap_grad", argnums, axes, name=fn.__name__,
                          only={"vmap[loop]", "jit(vmap[vectorize])"})
    _clean(report)
    assert not report.refusals and report.checks >= 2


def test_per_example_mask_is_refused_at_the_users_line():
    x = np.random.default_rng(0).normal(size=(3, 6))
    f = ad.vmap(bi.mask_read, (0, 0), method="vectorize")
    with pytest.raises(ValueError, match=r"batched_indexing\.py:\d+: a boolean mask that "
                                         r"differs between examples .* ragged.*np\.where"):
        f(x, x > 0)
    want = np.array([bi.mask_read(e, e > 0) for e in x])
    np.testing.assert_allclose(ad.vmap(bi.mask_read, (0, 0))(x, x > 0), want, rtol=1e-12)
    np.testing.assert_allclose(ad.vmap(ad.grad(bi.mask_read), (0, 0))(x, x > 0),
                               np.stack([ad.grad(bi.mask_read)(e, e > 0) for e in x]),
                               rtol=1e-12)
    # a mask shared by the examples is not ragged: vectorized
    shared = ad.vmap(bi.mask_read, (0, None), method="vectorize")
    np.testing.assert_allclose(shared(x, x[0] > 0), [bi.mask_read(e, x[0] > 0) for e in x],
                               rtol=1e-12)


@pytest.mark.parametrize("k", range(len(bi.MASKS)), ids=[_id(e, k) for k, e in
                                                        enumerate(bi.MASKS)])
def test_mask_programs_numpy_and_tier(k):
    fn, make, argnums = bi.MASKS[k]
    args = make(np.random.default_rng(k))
    report = oracle.check_all(fn, args, argnums, name=fn.__name__, families=("python", "tier"),
                              transforms=("grad", "jvp", "jacrev", "vjp"))
    _clean(report)
    assert not report.refusals


def test_tier_runs_the_index_array_helpers():
    src = ad.source(ad.jit(ad.grad(bi.mask_write)), *bi.MASKS[2][1](np.random.default_rng(0)))
    assert "rt.index_take(x, m)" in src and "rt.index_put(y, m," in src
    assert "rt.index_take_grad(" in src and "rt.index_written(" in src


ARGS = bi.compiled_masks_args(np.random.default_rng(5))


def test_masks_compiled():
    """Masks over several axes and an N-d index array, read, written and updated, compiled
    (one Numba build: the gradient runs every helper's Numba version, which forward mode
    reuses), against finite differences and the NumPy backend."""
    report = oracle.check(bi.compiled_masks, ARGS, "grad", (0, 1, 2), name="compiled_masks",
                          only={"python", "jit"})
    _clean(report)
    assert not report.refusals and not report.skipped and report.checks >= 2
