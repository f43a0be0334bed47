"""The stacks a loop's adjoint reads: allocated before the loop, or lists.

A float that only ``for ... in range`` loops push, with bounds known before
the outermost loop, goes on ``rt.float_stack`` storage sized for that loop's
trips and read back by index; everything else stays a list.  Every gradient
is checked against central finite differences (``check_grad``) or the other
mode; the source checks say which storage each program got.
"""
import math

import numpy as np
import pytest

import s2s_ad as ad
from s2s_ad.testing import check_grad


def nested_accumulator(x, a):
    """Starts as an int, carried through two loops: a float on the stack."""
    s = 0
    for i in range(x.shape[0]):
        for j in range(3):
            s = s * a + math.sin(x[i] * (j + 1))
    return s


def early_exit(x, limit):
    """A break turns the loop into a while loop (it counts its trips): a list."""
    s = 0.5
    for i in range(x.shape[0]):
        s = s + math.exp(-x[i]) * s * 0.1 + x[i]
        if s > limit:
            break
    return s * s


def branches(x):
    """A value only one branch sets, pushed in that branch."""
    s = 0.25
    for i in range(x.shape[0]):
        if x[i] > 0:
            y = math.exp(0.3 * x[i])
            s = s * y
        else:
            s = s * 0.5 + math.sin(x[i])
    return s


def element_writes(x, a):
    """Overwritten elements saved in nested loops, plus a loop-invariant bound."""
    y = x.copy()
    n = y.shape[0]
    for k in range(2):
        for i in range(1, n):
            y[i] = a * math.sin(y[i - 1]) + y[i] * 0.5
    return np.sum(y * y)


def triangular(x):
    """An inner loop bounded by the outer index: its stack stays a list."""
    t = 0.0
    for i in range(x.shape[0]):
        for j in range(i):
            t = math.sin(t + x[j] * x[i])
    return t


def moving_bound(x):
    """The outer loop changes the inner loop's bound: a list."""
    m = 1
    s = 0.1
    for i in range(3):
        for j in range(m):
            s = math.sin(s + x[j])
        m = m + 1
    return s


def until_small(x):
    """A while loop: its trips are not known before it runs: a list."""
    s = 0.0
    t = 1.0
    k = 0
    while t > 1e-3 and k < 50:
        t = t * 0.5 * math.cos(x[k % x.shape[0]])
        s = s + t * x[0]
        k += 1
    return s


def _step(s, xi):
    return s + 0.3 * math.sin(s * xi)


def with_helper(x):
    """A helper called in the loop: its VJP in the adjoint sweep."""
    s = 0.5
    for i in range(x.shape[0]):
        s = _step(s, x[i])
    return s


def prefix_products(x):
    """A vector output: a Jacobian of more rows than one sweep carries."""
    out = np.zeros(x.shape[0])
    p = 1.0
    for i in range(x.shape[0]):
        p = p * math.cos(x[i])
        out[i] = p
    return out


RNG = np.random.default_rng(3)
X = RNG.uniform(-1.0, 1.0, 7)

CASES = {
    "nested_accumulator": (nested_accumulator, (X, 0.7), (0, 1), True),
    "early_exit": (early_exit, (np.abs(X) + 0.1, 2.0), 0, False),
    "branches": (branches, (X,), 0, True),
    "element_writes": (element_writes, (X, 0.6), (0, 1), True),
    "triangular": (triangular, (X,), 0, False),
    "moving_bound": (moving_bound, (X,), 0, False),
    "until_small": (until_small, (X,), 0, False),
    "with_helper": (with_helper, (X,), 0, True),
}


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("target", ["python", "cpu"])
def test_gradients_match_finite_differences(name, target):
    f, args, argnums, _ = CASES[name]
    check_grad(f, args, argnums, target=target)


@pytest.mark.parametrize("name", CASES)
def test_which_stacks_are_allocated(name):
    f, args, argnums, allocated = CASES[name]
    src = ad.source(ad.jit(ad.grad(f, argnums=argnums)), *args)
    assert ("rt.float_stack(" in src) == allocated, src
    if allocated and name != "with_helper":
        assert "= []" not in src, src
        assert ".pop()" not in src and ".append(" not in src, src


def test_storage_is_sized_for_the_loops_trips():
    src = ad.source(ad.jit(ad.grad(nested_accumulator, argnums=(0, 1))), X, 0.7)
    # Carried by both loops: pushed at the top of each body.
    assert "s_1_stack = rt.float_stack(len(range(_t2)) + len(range(_t2)) * len(range(3)))" \
        in src, src
    src = ad.source(ad.jit(ad.grad(element_writes, argnums=(0, 1))), X, 0.6)
    assert "y_saved = rt.float_stack(len(range(2)) * len(range(1, n)))" in src, src
    assert "y_saved[y_saved_top] = y[i]" in src, src


def matrix_rows(A, w):
    """Saved elements of a matrix; the inner bound is read from its shape
    inside the outer loop (an array no loop rebinds keeps its shape)."""
    B = A.copy()
    for i in range(B.shape[0]):
        for j in range(1, B.shape[1]):
            B[i, j] = math.sin(B[i, j]) * w[j] + 0.5 * B[i, j - 1]
    return np.sum(B * B)


def rebound_bound(x):
    """The outer loop rebinds the array whose shape bounds the inner loop."""
    s = 0.5
    for i in range(2):
        x = np.concatenate((x, x[:1]))
        for j in range(x.shape[0]):
            s = math.sin(s + x[j])
    return s


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_matrix_elements_on_a_float_stack(target):
    W = RNG.uniform(0.1, 1.0, 5)
    A = RNG.uniform(0.1, 1.0, (4, 5))
    check_grad(matrix_rows, (A, W), (0, 1), target=target)
    check_grad(rebound_bound, (X,), 0, target=target)


def test_shape_read_bounds_are_hoisted_into_the_size():
    W = RNG.uniform(0.1, 1.0, 5)
    src = ad.source(ad.jit(ad.grad(matrix_rows, argnums=(0, 1))), RNG.uniform(size=(4, 5)), W)
    assert "B_saved = rt.float_stack(len(range(_t3)) * len(range(1, np.shape(B)[1])))" \
        in src, src
    assert "B_saved[B_saved_top] = B[i, j]" in src and "B_saved.append" not in src, src
    # x is rebound by the outer loop: its shape is not known before it
    src = ad.source(ad.jit(ad.grad(rebound_bound)), X)
    assert "rt.float_stack(" not in src and ".append(" in src, src


def test_float32_values_keep_their_precision():
    """float32 values go on float64 storage and come back unchanged."""
    x32 = X.astype(np.float32)
    grad = ad.grad(nested_accumulator, argnums=(0, 1))
    got = ad.jit(grad)(x32, np.float32(0.7))
    want = grad(x32.astype(np.float64), 0.7)
    assert got[0].dtype == np.float32
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_jacobian_rows_share_one_primal_sweep():
    """40 rows take several adjoint sweeps, each reading the storage from its top."""
    x = RNG.uniform(-1.0, 1.0, 40)
    got = ad.jit(ad.jacrev(prefix_products))(x)
    want = ad.jacfwd(prefix_products)(x)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    src = ad.source(ad.jit(ad.jacrev(prefix_products)), x)
    assert "rt.float_stack(" in src and ".copy()" not in src, src


def test_zero_and_negative_trip_counts():
    g = ad.jit(ad.grad(nested_accumulator))
    assert g(np.zeros(0), 0.5).shape == (0,)
    for n in (1, 2):
        check_grad(nested_accumulator, (X[:n], 0.7), (0, 1), target="cpu")
