"""Custom derivative rules give JAX's numbers (issue 38): JAX's own examples
from its custom-derivative tutorial, translated mechanically, checked against
JAX itself (run live) and against finite differences or closed forms.

* a ``custom_jvp`` rule is used by reverse mode too (transposed, as JAX does);
* a batched gradient keeps a ``custom_vjp`` rule on every vmap lowering;
* ``f.defjvps``, ``nondiff_argnums`` and ``functools.partial(ad.custom_vjp, ...)``.
"""
from functools import partial

import numpy as np
import pytest

import s2s_ad as ad

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jax.config.update("jax_enable_x64", True)

TARGETS = {"python": lambda f: f, "numba": ad.jit}
XS = np.array([1.0, 2.0, -0.5])


# -- JAX's definitions (the reference) -----------------------------------------------
@jax.custom_jvp
def j_f(x):
    return jnp.where(x > 0, jnp.sin(x), jnp.cos(x))


@j_f.defjvp
def j_f_jvp(primals, tangents):
    x, = primals
    x_dot, = tangents
    return j_f(x), 2 * x_dot


@jax.custom_jvp
def j_log1pexp(x):
    return jnp.log(1. + jnp.exp(x))


@j_log1pexp.defjvp
def j_log1pexp_jvp(primals, tangents):
    x, = primals
    x_dot, = tangents
    return j_log1pexp(x), (1 - 1 / (1 + jnp.exp(x))) * x_dot


@jax.custom_vjp
def j_clip_gradient(lo, hi, x):
    return x


j_clip_gradient.defvjp(lambda lo, hi, x: (x, (lo, hi)),
                       lambda res, g: (None, None, jnp.clip(g, res[0], res[1])))


def j_cg(x):
    return j_clip_gradient(-0.75, 0.75, jnp.sin(x))


# -- the same, written for s2s_ad --------------------------------------------------------
@ad.custom_jvp
def f(x):
    return np.sin(x) if x > 0 else np.cos(x)


@f.defjvp
def f_jvp(primals, tangents):
    x, = primals
    x_dot, = tangents
    return f(x), 2 * x_dot


@ad.custom_jvp
def fw(x):
    return np.where(x > 0, np.sin(x), np.cos(x))


@fw.defjvp
def fw_jvp(primals, tangents):
    x, = primals
    x_dot, = tangents
    return fw(x), 2 * x_dot


@ad.custom_jvp
def log1pexp(x):
    return np.log(1. + np.exp(x))


@log1pexp.defjvp
def log1pexp_jvp(primals, tangents):
    x, = primals
    x_dot, = tangents
    ans = log1pexp(x)
    ans_dot = (1 - 1 / (1 + np.exp(x))) * x_dot
    return ans, ans_dot


@ad.custom_vjp
def clip_gradient(lo, hi, x):
    return x


def clip_gradient_fwd(lo, hi, x):
    return x, (lo, hi)


def clip_gradient_bwd(res, g):
    lo, hi = res
    return (None, None, np.clip(g, lo, hi))


clip_gradient.defvjp(clip_gradient_fwd, clip_gradient_bwd)


def cg(x):
    return clip_gradient(-0.75, 0.75, np.sin(x))


def caller(x):
    return 3.0 * f(x) + x


def in_loop(x):
    s = 0.0
    for i in range(3):
        s = s + f(x * (i + 1.0))
    return s


def j_in_loop(x):
    return sum(j_f(x * (i + 1.0)) for i in range(3))


# -- 1. a custom_jvp rule in reverse mode ------------------------------------------------
@pytest.mark.parametrize("backend", TARGETS)
def test_reverse_mode_uses_the_jvp_rule(backend):
    wrap = TARGETS[backend]
    want = float(jax.grad(j_f)(1.0))
    assert want == 2.0
    assert wrap(ad.grad(f))(1.0) == want
    assert wrap(ad.jacrev(f))(1.0) == want
    assert wrap(ad.value_and_grad(f))(1.0)[1] == want
    np.testing.assert_allclose(wrap(ad.value_and_grad(f))(1.0)[0], np.sin(1.0))
    assert ad.vjp(f, 1.0)[1](1.0) == (want,)
    assert ad.jacfwd(f)(1.0) == want


