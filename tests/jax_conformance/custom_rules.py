"""JAX's custom derivative rules tutorial
(docs/notebooks/Custom_derivative_rules_for_Python_code.md) and custom-rule
tests, as JAX code."""
from collections import namedtuple
from functools import partial

import numpy as np
import jax
import jax.numpy as jnp
from jax import custom_jvp, custom_vjp, grad, jit, jvp, vjp, vmap, jacfwd, jacrev, hessian
from conformance import case


@custom_jvp
def f_sin_y(x, y):
    return jnp.sin(x) * y


@f_sin_y.defjvp
def f_sin_y_jvp(primals, tangents):
    x, y = primals
    x_dot, y_dot = tangents
    primal_out = f_sin_y(x, y)
    tangent_out = jnp.cos(x) * x_dot * y + jnp.sin(x) * y_dot
    return primal_out, tangent_out


@custom_jvp
def f_sin_y_defjvps(x, y):
    return jnp.sin(x) * y


f_sin_y_defjvps.defjvps(lambda x_dot, primal_out, x, y: jnp.cos(x) * x_dot * y,
                        lambda y_dot, primal_out, x, y: jnp.sin(x) * y_dot)


@custom_vjp
def f_vjp_sin_y(x, y):
    return jnp.sin(x) * y


def f_vjp_sin_y_fwd(x, y):
    return f_vjp_sin_y(x, y), (jnp.cos(x), jnp.sin(x), y)


def f_vjp_sin_y_bwd(res, g):
    cos_x, sin_x, y = res
    return (cos_x * g * y, sin_x * g)


f_vjp_sin_y.defvjp(f_vjp_sin_y_fwd, f_vjp_sin_y_bwd)


def log1pexp_plain(x):
    return jnp.log(1. + jnp.exp(x))


@custom_jvp
def log1pexp(x):
    return jnp.log(1. + jnp.exp(x))


@log1pexp.defjvp
def log1pexp_jvp(primals, tangents):
    x, = primals
    x_dot, = tangents
    ans = log1pexp(x)
    ans_dot = (1 - 1/(1 + jnp.exp(x))) * x_dot
    return ans, ans_dot


@custom_jvp
def log1pexp_defjvps(x):
    return jnp.log(1. + jnp.exp(x))


log1pexp_defjvps.defjvps(lambda t, ans, x: (1 - 1/(1 + jnp.exp(x))) * t)


@custom_jvp
def sqrt_ratio(x):
    return x / (1 + jnp.sqrt(x))


@sqrt_ratio.defjvp
def sqrt_ratio_jvp(primals, tangents):
    x, = primals
    x_dot, = tangents
    ans = sqrt_ratio(x)
    ans_dot = ((jnp.sqrt(x) + 2) / (2 * (jnp.sqrt(x) + 1)**2)) * x_dot
    return ans, ans_dot


@custom_vjp
def clip_gradient(lo, hi, x):
    return x


def clip_gradient_fwd(lo, hi, x):
    return x, (lo, hi)


def clip_gradient_bwd(res, g):
    lo, hi = res
    return (None, None, jnp.clip(g, lo, hi))


clip_gradient.defvjp(clip_gradient_fwd, clip_gradient_bwd)


def clip_sin(x):
    x = clip_gradient(-0.75, 0.75, x)
    return jnp.sin(x)


t = np.linspace(0, 10, 7)


@custom_jvp
def sin_rule(x):
    return jnp.sin(x)


def sin_rule_jvp(primals, tangents):
    x, = primals
    t, = tangents
    return sin_rule(x), jnp.cos(x) * t


sin_rule.defjvp(sin_rule_jvp)


@custom_jvp
def x2y(x, y):
    return x ** 2 * y


@x2y.defjvp
def x2y_jvp(primals, tangents):
    x, y = primals
    x_dot, y_dot = tangents
    primal_out = x2y(x, y)
    tangent_out = 2 * x * y * x_dot + x ** 2 * y_dot
    return primal_out, tangent_out


@custom_jvp
def x2y_none(x, y):
    return x ** 2 * y


x2y_none.defjvps(lambda x_dot, primal_out, x, y: 2 * x * y * x_dot, None)


@custom_jvp
def branchy(x):
    if x > 0:
        return jnp.sin(x)
    else:
        return jnp.cos(x)


@branchy.defjvp
def branchy_jvp(primals, tangents):
    x, = primals
    x_dot, = tangents
    ans = branchy(x)
    if x > 0:
        return ans, 2 * x_dot
    else:
        return ans, 3 * x_dot


