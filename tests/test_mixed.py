"""Forward mode through scalar while loops inside reverse mode (s2s_ad.transforms.mixed).

Every gradient is checked against central finite differences or a closed
form; the source checks say which loops ran in forward mode and which kept
the reverse sweep (a stack per iteration).
"""
import math

import numpy as np
import pytest

import s2s_ad as ad
from benchmarks.newton_sqrt import sum_sqrt as sum_newton
from s2s_ad.testing import check_grad
from s2s_ad.transforms import mixed


def two_carried(p, q):
    """Two carried names flow out; two differentiated inputs flow in."""
    u = p
    v = q
    k = 0
    while k < 30 and abs(u - v) > 1e-14:
        u, v = 0.5 * (u + v), math.sqrt(u * v)
        k += 1
    return u * 2.0 + math.sin(v)


def series(x, tol):
    """A series summed to a tolerance: a branch in the loop, a test value read after."""
    term = 1.0
    total = 1.0
    n = 1
    while abs(term) > tol:
        term = term * x / n
        if n % 2 == 0:
            total = total + term
        else:
            total = total + 0.5 * term
        n += 1
    return total * x


def inside_loop(xs, w):
    out = np.zeros(xs.shape[0])
    for i in range(xs.shape[0]):
        y = xs[i]
        z = w * y
        while z > 1.0:
            z = z * 0.5 + math.exp(-y) * w
        out[i] = z * y
    return out


def body_value_after(a):
    """A value set in the body only, read after the loop (carried out of it)."""
    x = a
    while x > 1.0:
        t = x * 0.25
        x = x - t
    return x + t


def array_carried(v):
    """An array carried through the loop: reverse sweep."""
    y = v * 1.0
    k = 0
    while k < 3:
        y = np.sin(y) + v
        k += 1
    return np.sum(y)


def written_in_loop(v):
    """An element write in the loop: reverse sweep."""
    y = v * 1.0
    k = 0
    while k < 3:
        y[0] = y[0] * y[1]
        k += 1
    return np.sum(y)


def many_inputs(a, b, c, d, e):
    """Five differentiated scalars flow in: more than MAX_INPUTS, reverse sweep."""
    x = a
    k = 0
    while k < 4:
        x = x * 0.5 + b * c - d * e
        k += 1
    return x


SCALAR_CASES = [
    (two_carried, (1.3, 2.9), (0, 1)),
    (series, (0.7, 1e-15), 0),
    (body_value_after, (7.5,), 0),
    (many_inputs, (1.5, 0.3, 0.7, -0.2, 0.9), (0, 1, 2, 3, 4)),
]


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("fn, args, argnums", SCALAR_CASES,
                         ids=[c[0].__name__ for c in SCALAR_CASES])
def test_scalar_loops_match_finite_differences(fn, args, argnums, target):
    check_grad(fn, args, argnums=argnums, target=target)


@pytest.mark.parametrize("fn, forward", [
    (sum_newton, True), (two_carried, True), (series, True), (inside_loop, True),
    (body_value_after, True), (array_carried, False), (written_in_loop, False),
    (many_inputs, False),
])
def test_which_loops_run_forward(fn, forward):
    args = {sum_newton: (np.ones(3),), two_carried: (1.0, 2.0), series: (0.5, 1e-12),
            inside_loop: (np.ones(3), 0.5), body_value_after: (3.0,),
            array_carried: (np.ones(3),), written_in_loop: (np.ones(3),),
            many_inputs: (1.0, 1.0, 1.0, 1.0, 1.0)}[fn]
    if fn is inside_loop:
        src = ad.source(ad.vjp(fn, *args)[1])
    else:
        src = ad.source(ad.grad(fn, argnums=tuple(range(len(args)))), *args)
    assert (f"jvp_{fn.__name__}_while" in src) is forward
    assert ("_trips" in src) is not forward        # the reverse sweep counts trips


def test_newton_gradient_is_one_tangent_and_one_stack():
    a = np.random.default_rng(0).uniform(0.01, 100.0, 200)
    g = ad.jit(ad.grad(sum_newton))
    np.testing.assert_allclose(g(a), 0.5 / np.sqrt(a), rtol=1e-9)
    np.testing.assert_allclose(ad.grad(sum_newton)(a), 0.5 / np.sqrt(a), rtol=1e-9)
    src = ad.source(g, a)
    # The branch choosing the start joins the region: one differentiated input.
    assert "jvp_sum_sqrt_while" in src and ", 1.0)" in src
    assert src.count("_stack = []") == 1 and "x_stack" not in src


