"""Forward mode never lets two arrays share a tangent that one of them writes.

A linear rule's tangent can be its operand's tangent itself
(``rt.broadcast_like`` of a tangent already of the right shape, a view):
when the function writes into either array afterwards, the write must not
reach the other's tangent, nor the caller's tangent array.  References are
central finite differences.
"""
import numpy as np
import pytest

import s2s_ad as ad


def alias_then_write(x):
    u = x * 2.0
    v = u + 0.0                 # v's tangent would be u's
    u[0] = x[1] ** 2
    return np.sum(v * v) + np.sum(u * x)


def view_then_write(xs, a):
    v = xs[0] * 1.0             # the tangent of a row of xs: a view of the caller's tangent
    if xs[0, 0] > 0.0:
        v[0] += xs[0, 0] * 0.5
    return np.sum(v * v) * a + np.sum(xs[1] ** 2)


def per_example(x, a):
    v4 = x * 1.0
    if x[0] > 0.0:
        v4[0] += x[0] * 0.5
    return np.tanh(np.mean(v4)) * a + np.sum(v4 * v4)


def _fd_jacobian(f, x, *rest, eps=1e-6):
    cols = []
    for i in range(x.size):
        e = np.zeros_like(x)
        e.flat[i] = eps
        cols.append((np.asarray(f(x + e, *rest)) - np.asarray(f(x - e, *rest))) / (2 * eps))
    return np.stack(cols, -1).reshape(np.shape(f(x, *rest)) + x.shape)


CASES = [(alias_then_write, (np.array([0.3, -0.8, 1.1]),)),
         (view_then_write, (np.array([[0.4, -0.2], [0.7, 0.1]]), 0.6))]


@pytest.mark.parametrize("f, args", CASES, ids=[f.__name__ for f, _ in CASES])
def test_jvp_and_jacfwd_with_a_written_alias(f, args):
    want = _fd_jacobian(f, *args)
    for jac in (ad.jacfwd(f), ad.jit(ad.jacfwd(f)), ad.jacrev(f)):
        np.testing.assert_allclose(jac(*args), want, rtol=1e-6, atol=1e-8)
    t = np.ones_like(args[0])
    kept = t.copy()
    _, tangent = ad.jvp(f, args, (t,) + tuple(0.0 * np.asarray(a) for a in args[1:]))
    np.testing.assert_allclose(tangent, np.sum(want * t), rtol=1e-6, atol=1e-8)
    np.testing.assert_array_equal(t, kept)          # the caller's tangent is untouched


def test_jacfwd_of_vmap_with_a_written_row():
    xs = np.array([[0.38, 0.2], [-0.36, 0.1], [0.84, 0.3]])
    a = np.array([0.74, -0.61, 0.35])
    J = ad.jacfwd(ad.vmap(per_example, in_axes=(0, 0)))(xs, a)
    for b in range(3):
        np.testing.assert_allclose(J[b, b], _fd_jacobian(per_example, xs[b], a[b]),
                                   rtol=1e-6, atol=1e-8)
        others = np.delete(J[b], b, axis=0)
        assert not others.any()


# -- reverse mode: an adjoint rebound on one path only ------------------------------

def branch_then_write(x):
    v1 = np.sin(x)
    v4 = x * 1.0
    v4[0] = x @ v1
    if x[0] > 0.5:
        s = np.sum(v1)
    else:
        s = x[1]
    return v4 * s + v1


def loop_then_write(x, n):
    v1 = np.sin(x)
    v4 = x * 1.0
    v4[0] = x @ v1
    s = 1.0
    for i in range(n):
        s = s + np.sum(v1) * x[i]
    return v4 * s + v1


def sum_view_then_element(x):
    t = np.minimum(x[1], -0.11)
    k = 0
    while k < 1:
        t = np.tanh(t + x[0])
        k += 1
    if x[1] > 0.0:
        s = 1.0
    else:
        s = np.maximum(x, x) @ (x * t)
    return s + np.sum(x)


@pytest.mark.parametrize("x", [np.array([0.3, -0.5, 0.2]), np.array([0.8, -0.5, 0.2])],
                         ids=["else", "if"])
@pytest.mark.parametrize("compiled", [False, True], ids=["python", "jit"])
def test_vjp_leaves_the_cotangent_alone_on_every_path(x, compiled):
    f = ad.jit(branch_then_write) if compiled else branch_then_write
    u = np.array([1.0, 2.0, 3.0])
    _, pull = ad.vjp(f, x)
    first, = pull(u)
    np.testing.assert_array_equal(u, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(pull(u)[0], first)
    np.testing.assert_allclose(first, u @ _fd_jacobian(branch_then_write, x), rtol=1e-6,
                               atol=1e-8)
    np.testing.assert_allclose(ad.jacrev(f)(x), _fd_jacobian(branch_then_write, x),
                               rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("n", [0, 2])
def test_vjp_leaves_the_cotangent_alone_when_a_loop_does_not_run(n):
    x = np.array([0.3, -0.5, 0.2])
    u = np.array([1.0, 2.0, 3.0])
    _, pull = ad.vjp(loop_then_write, x, n)
    got = pull(u)[0]
    np.testing.assert_array_equal(u, [1.0, 2.0, 3.0])
    np.testing.assert_allclose(got, u @ _fd_jacobian(loop_then_write, x, n), rtol=1e-6,
                               atol=1e-8)


@pytest.mark.parametrize("x", [np.array([0.3, 0.5, 0.2]), np.array([0.3, -0.5, 0.2])],
                         ids=["if", "else"])
def test_an_element_adjoint_after_a_sum_on_one_path(x):
    want = _fd_jacobian(sum_view_then_element, x)
    for t in (ad.grad(sum_view_then_element), ad.jacrev(sum_view_then_element),
              ad.jit(ad.grad(sum_view_then_element))):
        np.testing.assert_allclose(t(x), want, rtol=1e-6, atol=1e-8)
