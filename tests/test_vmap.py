"""ad.vmap (API.md): batching over an axis of the arguments, alone and composed.

Every batched result is checked against an independent reference: a Python
loop over the examples that calls the *un-batched* function and stacks the
results with ``np.stack``, or a closed form computed with plain NumPy.  The
programs live in this file (s2s_ad reads their source).  Numba builds cost
seconds each, so the jitted callables are built once at module scope and
shared between tests.

Known bugs would be ``xfail(strict=True)`` with the reason spelled out.
"""
import math
import pathlib

import numpy as np
import pytest
from conftest import load_program

import s2s_ad as ad
from s2s_ad.testing import check_grad, check_jvp

RTOL = 1e-12
RNG = np.random.default_rng(20240611)
B, N = 5, 3                                   # batch size, per-example vector length
X = RNG.standard_normal((B, N))
Y = RNG.standard_normal((B, N))
V = RNG.standard_normal((B, N))
BIG = 100                                     # >= the batch size that goes parallel by itself


def close(got, want, rtol=RTOL):
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * 1e-2)


def loop_ref(fn, args, in_axes):
    """The independent reference: call ``fn`` once per example, ``np.stack`` the results.

    ``in_axes`` has one int or None per argument (no pytree arguments here).
    """
    sizes = {np.shape(a)[ax] for a, ax in zip(args, in_axes) if ax is not None}
    assert len(sizes) == 1
    results = []
    for b in range(sizes.pop()):
        sample = [a if ax is None else np.take(a, b, axis=ax) for a, ax in zip(args, in_axes)]
        results.append(fn(*sample))
    if isinstance(results[0], tuple):
        return tuple(np.stack([r[k] for r in results]) for k in range(len(results[0])))
    return np.stack(results)


def assert_tree_close(got, want, rtol=RTOL):
    """Same pytree structure (tuple/list kinds too), leaves close."""
    if isinstance(want, (tuple, list)):
        assert type(got) is type(want), (type(got), type(want))
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert_tree_close(g, w, rtol)
        return
    assert isinstance(got, np.ndarray) or np.ndim(want) == 0, type(got)
    assert np.shape(got) == np.shape(want), (np.shape(got), np.shape(want))
    close(got, want, rtol)


def sech2(z):
    return 1.0 - np.tanh(z) ** 2


# -- programs ----------------------------------------------------------------------------------


def sin_dot(x, y):
    """sum(sin(x) y): d/dx = cos(x) y, d/dy = sin(x)."""
    return np.sum(np.sin(x) * y)


def sumsq(x):
    """sum(x^2): gradient 2 x."""
    return np.sum(x * x)


def square_plus_one(a):
    """a^2 + 1 for a scalar: derivative 2 a."""
    return a * a + 1.0


def tanh_mul(x, w):
    """tanh(x w) + 1: Jacobian w.r.t. x is diag(w sech^2(x w))."""
    return np.tanh(x * w) + 1.0


def outer_sq(x):
    """x x^T: d out[i, j] / d x[k] = delta_ik x_j + x_i delta_jk."""
    return np.outer(x, x)


def mat_vec(m, v):
    """m @ v for a matrix m and a vector v."""
    return np.dot(m, v)


def two_outputs(x, y):
    """(x y, (sin x, sum y)): a nested tuple output."""
    return x * y, (np.sin(x), np.sum(y))


def tree_loss(p, x):
    """p = (w, (b, c)): sum(tanh(x w) + b) c.

    d/dw = c sech^2(x w) x,  d/db = c,  d/dc = sum(tanh(x w) + b),  d/dx = c sech^2(x w) w.
    """
    w, (b, c) = p
    return np.sum(np.tanh(x * w) + b) * c


def list_loss(ps):
    """ps = [a, b, [s, (t,)]]: sum(a b) + s^2 t.  Gradient [b, a, [2 s t, (s^2,)]]."""
    a = ps[0]
    b = ps[1]
    s, (t,) = ps[2]
    return np.sum(a * b) + s * s * t


def with_aux(x):
    """sum(x^2), with aux (2 x, sum(x)): gradient 2 x."""
    return np.sum(x * x), (2.0 * x, np.sum(x))


def directional(x, v):
    """d/de sin_dot(x + e v, x + e v) at 0, by ad.jvp inside the user's function.

    = sum(cos(x) x v + sin(x) v).
    """
    _, t = ad.jvp(sin_dot, (x, x), (v, v))
    return t


