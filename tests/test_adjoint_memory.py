"""The adjoint sweep's memory peepholes, by their generated source and gradients.

Each peephole saves a full-size temporary in array code; each test checks
the form of the generated statement and the gradient against finite
differences, on NumPy and compiled:

* a negation moves out of a sum: ``-rt.unbroadcast(g, x)``, and ``bx -= c``
  rather than ``bx += -c``;
* an adjoint that took over the array of one that is read no more owns it:
  ``bx += c`` rather than ``bx = bx + c`` -- but not when two adjoints share
  that array;
* ``rt.sum_grad``/``rt.mean_grad`` may be read-only broadcast views: never
  updated in place, and never handed to the user;
* a max/min adjoint is added into an owned adjoint in place
  (``rt.add_minmax_grad``), ties and NaN included;
* the sum of a square reads the square's operand for its shape, so a loop
  keeps ``Lx`` on its stack, not ``Lx`` squared as well;
* a sum or mean whose operand only an elementwise function's adjoint reads
  again passes its cotangent on unbroadcast (``rt.sum_grad_kept``): the
  partial it is multiplied into has the full shape.
"""
import re

import numba
import numpy as np
import pytest

import s2s_ad as ad
from s2s_ad import runtime as rt
from s2s_ad.testing import check_grad

RNG = np.random.default_rng(7)


def logsumexp_rows(X):
    m = np.max(X, axis=1, keepdims=True)
    s = np.sum(np.exp(X - m), axis=1)
    return np.sum(np.log(s)) + np.sum(m)


def owned_then_negated(x, y):
    b = y - x
    a = x * y
    return np.sum(a * b)


def single_sharer(x):
    a = np.sin(x)
    z = x + 1.0
    return np.sum(z * a)


def two_sharers(x, y):
    a = np.sin(x) * np.cos(y)
    z = x + y
    return np.sum(z * a)


def sum_then_more(x):
    """bx starts as np.sum(x)'s view; y adds two more contributions to it."""
    y = x * np.cos(x)
    return np.sum(x) + np.sum(y)


def mean_rows_then_more(x):
    c = np.mean(x, axis=0)
    return np.sum(c * c) + np.sum(np.sin(x))


def total(x):
    return np.sum(x)


def squash(x):
    h = np.tanh(x)
    return np.sum(np.sin(h))


def self_product(x):
    c = np.cos(x)
    y = x * c
    return np.sum(np.sin(y))


def square_of(x):
    y = np.sin(x)
    z = y * y
    return np.sum(np.cos(z))


def max_ties(x):
    m = np.max(x, axis=1)
    return np.sum(m * m) + np.sum(x * x)


def min_all(x):
    return np.min(x) * np.sum(x)


def _source(f, *args, argnums=0):
    return ad.source(ad.grad(f, argnums), *args)


def _lines(source):
    return [line.strip() for line in source.splitlines()]


# ------------------------------------------------------------------ the forms

def test_negation_moves_out_of_the_sum():
    text = _source(logsumexp_rows, RNG.standard_normal((5, 4)))
    assert "rt.unbroadcast(-" not in text
    assert "bm = bm - rt.unbroadcast(bt2, m)" in _lines(text)


def test_owned_adjoint_subtracts_in_place():
    lines = _lines(_source(owned_then_negated, *RNG.standard_normal((2, 3)), argnums=(0, 1)))
    assert any(line.startswith("bx -= ") for line in lines), lines
    assert not any("+= -" in line for line in lines)


def test_single_sharer_takes_over_the_array():
    lines = _lines(_source(single_sharer, RNG.standard_normal(4)))
    assert "bx = bz" in lines or "bx = rt.unbroadcast(bz, x)" in lines, lines
    assert any(line.startswith("bx += ") for line in lines), lines


def test_two_sharers_rebind():
    lines = _lines(_source(two_sharers, *RNG.standard_normal((2, 4)), argnums=(0, 1)))
    assert not any(line.startswith(("bx +=", "by +=")) for line in lines), lines
    assert any(line.startswith("bx = bx + ") for line in lines), lines