@pytest.mark.parametrize("backend", TARGETS)
def test_log1pexp_is_stable_in_reverse_mode(backend):
    want = float(jax.grad(j_log1pexp)(100.0))
    assert want == 1.0
    assert TARGETS[backend](ad.grad(log1pexp))(100.0) == want
    xs = np.array([0.0, 3.0, 100.0, 800.0])
    np.testing.assert_allclose(ad.vmap(ad.grad(log1pexp))(xs), jax.vmap(jax.grad(j_log1pexp))(xs),
                               rtol=1e-14)


@pytest.mark.parametrize("method", ["vectorize", "loop"])
def test_batched_gradients_use_the_jvp_rule(method):
    want = np.asarray(jax.vmap(jax.grad(j_f))(XS))
    np.testing.assert_array_equal(ad.vmap(ad.grad(fw), method=method)(XS), want)
    np.testing.assert_array_equal(ad.vmap(ad.grad(f), method="loop")(XS), want)
    np.testing.assert_array_equal(ad.jit(ad.vmap(ad.grad(f)))(XS), want)
    np.testing.assert_array_equal(ad.jit(ad.vmap(ad.grad(fw), method=method))(XS), want)


def test_a_value_dependent_branch_is_not_vectorized_but_named():
    with pytest.raises(ValueError, match="branch depends on batched values"):
        ad.vmap(ad.grad(f), method="vectorize")(XS)


@pytest.mark.parametrize("backend", TARGETS)
def test_jvp_rule_called_from_other_code_and_inside_a_loop(backend):
    wrap = TARGETS[backend]
    assert wrap(ad.grad(caller))(1.0) == float(jax.grad(lambda x: 3.0 * j_f(x) + x)(1.0)) == 7.0
    assert wrap(ad.grad(in_loop))(1.0) == float(jax.grad(j_in_loop)(1.0)) == 12.0
    np.testing.assert_array_equal(wrap(ad.jacrev(fw))(XS), jax.jacrev(j_f)(XS))
    np.testing.assert_array_equal(wrap(ad.grad(lambda x: np.sum(fw(x))))(XS),
                                  jax.grad(lambda x: jnp.sum(j_f(x)))(XS))


@pytest.mark.parametrize("backend", TARGETS)
def test_second_order_differentiates_the_rule(backend):
    assert TARGETS[backend](ad.hessian(f))(1.0) == float(jax.hessian(j_f)(1.0)) == 0.0
    x = 0.7
    want = float(jax.hessian(j_log1pexp)(x))
    np.testing.assert_allclose(TARGETS[backend](ad.hessian(log1pexp))(x), want, rtol=1e-13)
    s = 1.0 / (1.0 + np.exp(-x))
    np.testing.assert_allclose(want, s * (1 - s), rtol=1e-13)


# -- 2. vmap(grad) keeps a custom_vjp rule -----------------------------------------------
@pytest.mark.parametrize("method", [None, "vectorize", "loop"])
def test_vmap_of_grad_keeps_the_vjp_rule(method):
    xs = np.array([0.0, 2.0, 4.0])
    want = np.asarray(jax.vmap(jax.grad(j_cg))(xs))
    np.testing.assert_allclose(want, 0.75 * np.cos(xs), rtol=1e-15)    # g = 1 clipped
    kw = {} if method is None else {"method": method}
    np.testing.assert_allclose(ad.vmap(ad.grad(cg), **kw)(xs), want, rtol=1e-15)
    np.testing.assert_allclose(ad.jit(ad.vmap(ad.grad(cg), **kw))(xs), want, rtol=1e-15)
    np.testing.assert_allclose([ad.grad(cg)(x) for x in xs], want, rtol=1e-15)


# -- 3. JAX's API surface -----------------------------------------------------------------
@jax.custom_jvp
def j_two(x, y):
    return jnp.sin(x) * y


j_two.defjvps(lambda x_dot, ans, x, y: 2 * jnp.cos(x) * x_dot * y,
              lambda y_dot, ans, x, y: 3 * jnp.sin(x) * y_dot)


@ad.custom_jvp
def two(x, y):
    return np.sin(x) * y


two.defjvps(lambda x_dot, ans, x, y: 2 * np.cos(x) * x_dot * y,
            lambda y_dot, ans, x, y: 3 * np.sin(x) * y_dot)