def td_loss(theta, s_t, r_tp1, s_tp1):
    """API.md's TD(0) pseudo-loss: d/dtheta = -2 (r + theta.s_tp1 - theta.s_t) s_t."""
    v_t = np.dot(theta, s_t)
    target = r_tp1 + np.dot(theta, s_tp1)
    return (ad.stop_gradient(target) - v_t) ** 2


def flow(x, n):
    """Per-example control flow: a loop over n (an int argument), a branch on each
    element's sign, and a while loop whose trip count depends on x[0]."""
    s = 0.0
    for k in range(n):
        if x[k] > 0.0:
            s = s + x[k] * x[k]
        else:
            s = s - np.sin(x[k])
    t = x[0] * x[0] + 0.5
    while t < 6.0:
        t = t * 1.5
    return s + t


def flow_grad(x, n):
    """Closed form of d flow / dx."""
    g = np.zeros_like(x)
    for k in range(n):
        g[k] = 2.0 * x[k] if x[k] > 0.0 else -math.cos(x[k])
    t, trips = x[0] * x[0] + 0.5, 0
    while t < 6.0:
        t, trips = t * 1.5, trips + 1
    g[0] += 1.5 ** trips * 2.0 * x[0]
    return g


def power(a, n):
    """a^n by a loop of n (an int argument) trips: derivative n a^(n-1)."""
    s = 1.0
    for _ in range(n):
        s = s * a
    return s


def pick_sq(x, i):
    """x[i]^2 with an integer index argument: gradient 2 x[i] e_i."""
    return x[i] * x[i]


def prefix(x, n):
    """2 x[:n]: the output's shape depends on the example."""
    return x[:n] * 2.0


# -- shared compiled callables (each costs a Numba build) ------------------------------------

JIT_VMAP_GRAD = ad.jit(ad.vmap(ad.grad(sin_dot)))
JIT_VMAP_GRAD_BOTH = ad.jit(ad.vmap(ad.grad(sin_dot, argnums=(0, 1))))
VMAP_JIT_GRAD = ad.vmap(ad.jit(ad.grad(sin_dot)))
JIT_TD = ad.jit(ad.vmap(ad.grad(td_loss), in_axes=(None, 0, 0, 0)))
JIT_FLOW = ad.jit(ad.vmap(ad.grad(flow)))                        # parallel=None
JIT_FLOW_PARALLEL = ad.jit(ad.vmap(ad.grad(flow)), parallel=True)
JIT_FLOW_SERIAL = ad.jit(ad.vmap(ad.grad(flow)), parallel=False)
JIT_PICK = ad.jit(ad.vmap(ad.grad(pick_sq), in_axes=(None, 0)))
JIT_TWO_OUTPUTS = ad.jit(ad.vmap(two_outputs, in_axes=(0, None), out_axes=(1, (-1, None))))
JIT_SUMSQ = ad.jit(ad.vmap(sumsq))
JIT_GRAD_SUMSQ = ad.jit(ad.vmap(ad.grad(sumsq)))
JIT_VMAP_GRAD_POWER = ad.jit(ad.vmap(ad.grad(power)))
JIT_VMAP_VMAP_GRAD = ad.jit(ad.vmap(ad.vmap(ad.grad(sin_dot))))
JIT_DIRECTIONAL = ad.jit(ad.vmap(directional))
JIT_TREE_GRAD = ad.jit(ad.vmap(ad.grad(tree_loss), in_axes=((0, (None, 0)), None)))
JIT_JACFWD = ad.jit(ad.vmap(ad.jacfwd(outer_sq)))
JIT_PREFIX = ad.jit(ad.vmap(prefix))
VMAP_JIT_VALUE_AND_GRAD_AUX = ad.vmap(ad.jit(ad.value_and_grad(with_aux, has_aux=True)))


def flow_batch(size, seed):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2.0, 2.0, (size, 4))
    n = rng.integers(0, 5, size)
    return x, n


# -- in_axes ------------------------------------------------------------------------------------


def test_default_in_axes_maps_every_argument_over_axis_0():
    got = ad.vmap(sin_dot)(X, Y)
    assert isinstance(got, np.ndarray) and got.shape == (B,)
    close(got, loop_ref(sin_dot, (X, Y), (0, 0)))
    close(got, np.sum(np.sin(X) * Y, axis=1))


@pytest.mark.parametrize("in_axes, xs, ys", [
    (1, X.T, Y.T),
    (-1, X.T, Y.T),
    ((1, 0), X.T, Y),
    ((-1, -2), X.T, Y),
    ((0, -1), X, Y.T),
])
def test_int_negative_and_per_argument_in_axes(in_axes, xs, ys):
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes, in_axes)
    got = ad.vmap(sin_dot, in_axes=in_axes)(xs, ys)
    close(got, loop_ref(sin_dot, (xs, ys), axes))
    close(got, np.sum(np.sin(X) * Y, axis=1))


