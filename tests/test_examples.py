"""The examples run, and their gradients match closed-form derivatives.

Each example's ``main()`` is run as a user would run the script; what it
returns is checked against gradients derived by hand and computed here with
plain NumPy, never against s2s_ad itself.
"""
import importlib.util
import pathlib

import numpy as np
import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def load(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


@pytest.fixture(scope="module")
def linear_bce():
    return load("linear_bce")


@pytest.fixture(scope="module")
def linear_bce_run(linear_bce):
    return linear_bce.main()


def bce_reference(x, y, w, b):
    """Loss, dloss/dw and dloss/db of mean BCE-with-logits, by hand.

    With p = sigmoid(z), d/dz of -y log p - (1 - y) log(1 - p) is p - y, so
    dloss/dz = (p - y) / n, dloss/db = that, and dloss/dw = outer(x, that).
    """
    z = x @ w + b
    p = sigmoid(z)
    loss = np.mean(-y * np.log(p) - (1.0 - y) * np.log(1.0 - p))
    dz = (p - y) / z.size
    return loss, np.outer(x, dz), dz, z


def assert_pair_close(got, want_w, want_b):
    got_w, got_b = got
    assert got_w.shape == want_w.shape and got_b.shape == want_b.shape
    np.testing.assert_allclose(got_w, want_w, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got_b, want_b, rtol=1e-12, atol=1e-14)


def test_linear_bce_inputs_are_the_tutorials(linear_bce_run):
    x, y, w, b = linear_bce_run["inputs"]
    assert np.array_equal(x, np.ones(5)) and np.array_equal(y, np.zeros(3))
    assert w.shape == (5, 3) and b.shape == (3,)


@pytest.mark.parametrize("key", ["grad", "aux_grad", "stop_gradient_grad", "value_and_grad",
                                 "jit_grad"])
def test_linear_bce_gradients(linear_bce_run, key):
    _, want_w, want_b, _ = bce_reference(*linear_bce_run["inputs"])
    assert_pair_close(linear_bce_run[key], want_w, want_b)


def test_linear_bce_value_and_aux(linear_bce_run):
    loss, _, _, z = bce_reference(*linear_bce_run["inputs"])
    assert linear_bce_run["value"] == pytest.approx(loss, rel=1e-12)
    np.testing.assert_allclose(linear_bce_run["z"], z, rtol=1e-12)


def test_linear_bce_both_outputs_pulled_back(linear_bce_run):
    # Pulling (1, ones) back through (loss, z) differentiates loss + sum(z):
    # d(sum z)/db = 1 and d(sum z)/dw = outer(x, 1).
    x, _, _, _ = linear_bce_run["inputs"]
    _, want_w, want_b, _ = bce_reference(*linear_bce_run["inputs"])
    assert_pair_close(linear_bce_run["both_outputs_grad"],
                      want_w + np.outer(x, np.ones(3)), want_b + 1.0)


def test_linear_bce_loss_is_stable_for_large_logits(linear_bce):
    # The naive log(sigmoid(z)) form gives inf/nan here; the example's does not.
    z = np.array([-800.0, 0.0, 800.0])
    y = np.array([1.0, 0.5, 0.0])
    want = np.mean([800.0, np.log(2.0), 800.0])
    assert linear_bce.bce_with_logits(z, y) == pytest.approx(want, rel=1e-12)


def test_linear_bce_prints(capsys, linear_bce):
    linear_bce.main()
    out = capsys.readouterr().out
    assert "dloss/dw" in out and "dloss/db" in out
    assert "equal to step 1: True" in out
    assert "False" not in out


def td_reference(theta, s_t, r_tp1, s_tp1):
    """grad of (const(r + theta.s_tp1) - theta.s_t)**2 = -2 * TD error * s_t."""
    td_error = r_tp1 + theta @ s_tp1 - theta @ s_t
    return -2.0 * td_error * s_t


def test_td0_update(capsys):
    result = load("td0_update").main()
    theta, s_t, r_tp1, s_tp1 = result["inputs"]
    want = td_reference(theta, s_t, r_tp1, s_tp1)
    np.testing.assert_allclose(want, [-7.2, -3.6, 7.2], rtol=1e-12)  # API.md's numbers
    for key in ("grad", "jit_grad"):
        np.testing.assert_allclose(result[key], want, rtol=1e-12)
    lr = result["learning_rate"]
    for key in ("theta", "jit_theta"):
        np.testing.assert_allclose(result[key], theta - lr * want, rtol=1e-12)
    out = capsys.readouterr().out
    assert "-7.2" in out and "-3.6" in out
