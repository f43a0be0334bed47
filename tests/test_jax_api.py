"""JAX's API spellings (issue 38): ``ad.jacobian``, ``ad.linearize``, library
callables given to transforms (``ad.grad(np.tanh)``), ``ad.jit`` with
``static_argnums``/``static_argnames``, and ``scipy.stats.norm``.

Every expected value comes from JAX (``jax_enable_x64``) or from central
finite differences of the plain NumPy function, never from s2s_ad itself;
each is checked on plain NumPy and under ``ad.jit``, and under ``ad.vmap``
where it applies.  See docs/jax_api.md.
"""
import math
from functools import partial

import numpy as np
import pytest
import scipy.special as sc
import scipy.stats
from scipy.stats import norm

import s2s_ad as ad
from s2s_ad.api.core import _as_transformed

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy
jsc = pytest.importorskip("jax.scipy.special")
jnorm = pytest.importorskip("jax.scipy.stats.norm")

TARGETS = [lambda f: f, ad.jit]
TARGET_IDS = ["python", "jit"]
X = np.array([0.3, -0.7, 1.1])


def fd(f, x, eps=1e-6):
    """Central differences of f (scalar or array valued) at float x: the Jacobian."""
    x = np.asarray(x, dtype=float)
    cols = []
    for i in np.ndindex(x.shape):
        e = np.zeros(x.shape)
        e[i] = eps
        cols.append((np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * eps))
    out = np.stack(cols, axis=-1)
    return out.reshape(out.shape[:-1] + x.shape)


# -- 1. ad.jacobian ---------------------------------------------------------------

def test_jacobian_is_jacrev_and_exported():
    assert ad.jacobian is ad.jacrev
    assert "jacobian" in ad.__all__ and "linearize" in ad.__all__


@pytest.mark.parametrize("wrap", TARGETS, ids=TARGET_IDS)
def test_jacobian_matches_jax(wrap):
    def f(x):
        return np.sin(x) * np.sum(x * x)

    def jf(x):
        return jnp.sin(x) * jnp.sum(x * x)
    np.testing.assert_allclose(wrap(ad.jacobian(f))(X), jax.jacobian(jf)(X), rtol=1e-12)


# -- 2. ad.linearize --------------------------------------------------------------

def lin_f(x, y):
    return np.sin(x) * y + np.sum(x * x) * y


def lin_jf(x, y):
    return jnp.sin(x) * y + jnp.sum(x * x) * y


def test_linearize_matches_jax_called_repeatedly():
    out, f_jvp = ad.linearize(lin_f, X, 1.5)
    jout, jf_jvp = jax.linearize(lin_jf, X, 1.5)
    np.testing.assert_allclose(out, jout, rtol=1e-13)
    for tx, ty in [(np.ones(3), 0.0), (np.zeros(3), 1.0), (np.array([0.2, -1.0, 3.0]), -0.5)]:
        np.testing.assert_allclose(f_jvp(tx, ty), jf_jvp(tx, ty), rtol=1e-12)


def test_linearize_under_jit_and_vmap():
    _, f_jvp = ad.linearize(lin_f, X, 1.5)
    _, jf_jvp = jax.linearize(lin_jf, X, 1.5)
    t = np.array([0.2, -1.0, 3.0])
    np.testing.assert_allclose(ad.jit(f_jvp)(t, 0.5), jf_jvp(t, 0.5), rtol=1e-12)
    basis = np.eye(3)
    want = jax.vmap(jf_jvp)(basis, np.zeros(3))
    np.testing.assert_allclose(ad.vmap(f_jvp)(basis, np.zeros(3)), want, rtol=1e-12)
    np.testing.assert_allclose(ad.jit(ad.vmap(f_jvp))(basis, np.zeros(3)), want, rtol=1e-12)


def test_linearize_one_primal_vmap_of_tangent_batch():
    out, f_jvp = ad.linearize(np.sin, 1.0)
    assert out == pytest.approx(math.sin(1.0))
    assert f_jvp(2.0) == pytest.approx(2 * math.cos(1.0), rel=1e-14)

    def g(x):
        return np.tanh(x) ** 2
    _, g_jvp = ad.linearize(g, X)
    _, jg_jvp = jax.linearize(lambda x: jnp.tanh(x) ** 2, X)
    tangents = np.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(ad.vmap(g_jvp)(tangents), jax.vmap(jg_jvp)(tangents),
                               rtol=1e-12)


