"""Regressions: what a transformed function does with its inputs (issue 15).

* A function that writes into its argument differentiates as the function of
  the input values, and no transform (nor its checks and timings) ever changes
  the caller's primals, tangents or cotangents.
* dict and NamedTuple arguments (nested too) are pytrees in every transform.
* Chained assignments, list displays where arrays are expected, ``np.array``
  of an array, boolean-mask reads and stacked matrix products, under ``jit``.
* Bad input at call time is a clear error, never an internal traceback.

Derivatives are checked against central differences of the plain function,
run on copies.
"""
from typing import NamedTuple

import numpy as np
import pytest

import s2s_ad as ad

JITS = {"python": lambda f: f, "jit": ad.jit}


# -- programs -----------------------------------------------------------------
def write_scalar(x):
    y = x ** 2.0
    x[0] = y[1] * y[2]
    return np.sum(x * y)


def write_vector(x):
    x[1] = x[0] ** 2
    return x * 2.0


def write_in_loop(x):
    for i in range(1, x.shape[0]):
        x[i] = x[i - 1] * x[i]
    return np.sum(x)


def add_in_place(x):
    x += 1.0
    return np.sum(x ** 2)


def write_alias(x, w):
    z = x
    z[2] += w[0] * z[1]
    return np.sum(x * w)


def double_first(x):
    x[0] = x[0] * 2.0
    return np.sum(x)


def reads_only(x, w):
    return np.sum(x * w)


def dict_fn(v):
    return v["a"] * v["b"] + v["c"]


class Point(NamedTuple):
    x: float
    y: np.ndarray


def point_fn(p):
    return np.sum(p.x * p.y ** 2)


def nested_fn(t):
    pair, d = t
    return np.sum(pair[0] * d["w"]) + pair[1] * np.sum(d["v"].y)


def dict_out(v):
    return v, Point(v["b"], v["a"] * v["b"])


def chained(x):
    a = b = x * 2.0
    return np.sum(a * b)


def chained_targets(x):
    cov = np.zeros((3, 3))
    for i in range(3):
        cov[i:, i] = cov[i, i:] = x[i] * x[i:]
    p, q = r = (x[0] * 3.0, x[1])
    return np.sum(cov * cov) + p * q * r[0]


def mask_read(x):
    return np.sum(x[x > 0.5] ** 2)


def mask_rows(X):
    return np.sum(X[X[:, 0] > 0.0] ** 3)


def mask_2d(X):
    return np.sum(X[X > 0.5] ** 2)


def stacked_matmul(A, B):
    return np.sum(np.sin(A @ B))


def array_of_array(x):
    return np.sum(np.array(x) * x)


def list_in_call(a):
    return np.sum([1.0, a * a, 2.0])


def nested_list(a):
    return np.sum(np.array([[1.0, a], [a * a, 2.0]]) ** 2)


def list_operand(x, y):
    return np.sum(x * y ** 2)


def with_default(x, s=2.0):
    return s * np.sum(x ** 3)


def sequence_ops(a, b):
    t = (a,) + (b,) * 2
    return t[0] * t[2] + len(t)


def write_output(x):
    y = x * 2.0
    y[0] = 1.0
    return y


# -- helpers -----------------------------------------------------------------
def _copy(x):
    leaves, tree = ad.pytree.flatten(x)
    return ad.pytree.unflatten([np.copy(v) if isinstance(v, np.ndarray) else v
                                for v in leaves], tree)


def fd_grad(f, args, argnum=0, eps=1e-6):
    """Central differences of scalar ``f`` w.r.t. the array ``args[argnum]``,
    every evaluation on copies."""
    x = np.asarray(args[argnum], dtype=float)
    g = np.zeros_like(x)
    for k in range(x.size):
        e = np.zeros_like(x)
        e.flat[k] = eps
        plus = [_copy(a) for a in args]
        minus = [_copy(a) for a in args]
        plus[argnum], minus[argnum] = x + e, x - e
        g.flat[k] = (f(*plus) - f(*minus)) / (2 * eps)
    return g