@ad.custom_jvp
def only_x(x, y):
    return x * y


only_x.defjvps(lambda g, ans, x, y: 5.0 * g * y, None)


@pytest.mark.parametrize("backend", TARGETS)
def test_defjvps(backend):
    wrap = TARGETS[backend]
    want = jax.grad(j_two, argnums=(0, 1))(2.0, 3.0)
    np.testing.assert_allclose(wrap(ad.grad(two, argnums=(0, 1)))(2.0, 3.0), want, rtol=1e-15)
    np.testing.assert_allclose(ad.jacfwd(two, argnums=(0, 1))(2.0, 3.0), want, rtol=1e-15)
    np.testing.assert_allclose(want, (6 * np.cos(2.0), 3 * np.sin(2.0)))
    assert wrap(ad.grad(only_x, argnums=(0, 1)))(2.0, 3.0) == (15.0, 0.0)


def test_defjvps_wants_one_rule_per_argument():
    with pytest.raises(TypeError, match="one rule per argument"):
        two.defjvps(None)


@partial(ad.custom_vjp, nondiff_argnums=(0, 1))
def clip_nd(lo, hi, x):
    return x


def clip_nd_fwd(lo, hi, x):
    return x, None


def clip_nd_bwd(lo, hi, _, g):
    return (np.clip(g, lo, hi),)


clip_nd.defvjp(clip_nd_fwd, clip_nd_bwd)


def cg_nd(x):
    return clip_nd(-0.75, 0.75, np.sin(x))


@partial(jax.custom_vjp, nondiff_argnums=(0, 1))
def j_clip_nd(lo, hi, x):
    return x


j_clip_nd.defvjp(lambda lo, hi, x: (x, None),
                 lambda lo, hi, _, g: (jnp.clip(g, lo, hi),))


@partial(ad.custom_jvp, nondiff_argnums=(1,))
def scaled(x, k):
    return np.sin(x) * k


@scaled.defjvp
def scaled_jvp(k, primals, tangents):
    x, = primals
    t, = tangents
    return scaled(x, k), 3.0 * k * t


@partial(jax.custom_jvp, nondiff_argnums=(1,))
def j_scaled(x, k):
    return jnp.sin(x) * k


@j_scaled.defjvp
def j_scaled_jvp(k, primals, tangents):
    x, = primals
    t, = tangents
    return j_scaled(x, k), 3.0 * k * t


@pytest.mark.parametrize("backend", TARGETS)
def test_nondiff_argnums(backend):
    wrap = TARGETS[backend]
    xs = np.array([0.0, 2.0, 4.0])
    want = np.asarray(jax.vmap(jax.grad(lambda x: j_clip_nd(-0.75, 0.75, jnp.sin(x))))(xs))
    np.testing.assert_allclose([wrap(ad.grad(cg_nd))(x) for x in xs], want, rtol=1e-15)
    np.testing.assert_allclose(wrap(ad.vmap(ad.grad(cg_nd)))(xs), want, rtol=1e-15)
    np.testing.assert_allclose(ad.vmap(ad.grad(cg_nd), method="loop")(xs), want, rtol=1e-15)
    k_want = float(jax.grad(lambda x: j_scaled(x, 2.0))(1.0))
    assert k_want == 6.0
    assert wrap(ad.grad(lambda x: scaled(x, 2.0)))(1.0) == k_want
    assert ad.jacfwd(lambda x: scaled(x, 2.0))(1.0) == k_want
    np.testing.assert_array_equal(ad.vmap(ad.grad(lambda x: scaled(x, 2.0)))(xs), 6.0)


def test_nondiff_argnums_are_checked():
    with pytest.raises(TypeError, match="nondiff_argnums"):
        ad.custom_vjp(lambda x: x, nondiff_argnums=(3,))


def newton_sqrt(a):
    update = lambda a, x: 0.5 * (x + a / x)     # noqa: E731
    return fixed_point(update, a, a)


@partial(ad.custom_vjp, nondiff_argnums=(0,))
def fixed_point(f, a, x_guess):
    x_prev, x = x_guess, f(a, x_guess)
    while np.abs(x_prev - x) > 1e-12:
        x_prev, x = x, f(a, x)
    return x


def fixed_point_fwd(f, a, x_init):
    x_star = fixed_point(f, a, x_init)
    return x_star, (a, x_star)


