"""JAX's has_aux for Jacobians, Hessians and jvp; Python bool flags decided when
built; dict(k=v) in differentiated code; dict outputs of compiled Jacobians;
jvp's structure errors as JAX's TypeError.  Expected values are closed forms."""
import numpy as np
import pytest

import s2s_ad as ad

A = np.array([[2.0, 1.0, 0.0], [1.0, 3.0, -1.0], [0.0, -1.0, 4.0]])
X = np.array([0.3, -0.7, 1.1])
TARGETS = {"python": lambda f: f, "numba": ad.jit}


def quad_aux(x):
    return x @ A @ x, {"x": x, "norm": np.sum(x ** 2)}


def cube_aux(x):
    return x ** 3, [x ** 2]


@pytest.mark.parametrize("target", TARGETS)
def test_jacobians_and_hessian_with_aux(target):
    jac, aux = TARGETS[target](ad.jacrev(cube_aux, has_aux=True))(X)
    np.testing.assert_allclose(jac, np.diag(3 * X ** 2), rtol=1e-12)
    np.testing.assert_allclose(aux[0], X ** 2)
    assert isinstance(aux, list)
    jac, aux = TARGETS[target](ad.jacfwd(cube_aux, has_aux=True))(X)
    np.testing.assert_allclose(jac, np.diag(3 * X ** 2), rtol=1e-12)
    h, aux = TARGETS[target](ad.hessian(quad_aux, has_aux=True))(X)
    np.testing.assert_allclose(h, A + A.T, rtol=1e-12)
    assert set(aux) == {"x", "norm"}
    np.testing.assert_allclose(aux["norm"], np.sum(X ** 2))


def test_jvp_with_aux_and_a_bad_aux():
    out, tangent, aux = ad.jvp(cube_aux, (3.0,), (4.0,), has_aux=True)
    assert (out, tangent, aux) == (27.0, 108.0, [9.0])
    with pytest.raises(TypeError, match="pair"):
        ad.jacfwd(lambda x: x * 2, has_aux=True)(X)


def lin3(x, y, z, flag=False):
    assert flag
    return 1.0 * x + 2.0 * y + 3.0 * z


def scaled(x, double):
    return x * 2.0 if double else x * 3.0


@pytest.mark.parametrize("target", TARGETS)
def test_bool_flags_are_decided_when_built(target):
    assert TARGETS[target](ad.grad(lin3, argnums=(2, 0)))(1.0, 1.0, 1.0, flag=True) == (3.0, 1.0)
    g = TARGETS[target](ad.grad(scaled))
    assert (g(1.0, True), g(1.0, False)) == (2.0, 3.0)


def with_dict_call(x):
    aux = dict(identity=x, p1=x + 1)
    return x ** 2 * aux["p1"], aux


def test_dict_with_keywords():
    g, aux = ad.grad(with_dict_call, has_aux=True)(3.0)
    assert g == pytest.approx(2 * 3.0 * 4.0 + 9.0)
    assert aux == {"identity": 3.0, "p1": 4.0}


def outer_dict(x, y):
    return {"x": x, "xy": np.outer(x, y)}


@pytest.mark.parametrize("target", TARGETS)
def test_compiled_jacrev_keeps_a_dict_output(target):
    x, y = np.array([1.0, 2.0]), np.array([1.0, -1.0, 0.5])
    jac = TARGETS[target](ad.jacrev(outer_dict))(x, y)
    assert isinstance(jac, dict) and set(jac) == {"x", "xy"}
    np.testing.assert_allclose(jac["x"], np.eye(2))
    np.testing.assert_allclose(jac["xy"], np.kron(np.eye(2), y[:, None]).reshape(2, 3, 2))


def test_jvp_structure_errors_are_type_errors_as_in_jax():
    with pytest.raises(TypeError, match="1 primals but 0 tangents"):
        ad.jvp(lambda x, y: x * y, (2.0,), ())
    with pytest.raises(ValueError):                 # and still the documented ValueError
        ad.jvp(lambda x: x, (np.ones(2),), ((np.ones(2),),))


def selu(x, alpha=1.67, lambda_=1.05):
    return lambda_ * np.where(x > 0, x, alpha * np.exp(x) - alpha)


def test_vjp_gives_one_cotangent_per_primal_passed():
    """As JAX: parameters left to their defaults are not primals."""
    x = np.array([-0.5, 0.5])
    _, pull = ad.vjp(selu, x)
    (g,) = pull(np.ones(2))
    np.testing.assert_allclose(g, np.where(x > 0, 1.05, 1.05 * 1.67 * np.exp(x)), rtol=1e-12)