def fd_jac(f, x, eps=1e-6):
    cols = []
    for k in range(x.size):
        e = np.zeros_like(x)
        e.flat[k] = eps
        cols.append((f(np.copy(x + e)) - f(np.copy(x - e))) / (2 * eps))
    return np.stack(cols, axis=-1)


X0 = np.array([-0.98, -1.44, -2.92, 0.5])


def _unchanged(*arrays):
    """A context that asserts ``arrays`` are the same after the block."""
    class Guard:
        def __enter__(self):
            self.before = [np.copy(a) for a in arrays]

        def __exit__(self, *exc):
            for a, b in zip(arrays, self.before):
                np.testing.assert_array_equal(a, b)
    return Guard()


# -- defect 5: writes into arguments --------------------------------------------
SCALAR_WRITERS = [write_scalar, write_in_loop, add_in_place, double_first]


@pytest.mark.parametrize("backend", JITS)
@pytest.mark.parametrize("f", SCALAR_WRITERS, ids=lambda f: f.__name__)
def test_writer_gradients_leave_inputs(f, backend):
    J = JITS[backend]
    right = fd_grad(f, (X0,))
    value = f(np.copy(X0))
    x, t = np.copy(X0), np.ones(4)
    with _unchanged(x, t):
        np.testing.assert_allclose(J(ad.grad(f))(x), right, rtol=1e-6, atol=1e-6)
        v, g = J(ad.value_and_grad(f))(x)
        assert np.isclose(v, value)
        np.testing.assert_allclose(g, right, rtol=1e-6, atol=1e-6)
        out, dout = ad.jvp(J(f), (x,), (t,))
        assert np.isclose(out, value) and np.isclose(dout, right @ t, rtol=1e-6)
        out, pull = ad.vjp(J(f), x)
        np.testing.assert_allclose(pull(1.0)[0], right, rtol=1e-6, atol=1e-6)
        hess = fd_jac(lambda z: ad.grad(f)(z), np.copy(X0))
        np.testing.assert_allclose(ad.hvp(J(f), (x,), (t,)), hess @ t, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(J(ad.hessian(f))(x), hess, rtol=1e-5, atol=1e-5)
        batch = np.stack([X0, X0 * 0.5])
        with _unchanged(batch):
            np.testing.assert_allclose(J(ad.vmap(ad.grad(f)))(batch),
                                       [right, fd_grad(f, (X0 * 0.5,))], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("backend", JITS)
def test_vector_writer_jacobians_leave_inputs(backend):
    J, f = JITS[backend], write_vector
    right = fd_jac(f, X0)
    x, t, ct = np.copy(X0), np.ones(4), np.ones(4)
    with _unchanged(x, t, ct):
        out, dout = ad.jvp(J(f), (x,), (t,))
        np.testing.assert_allclose(out, f(np.copy(X0)))
        np.testing.assert_allclose(dout, right @ t, rtol=1e-6)
        np.testing.assert_allclose(J(ad.jacfwd(f))(x), right, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(J(ad.jacrev(f))(x), right, rtol=1e-6, atol=1e-8)
        _, pull = ad.vjp(J(f), x)
        np.testing.assert_allclose(pull(ct)[0], ct @ right, rtol=1e-6)
        batch = np.stack([X0, X0 + 1.0])
        with _unchanged(batch):
            np.testing.assert_allclose(J(ad.vmap(f))(batch), [f(np.copy(b)) for b in batch])


@pytest.mark.parametrize("backend", JITS)
def test_write_through_alias(backend):
    J = JITS[backend]
    x, w = np.copy(X0), np.array([0.3, -0.2, 0.7, 1.1])
    with _unchanged(x, w):
        gx, gw = J(ad.grad(write_alias, argnums=(0, 1)))(x, w)
    np.testing.assert_allclose(gx, fd_grad(write_alias, (X0, w), 0), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gw, fd_grad(write_alias, (X0, w), 1), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("backend", JITS)
def test_cotangents_are_left_alone(backend):
    x, ct = np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 3.0])
    with _unchanged(x, ct):
        _, pull = ad.vjp(JITS[backend](write_output), x)
        np.testing.assert_allclose(pull(ct)[0], [0.0, 4.0, 6.0])


def test_reported_jit_case():
    a = np.array([1.0, 2.0])
    assert ad.jit(double_first)(a) == 4.0
    np.testing.assert_array_equal(a, [1.0, 2.0])
    a32 = X0.astype(np.float32)            # float32: the first call probes NumPy's dtypes
    with _unchanged(a32):
        out = ad.jit(add_in_place)(a32)
    assert out.dtype == np.float32 and np.isclose(out, add_in_place(np.copy(a32)))


def test_only_written_arguments_are_copied():
    x, w = np.copy(X0), np.ones(4)
    text = ad.source(ad.grad(write_alias), x, w)
    assert "x_copy = np.copy(x)" in text and "np.copy(w)" not in text
    assert "np.copy" not in ad.source(ad.grad(reads_only), x, w)


# -- defect 6: dicts and NamedTuples --------------------------------------------
DICT = {"a": 2.0, "b": 2.0, "c": 2.0}
DICT_T = {"a": 1.0, "b": 0.5, "c": -1.0}


@pytest.mark.parametrize("backend", JITS)
def test_dict_argument(backend):
    J = JITS[backend]
    assert ad.jvp(J(dict_fn), (DICT,), (DICT_T,)) == (6.0, 2.0)
    for g in (J(ad.grad(dict_fn))(DICT), ad.jacfwd(J(dict_fn))(DICT),
              ad.jacrev(J(dict_fn))(DICT), ad.vjp(J(dict_fn), DICT)[1](1.0)[0]):
        assert g == {"a": 2.0, "b": 2.0, "c": 1.0}
    assert ad.hvp(J(dict_fn), (DICT,), (DICT_T,)) == {"a": 0.5, "b": 1.0, "c": 0.0}


@pytest.mark.parametrize("backend", JITS)
def test_namedtuple_and_nested_arguments(backend):
    J = JITS[backend]
    y = np.array([0.5, -1.5, 2.0])
    p, dp = Point(1.5, y), Point(0.25, np.array([1.0, 0.0, -1.0]))
    g = J(ad.grad(point_fn))(p)
    assert isinstance(g, Point)
    assert np.isclose(g.x, np.sum(y ** 2)) and np.allclose(g.y, 2 * 1.5 * y)
    out, dout = ad.jvp(J(point_fn), (p,), (dp,))
    assert np.isclose(dout, g.x * dp.x + g.y @ dp.y)
    jac = ad.jacrev(J(point_fn))(p)
    assert isinstance(jac, Point) and np.allclose(jac.y, g.y)
    t = ((y, 0.7), {"w": y[::-1].copy(), "v": p})
    gt = J(ad.grad(nested_fn))(t)
    assert isinstance(gt[1], dict) and isinstance(gt[1]["v"], Point)
    np.testing.assert_allclose(gt[0][0], y[::-1])
    assert np.isclose(gt[0][1], np.sum(y))
    np.testing.assert_allclose(gt[1]["v"].y, [0.7] * 3)


def test_dict_and_namedtuple_outputs():
    out = ad.jit(dict_out)({"a": 1.5, "b": 2.0})
    assert out == ({"a": 1.5, "b": 2.0}, Point(2.0, 3.0))


@pytest.mark.parametrize("call", [
    lambda: ad.jvp(dict_fn, ({"a": 2.0, "b": 2, "c": 2.0},), ({"a": 1.0, "b": 0, "c": 1.0},)),
    lambda: ad.vjp(dict_fn, {"a": 2.0, "b": 2, "c": 2.0}),
    lambda: ad.grad(dict_fn)({"a": 2.0, "b": 2, "c": 2.0}),
    lambda: ad.jvp(reads_only, (X0, object()), (X0, object())),
], ids=["jvp", "vjp", "grad", "object"])
def test_mixed_arguments_raise(call):
    with pytest.raises(TypeError, match="argument"):
        call()


# -- defect 8: chained assignment, masks, stacked products ----------------------------
@pytest.mark.parametrize("backend", JITS)
def test_chained_assignment(backend):
    J = JITS[backend]
    x = np.array([0.3, 1.2, -0.7])
    np.testing.assert_allclose(J(ad.grad(chained))(x), 8 * x)
    np.testing.assert_allclose(J(ad.grad(chained_targets))(x),
                               fd_grad(chained_targets, (x,)), rtol=1e-6)


@pytest.mark.parametrize("backend", JITS)
def test_mask_reads(backend):
    J = JITS[backend]
    x = np.array([0.1, 0.7, 1.2, -0.3, 0.9])
    np.testing.assert_allclose(J(ad.grad(mask_read))(x), np.where(x > 0.5, 2 * x, 0.0))
    X = np.arange(12.0).reshape(3, 4) / 5 - 1
    np.testing.assert_allclose(J(ad.grad(mask_rows))(X),
                               np.where(X[:, :1] > 0, 3 * X ** 2, 0.0))


def test_full_mask_under_jit():
    """A mask over both axes: under jit, rt.index_take and its cotangent
    (docs/batched_indexing.md); before, an UnsupportedSyntaxError at the line."""
    X = np.arange(12.0).reshape(3, 4) / 5 - 1
    want = np.where(X > 0.5, 2 * X, 0.0)
    np.testing.assert_allclose(ad.grad(mask_2d)(X), want)
    np.testing.assert_allclose(ad.jit(ad.grad(mask_2d))(X), want)


def test_stacked_matmul_under_jit():
    rng = np.random.default_rng(3)
    A, B = rng.normal(size=(2, 1, 3, 4)), rng.normal(size=(2, 4, 2))
    ga, gb = ad.jit(ad.grad(stacked_matmul, argnums=(0, 1)))(A, B)
    np.testing.assert_allclose(ga, fd_grad(stacked_matmul, (A, B), 0), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gb, fd_grad(stacked_matmul, (A, B), 1), rtol=1e-6, atol=1e-8)


# -- defect 9: np.array of an array, list displays ------------------------------
@pytest.mark.parametrize("backend", JITS)
def test_arrays_from_lists(backend):
    J = JITS[backend]
    x = np.array([0.5, -1.0, 2.0])
    with _unchanged(x):
        np.testing.assert_allclose(J(ad.grad(array_of_array))(x), 2 * x)
    assert J(ad.grad(list_in_call))(3.0) == 6.0
    assert J(ad.grad(nested_list))(3.0) == pytest.approx(2 * 3.0 + 4 * 3.0 ** 3)
    y = np.array([0.5, 1.0, -2.0])
    g = J(ad.grad(list_operand))([1.0, 2.0, 3.0], y)
    assert isinstance(g, list) and np.allclose(g, y ** 2)
    assert J(ad.grad(sequence_ops, argnums=(0, 1)))(2.0, 3.0) == (3.0, 2.0)


# -- bad input at call time -------------------------------------------------------
@pytest.mark.parametrize("backend", JITS)
def test_bad_calls_are_clear_errors(backend):
    J = JITS[backend]
    x = np.array([1.0, 2.0, 3.0])
    g = J(ad.grad(reads_only))
    g(x, x)
    with pytest.raises(TypeError, match="takes 2 positional arguments but 1"):
        g(x)
    with pytest.raises(TypeError, match="takes 2 positional arguments but 3"):
        g(x, x, x)
    with pytest.raises(TypeError, match="dtype int64"):
        g(np.arange(3), x)
    np.testing.assert_array_equal(g(x, np.arange(3)), np.arange(3.0))
    assert np.isnan(g(x, np.array([np.nan, 1.0, 1.0]))[0])
    with pytest.raises((TypeError, ad.UnsupportedSyntaxError), match="sequence|Numba"):
        J(ad.grad(chained))([1.0, 2.0])             # list * 2.0, as in Python
    with pytest.raises(ad.UnsupportedSyntaxError, match="tuple or list cannot be written"):
        J(ad.jacrev(write_vector))([1.0, 2.0])
    np.testing.assert_allclose(ad.hvp(J(with_default), (x,), (np.ones(3),)), 12 * x)
    np.testing.assert_allclose(J(ad.grad(with_default))(x, s=3.0), 9 * x ** 2)
    np.testing.assert_allclose(g(x, w=x), x)                  # a keyword is not differentiated
    with pytest.raises(TypeError, match="positional"):
        J(ad.grad(reads_only, argnums=1))(x, w=x)