def test_in_axes_none_shares_an_argument():
    y = Y[0]
    got = ad.vmap(sin_dot, in_axes=(0, None))(X, y)
    close(got, loop_ref(sin_dot, (X, y), (0, None)))
    got = ad.vmap(sin_dot, in_axes=(None, 0))(y, X)
    close(got, loop_ref(sin_dot, (y, X), (None, 0)))
    close(got, np.sin(y) @ X.T)


def test_batch_axis_in_the_middle_of_a_matrix_argument():
    m = RNG.standard_normal((2, B, 3))           # example b is m[:, b, :]
    v = RNG.standard_normal(3)
    got = ad.vmap(mat_vec, in_axes=(1, None))(m, v)
    assert got.shape == (B, 2)
    close(got, loop_ref(mat_vec, (m, v), (1, None)))
    got = ad.vmap(mat_vec, in_axes=(-2, 0))(m, X)
    close(got, np.stack([m[:, b, :] @ X[b] for b in range(B)]))


def test_nested_in_axes_for_a_tuple_argument():
    w, b, c = X, Y[0], np.linspace(0.5, 1.5, B)      # w and c batched, b shared
    x = V[0]
    p = (w, (b, c))
    got = ad.vmap(tree_loss, in_axes=((0, (None, 0)), None))(p, x)
    want = np.stack([tree_loss((w[k], (b, c[k])), x) for k in range(B)])
    close(got, want)
    # an int entry applies to every leaf of its argument
    p0 = (w, (Y, c))
    close(ad.vmap(tree_loss, in_axes=(0, None))(p0, x),
          np.stack([tree_loss((w[k], (Y[k], c[k])), x) for k in range(B)]))


@pytest.mark.parametrize("jit", [False, True], ids=["python", "jit"])
def test_grad_of_a_tuple_argument_batched_by_nested_in_axes(jit):
    w, b, c = X, Y[0], np.linspace(0.5, 1.5, B)
    x = V[0]
    fn = JIT_TREE_GRAD if jit else ad.vmap(ad.grad(tree_loss), in_axes=((0, (None, 0)), None))
    got = fn((w, (b, c)), x)
    # each example's gradient, stacked: the shared b still gets one gradient per example
    want = (c[:, None] * sech2(x * w) * x, (np.tile(c[:, None], (1, N)),
                                            np.sum(np.tanh(x * w) + b, axis=1)))
    assert_tree_close(got, want)
    ref = [ad.grad(tree_loss)((w[k], (b, c[k])), x) for k in range(B)]
    assert_tree_close(got, (np.stack([r[0] for r in ref]),
                            (np.stack([r[1][0] for r in ref]), np.stack([r[1][1] for r in ref]))))


def test_list_argument_with_list_in_axes_keeps_list_structure():
    s = np.linspace(-1.0, 1.0, B)
    ps = [X, Y[0], [s, (2.0,)]]                   # a and s batched, b and t shared
    spec = ([0, None, [0, (None,)]],)
    got = ad.vmap(ad.grad(list_loss), in_axes=spec)(ps)
    want = [np.tile(Y[0], (B, 1)), X, [4.0 * s, (s * s,)]]
    assert_tree_close(got, want)
    got_tuple_spec = ad.vmap(ad.grad(list_loss), in_axes=((0, None, (0, (None,))),))(ps)
    assert_tree_close(got_tuple_spec, want)


# -- outputs and out_axes ------------------------------------------------------------------------


def test_scalar_and_0d_outputs_batch_to_1d():
    got = ad.vmap(sumsq)(X)                        # np.float64 per example
    assert isinstance(got, np.ndarray) and got.shape == (B,)
    close(got, np.sum(X * X, axis=1))
    a = X[:, 0]
    got = ad.vmap(square_plus_one)(a)              # scalar in, scalar out
    assert isinstance(got, np.ndarray) and got.shape == (B,)
    close(got, a * a + 1.0)
    got = ad.vmap(ad.grad(square_plus_one))(a)
    assert isinstance(got, np.ndarray) and got.shape == (B,)
    close(got, 2.0 * a)
    got = JIT_SUMSQ(X)
    assert isinstance(got, np.ndarray) and got.shape == (B,)
    close(got, np.sum(X * X, axis=1))


def test_tuple_outputs_are_batched_leaf_by_leaf():
    got = ad.vmap(two_outputs)(X, Y)
    want = (X * Y, (np.sin(X), np.sum(Y, axis=1)))
    assert_tree_close(got, want)