def fixed_point_rev(f, res, x_star_bar):
    a, x_star = res
    _, vjp_a = ad.vjp(lambda a: f(a, x_star), a)
    # (JAX's tutorial writes partial(rev_iter, f): a lambda here, see docs/custom_rules.md)
    a_bar, = vjp_a(fixed_point(lambda packed, u: rev_iter(f, packed, u),
                               (a, x_star, x_star_bar), x_star_bar))
    return a_bar, np.zeros_like(x_star)


def rev_iter(f, packed, u):
    a, x_star, x_star_bar = packed
    _, vjp_x = ad.vjp(lambda x: f(a, x), x_star)
    return x_star_bar + vjp_x(u)[0]


fixed_point.defvjp(fixed_point_fwd, fixed_point_rev)


@partial(jax.custom_vjp, nondiff_argnums=(0,))
def j_fixed_point(f, a, x_guess):
    def cond_fun(carry):
        x_prev, x = carry
        return jnp.abs(x_prev - x) > 1e-12

    def body_fun(carry):
        _, x = carry
        return x, f(a, x)
    _, x_star = jax.lax.while_loop(cond_fun, body_fun, (x_guess, f(a, x_guess)))
    return x_star


def j_fixed_point_fwd(f, a, x_init):
    x_star = j_fixed_point(f, a, x_init)
    return x_star, (a, x_star)


def j_fixed_point_rev(f, res, x_star_bar):
    a, x_star = res
    _, vjp_a = jax.vjp(lambda a: f(a, x_star), a)
    a_bar, = vjp_a(j_fixed_point(partial(j_rev_iter, f), (a, x_star, x_star_bar), x_star_bar))
    return a_bar, jnp.zeros_like(x_star)


def j_rev_iter(f, packed, u):
    a, x_star, x_star_bar = packed
    _, vjp_x = jax.vjp(partial(f, a), x_star)
    return x_star_bar + vjp_x(u)[0]


j_fixed_point.defvjp(j_fixed_point_fwd, j_fixed_point_rev)


@pytest.mark.parametrize("backend", TARGETS)
def test_the_tutorials_fixed_point(backend):
    src = ad.source(ad.grad(newton_sqrt), 2.0)
    assert "rev_iter" in src and "fixed_point_rev" in src      # the rule, not the loop's adjoint
    for a in (2.0, 9.0):
        want = float(jax.grad(lambda a: j_fixed_point(lambda a, x: 0.5 * (x + a / x), a, a))(a))
        np.testing.assert_allclose(want, 0.5 / np.sqrt(a), rtol=1e-10)
        np.testing.assert_allclose(TARGETS[backend](ad.grad(newton_sqrt))(a), want, rtol=1e-12)
        np.testing.assert_allclose(newton_sqrt(a), np.sqrt(a), rtol=1e-14)


@partial(ad.custom_vjp, nondiff_argnums=(0,))
def apply_ten(f, x):
    return f(x)


apply_ten.defvjp(lambda f, x: (f(x), x), lambda f, x, g: (10.0 * g,))


@partial(jax.custom_vjp, nondiff_argnums=(0,))
def j_apply_ten(f, x):
    return f(x)


j_apply_ten.defvjp(lambda f, x: (f(x), x), lambda f, x, g: (10.0 * g,))


@pytest.mark.parametrize("backend", TARGETS)
def test_a_function_argument_keeps_the_rule(backend):
    want = float(jax.grad(lambda x: j_apply_ten(lambda t: t * t, x))(3.0))
    assert want == 10.0
    assert TARGETS[backend](ad.grad(lambda x: apply_ten(lambda t: t * t, x)))(3.0) == want


def reads_its_callers_value(x, w):
    return apply_ten(lambda t: t * w, x)


def test_a_function_argument_reading_the_callers_values_is_refused():
    with pytest.raises(ad.UnsupportedSyntaxError, match="reads w of the calling function"):
        ad.grad(reads_its_callers_value)(1.0, 2.0)


# -- forward mode and second order of a custom_vjp function (docs/custom_rules.md) -------
@ad.custom_vjp
def ten_sin(x):
    return np.sin(x)


ten_sin.defvjp(lambda x: (np.sin(x), np.cos(x)), lambda c, g: (10 * c * g,))