def test_value_and_jacobians_through_forward_loops():
    xs = np.array([0.3, 1.7, 2.5, 4.0])
    w = 0.8
    f = ad.jit(inside_loop)
    value, pull = ad.vjp(f, xs, w)
    np.testing.assert_allclose(value, inside_loop(xs, w))
    rev = ad.jit(ad.jacrev(inside_loop, argnums=(0, 1)))(xs, w)
    fwd = ad.jacfwd(inside_loop, argnums=(0, 1))(xs, w)
    for r, q in zip(rev, fwd):
        np.testing.assert_allclose(r, q, rtol=1e-10, atol=1e-12)
    eps = 1e-6
    fd = [(inside_loop(xs + eps * e, w) - inside_loop(xs - eps * e, w)) / (2 * eps)
          for e in np.eye(4)]
    np.testing.assert_allclose(rev[0], np.array(fd).T, rtol=1e-6, atol=1e-8)
    v, g = ad.value_and_grad(ad.jit(two_carried))(1.3, 2.9)
    assert v == pytest.approx(two_carried(1.3, 2.9), rel=1e-15)


def test_per_sample_gradients_through_forward_loops():
    a = np.random.default_rng(1).uniform(0.5, 50.0, (6, 4))
    per = ad.jit(ad.vmap(ad.grad(sum_newton)))(a)
    np.testing.assert_allclose(per, 0.5 / np.sqrt(a), rtol=1e-9)


def sum_newton32(a):
    s = 0.0
    for i in range(a.shape[0]):
        ai = a[i]
        x = ai if ai > 1.0 else 1.0
        k = 0
        while abs(x * x - ai) > 1e-5 * ai and k < 40:
            x = 0.5 * (x + ai / x)
            k += 1
        s += x
    return s


def test_float32_inputs():
    a = np.linspace(0.5, 9.0, 5).astype(np.float32)
    g = ad.jit(ad.grad(sum_newton32))(a)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, 0.5 / np.sqrt(a.astype(np.float64)), rtol=1e-3)
    assert "jvp_sum_newton32_while" in ad.source(ad.grad(sum_newton32), a)


def test_through_has_the_partials_of_its_inputs():
    rule = mixed.THROUGH[2]
    assert rule.params == ("v", "x1", "x2", "p1", "p2")
    assert rule.partials == {"x1": "p1", "x2": "p2"} and rule.emit == "identity"


def sum_newton_inline(a):
    """The user's loop reads a[i] in its test and body: the reads move out."""
    s = 0.0
    for i in range(a.shape[0]):
        x = a[i] if a[i] > 1.0 else 1.0
        while abs(x * x - a[i]) > 1e-12 * a[i]:
            x = 0.5 * (x + a[i] / x)
        s += x
    return s


def walk_index(a):
    """The loop reads a[k] at an index it changes: reverse sweep."""
    x = 0.0
    k = 0
    while k < a.shape[0] and x < 5.0:
        x = x + a[k] * a[k]
        k += 1
    return x


def read_in_body(a, c):
    """An element read only in the body stays there (reverse sweep)."""
    x = c
    while x > 1.0:
        x = x * a[0]
    return x


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_element_reads_of_the_loop_test_move_out(target):
    a = np.random.default_rng(2).uniform(0.01, 100.0, 40)
    g = ad.grad(ad.jit(sum_newton_inline) if target == "cpu" else sum_newton_inline)
    np.testing.assert_allclose(g(a), 0.5 / np.sqrt(a), rtol=1e-9)
    src = ad.source(ad.grad(sum_newton_inline), a)
    assert "jvp_sum_newton_inline_while" in src and "_trips" not in src


@pytest.mark.parametrize("fn, args", [(walk_index, (np.array([0.5, 1.2, 0.8, 2.0, 1.1]),)),
                                      (read_in_body, (np.array([0.6, 2.0]), 7.0))])
def test_loops_reading_elements_they_move_to_or_only_in_the_body(fn, args):
    check_grad(fn, args, argnums=0)
    check_grad(fn, args, argnums=0, target="cpu")
    assert "_trips" in ad.source(ad.grad(fn), *args)