@pytest.mark.parametrize("jit", [False, True], ids=["python", "jit"])
def test_out_axes_tuple_negative_and_none(jit):
    y = Y[0]
    fn = JIT_TWO_OUTPUTS if jit else ad.vmap(two_outputs, in_axes=(0, None),
                                             out_axes=(1, (-1, None)))
    got = fn(X, y)
    want = ((X * y).T, (np.sin(X).T, np.sum(y)))
    assert_tree_close(got, want)
    assert np.ndim(got[1][1]) == 0                 # out_axes=None: not batched


def test_out_axes_on_a_matrix_output():
    ref = loop_ref(outer_sq, (X,), (0,))           # (B, N, N)
    close(ad.vmap(outer_sq, out_axes=0)(X), ref)
    close(ad.vmap(outer_sq, out_axes=1)(X), np.moveaxis(ref, 0, 1))
    close(ad.vmap(outer_sq, out_axes=-1)(X), np.moveaxis(ref, 0, -1))
    close(ad.vmap(outer_sq, out_axes=-2)(X), np.moveaxis(ref, 0, 1))
    close(ad.vmap(sumsq, out_axes=-1)(X), np.sum(X * X, axis=1))


def test_out_axes_none_for_an_output_that_differs_is_an_error():
    with pytest.raises(ValueError, match="out_axes"):
        ad.vmap(sumsq, out_axes=None)(X)


def test_nested_vmap():
    xs = RNG.standard_normal((2, 4, N))
    ys = RNG.standard_normal((2, 4, N))
    got = ad.vmap(ad.vmap(sin_dot))(xs, ys)
    assert got.shape == (2, 4)
    close(got, np.stack([loop_ref(sin_dot, (xs[i], ys[i]), (0, 0)) for i in range(2)]))
    # pairwise: the outer map over y's rows, the inner over x's rows
    got = ad.vmap(ad.vmap(sin_dot, in_axes=(0, None)), in_axes=(None, 0))(X, Y[:2])
    assert got.shape == (2, B)
    close(got, np.array([[sin_dot(x, y) for x in X] for y in Y[:2]]))
    # inner batch axis 1 under an outer batch axis 0
    got = ad.vmap(ad.vmap(sin_dot, in_axes=1), in_axes=0)(np.swapaxes(xs, 1, 2),
                                                          np.swapaxes(ys, 1, 2))
    close(got, np.sum(np.sin(xs) * ys, axis=2))


def test_jit_of_nested_vmap_of_grad():
    xs = RNG.standard_normal((2, 4, N))
    ys = RNG.standard_normal((2, 4, N))
    got = JIT_VMAP_VMAP_GRAD(xs, ys)
    close(got, np.cos(xs) * ys)
    close(got, ad.vmap(ad.vmap(ad.grad(sin_dot)))(xs, ys))


# -- composition with the other transforms -----------------------------------------------------


@pytest.mark.parametrize("fn", [ad.vmap(ad.grad(sin_dot)), JIT_VMAP_GRAD, VMAP_JIT_GRAD],
                         ids=["vmap(grad)", "jit(vmap(grad))", "vmap(jit(grad))"])
def test_vmap_of_grad(fn):
    got = fn(X, Y)
    assert got.shape == (B, N)
    close(got, np.cos(X) * Y)
    close(got, loop_ref(ad.grad(sin_dot), (X, Y), (0, 0)))


@pytest.mark.parametrize("jit", [False, True], ids=["python", "jit"])
def test_vmap_of_grad_with_argnums_tuple(jit):
    fn = JIT_VMAP_GRAD_BOTH if jit else ad.vmap(ad.grad(sin_dot, argnums=(0, 1)))
    got = fn(X, Y)
    assert isinstance(got, tuple) and len(got) == 2
    assert_tree_close(got, (np.cos(X) * Y, np.sin(X)))


@pytest.mark.parametrize("jit", [False, True], ids=["python", "jit"])
def test_vmap_of_value_and_grad_with_aux(jit):
    fn = VMAP_JIT_VALUE_AND_GRAD_AUX if jit else ad.vmap(ad.value_and_grad(with_aux, has_aux=True))
    got = fn(X)
    want = ((np.sum(X * X, axis=1), (2.0 * X, np.sum(X, axis=1))), 2.0 * X)
    assert_tree_close(got, want)
    g, aux = ad.vmap(ad.grad(with_aux, has_aux=True))(X)
    assert_tree_close((g, aux), (2.0 * X, (2.0 * X, np.sum(X, axis=1))))