def test_forward_mode_of_a_custom_vjp_function_is_its_bodys():
    assert ad.grad(ten_sin)(1.0) == pytest.approx(10 * np.cos(1.0))
    assert ad.jacfwd(ten_sin)(1.0) == pytest.approx(np.cos(1.0))     # JAX: TypeError
    h = 1e-6
    assert ad.jacfwd(ten_sin)(1.0) == pytest.approx((np.sin(1 + h) - np.sin(1 - h)) / (2 * h))


@pytest.mark.parametrize("second", [ad.hessian, lambda g: ad.jacfwd(ad.grad(g)),
                                    lambda g: ad.grad(ad.grad(g))])
def test_a_second_derivative_through_a_custom_vjp_function_is_refused(second):
    with pytest.raises(TypeError, match="ten_sin is an ad.custom_vjp function"):
        second(ten_sin)(1.0)


@partial(ad.custom_vjp, nondiff_argnums=(1, 2))
def by_mode(x, mode, n):
    return np.sin(x) * n


def by_mode_fwd(x, mode, n):
    return by_mode(x, mode, n), np.cos(x)


def by_mode_bwd(mode, n, c, g):
    if mode == "double":
        return (2.0 * n * c * g,)
    return (n * c * g,)


by_mode.defvjp(by_mode_fwd, by_mode_bwd)


@partial(jax.custom_vjp, nondiff_argnums=(1, 2))
def j_by_mode(x, mode, n):
    return jnp.sin(x) * n


j_by_mode.defvjp(lambda x, mode, n: (j_by_mode(x, mode, n), jnp.cos(x)),
                 lambda mode, n, c, g: ((2.0 if mode == "double" else 1.0) * n * c * g,))


@pytest.mark.parametrize("backend", TARGETS)
@pytest.mark.parametrize("mode", ["double", "single"])
def test_string_and_int_nondiff_arguments(backend, mode):
    want = float(jax.grad(lambda x: j_by_mode(x, mode, 3))(1.0))
    got = TARGETS[backend](ad.grad(lambda x: by_mode(x, mode, 3)))(1.0)
    np.testing.assert_allclose(got, want, rtol=1e-15)
    xs = np.array([1.0, 2.0])
    np.testing.assert_allclose(ad.vmap(ad.grad(lambda x: by_mode(x, mode, 3)))(xs),
                               jax.vmap(jax.grad(lambda x: j_by_mode(x, mode, 3)))(xs),
                               rtol=1e-15)


@partial(ad.custom_jvp, nondiff_argnums=(1,))
def jvp_by_mode(x, mode):
    return np.sin(x)


@jvp_by_mode.defjvp
def jvp_by_mode_jvp(mode, primals, tangents):
    x, = primals
    t, = tangents
    scale = 2.0 if mode == "double" else 1.0
    return jvp_by_mode(x, mode), scale * np.cos(x) * t


@partial(jax.custom_jvp, nondiff_argnums=(1,))
def j_jvp_by_mode(x, mode):
    return jnp.sin(x)


@j_jvp_by_mode.defjvp
def j_jvp_by_mode_jvp(mode, primals, tangents):
    x, = primals
    t, = tangents
    return j_jvp_by_mode(x, mode), (2.0 if mode == "double" else 1.0) * jnp.cos(x) * t


@pytest.mark.parametrize("backend", TARGETS)
def test_a_string_nondiff_argument_of_a_jvp_rule(backend):
    for mode in ("double", "single"):
        want = float(jax.grad(lambda x: j_jvp_by_mode(x, mode))(1.0))
        got = TARGETS[backend](ad.grad(lambda x: jvp_by_mode(x, mode)))(1.0)
        np.testing.assert_allclose(got, want, rtol=1e-15)
        np.testing.assert_allclose(ad.jacfwd(lambda x: jvp_by_mode(x, mode))(1.0), want,
                                   rtol=1e-15)


@pytest.mark.skipif(not __import__("cuda_support").RUNS,
                    reason="needs a GPU or NUMBA_ENABLE_CUDASIM=1")