def test_linearize_of_jitted_function_reuses_its_build():
    jf = ad.jit(lin_f)
    _, f_jvp = ad.linearize(jf, X, 1.5)
    _, jf_jvp = jax.linearize(lin_jf, X, 1.5)
    first = f_jvp(np.ones(3), 0.0)
    t = _as_transformed(jf)
    layered = t.derived("primal", layers=t.layers + (((0, 1), "pair"),))   # what ad.jvp runs
    builds = len(layered._built)
    second = f_jvp(np.ones(3), 1.0)
    np.testing.assert_allclose(first, jf_jvp(np.ones(3), 0.0), rtol=1e-12)
    np.testing.assert_allclose(second, jf_jvp(np.ones(3), 1.0), rtol=1e-12)
    assert builds == 1 and len(layered._built) == builds          # no new build


def mlp_loss(p, x):
    return np.sum(np.tanh(x @ p["W"] + p["b"]))


def test_linearize_of_a_pytree_primal_matches_jax():
    params = {"W": np.linspace(-0.3, 0.4, 6).reshape(3, 2), "b": np.array([0.5, -0.2])}
    x = np.linspace(-1.0, 1.0, 12).reshape(4, 3)
    tangent = {"W": np.ones((3, 2)), "b": np.array([1.0, -2.0])}
    out, f_jvp = ad.linearize(mlp_loss, params, x)
    jout, jf_jvp = jax.linearize(lambda p, v: jnp.sum(jnp.tanh(v @ p["W"] + p["b"])),
                                 params, x)
    assert out == pytest.approx(float(jout), rel=1e-13)
    want = float(jf_jvp(tangent, np.zeros((4, 3))))
    assert f_jvp(tangent, np.zeros((4, 3))) == pytest.approx(want, rel=1e-12)
    assert ad.jit(f_jvp)(tangent, np.zeros((4, 3))) == pytest.approx(want, rel=1e-12)


def test_linearize_has_aux_matches_jax():
    def f(x):
        return np.sin(x) * 2.0, np.cos(x)
    out, f_jvp, aux = ad.linearize(f, X, has_aux=True)
    jout, jf_jvp, jaux = jax.linearize(lambda x: (jnp.sin(x) * 2.0, jnp.cos(x)), X,
                                       has_aux=True)
    np.testing.assert_allclose(out, jout, rtol=1e-14)
    np.testing.assert_allclose(aux, jaux, rtol=1e-14)
    t = np.array([1.0, -2.0, 0.5])
    np.testing.assert_allclose(f_jvp(t), jf_jvp(t), rtol=1e-13)
    np.testing.assert_allclose(ad.jit(f_jvp)(t), jf_jvp(t), rtol=1e-13)
    np.testing.assert_allclose(ad.vmap(f_jvp)(np.eye(3)), jax.vmap(jf_jvp)(np.eye(3)),
                               rtol=1e-13)
    with pytest.raises(TypeError, match="pair"):
        ad.linearize(np.sin, X, has_aux=True)


def test_linearize_refuses_integer_primal():
    with pytest.raises(TypeError, match="primal 1"):
        ad.linearize(lambda x, n: x * n, 1.0, 3)


# -- 3. library callables given to transforms -------------------------------------

@pytest.mark.parametrize("wrap", TARGETS, ids=TARGET_IDS)
def test_grad_of_ufuncs_matches_jax(wrap):
    assert wrap(ad.grad(np.tanh))(0.5) == pytest.approx(float(jax.grad(jnp.tanh)(0.5)),
                                                        rel=1e-14)
    assert wrap(ad.grad(math.sin))(0.5) == pytest.approx(math.cos(0.5), rel=1e-14)
    assert wrap(ad.grad(sc.expit))(0.5) == pytest.approx(float(jax.grad(jsc.expit)(0.5)),
                                                         rel=1e-13)
    np.testing.assert_allclose(wrap(ad.grad(np.sum))(X), jax.grad(jnp.sum)(X))
    np.testing.assert_allclose(wrap(ad.grad(sc.logsumexp))(X),
                               jax.grad(jsc.logsumexp)(X), rtol=1e-13)
    np.testing.assert_allclose(wrap(ad.grad(np.linalg.norm))(X),
                               jax.grad(jnp.linalg.norm)(X), rtol=1e-13)