def test_vmap_of_grad_of_jit_runs_the_compiled_loop():
    close(VMAP_JIT_GRAD(X, Y), np.cos(X) * Y)
    assert "vmap_loop" in ad.source(VMAP_JIT_GRAD)


@pytest.mark.parametrize("kind", ["jacrev", "jacfwd"])
def test_vmap_of_jacobians(kind):
    jac = getattr(ad, kind)
    got = ad.vmap(jac(tanh_mul))(X, Y)
    assert got.shape == (B, N, N)
    close(got, np.stack([np.diag(w * sech2(x * w)) for x, w in zip(X, Y)]))
    eye = np.eye(N)
    want = np.stack([np.einsum("ik,j->ijk", eye, x) + np.einsum("i,jk->ijk", x, eye)
                     for x in X])
    close(ad.vmap(jac(outer_sq))(X), want)
    close(ad.vmap(jac(tanh_mul, argnums=1))(X, Y),
          np.stack([np.diag(x * sech2(x * w)) for x, w in zip(X, Y)]))


def test_jit_of_vmap_of_jacfwd():
    eye = np.eye(N)
    want = np.stack([np.einsum("ik,j->ijk", eye, x) + np.einsum("i,jk->ijk", x, eye)
                     for x in X])
    close(JIT_JACFWD(X), want)


@pytest.mark.parametrize("jit", [False, True], ids=["python", "jit"])
def test_vmap_of_a_function_that_calls_jvp(jit):
    fn = JIT_DIRECTIONAL if jit else ad.vmap(directional)
    got = fn(X, V)
    assert got.shape == (B,)
    close(got, np.sum(np.cos(X) * X * V + np.sin(X) * V, axis=1))
    close(got, loop_ref(directional, (X, V), (0, 0)))


def test_jit_vmap_grad_td0_matches_api_md():
    theta = np.array([0.2, -0.2, 0.1])
    s_t = np.array([[2., 1., -2.]] * 2)
    r = np.array([2., 2.])
    s_tp1 = np.array([[1., 2., 0.]] * 2)
    got = JIT_TD(theta, s_t, r, s_tp1)
    assert got.shape == (2, 3)
    close(got, [[-7.2, -3.6, 7.2], [-7.2, -3.6, 7.2]])


def test_jit_vmap_grad_td0_random_batch():
    rng = np.random.default_rng(3)
    theta = rng.standard_normal(4)
    s_t, s_tp1 = rng.standard_normal((7, 4)), rng.standard_normal((7, 4))
    r = rng.standard_normal(7)
    got = JIT_TD(theta, s_t, r, s_tp1)
    want = -2.0 * (r + s_tp1 @ theta - s_t @ theta)[:, None] * s_t
    close(got, want)
    close(got, ad.vmap(ad.grad(td_loss), in_axes=(None, 0, 0, 0))(theta, s_t, r, s_tp1))
    close(got, loop_ref(ad.grad(td_loss), (theta, s_t, r, s_tp1), (None, 0, 0, 0)))


@pytest.mark.parametrize("jit", [False, True], ids=["python", "jit"])
def test_per_example_control_flow(jit):
    x, n = flow_batch(12, seed=5)
    fn = JIT_FLOW if jit else ad.vmap(ad.grad(flow))
    got = fn(x, n)
    close(got, np.stack([flow_grad(xb, nb) for xb, nb in zip(x, n)]))
    close(got, loop_ref(ad.grad(flow), (x, n), (0, 0)))
    close(ad.vmap(flow)(x, n), np.stack([flow(xb, nb) for xb, nb in zip(x, n)]))


@pytest.mark.parametrize("jit", [False, True], ids=["python", "jit"])
def test_integer_loop_count_argument(jit):
    a = np.array([0.5, 1.5, 2.0, -1.0, 0.7])
    n = np.array([1, 2, 3, 2, 0])
    fn = JIT_VMAP_GRAD_POWER if jit else ad.vmap(ad.grad(power))
    close(fn(a, n), n * a ** np.maximum(n - 1, 0) * (n > 0))


@pytest.mark.parametrize("jit", [False, True], ids=["python", "jit"])
def test_integer_batched_argument_used_as_index(jit):
    x = X[0]
    idx = np.array([0, 2, 1, 2, 0])
    fn = JIT_PICK if jit else ad.vmap(ad.grad(pick_sq), in_axes=(None, 0))
    got = fn(x, idx)
    want = np.zeros((len(idx), N))
    want[np.arange(len(idx)), idx] = 2.0 * x[idx]
    close(got, want)
    close(ad.vmap(pick_sq, in_axes=(None, 0))(x, idx), x[idx] ** 2)
    close(ad.vmap(pick_sq)(X, idx), X[np.arange(B), idx] ** 2)