def test_sum_grad_view_is_never_updated_in_place():
    lines = _lines(_source(sum_then_more, RNG.standard_normal(4)))
    bound = next(k for k, line in enumerate(lines) if line.startswith("bx = rt.sum_grad("))
    updates = [line for line in lines[bound + 1:] if line.startswith("bx ")]
    # The first update makes a new array; only then is bx updated in place.
    assert updates[0].startswith("bx = bx + ") and updates[1].startswith("bx += "), lines


def test_max_adjoint_adds_into_the_owned_adjoint():
    lines = _lines(_source(logsumexp_rows, RNG.standard_normal((5, 4))))
    assert "bX = rt.add_minmax_grad(bX, bm, X, m, 1, True)" in lines, lines


# ------------------------------------------------------------------ the values

def _tied(shape):
    """Values on a coarse grid: many ties in every row."""
    return np.round(RNG.uniform(-1, 1, shape) * 2) / 2


def _numba_grad(f, args, argnums):
    """The generated gradient source compiled with numba.njit (whatever ad.jit
    would choose to run): the gradients, one per argnum."""
    text = _source(f, *args, argnums=argnums)
    scope = {}
    exec(compile(text, "<generated>", "exec"), scope)  # noqa: S102 - our generated code
    entry = numba.njit(scope[f"grad_{f.__name__}"])
    grads = entry(*args)[1]
    return grads[0] if isinstance(argnums, int) else grads


@pytest.mark.parametrize("f, make, argnums", [
    (logsumexp_rows, lambda: (RNG.standard_normal((6, 5)),), 0),
    (logsumexp_rows, lambda: (_tied((6, 5)),), 0),
    (owned_then_negated, lambda: tuple(RNG.standard_normal((2, 3, 2))), (0, 1)),
    (single_sharer, lambda: (RNG.standard_normal(5),), 0),
    (two_sharers, lambda: tuple(RNG.standard_normal((2, 5))), (0, 1)),
    (sum_then_more, lambda: (RNG.standard_normal((3, 2)),), 0),
    (mean_rows_then_more, lambda: (RNG.standard_normal((4, 3)),), 0),
    (max_ties, lambda: (RNG.standard_normal((4, 6)),), 0),
    (squash, lambda: (RNG.standard_normal((3, 4)),), 0),
    (self_product, lambda: (RNG.standard_normal(5),), 0),
    (square_of, lambda: (RNG.standard_normal(5),), 0),
    (min_all, lambda: (RNG.standard_normal((3, 4)),), 0),
], ids=lambda v: getattr(v, "__name__", None))
def test_gradients_match_finite_differences(f, make, argnums):
    args = make()
    grads = check_grad(f, args, argnums)
    compiled = _numba_grad(f, args, argnums)
    for a, b in zip(*((grads, compiled) if isinstance(argnums, tuple) else ((grads,), (compiled,)))):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-14)


def test_tied_max_shares_the_cotangent():
    x = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, -1.0, 2.0, 2.0]])
    expected = 2.0 * x
    expected[0, 1:3] += 3.0           # 2 * max / 2 ties
    expected[1, [0, 2, 3]] += 4.0 / 3  # 2 * max / 3 ties
    np.testing.assert_allclose(ad.grad(max_ties)(x), expected)
    np.testing.assert_allclose(_numba_grad(max_ties, (x,), 0), expected)


def test_gradient_of_a_sum_is_a_writeable_array():
    x = RNG.standard_normal((3, 4))
    for g in (ad.grad(total)(x), _numba_grad(total, (x,), 0)):
        assert g.flags.writeable and g.shape == x.shape and g.strides == x.strides
    g *= 2.0
    np.testing.assert_array_equal(g, np.full(x.shape, 2.0))


# ------------------------------------------------------------------ the runtime