@pytest.mark.parametrize("wrap", TARGETS, ids=TARGET_IDS)
def test_other_transforms_of_ufuncs_match_jax(wrap):
    np.testing.assert_allclose(wrap(ad.vmap(np.sin))(X), jax.vmap(jnp.sin)(X), rtol=1e-15)
    np.testing.assert_allclose(wrap(ad.jacfwd(np.exp))(X), jax.jacfwd(jnp.exp)(X),
                               rtol=1e-14)
    np.testing.assert_allclose(wrap(ad.jacrev(np.exp))(X), jax.jacrev(jnp.exp)(X),
                               rtol=1e-14)
    np.testing.assert_allclose(wrap(ad.vmap(ad.grad(np.tanh)))(X),
                               jax.vmap(jax.grad(jnp.tanh))(X), rtol=1e-14)
    assert wrap(ad.hessian(np.tanh))(0.5) == pytest.approx(
        float(jax.hessian(jnp.tanh)(0.5)), rel=1e-13)
    out, dout = ad.jvp(np.sin, (0.5,), (2.0,))
    assert (out, dout) == pytest.approx((math.sin(0.5), 2 * math.cos(0.5)), rel=1e-14)
    assert ad.grad(np.add, argnums=(0, 1))(1.0, 2.0) == (1.0, 1.0)


def test_jit_of_a_ufunc():
    np.testing.assert_allclose(ad.jit(np.cos)(X), np.cos(X), rtol=1e-15)
    assert ad.jit(np.cos)(0.25) == pytest.approx(math.cos(0.25), rel=1e-15)


def test_a_library_callable_gives_one_function():
    assert ad.grad(np.tanh).fun is ad.grad(np.tanh).fun       # builds are shared
    assert ad.grad(norm.logpdf).fun is ad.grad(norm.logpdf).fun   # a new method each access
    assert ad.grad(norm.logpdf).fun is not ad.grad(norm.pdf).fun
    assert "np.tanh(x)" in ad.source(ad.grad(np.tanh), 0.5)


@pytest.mark.parametrize("fn, name", [(np.frexp, "np.frexp"), (np.busday_count,
                                                               "np.busday_count")])
def test_library_callable_with_no_rule_is_refused_naming_it(fn, name):
    with pytest.raises(TypeError, match=f"ad.grad cannot transform {name}: s2s_ad has no "
                                        "derivative rule"):
        ad.grad(fn)
    with pytest.raises(TypeError, match=f"ad.vmap cannot transform {name}"):
        ad.vmap(fn)


# -- 4. ad.jit(static_argnums=..., static_argnames=...) ---------------------------

def repeat_sin(x, n, mode):
    y = x
    for _ in range(n):
        y = np.sin(y)
    if mode == "sum":
        return np.sum(y)
    return np.sum(y * y)


def j_repeat_sin(x, n, mode):
    y = x
    for _ in range(n):
        y = jnp.sin(y)
    return jnp.sum(y) if mode == "sum" else jnp.sum(y * y)


JREPEAT = jax.jit(j_repeat_sin, static_argnums=(1, 2))


@pytest.mark.parametrize("n, mode", [(1, "sum"), (2, "sum"), (3, "squares")])
def test_static_argnums_values_and_grads_match_jax(n, mode):
    f = ad.jit(repeat_sin, static_argnums=(1, 2))
    assert f(X, n, mode) == pytest.approx(float(JREPEAT(X, n, mode)), rel=1e-14)
    assert f(X, n=n, mode=mode) == pytest.approx(float(JREPEAT(X, n, mode)), rel=1e-14)
    want = jax.grad(JREPEAT)(X, n, mode)
    np.testing.assert_allclose(ad.grad(f)(X, n, mode), want, rtol=1e-13)
    np.testing.assert_allclose(ad.jit(ad.grad(f))(X, n, mode), want, rtol=1e-13)
    value, g = ad.value_and_grad(f)(X, n, mode)
    assert value == pytest.approx(float(JREPEAT(X, n, mode)), rel=1e-14)
    np.testing.assert_allclose(g, want, rtol=1e-13)