# -- the compiled loop: same answers as the Python loop, serial or parallel -------------------


@pytest.mark.parametrize("python, compiled, args", [
    (ad.vmap(ad.grad(sin_dot)), JIT_VMAP_GRAD, lambda: (X, Y)),
    (ad.vmap(ad.grad(sin_dot, argnums=(0, 1))), JIT_VMAP_GRAD_BOTH, lambda: (X, Y)),
    (ad.vmap(ad.grad(flow)), JIT_FLOW, lambda: flow_batch(BIG, seed=1)),
    (ad.vmap(ad.grad(pick_sq), in_axes=(None, 0)), JIT_PICK,
     lambda: (X[1], np.arange(BIG) % N)),
    (ad.vmap(sumsq), JIT_SUMSQ, lambda: (RNG.standard_normal((BIG, N)),)),
], ids=["grad", "grad-argnums", "flow-big", "pick-big", "sumsq-big"])
def test_jitted_loop_equals_python_loop(python, compiled, args):
    a = args()
    assert_tree_close(compiled(*a), python(*a))


def test_parallel_option_gives_the_same_results():
    x, n = flow_batch(BIG, seed=9)
    want = np.stack([flow_grad(xb, nb) for xb, nb in zip(x, n)])
    auto, par, ser = JIT_FLOW(x, n), JIT_FLOW_PARALLEL(x, n), JIT_FLOW_SERIAL(x, n)
    close(auto, want)
    np.testing.assert_array_equal(par, ser)
    np.testing.assert_array_equal(auto, ser)
    # and on a batch too small to go parallel by itself
    xs, ns = flow_batch(3, seed=10)
    np.testing.assert_array_equal(JIT_FLOW_PARALLEL(xs, ns), JIT_FLOW_SERIAL(xs, ns))
    close(JIT_FLOW_SERIAL(xs, ns), np.stack([flow_grad(xb, nb) for xb, nb in zip(xs, ns)]))


def test_parallel_option_reaches_the_generated_loop():
    x, n = flow_batch(BIG, seed=11)
    JIT_FLOW_PARALLEL(x, n)
    JIT_FLOW_SERIAL(x, n)
    assert "prange(" in ad.source(JIT_FLOW_PARALLEL)
    assert "prange(" not in ad.source(JIT_FLOW_SERIAL)
    assert "range(" in ad.source(JIT_FLOW_SERIAL)


def test_compiled_loop_is_reused_across_batch_sizes_and_layouts():
    close(JIT_VMAP_GRAD(X[:2], Y[:2]), np.cos(X[:2]) * Y[:2])
    big = RNG.standard_normal((BIG, N))
    close(JIT_VMAP_GRAD(big, big), np.cos(big) * big)
    m = RNG.standard_normal((4, 2, N))           # per-example matrices: a new layout
    close(JIT_VMAP_GRAD(m, m), np.cos(m) * m)
    xs, ys = big[::3], big[::-3]                  # strided views
    close(JIT_VMAP_GRAD(xs, ys), np.cos(xs) * ys)


# -- ad.source -----------------------------------------------------------------------------------


def test_source_of_jitted_vmap_shows_loop_and_per_example_function():
    theta = np.array([0.2, -0.2, 0.1])
    JIT_TD(theta, np.ones((2, 3)), np.ones(2), np.ones((2, 3)))
    src = ad.source(JIT_TD)
    assert isinstance(src, str)
    assert "def vmap_loop(" in src                 # the generated per-sample loop ...
    assert "entry(a0, a1[b], a2[b], a3[b])" in src  # ... theta shared, the rest per example
    assert "def grad_td_loss(" in src              # ... and the gradient it calls
    compile(src.split("# the function called once per example:")[1], "<src>", "exec")


def test_source_of_vmap_before_the_first_call_and_in_python():
    src = ad.source(ad.jit(ad.vmap(sumsq)))
    assert isinstance(src, str) and "def sumsq(" in src
    src = ad.source(ad.vmap(ad.grad(sin_dot)))
    assert isinstance(src, str) and "def grad_sin_dot(" in src


# -- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [ad.vmap(sin_dot), JIT_VMAP_GRAD], ids=["python", "jit"])
def test_batch_size_mismatch_names_the_arguments(fn):
    names_both = r"argument 0.*4.*argument 1.*5|argument 1.*5.*argument 0.*4"
    with pytest.raises(ValueError, match=names_both):
        fn(np.ones((4, 3)), np.ones((5, 3)))