@custom_vjp
def sin_vjp(x):
    return jnp.sin(x)


def sin_vjp_fwd(x):
    return sin_vjp(x), jnp.cos(x)


def sin_vjp_bwd(cos_x, y_bar):
    return (cos_x * y_bar,)


sin_vjp.defvjp(sin_vjp_fwd, sin_vjp_bwd)

Point = namedtuple("Point", ["x", "y"])


@custom_jvp
def pt_fn(pt):
    x, y = pt.x, pt.y
    return {'a': x ** 2, 'b': (jnp.sin(x), jnp.cos(y))}


@pt_fn.defjvp
def pt_fn_jvp(primals, tangents):
    pt, = primals
    pt_dot, = tangents
    ans = pt_fn(pt)
    ans_dot = {'a': 2 * pt.x * pt_dot.x,
               'b': (jnp.cos(pt.x) * pt_dot.x, -jnp.sin(pt.y) * pt_dot.y)}
    return ans, ans_dot


def pt_fun(pt):
    dct = pt_fn(pt)
    return dct['a'] + dct['b'][0]


@custom_vjp
def pt_fn_vjp(pt):
    x, y = pt.x, pt.y
    return {'a': x ** 2, 'b': (jnp.sin(x), jnp.cos(y))}


def pt_fn_vjp_fwd(pt):
    return pt_fn_vjp(pt), pt


def pt_fn_vjp_bwd(pt, g):
    a_bar, (b0_bar, b1_bar) = g['a'], g['b']
    x_bar = 2 * pt.x * a_bar + jnp.cos(pt.x) * b0_bar
    y_bar = -jnp.sin(pt.y) * b1_bar
    return (Point(x_bar, y_bar),)


pt_fn_vjp.defvjp(pt_fn_vjp_fwd, pt_fn_vjp_bwd)


def pt_fun_vjp(pt):
    dct = pt_fn_vjp(pt)
    return dct['a'] + dct['b'][0]


@partial(custom_jvp, nondiff_argnums=(0,))
def app(f, x):
    return f(x)


@app.defjvp
def app_jvp(f, primals, tangents):
    x, = primals
    x_dot, = tangents
    return f(x), 2. * x_dot


@partial(custom_jvp, nondiff_argnums=(0, 2))
def app2(f, x, g):
    return f(g((x)))


@app2.defjvp
def app2_jvp(f, g, primals, tangents):
    x, = primals
    x_dot, = tangents
    return f(g(x)), 3. * x_dot


@partial(custom_vjp, nondiff_argnums=(0,))
def app_vjp(f, x):
    return f(x)


def app_vjp_fwd(f, x):
    return f(x), x


def app_vjp_bwd(f, x, g):
    return (5 * g,)


app_vjp.defvjp(app_vjp_fwd, app_vjp_bwd)


def cube(x):
    return x ** 3


def five_y(y):
    return 5 * y


@custom_vjp
def scaled_tanh(x, w):
    return jnp.tanh(x) * w


def scaled_tanh_fwd(x, w):
    th = jnp.tanh(x)
    return th * w, (th, w)


def scaled_tanh_bwd(res, g):
    th, w = res
    return (g * w * (1 - th ** 2), jnp.sum(g * th))


scaled_tanh.defvjp(scaled_tanh_fwd, scaled_tanh_bwd)


def uses_scaled_tanh(x, w):
    total = 0.0
    for i in range(3):
        total = total + jnp.sum(scaled_tanh(x * (i + 1), w))
    return total


def uses_log1pexp(x):
    return jnp.sum(log1pexp(x) * x)


xs = np.array([0.5, -1.0, 2.0])