# Numba needs the axis as a literal.
_NB_ADD_MINMAX = {
    0: numba.njit(lambda acc, g, a, out: rt.add_minmax_grad(acc, g, a, out, 0, False)),
    1: numba.njit(lambda acc, g, a, out: rt.add_minmax_grad(acc, g, a, out, 1, False)),
    -1: numba.njit(lambda acc, g, a, out: rt.add_minmax_grad(acc, g, a, out, -1, False)),
}


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("tied", [False, True])
def test_add_minmax_grad_adds_in_place(axis, tied):
    a = _tied((5, 7)) if tied else RNG.standard_normal((5, 7))
    out = np.max(a, axis=axis)
    g = RNG.standard_normal(out.shape)
    acc = RNG.standard_normal(a.shape)
    expected = acc + rt.minmax_grad(g, a, out, axis, False)
    for run in (lambda *args: rt.add_minmax_grad(*args, axis), _NB_ADD_MINMAX[axis]):
        for into in (acc.copy(), np.asfortranarray(acc)):    # both layouts
            assert run(into, g, a, out) is into
            np.testing.assert_allclose(into, expected, rtol=1e-13)


def test_add_minmax_grad_many_ties_nan_and_scalars():
    a = np.zeros((3, 40))               # every element ties: the dense path
    a[1, 5] = np.nan                    # a NaN lane gets nothing
    out = np.max(a, axis=1)
    g = np.array([4.0, 5.0, 6.0])
    res = rt.add_minmax_grad(np.ones(a.shape), g, a, out, 1)
    np.testing.assert_allclose(res[0], 1.0 + 4.0 / 40)
    np.testing.assert_allclose(res[1], 1.0)
    np.testing.assert_allclose(res[2], 1.0 + 6.0 / 40)
    assert rt.add_minmax_grad(1.5, 2.0, 3.0, 3.0) == 3.5
    assert rt.add_minmax_grad(0.0, 2.0, np.array([1.0, 3.0]), 3.0).tolist() == [0.0, 2.0]


def test_sum_and_mean_grads_are_views_on_numpy():
    g = np.arange(3.0)
    a = np.ones((3, 4), np.float32)
    s = rt.sum_grad(g, a, 1)
    m = rt.mean_grad(g, a, 1)
    assert not s.flags.writeable and s.dtype == np.float32 and s.shape == a.shape
    np.testing.assert_array_equal(m, np.repeat(g[:, None] / 4, 4, axis=1))
    assert m.dtype == np.float32
    copy = rt.like(s, a)
    assert copy.flags.writeable and copy is not s


def squared_norms(x, means):
    """Per component, a sum of squares over rows (the GMM objective's shape)."""
    total = 0.0
    for j in range(means.shape[0]):
        d = x - means[j]
        total += np.sum(np.sqrt(1.0 + np.sum(d * d, axis=1)))
    return total


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_sum_of_a_square_keeps_only_its_operand(target):
    x, means = RNG.normal(size=(6, 3)), RNG.normal(size=(4, 3))
    check_grad(squared_norms, (x, means), argnums=(0, 1), target=target)
    src = ad.source(ad.grad(squared_norms, argnums=(0, 1)), x, means)
    # The square is neither kept for the adjoint nor made: the sum is one
    # loop over d (rt.sum_squares).
    assert "d_stack.append(d)" in src and "rt.sum_squares(d, axis=1)" in src
    assert "np.square" not in src
    # ... and its adjoint is multiplied into 2d unbroadcast: (rows, 1) * (rows, 3)
    assert "rt.sum_grad_kept(bt" in src and ", d, 1, False)" in src


def kept_reductions(X, w):
    """Sums and means of elementwise values, over rows, columns and all."""
    a = np.sum(np.exp(X * w), axis=1)
    b = np.mean(np.tanh(X), axis=0, keepdims=True)
    c = np.sum(np.square(X))
    d = np.mean(np.sin(X), axis=1, keepdims=True)
    return np.sum(a * a) + np.sum(b * w) + c + np.sum(d * X[:, :1])


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_reductions_of_elementwise_values_stay_unbroadcast(target, dtype):
    X, w = RNG.normal(size=(5, 4)).astype(dtype), RNG.normal(size=4).astype(dtype)
    g = check_grad(kept_reductions, (X, w), argnums=(0, 1), target=target)
    assert g[0].dtype == dtype and g[0].shape == X.shape
    src = ad.source(ad.grad(kept_reductions, argnums=(0, 1)), X, w)
    assert src.count("rt.sum_grad_kept(") == 3 and src.count("rt.mean_grad_kept(") == 2   # a * a too