def test_static_argnames_and_the_other_transforms_match_jax():
    f = ad.jit(repeat_sin, static_argnames=("n", "mode"))
    jf = jax.jit(j_repeat_sin, static_argnames=("n", "mode"))
    np.testing.assert_allclose(ad.jacrev(f)(X, 2, "sum"), jax.jacrev(jf)(X, 2, "sum"),
                               rtol=1e-13)
    np.testing.assert_allclose(ad.jacfwd(f)(X, 2, "sum"), jax.jacfwd(jf)(X, 2, "sum"),
                               rtol=1e-13)
    np.testing.assert_allclose(ad.hessian(f)(X, 2, "squares"),
                               jax.hessian(jf)(X, 2, "squares"), rtol=1e-12)
    batch = np.stack([X, 2 * X])
    np.testing.assert_allclose(ad.vmap(f, in_axes=(0, None, None))(batch, 2, "sum"),
                               jax.vmap(jf, in_axes=(0, None, None))(batch, 2, "sum"),
                               rtol=1e-14)
    out, dout = ad.jvp(f, (X, 2, "sum"), (np.ones(3), None, None))
    jout, jdout = jax.jvp(lambda x: jf(x, 2, "sum"), (X,), (np.ones(3),))
    assert (out, dout) == pytest.approx((float(jout), float(jdout)), rel=1e-13)


def test_static_arguments_as_decorator_tuples_callables_none():
    @partial(ad.jit, static_argnums=(1,))
    def reshaped(x, shape):
        return np.sum(np.reshape(x, shape) ** 2 * np.arange(1.0, 5.0).reshape(shape))

    x = np.arange(4.0)
    assert reshaped(x, (2, 2)) == pytest.approx(np.sum(x ** 2 * np.arange(1.0, 5.0)))
    np.testing.assert_allclose(ad.grad(reshaped)(x, (2, 2)), 2 * x * np.arange(1.0, 5.0))

    @ad.jit(static_argnames="fn")
    def apply(x, fn, k=2.0):
        return fn(x) * k
    for fn, d in [(np.sin, np.cos), (np.cos, lambda v: -np.sin(v))]:
        assert apply(0.5, fn) == pytest.approx(2 * fn(0.5), rel=1e-15)
        assert apply(0.5, fn, 3.0) == pytest.approx(3 * fn(0.5), rel=1e-15)
        assert ad.grad(apply)(0.5, fn, 3.0) == pytest.approx(3 * d(0.5), rel=1e-14)
        np.testing.assert_allclose(ad.grad(apply, argnums=2)(0.5, fn, 3.0), fn(0.5))

    def scaled(x, a):
        return x if a is None else x * a
    f = ad.jit(scaled, static_argnums=1)
    assert f(2.0, None) == 2.0 and f(2.0, 3) == 6.0
    assert ad.grad(f)(2.0, None) == 1.0 and ad.grad(f)(2.0, 3) == 3.0


def test_one_build_per_static_value():
    def power(x, n):
        return x ** n
    f = ad.jit(power, static_argnums=1)
    assert [f(2.0, n) for n in (2, 3, 2, 3)] == [4.0, 8.0, 4.0, 8.0]
    assert len(f._specialized) == 2
    assert "power(x, 3)" in ad.source(f, 2.0, 3)          # the value is built in


def test_static_argument_errors_match_jax():
    f = ad.jit(repeat_sin, static_argnums=(1, 2))
    with pytest.raises(ValueError, match="Non-hashable static arguments are not supported"):
        f(X, [1], "sum")
    with pytest.raises(ValueError, match="Non-hashable static arguments are not supported"):
        JREPEAT(X, [1], "sum")                          # JAX's error, the same type
    with pytest.raises(ValueError, match="is static"):
        ad.grad(f, argnums=1)
    with pytest.raises(ValueError, match="not a parameter"):
        ad.jit(repeat_sin, static_argnames="m")
    with pytest.raises(ValueError, match="out of range"):
        ad.jit(repeat_sin, static_argnums=5)
    with pytest.raises(TypeError, match="static arguments"):
        ad.vjp(f, X, 1, "sum")


# -- 5. scipy.stats.norm ----------------------------------------------------------

