"""Jacobians through helpers with loops, module constants and where/maximum/
minimum/clip: plain, compiled, batched and compiled-batched (issue 15).

A compiled ``jacrev`` runs one primal sweep and then one adjoint sweep per
row (or per few rows); a called helper's bwd function then runs once per
sweep, so it must leave the residuals its caller keeps (the lists it pops,
the arrays it writes overwritten values back into) as it found them.  Every
Jacobian is checked against the NumPy backend's per-example result, which
is itself checked against central finite differences.
"""
from pathlib import Path

import numpy as np
import pytest
from conftest import load_program

import s2s_ad as ad

P = load_program(Path(__file__).parent / "programs" / "jacobian_paths.py")
RNG = np.random.default_rng(15)


def fd_jacobian(f, args, i, eps=1e-6):
    """Central differences of every output leaf w.r.t. ``args[i]``."""
    args = [np.array(a, dtype=float) for a in args]
    out = f(*args)
    outs = out if isinstance(out, tuple) else (out,)
    cols = [np.zeros(np.shape(o) + args[i].shape) for o in outs]
    for k in np.ndindex(args[i].shape):
        up, down = [a.copy() for a in args], [a.copy() for a in args]
        up[i][k] += eps
        down[i][k] -= eps
        hi, lo = f(*up), f(*down)
        hi, lo = (hi, lo) if isinstance(hi, tuple) else ((hi,), (lo,))
        for c, a, b in zip(cols, hi, lo):
            c[(...,) + k] = (np.asarray(a) - np.asarray(b)) / (2 * eps)
    return cols


def leaves(x):
    if isinstance(x, (tuple, list)):
        return [leaf for item in x for leaf in leaves(item)]
    return [np.asarray(x)]


def assert_same(got, want, atol=1e-10):
    got, want = leaves(got), leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=atol)


def assert_batch(got, f, examples):
    """``got`` (a batched result) against ``f`` on each example, stacked."""
    per = [leaves(f(*ex)) for ex in examples]
    got = leaves(got)
    assert len(got) == len(per[0])
    for k, g in enumerate(got):
        np.testing.assert_allclose(g, np.stack([p[k] for p in per]), rtol=1e-10, atol=1e-10)


# -- the reported programs --------------------------------------------------------
X3 = np.array([0.3, -0.7, 1.1])
XS = RNG.normal(size=(4, 3))


def test_model_reference_matches_finite_differences():
    np.testing.assert_allclose(ad.jacrev(P.model)(X3), fd_jacobian(P.model, (X3,), 0)[0],
                               rtol=1e-6, atol=1e-7)


def test_compiled_jacrev_through_a_helper_loop():
    """Was ``IndexError: pop from empty list``: the second row's sweep found the
    helper's stack emptied by the first."""
    assert_same(ad.jit(ad.jacrev(P.model))(X3), ad.jacrev(P.model)(X3))
    assert_same(ad.jit(ad.jacfwd(P.model))(X3), ad.jacrev(P.model)(X3))


def test_compiled_batched_jacrev_through_a_helper_loop():
    assert_batch(ad.jit(ad.vmap(ad.jacrev(P.model)))(XS), ad.jacrev(P.model), XS[:, None])


def test_rows_share_sweeps_and_keep_the_helpers_stack():
    """The bwd function pops a copy of its list, so it may run per row, and the
    rows' adjoint sweeps carry two rows each."""
    text = ad.source(ad.jit(ad.jacrev(P.model)), X3)
    bwd = text[text.index("def bwd_horner"):]
    assert "p_1_stack = p_1_stack.copy()" in bwd.splitlines()[1], text
    assert "range(0, m, 2)" in text, text
    # One VJP (a single adjoint sweep) needs no copy.
    assert ".copy()" not in ad.source(ad.jit(ad.grad(P.model_total)), X3)