def test_batch_size_mismatch_inside_a_pytree_names_the_leaf():
    ps = [np.ones((4, 3)), np.ones((5, 3)), [np.ones(4), (np.ones(4),)]]
    with pytest.raises(ValueError, match=r"argument 0 \(leaf 1\)"):
        ad.vmap(list_loss)(ps)


def test_batch_size_mismatch_with_nondefault_axes():
    with pytest.raises(ValueError, match="argument 1"):
        ad.vmap(sin_dot, in_axes=(0, 1))(np.ones((4, 3)), np.ones((4, 3)))


@pytest.mark.parametrize("in_axes", [(0,), (0, 0, 0)])
def test_in_axes_of_the_wrong_length(in_axes):
    with pytest.raises(ValueError, match="in_axes"):
        ad.vmap(sin_dot, in_axes=in_axes)(X, Y)


def test_in_axes_tuple_for_a_non_tuple_argument():
    with pytest.raises(ValueError, match="argument 0"):
        ad.vmap(sin_dot, in_axes=((0, 0), 0))(X, Y)


def test_in_axes_tuple_not_matching_a_pytree_argument():
    ps = [X, Y, [X[:, 0], (X[:, 1],)]]
    with pytest.raises(ValueError, match="argument 0"):
        ad.vmap(list_loss, in_axes=((0, 0),))(ps)


@pytest.mark.parametrize("in_axes, args, who", [
    ((0, 2), (X, Y), "argument 1"),
    ((-3, 0), (X, Y), "argument 0"),
    ((None, 0), (X[0], 1.5), "argument 1"),
])
def test_axis_out_of_range_names_the_argument(in_axes, args, who):
    with pytest.raises(ValueError, match=f"out of range for {who}"):
        ad.vmap(sin_dot, in_axes=in_axes)(*args)


@pytest.mark.parametrize("in_axes", [None, (None, None)])
def test_all_in_axes_none(in_axes):
    with pytest.raises(ValueError, match="None"):
        ad.vmap(sin_dot, in_axes=in_axes)(X, Y)


@pytest.mark.parametrize("method", ["fast", "vectorise", 1])
def test_bad_method(method):
    with pytest.raises(ValueError, match="method"):
        ad.vmap(sin_dot, method=method)


def test_method_loop_is_accepted():
    close(ad.vmap(sin_dot, method="loop")(X, Y), np.sum(np.sin(X) * Y, axis=1))


@pytest.mark.parametrize("spec", ["0", 0.0, True, {0: 1}, (0, 1.5), ((0, "a"), None)])
def test_axes_of_the_wrong_type(spec):
    with pytest.raises(TypeError, match="in_axes"):
        ad.vmap(sin_dot, in_axes=spec)
    with pytest.raises(TypeError, match="out_axes"):
        ad.vmap(sin_dot, out_axes=spec)


def test_out_axes_structure_not_matching_the_output():
    with pytest.raises(ValueError):
        ad.vmap(two_outputs, out_axes=(0,))(X, Y)
    with pytest.raises(ValueError):
        ad.vmap(sumsq, out_axes=(0, 0))(X)
    with pytest.raises(ValueError, match="out of range"):
        ad.vmap(sumsq, out_axes=1)(X)


def test_not_a_function():
    with pytest.raises(TypeError):
        ad.vmap(3)


# -- dtypes ------------------------------------------------------------------------------------


def test_float32_inputs_keep_float32_outputs():
    x32, y32 = X.astype(np.float32), Y.astype(np.float32)
    for fn in (ad.vmap(ad.grad(sin_dot)), VMAP_JIT_GRAD, JIT_VMAP_GRAD):
        got = fn(x32, y32)
        assert got.dtype == np.float32, fn
        close(got, np.cos(x32) * y32, rtol=1e-5)
    got = JIT_GRAD_SUMSQ(x32)
    assert got.dtype == np.float32
    close(got, 2 * x32, rtol=1e-6)
    got = ad.vmap(sumsq)(x32)
    assert got.dtype == np.float32
    a32 = x32[:, 0]
    got = ad.vmap(ad.grad(power))(a32, np.full(B, 3))
    assert got.dtype == np.float32
    close(got, 3 * a32 ** 2, rtol=1e-5)


# -- once known bugs, kept as regressions --------------------------------------------------------------------------------


def test_jitted_vmap_scalar_output_keeps_float32():
    x32 = X.astype(np.float32)
    assert ad.vmap(sumsq)(x32).dtype == np.float32          # the Python loop
    assert JIT_SUMSQ(x32).dtype == np.float32