CASES = [
    case("custom_jvp_call", "f_sin_y(2., 3.)"),
    case("custom_jvp_jvp", "jvp(f_sin_y, (2., 3.), (1., 0.))"),
    case("custom_jvp_grad", "grad(f_sin_y)(2., 3.)"),
    case("custom_jvp_grad_both", "grad(f_sin_y, (0, 1))(2., 3.)"),
    case("defjvps_jvp", "jvp(f_sin_y_defjvps, (2., 3.), (1., 0.))"),
    case("defjvps_grad", "grad(f_sin_y_defjvps)(2., 3.)"),
    case("custom_vjp_grad", "grad(f_vjp_sin_y)(2., 3.)"),
    case("custom_vjp_grad_both", "grad(f_vjp_sin_y, (0, 1))(2., 3.)"),
    case("log1pexp_plain_jit_grad", "jit(grad(log1pexp_plain))(3.)"),
    case("log1pexp_plain_vmap_jit_grad", "vmap(jit(grad(log1pexp_plain)))(jnp.arange(3.))"),
    case("log1pexp_grad_100", "grad(log1pexp)(100.)"),
    case("log1pexp_jit", "jit(log1pexp)(3.)"),
    case("log1pexp_jit_grad", "jit(grad(log1pexp))(3.)"),
    case("log1pexp_vmap_jit_grad", "vmap(jit(grad(log1pexp)))(jnp.arange(3.))"),
    case("log1pexp_vmap_grad_large", "vmap(grad(log1pexp))(jnp.array([10., 100., 1000.]))"),
    case("log1pexp_defjvps_grad_100", "grad(log1pexp_defjvps)(100.)"),
    case("log1pexp_defjvps_vmap_jit_grad", "vmap(jit(grad(log1pexp_defjvps)))(jnp.arange(3.))"),
    case("log1pexp_jacrev", "jacrev(log1pexp)(xs)"),
    case("log1pexp_vjp", "vjp(log1pexp, xs)[1](np.ones(3))"),
    case("log1pexp_in_a_sum", "grad(uses_log1pexp)(xs)"),
    case("log1pexp_hessian", "hessian(uses_log1pexp)(xs)"),
    case("sqrt_ratio_grad_0", "grad(sqrt_ratio)(0.)"),
    case("clip_sin_vmap_grad", "vmap(grad(clip_sin))(t)"),
    case("clip_sin_grad", "grad(clip_sin)(2.)"),
    case("clip_sin_jit_vmap_grad", "jit(vmap(grad(clip_sin)))(t)"),
    case("sin_rule_jvp", "jvp(sin_rule, (3.,), (1.,))"),
    case("sin_rule_grad", "grad(sin_rule)(3.)"),
    case("sin_rule_grad_grad", "grad(grad(sin_rule))(3.)"),
    case("x2y_grad", "grad(x2y)(2., 3.)"),
    case("x2y_grad_1", "grad(x2y, 1)(2., 3.)"),
    case("x2y_none_grad_0", "grad(x2y_none, 0)(2., 3.)"),
    case("x2y_none_grad_1", "grad(x2y_none, 1)(2., 3.)"),
    case("branchy_grad_pos", "grad(branchy)(1.)"),
    case("branchy_grad_neg", "grad(branchy)(-1.)"),
    case("branchy_jacfwd", "jacfwd(branchy)(1.)"),
    case("branchy_jacrev", "jacrev(branchy)(1.)"),
    case("sin_vjp_grad", "grad(sin_vjp)(3.)"),
    case("sin_vjp_vjp", "vjp(sin_vjp, 3.)[1](1.)"),
    # JAX refuses forward mode through a custom_vjp function; s2s_ad differentiates its
    # body (docs/custom_rules.md), here sin.
    case("sin_vjp_jvp", "jvp(sin_vjp, (3.,), (1.,))", reference="jvp(jnp.sin, (3.,), (1.,))"),
    case("pt_fn_call", "pt_fn(Point(1., 2.))"),
    case("pt_fun_grad", "grad(pt_fun)(Point(1., 2.))"),
    case("pt_fun_vjp_grad", "grad(pt_fun_vjp)(Point(1., 2.))"),
    case("app_call", "app(cube, 3.)"),
    case("app_grad", "grad(app, 1)(cube, 3.)"),
    case("app2_grad", "grad(app2, 1)(cube, 3., five_y)"),
    case("app_vjp_grad", "grad(app_vjp, 1)(cube, 4.)"),
    case("scaled_tanh_loop_grad", "grad(uses_scaled_tanh, (0, 1))(xs, 1.5)"),
    case("scaled_tanh_vmap_grad", "vmap(grad(uses_scaled_tanh), in_axes=(0, None))(np.stack([xs, -xs]), 1.5)"),
]

#: Functions the differential oracle checks under every transform and witness:
#: (function, arguments, differentiated argnums).
ORACLE = [("uses_scaled_tanh", "(xs, 1.5)", (0, 1)), ("uses_log1pexp", "(xs,)", 0),
          ("f_sin_y", "(2., 3.)", (0, 1)), ("x2y", "(2., 3.)", (0, 1))]
