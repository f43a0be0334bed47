"""ad.custom_vjp and ad.custom_jvp: user rules are used inside every transform.

The rules in programs/custom_rules.py scale the true derivative by a known
factor, so each expectation below is the closed form of the *rule*, and a
transform that differentiated the body instead would fail.
"""
import pathlib

import numpy as np
import pytest
from conftest import load_program

import s2s_ad as ad

cr = load_program(pathlib.Path(__file__).resolve().parent / "programs" / "custom_rules.py")
X = np.array([0.5, -1.0, 2.0])
W = 1.5
T = np.tanh(X)
TARGETS = {"python": lambda f: f, "numba": ad.jit}


def rule_grad_x(x, w):
    return 10.0 * w * (1.0 - np.tanh(x) ** 2)


@pytest.mark.parametrize("backend", TARGETS)
def test_custom_vjp_inside_a_loop(backend):
    gx, gw = TARGETS[backend](ad.grad(cr.loop_user, argnums=(0, 1)))(X, W)
    np.testing.assert_allclose(gx, 6.0 * rule_grad_x(X, W), rtol=1e-12)
    np.testing.assert_allclose(gw, 6.0 * np.sum(T), rtol=1e-12)


@pytest.mark.parametrize("backend", TARGETS)
def test_vjp_of_the_custom_function_itself(backend):
    f = TARGETS[backend](cr.scaled_tanh) if backend == "numba" else cr.scaled_tanh
    out, pull = ad.vjp(f, X, W)
    np.testing.assert_allclose(out, T * W)
    g = np.array([1.0, 2.0, -1.0])
    gx, gw = pull(g)
    np.testing.assert_allclose(gx, g * rule_grad_x(X, W), rtol=1e-12)
    np.testing.assert_allclose(gw, np.sum(g * T), rtol=1e-12)


def test_the_decorated_function_still_calls_through():
    np.testing.assert_allclose(cr.scaled_tanh(X, W), T * W)
    assert cr.softplus.__name__ == "softplus"


@pytest.mark.parametrize("backend", TARGETS)
def test_custom_jvp_in_forward_mode(backend):
    f = TARGETS[backend](cr.softplus_user)
    dx = np.array([1.0, -0.5, 0.25])
    out, tangent = ad.jvp(f, (X,), (dx,))
    sp = np.log1p(np.exp(X))
    rule = 2.0 / (1.0 + np.exp(-X))
    np.testing.assert_allclose(out, np.sum(sp * X), rtol=1e-12)
    np.testing.assert_allclose(tangent, np.sum((rule * X + sp) * dx), rtol=1e-12)


def test_custom_jvp_of_the_function_itself_and_its_jacobian():
    _, tangent = ad.jvp(cr.softplus, (X,), (np.ones(3),))
    np.testing.assert_allclose(tangent, 2.0 / (1.0 + np.exp(-X)), rtol=1e-12)
    np.testing.assert_allclose(ad.jacfwd(cr.softplus)(X), np.diag(2.0 / (1.0 + np.exp(-X))),
                               rtol=1e-12)


def test_forward_mode_through_a_custom_vjp_function_differentiates_its_body():
    dx = np.array([1.0, 0.0, 0.0])
    _, tangent = ad.jvp(cr.scaled_tanh, (X, W), (dx, 0.0))
    np.testing.assert_allclose(tangent, W * (1.0 - T ** 2) * dx, rtol=1e-12)


def test_a_backward_rule_with_the_wrong_number_of_cotangents_is_a_type_error():
    with pytest.raises(TypeError, match="one cotangent per argument"):
        ad.grad(cr.bad_count)(2.0, 3.0)


def test_defvjp_rejects_non_functions():
    with pytest.raises(TypeError, match="expects functions"):
        cr.bad_count.defvjp(1, 2)


@pytest.mark.parametrize("backend", TARGETS)
def test_one_residual_and_a_one_tuple_of_cotangents(backend):
    x = np.array([1.0, 2.0, 4.0])
    np.testing.assert_allclose(TARGETS[backend](ad.grad(cr.sum_safe_log))(x), 1.0 / x)