def test_jitted_vmap_of_grad_over_float32_scalars_keeps_float32():
    a32 = X[:, 0].astype(np.float32)
    n = np.full(B, 3)
    assert ad.jit(ad.grad(power))(a32[0], 3).dtype == np.float32  # un-batched: float32
    got = JIT_VMAP_GRAD_POWER(a32, n)
    close(got, 3 * a32 ** 2, rtol=1e-5)
    assert got.dtype == np.float32


def test_jitted_vmap_rejects_outputs_whose_shape_differs_between_examples():
    x = np.arange(12.0).reshape(4, 3)
    n = np.array([3, 1, 2, 3])
    with pytest.raises(ValueError):
        ad.vmap(prefix)(x, n)                      # the Python loop refuses
    with pytest.raises(ValueError):
        JIT_PREFIX(x, n)


def test_empty_batch_is_the_same_error_jitted_or_not():
    with pytest.raises(ValueError, match="empty"):
        ad.vmap(sumsq)(np.zeros((0, 3)))
    with pytest.raises(ValueError, match="empty"):
        JIT_SUMSQ(np.zeros((0, 3)))


def test_parallel_none_goes_parallel_for_a_large_batch_after_a_small_one():
    fn = ad.jit(ad.vmap(sumsq, method="loop"))
    fn(np.ones((2, 3)))
    close(fn(np.ones((BIG, 3))), np.full(BIG, 3.0))
    assert "prange(" in ad.source(fn)


# -- ad.vmap called inside a function that is differentiated ------------------------------------

vi = load_program(pathlib.Path(__file__).resolve().parent / "programs" / "vmap_inside.py")


@pytest.mark.parametrize("jit", [False, True], ids=["python", "jit"])
def test_grad_of_a_function_that_sums_a_vmap(jit):
    theta = RNG.standard_normal(3)
    xs = RNG.standard_normal((6, 3))
    g = ad.grad(vi.total)
    got = (ad.jit(g) if jit else g)(theta, xs)
    close(got, sum(ad.grad(vi.loss)(theta, x) for x in xs))
    close(vi.total(theta, xs), sum(vi.loss(theta, x) for x in xs))
    check_grad(vi.total, (theta, xs), (0, 1), target="cpu" if jit else "python")


@pytest.mark.parametrize("jit", [False, True], ids=["python", "jit"])
def test_vmap_inside_with_other_axes_tuples_and_pytrees(jit):
    w = RNG.standard_normal(4)
    xs = RNG.standard_normal((4, 5))
    target = "cpu" if jit else "python"
    check_grad(vi.columns_total, (w, xs), (0, 1), target=target)
    p = (RNG.standard_normal(3), 0.7)
    check_grad(vi.tree_total, (p, RNG.standard_normal((5, 3))), (0, 1), target=target)
    check_jvp(vi.columns_total, (w, xs), target=target)


@pytest.mark.parametrize("name, match", [
    ("bad_out_axes", "out_axes=0"),
    ("bad_negative_axis", "non-negative"),
    ("bad_variable_axes", "literal"),
])
def test_vmap_inside_errors_point_at_the_line(name, match):
    fn = getattr(vi, name)
    args = (RNG.standard_normal(3), RNG.standard_normal((4, 3)))
    if name == "bad_variable_axes":
        args += (0,)
    with pytest.raises(ad.UnsupportedSyntaxError, match=match) as info:
        ad.grad(fn)(*args)
    assert "vmap_inside.py" in str(info.value)


def test_a_dropped_batch_output_is_freed_at_once():
    """The outputs of a compiled per-sample loop go when the caller drops
    them, without the cyclic garbage collector (a self-calling closure in
    pytree.unflatten held them: every call took fresh pages from the OS)."""
    import gc
    import tracemalloc
    theta = RNG.standard_normal(3)
    batch = [RNG.standard_normal((2000, 3)), RNG.standard_normal(2000),
             RNG.standard_normal((2000, 3))]
    JIT_TD(theta, *batch)
    size = 2000 * 3 * 8
    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        for _ in range(5):
            JIT_TD(theta, *batch)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        gc.enable()
    assert held < size, f"{held} bytes still held after 5 calls ({size} per output)"


def doubled_prefix(x, k):
    out = np.zeros(k)
    for i in range(k):
        out[i] = 2.0 * x[i]
    return out


def test_an_output_of_another_shape_names_its_example():
    f = ad.jit(ad.vmap(doubled_prefix, method="loop"))
    x = RNG.standard_normal((3, 4))
    close(f(x, np.array([2, 2, 2])), 2.0 * x[:, :2])
    with pytest.raises(ValueError, match="different shape for example 2 than for example 0"):
        f(x, np.array([2, 2, 3]))