def test_compiled_batched_jacobian_of_where_maximum_minimum_clip():
    """Was wrong by up to 1.8 in the x-Jacobian (a scalarized parameter read both
    whole and by element got only its elements' cotangents)."""
    xs, ys = RNG.normal(size=(3, 5)), RNG.normal(size=(3, 5))
    jac = ad.jacrev(P.gate, argnums=(0, 1))
    for b in range(3):
        fd = [fd_jacobian(P.gate, (xs[b], ys[b]), i)[0] for i in (0, 1)]
        for got, want in zip(jac(xs[b], ys[b]), fd):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    assert_batch(ad.jit(ad.vmap(jac))(xs, ys), jac, list(zip(xs, ys)))
    assert_batch(ad.jit(ad.vmap(ad.jacfwd(P.gate, argnums=(0, 1))))(xs, ys), jac,
                 list(zip(xs, ys)))


# -- every path, at widths around the vector mode's ----------------------------------
#: (program, input length n, output length m): 1, 3, 16 and 17 inputs; 1, 3 and
#: 17 outputs (17 rows or columns take two sweeps, the last padded).
CASES = [("mixed", 1, 17), ("in_loop", 3, 3), ("gated", 17, 17), ("two_outputs", 16, 1)]


def _examples(n, m, count=3):
    rng = np.random.default_rng(n * 100 + m)
    return [(rng.normal(size=n), rng.normal(size=(m, n)) / np.sqrt(n)) for _ in range(count)]


@pytest.fixture(scope="module", params=CASES, ids=lambda c: f"{c[0]}-n{c[1]}-m{c[2]}")
def case(request):
    name, n, m = request.param
    f = getattr(P, name)
    examples = _examples(n, m)
    # The reference: NumPy backend per example, checked against differences.
    ref = ad.jacrev(f, argnums=(0, 1))
    x, w = examples[0]
    fd = [fd_jacobian(f, (x, w), i) for i in (0, 1)]
    got = ref(x, w)
    got = got if isinstance(got, tuple) and isinstance(got[0], tuple) else (got,)
    for o, per_out in enumerate(got):
        for i in (0, 1):
            np.testing.assert_allclose(per_out[i], fd[i][o], rtol=1e-6, atol=1e-7)
    return f, examples, ref


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["jacfwd", "jacrev"])
def test_compiled_jacobian(case, mode):
    f, examples, ref = case
    jac = ad.jit(getattr(ad, mode)(f, argnums=(0, 1)))
    for x, w in examples:
        assert_same(jac(x, w), ref(x, w))


@pytest.mark.parametrize("mode", ["jacfwd", "jacrev"])
@pytest.mark.parametrize("method", [None, "loop", "vectorize"])
def test_batched_jacobian(case, mode, method):
    f, examples, ref = case
    xs, ws = (np.stack(a) for a in zip(*examples))
    batched = ad.vmap(getattr(ad, mode)(f, argnums=(0, 1)), method=method)
    assert_batch(batched(xs, ws), ref, examples)
    shared = ad.vmap(getattr(ad, mode)(f, argnums=(0, 1)), in_axes=(0, None), method=method)
    assert_batch(shared(xs, ws[0]), ref, [(x, ws[0]) for x in xs])


@pytest.mark.parametrize("mode", ["jacfwd", "jacrev"])
def test_compiled_batched_jacobian(case, mode):
    f, examples, ref = case
    xs, ws = (np.stack(a) for a in zip(*examples))
    assert_batch(ad.jit(ad.vmap(getattr(ad, mode)(f, argnums=(0, 1))))(xs, ws), ref, examples)


@pytest.mark.parametrize("name, n, m", [("mixed", 3, 17),
                                         pytest.param("in_loop", 17, 1, marks=pytest.mark.slow)])
def test_hessians(name, n, m):
    f = getattr(P, name)
    examples = _examples(n, m)
    want, grad = ad.hessian(f), ad.jacrev(f)
    x, w = examples[0]
    step = 1e-5
    fd = np.stack([(grad(x + step * e, w) - grad(x - step * e, w)) / (2 * step)
                   for e in np.eye(n)], axis=-1)
    np.testing.assert_allclose(want(x, w), fd, rtol=1e-5, atol=1e-6)
    assert_same(ad.jit(ad.hessian(f))(x, w), want(x, w), atol=1e-9)
    xs, ws = (np.stack(a) for a in zip(*examples))
    assert_batch(ad.jit(ad.vmap(ad.hessian(f)))(xs, ws), want, examples)
    assert_batch(ad.vmap(ad.hessian(f), method="loop")(xs, ws), want, examples)