@numba.njit
def _kept_compiled(g0, g1, g2, g3, a):
    """The kept adjoints under Numba, axes written as literals (as generated code does)."""
    return (rt.sum_grad_kept(g0, a, None, False), rt.mean_grad_kept(g1, a, 1, False),
            rt.sum_grad_kept(g2, a, (0, 2), True), rt.mean_grad_kept(g3, a, -1, False))


def test_kept_reduction_adjoints_match_the_broadcast_ones():
    a = RNG.normal(size=(3, 4, 2))
    cases = [(None, False), (1, False), ((0, 2), True), (-1, False)]
    gs = [RNG.normal(size=np.sum(a, axis=axis, keepdims=keep).shape) for axis, keep in cases]
    compiled = _kept_compiled(float(gs[0]), gs[1], gs[2], gs[3], a)
    for q, ((axis, keep), g) in enumerate(zip(cases, gs)):
        kept, full = ((rt.sum_grad_kept, rt.sum_grad) if q % 2 == 0 else
                      (rt.mean_grad_kept, rt.mean_grad))
        small = kept(g, a, axis, keep)
        assert small.ndim == a.ndim and all(s in (1, n) for s, n in zip(small.shape, a.shape))
        np.testing.assert_array_equal(np.broadcast_to(small, a.shape), full(g, a, axis, keep))
        np.testing.assert_allclose(compiled[q], small, rtol=1e-15)


def centred_norms(mu, x, A):
    """A differentiated vector subtracted from data, then a matrix product."""
    total = 0.0
    for j in range(mu.shape[0]):
        xc = x - mu[j]
        y = xc @ A.T
        total = total + np.sum(np.tanh(y))
    return total


CENTRED = (RNG.normal(size=(3, 4)), RNG.normal(size=(50, 4)), RNG.normal(size=(5, 4)))


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_centred_product_sums_the_cotangent_rows_first(target):
    """Only the rows' sum of xc's cotangent is read (mu[j]'s adjoint), so the
    product's adjoint sums the rows first: a vector times a matrix."""
    check_grad(centred_norms, CENTRED, 0, target=target)
    src = ad.source(ad.grad(centred_norms), *CENTRED)
    assert "bxc = rt.matmul(rt.sum(by, axis=0), np.transpose(" in src, src
    assert "rt.matmul_grad_a" not in src


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_centred_product_keeps_the_full_cotangent_for_a_differentiated_matrix(target):
    check_grad(centred_norms, CENTRED, (0, 1, 2), target=target)
    src = ad.source(ad.grad(centred_norms, argnums=(0, 1)), *CENTRED)
    assert "bxc = rt.matmul_grad_a(by, xc," in src, src


@numba.njit
def _times_kept_compiled(g, p, temporary):
    return rt.times_kept(g, p, temporary=temporary)


@pytest.mark.parametrize("gshape, pshape", [
    ((6, 1), (6, 4)), ((1, 4), (6, 4)), ((1, 1), (6, 4)), ((6, 4), (6, 4)),
    ((1,), (5,)), ((5,), (5,)), ((1, 4, 1), (3, 4, 2))])
@pytest.mark.parametrize("pdtype", [np.float64, np.float32])
@pytest.mark.parametrize("temporary", [False, True])
def test_times_kept_is_the_broadcast_product(gshape, pshape, pdtype, temporary):
    """Both backends: g * p exactly, in g * p's dtype; p may be scaled in
    place only when it is a temporary of that dtype, else it is left alone."""
    g = RNG.normal(size=gshape)
    for run in (rt.times_kept, _times_kept_compiled):
        p = RNG.normal(size=pshape).astype(pdtype)
        expected = g * p
        before = p.copy()
        got = run(g, p, temporary)
        np.testing.assert_array_equal(got, expected)
        assert got.dtype == expected.dtype
        if temporary and expected.dtype == p.dtype:
            assert np.array_equal(p, before) or np.array_equal(p, expected)
            assert run is not rt.times_kept or got is p
        else:
            np.testing.assert_array_equal(p, before)