def test_custom_rules_on_the_cuda_target():
    xs = np.array([0.5, 3.0, 30.0, -2.0])
    cases = [(log1pexp, j_log1pexp), (cg, j_cg), (f, j_f), (cg_nd, lambda x: j_clip_nd(
        -0.75, 0.75, jnp.sin(x)))]
    for fun, ref in cases:
        got = ad.jit(ad.vmap(ad.grad(fun)), target="cuda")(xs)
        np.testing.assert_allclose(got, jax.vmap(jax.grad(ref))(xs), rtol=1e-14)


def clip_by_x(x):
    return clip_nd(-x, x, x)


def test_a_differentiated_value_in_a_nondiff_position_is_refused():
    with pytest.raises(jax.errors.UnexpectedTracerError):
        jax.grad(lambda x: j_clip_nd(-x, x, x))(1.0)
    with pytest.raises(ad.UnsupportedSyntaxError, match="nondiff_argnums") as info:
        ad.grad(clip_by_x)(1.0)
    assert info.value.filename == __file__ and "clip_nd(-x, x, x)" in info.value.text


def mixed_rules(x):
    return np.tanh(x) * fw(x) + log1pexp(x * 3.0) + clip_gradient(-0.1, 0.1, np.sin(x)) * x


def j_mixed_rules(x):
    return jnp.tanh(x) * j_f(x) + j_log1pexp(x * 3.0) + j_clip_gradient(-0.1, 0.1,
                                                                         jnp.sin(x)) * x


@pytest.mark.parametrize("backend", TARGETS)
def test_jacobian_rows_of_a_vector_function_use_the_rules(backend):
    x = np.linspace(-2.0, 3.0, 40)
    want = np.asarray(jax.jacrev(j_mixed_rules)(x))
    np.testing.assert_allclose(TARGETS[backend](ad.jacrev(mixed_rules))(x), want, atol=1e-14)


# -- more of the tutorial's examples ----------------------------------------------------------
@ad.custom_jvp
def root_ratio(x):
    return x / (1 + np.sqrt(x))


@root_ratio.defjvp
def root_ratio_jvp(primals, tangents):
    x, = primals
    x_dot, = tangents
    ans = root_ratio(x)
    ans_dot = ((np.sqrt(x) + 2) / (2 * (np.sqrt(x) + 1) ** 2)) * x_dot
    return ans, ans_dot


@ad.custom_jvp
def root_ratio_s(x):
    return x / (1 + np.sqrt(x))


root_ratio_s.defjvps(lambda t, ans, x: ((np.sqrt(x) + 2) / (2 * (np.sqrt(x) + 1) ** 2)) * t)


@ad.custom_jvp
def log1pexp_s(x):
    return np.log(1. + np.exp(x))


log1pexp_s.defjvps(lambda t, ans, x: (1 - 1 / (1 + np.exp(x))) * t)


@ad.custom_jvp
def sin_rule(x):
    return np.sin(x)


sin_rule.defjvp(lambda primals, tangents: (sin_rule(primals[0]), np.cos(primals[0]) * tangents[0]))


@jax.custom_jvp
def j_sin_rule(x):
    return jnp.sin(x)


j_sin_rule.defjvp(lambda p, t: (j_sin_rule(p[0]), jnp.cos(p[0]) * t[0]))


@pytest.mark.parametrize("backend", TARGETS)
def test_tutorial_rules_at_the_edge_of_the_domain(backend):
    wrap = TARGETS[backend]
    assert wrap(ad.grad(root_ratio))(0.) == wrap(ad.grad(root_ratio_s))(0.) == 1.0
    assert wrap(ad.grad(log1pexp_s))(100.) == 1.0
    np.testing.assert_allclose(wrap(ad.grad(log1pexp_s))(3.), jax.grad(j_log1pexp)(3.),
                               rtol=1e-15)
    np.testing.assert_allclose(ad.vmap(wrap(ad.grad(log1pexp_s)))(np.arange(3.)),
                               jax.vmap(jax.grad(j_log1pexp))(np.arange(3.)), rtol=1e-15)


@pytest.mark.parametrize("backend", TARGETS)
def test_grad_of_grad_through_a_jvp_rule(backend):
    np.testing.assert_allclose(TARGETS[backend](ad.grad(ad.grad(sin_rule)))(3.),
                               jax.grad(jax.grad(j_sin_rule))(3.), rtol=1e-15)
    np.testing.assert_allclose(ad.grad(sin_rule)(3.), np.cos(3.), rtol=1e-15)