FUNCS = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]


def jax_norm(name):
    if name == "logsf":                      # jax.scipy.stats.norm has no logsf
        return lambda x, loc=0.0, scale=1.0: jsc.log_ndtr((loc - x) / scale)
    return getattr(jnorm, name)


@pytest.mark.parametrize("wrap", TARGETS, ids=TARGET_IDS)
@pytest.mark.parametrize("name", FUNCS)
def test_norm_values_and_gradients_match_jax(name, wrap):
    def by_keyword(x, loc, scale):
        return getattr(scipy.stats.norm, name)(x, loc=loc, scale=scale)

    def positional(x, loc, scale):
        return getattr(norm, name)(x, loc, scale)

    def standard(x):
        return getattr(norm, name)(x)
    jf = jax_norm(name)
    args = (0.3, 1.0, 2.0)
    want = [float(g) for g in jax.grad(jf, argnums=(0, 1, 2))(*args)]
    for f in (by_keyword, positional):
        assert wrap(f)(*args) == pytest.approx(float(jf(*args)), rel=1e-13)
        assert wrap(ad.grad(f, argnums=(0, 1, 2)))(*args) == pytest.approx(want, rel=1e-12)
    assert wrap(ad.grad(standard))(-0.4) == pytest.approx(float(jax.grad(jf)(-0.4)),
                                                          rel=1e-12)
    xs = np.array([-2.0, 0.1, 1.5])
    np.testing.assert_allclose(wrap(ad.vmap(ad.grad(standard)))(xs),
                               jax.vmap(jax.grad(jf))(xs), rtol=1e-12)
    np.testing.assert_allclose(wrap(ad.jacfwd(standard))(xs), jax.jacfwd(jf)(xs),
                               rtol=1e-12)


@pytest.mark.parametrize("name", FUNCS)
def test_norm_matches_scipy_and_finite_differences(name):
    sp = getattr(norm, name)
    xs = np.array([-1.5, 0.2, 2.5])
    loc, scale = 0.4, 1.7
    f = ad.jit(lambda x: getattr(norm, name)(x, loc, scale))
    np.testing.assert_allclose(f(xs), sp(xs, loc, scale), rtol=1e-12)
    np.testing.assert_allclose(ad.jacrev(f)(xs), fd(lambda v: sp(v, loc, scale), xs),
                               rtol=1e-7, atol=1e-10)


def test_norm_method_passed_to_a_transform():
    g = ad.grad(norm.logpdf, argnums=(0, 1, 2))(0.3, 1.0, 2.0)
    assert g == pytest.approx([float(v) for v in jax.grad(jnorm.logpdf, argnums=(0, 1, 2))(
        0.3, 1.0, 2.0)], rel=1e-13)
    np.testing.assert_allclose(ad.vmap(ad.grad(norm.cdf))(X), jax.vmap(jax.grad(jnorm.cdf))(X),
                               rtol=1e-13)


def sin_power(x, n):
    return np.sin(x) ** n


SIN_POWER = ad.jit(sin_power, static_argnums=1)


def calls_static_jit(x):
    return SIN_POWER(x, 3) * 2.0


@pytest.mark.parametrize("wrap", TARGETS, ids=TARGET_IDS)
def test_static_jit_called_inside_a_transformed_function(wrap):
    def j_outer(x):
        return jax.jit(lambda v, n: jnp.sin(v) ** n, static_argnums=1)(x, 3) * 2.0
    assert wrap(calls_static_jit)(0.5) == pytest.approx(float(j_outer(0.5)), rel=1e-14)
    assert wrap(ad.grad(calls_static_jit))(0.5) == pytest.approx(
        float(jax.grad(j_outer)(0.5)), rel=1e-13)


def test_static_jit_of_a_closure():
    w = np.array([1.0, 2.0])
    f = ad.jit(lambda x, k: np.sum(w * x) ** k, static_argnums=1)
    x = np.array([0.5, -0.25])
    assert f(x, 2) == pytest.approx(0.0)
    assert f(np.ones(2), 3) == pytest.approx(27.0)
    np.testing.assert_allclose(ad.grad(f)(np.ones(2), 2),
                               fd(lambda v: np.sum(w * v) ** 2, np.ones(2)), rtol=1e-8)
