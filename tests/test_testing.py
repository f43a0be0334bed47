"""Tests of s2s_ad.testing: the checkers pass on right derivatives, fail
loudly on wrong ones, and handle pytrees, argnums, dtypes and backends."""
import math

import numpy as np
import pytest

import s2s_ad as ad
from s2s_ad import rules, testing
from s2s_ad.testing import check_grad, check_vjp


def loss(w, x):
    return np.sum(np.tanh(x @ w) ** 2)


def tree_loss(params, x, n):
    (w, b), scale = params
    return scale * np.sum(np.sin(x * w + b)) * n


def layer(w, x):
    return np.tanh(x @ w), np.sum(w * w)


def scalar_fn(a, b):
    return math.sin(a) * b + a * a


def stopped(x):
    return np.sum(x * ad.stop_gradient(x))


def sine(x):
    return np.sum(np.sin(x))


def vector_out(x):
    return np.exp(x)


RNG = np.random.default_rng(1)
W, X = RNG.standard_normal(3), RNG.standard_normal((4, 3))


def test_check_grad_passes_and_returns_the_gradient():
    g = check_grad(loss, (W, X))
    np.testing.assert_allclose(g, ad.grad(loss)(W, X))


def test_check_grad_tuple_argnums():
    gw, gx = check_grad(loss, (W, X), argnums=(0, 1))
    assert gw.shape == W.shape and gx.shape == X.shape


def test_check_grad_negative_argnums():
    gx = check_grad(loss, (W, X), argnums=-1)
    assert gx.shape == X.shape


def test_check_grad_pytree_argument_and_integer_argument():
    params = ((W, 0.5), 2.0)
    g = check_grad(tree_loss, (params, X, 3))
    (gw, gb), gs = g
    assert gw.shape == W.shape and isinstance(gb, float) and isinstance(gs, float)


def test_check_grad_python_floats():
    check_grad(scalar_fn, (0.3, -1.2), argnums=(0, 1))


def test_check_grad_float32_uses_float64_differences():
    w, x = W.astype(np.float32), X.astype(np.float32)
    g = check_grad(loss, (w, x), argnums=(0, 1))
    assert g[0].dtype == np.float32 and g[1].dtype == np.float32


def test_check_grad_numba():
    check_grad(scalar_fn, (0.3, -1.2), argnums=(0, 1), target="cpu")


def test_check_grad_accepts_a_jitted_function():
    check_grad(ad.jit(scalar_fn), (0.3, -1.2))


def test_check_vjp_passes_with_pytree_output():
    cts = check_vjp(layer, (W, X))
    assert cts[0].shape == W.shape and cts[1].shape == X.shape


def test_check_vjp_integer_argument_gets_no_direction():
    check_vjp(tree_loss, (((W, 0.5), 2.0), X, 3))


def test_check_vjp_float32():
    check_vjp(vector_out, (X.astype(np.float32),))


def test_check_vjp_numba():
    check_vjp(vector_out, (X[0],), target="cpu")


def test_wrong_gradient_fails_with_both_numbers_direction_and_argument():
    # stop_gradient is invisible to finite differences: d/dx sum(x * x) is
    # 2x, s2s_ad says x.  A convenient wrong derivative.
    x = np.array([0.5, -1.0, 2.0])
    with pytest.raises(AssertionError) as info:
        check_grad(stopped, (x,))
    msg = str(info.value)
    assert "stopped" in msg
    assert "s2s_ad" in msg and "finite diff" in msg
    assert "direction v for argument 0" in msg
    assert "argument 0: array([ 0.5, -1. ,  2. ])" in msg
    numbers = [line.split("=")[1].split()[0] for line in msg.splitlines()
               if line.strip().startswith(("<gradient, v>", "finite diff"))]
    ad_value, fd = map(float, numbers)
    assert fd == pytest.approx(2 * ad_value, rel=1e-6)


def test_wrong_rule_is_caught_by_check_vjp(monkeypatch):
    sin = rules.RULES["np.sin"]
    monkeypatch.setitem(sin.partials, "x", "-np.cos(x)")
    with pytest.raises(AssertionError, match="cotangent u"):
        check_vjp(_fresh_sin, (X,))


def _fresh_sin(x):
    # Its own function, so no transformed version built before the
    # monkeypatch is reused.
    return np.sin(x) * 1.0


def test_wrong_shape_or_dtype_is_reported(monkeypatch):
    def wrong(f, kind, argnums, target):
        return lambda *args: np.zeros(2, dtype=np.float32)
    monkeypatch.setattr(testing, "_transformed", wrong)
    with pytest.raises(AssertionError, match=r"has shape \(2,\), but the argument has shape"):
        check_grad(sine, (np.ones(3),))
    with pytest.raises(AssertionError, match="dtype float32, but the argument is an array of "
                                             "dtype float64"):
        check_grad(sine, (np.ones(2),))


def test_tolerances_follow_the_dtype():
    rtol64, _ = testing.default_tolerances((np.ones(2),))
    rtol32, _ = testing.default_tolerances((np.ones(2), np.ones(2, np.float32)))
    assert rtol32 > rtol64
    # An explicit tolerance wins: with rtol=1 even the stop_gradient
    # mismatch (a factor of 2) passes.
    check_grad(stopped, (np.array([0.5, -1.0]),), rtol=1.0)


def test_seed_chooses_the_direction():
    x = np.array([0.5, -1.0, 2.0])
    messages = []
    for seed in (0, 0, 1):
        with pytest.raises(AssertionError) as info:
            check_grad(stopped, (x,), seed=seed)
        messages.append(str(info.value))
    assert messages[0] == messages[1] != messages[2]


def test_non_scalar_output_is_rejected():
    with pytest.raises(TypeError, match="scalar"):
        check_grad(vector_out, (X,))