def test_kept_adjoint_scales_its_partial_in_a_loop():
    """np.sum(np.square(Lx), axis=1)'s adjoint: the kept cotangent scales the
    partial in a loop (rt.times_kept), no broadcast product; np.square's
    constant factor 2.0 scales the small cotangent, not a full-size copy of
    Lx."""
    def f(x, w):
        Lx = x @ w
        return np.sum(np.log(np.sum(Lx * Lx, axis=1)))
    args = (RNG.normal(size=(20, 3)), RNG.normal(size=(3, 3)))
    for target in ("python", "cpu"):
        check_grad(f, args, (0, 1), target=target)
    src = ad.source(ad.grad(f, argnums=(0, 1)), *args)
    assert re.search(r"rt\.times_kept\(bt\w+ \* 2\.0, Lx\)", src), src
    assert "2.0 * Lx" not in src


def test_kept_adjoint_scales_a_new_partial_in_place():
    """A partial computed for the adjoint (np.sin's np.cos(x)) is scaled in
    place; a constant factor in the partial's own product (exp2's log 2)
    moves to the cotangent."""
    def f(x):
        return np.sum(np.log(np.sum(np.sin(x), axis=1) + 3.0)) + \
            np.sum(np.log(np.sum(np.exp2(x), axis=0)))
    args = (RNG.normal(size=(20, 3)),)
    for target in ("python", "cpu"):
        check_grad(f, args, 0, target=target)
    src = ad.source(ad.grad(f), *args)
    assert re.search(r"rt\.times_kept\(bt\w+, np\.cos\(x\), temporary=True\)", src), src
    assert re.search(r"rt\.times_kept\(bt\w+ \* 0\.693\d*, \w+\)", src), src


def named_square_in_a_loop(x, w):
    k = w.shape[0]
    main = np.zeros((x.shape[0], k))
    for j in range(k):
        Lx = x * w[j]
        sq = Lx * Lx
        main[:, j] = np.sum(sq, axis=1)
    return np.sum(np.log(main))


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_a_named_square_in_a_loop_is_a_kept_sum(target):
    """``sq`` outlives the loop in Python, so the loop carries it, but
    nothing reads it after the loop: the sum is still its only use."""
    args = (RNG.normal(size=(6, 3)), RNG.normal(size=(4, 3)))
    check_grad(named_square_in_a_loop, args, (0, 1), target=target)
    src = ad.source(ad.grad(named_square_in_a_loop, argnums=(0, 1)), *args)
    assert "bsq = rt.sum_grad_kept(" in src and "rt.times_kept(bsq * 2.0, Lx)" in src, src


def heat(u, k, T):
    for t in range(T):
        u[1:-1] = u[1:-1] + k * (u[:-2] - 2.0 * u[1:-1] + u[2:])
        u = np.tanh(u)
    return np.sum(u ** 2)


def test_a_stencil_step_keeps_its_output_and_one_restore():
    """Each step of the heat stencil keeps tanh's output (which the next step
    writes into) and what the slice write overwrote: about 2x the state, not
    4x.  A Python float parameter is a scalar to the shape analysis, so the
    write's value ``u[1:-1] + k * (...)`` is shaped like the view
    ``u[1:-1]`` and is not kept for its shape."""
    import tracemalloc
    u0, T = np.linspace(-1.0, 1.0, 20_000), 40
    grad = ad.grad(heat)
    text = ad.source(grad, u0, 0.1, T)
    assert re.search(r"bt\d+ = rt\.unbroadcast\(rt\.snapshot\(bu_1\[1:-1\]\), _t1\)", text)
    grad(u0, 0.1, T)
    tracemalloc.start()
    try:
        g = grad(u0, 0.1, T)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2.5 * T * u0.nbytes, peak / (T * u0.nbytes)
    assert np.all(np.isfinite(g)) and np.abs(g).max() > 0.0
    small = np.linspace(-1.0, 1.0, 12)
    for target in ("python", "cpu"):
        check_grad(heat, (small, 0.1, 3), argnums=(0, 1), target=target)
