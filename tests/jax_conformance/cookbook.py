"""JAX's autodiff cookbook (docs/notebooks/autodiff_cookbook.md) and the
automatic differentiation tutorial (docs/automatic-differentiation.md), as
JAX code; random keys replaced by NumPy's generator."""
import numpy as np
import jax
import jax.numpy as jnp
from jax import grad, jit, vmap, jacfwd, jacrev, jvp, vjp, value_and_grad
from conformance import case

rng = np.random.default_rng(0)


def sigmoid(x):
    return 0.5 * (jnp.tanh(x / 2) + 1)


def predict(W, b, inputs):
    return sigmoid(jnp.dot(inputs, W) + b)


inputs = np.array([[0.52, 1.12, 0.77],
                   [0.88, -1.08, 0.15],
                   [0.52, 0.06, -1.30],
                   [0.74, -2.49, 1.39]])
targets = np.array([True, True, False, True])


def loss(W, b):
    preds = predict(W, b, inputs)
    label_probs = preds * targets + (1 - preds) * (1 - targets)
    return -jnp.sum(jnp.log(label_probs))


W = rng.normal(size=(3,))
b = float(rng.normal())
vec = rng.normal(size=W.shape)
unitvec = vec / np.sqrt(np.vdot(vec, vec))


def loss2(params_dict):
    preds = predict(params_dict['W'], params_dict['b'], inputs)
    label_probs = preds * targets + (1 - preds) * (1 - targets)
    return -jnp.sum(jnp.log(label_probs))


def f_poly(x):
    return x**3 + 2*x**2 - 3*x + 1


f = lambda W: predict(W, b, inputs)


def predict_dict(params, inputs):
    return predict(params['W'], params['b'], inputs)


def hessian(f):
    return jacfwd(jacrev(f))


v = rng.normal(size=W.shape)
u = rng.normal(size=(4,))


def vgrad(f, x):
    y, vjp_fn = vjp(f, x)
    return vjp_fn(jnp.ones(y.shape))[0]


def hvp_revrev(f, x, v):
    return grad(lambda x: jnp.vdot(grad(f)(x), v))(x)


def hvp(f, primals, tangents):
    return jvp(grad(f), primals, tangents)[1]


def hvp_revfwd(f, primals, tangents):
    g = lambda primals: jvp(f, primals, tangents)[1]
    return grad(g)(primals)


def sum_tanh_sq(X):
    return jnp.sum(jnp.tanh(X)**2)


X = rng.normal(size=(5, 4))
V = rng.normal(size=(5, 4))


def loop_mjp(f, x, M):
    y, vjp_fun = vjp(f, x)
    return jnp.vstack([jnp.asarray(vjp_fun(mi)) for mi in M])


def vmap_mjp(f, x, M):
    y, vjp_fun = vjp(f, x)
    outs, = vmap(vjp_fun)(M)
    return outs


U = rng.normal(size=(6, 4))
S = rng.normal(size=(6, 3))


def loop_jmp(f, W, M):
    return jnp.vstack([jvp(f, (W,), (mi,))[1] for mi in M])


def vmap_jmp(f, W, M):
    _jvp = lambda s: jvp(f, (W,), (s,))[1]
    return vmap(_jvp)(M)


def our_jacrev(f):
    def jacfun(x):
        y, vjp_fun = vjp(f, x)
        J, = vmap(vjp_fun, in_axes=0)(jnp.eye(len(y)))
        return J
    return jacfun


def our_jacfwd(f):
    def jacfun(x):
        _jvp = lambda s: jvp(f, (x,), (s,))[1]
        Jt = vmap(_jvp, in_axes=1)(jnp.eye(len(x)))
        return jnp.transpose(Jt)
    return jacfun


def piecewise(x):
    if x < 3:
        return 2 * x ** 3
    else:
        return jnp.pi * x


def abs_sq(z):
    x, y = jnp.real(z), jnp.imag(z)
    return x**2 + y**2


def linear_complex(z):
    x, y = jnp.real(z), jnp.imag(z)
    return (0.3 * x + 0.7 * y) + (0.2 * x + 0.9 * y) * 1j


def sin_z(z):
    return jnp.sin(z)


def conj_z(z):
    return jnp.conjugate(z)


CASES = [
    case("grad_tanh", "grad(jnp.tanh)(2.0)"),
    case("grad_grad_tanh", "grad(grad(jnp.tanh))(2.0)"),
    case("grad_grad_grad_tanh", "grad(grad(grad(jnp.tanh)))(2.0)"),
    case("poly_d1", "jax.grad(f_poly)(1.)"),
    case("poly_d2", "jax.grad(jax.grad(f_poly))(1.)"),
    case("poly_d3", "jax.grad(jax.grad(jax.grad(f_poly)))(1.)"),
    case("poly_d4", "jax.grad(jax.grad(jax.grad(jax.grad(f_poly))))(1.)"),
    case("loss_grad_argnums0", "grad(loss, argnums=0)(W, b)"),
    case("loss_grad", "grad(loss)(W, b)"),
    case("loss_grad_b", "grad(loss, 1)(W, b)"),
    case("loss_grad_tuple", "grad(loss, (0, 1))(W, b)"),
    case("loss2_dict", "grad(loss2)({'W': W, 'b': b})"),
    case("value_and_grad_tuple", "value_and_grad(loss, (0, 1))(W, b)"),
    case("directional_derivative", "jnp.vdot(grad(loss)(W, b), unitvec)"),
    case("jacfwd_predict", "jacfwd(f)(W)"),
    case("jacrev_predict", "jacrev(f)(W)"),
    case("jacrev_dict", "jacrev(predict_dict)({'W': W, 'b': b}, inputs)"),
    case("hessian_predict", "hessian(f)(W)"),
    case("jvp_predict", "jvp(f, (W,), (v,))"),
    case("vjp_predict", "vjp(f, W)[1](u)"),
    case("vgrad", "vgrad(lambda x: 3*x**2, jnp.ones((2, 2)))"),
    case("hvp_revrev", "hvp_revrev(sum_tanh_sq, X, V)"),
    case("hvp_fwdrev", "hvp(sum_tanh_sq, (X,), (V,))"),
    case("hvp_revfwd", "hvp_revfwd(sum_tanh_sq, (X,), (V,))"),
    case("hessian_tensordot", "jnp.tensordot(hessian(sum_tanh_sq)(X), V, 2)"),
    case("loop_mjp", "loop_mjp(f, W, U)"),
    case("vmap_mjp", "vmap_mjp(f, W, U)"),
    case("loop_jmp", "loop_jmp(f, W, S)"),
    case("vmap_jmp", "vmap_jmp(f, W, S)"),
    case("our_jacrev", "our_jacrev(f)(W)"),
    case("our_jacfwd", "our_jacfwd(f)(W)"),
    case("vmap_vjp_fun_eye", "vmap(vjp(f, W)[1])(jnp.eye(4))"),
    case("jit_vjp_fun", "jit(vjp(piecewise, 4.)[1])(1.)"),
    case("grad_piecewise_python_branch", "grad(piecewise)(2.)"),
    case("complex_grad_real_valued", "grad(abs_sq)(3. + 4j)"),
    case("complex_jvp", "jvp(linear_complex, (0.4 + 0.8j,), (0.5 + 0.25j,))"),
    case("complex_vjp", "vjp(linear_complex, 0.4 + 0.8j)[1](np.array(0.5 + 0.25j))"),
    case("holomorphic_sin", "grad(sin_z, holomorphic=True)(3. + 4j)"),
    case("holomorphic_conj", "grad(conj_z, holomorphic=True)(3. + 4j)"),
]

#: Functions the differential oracle checks under every transform and witness:
#: (function, arguments, differentiated argnums).
ORACLE = [("loss", "(W, b)", (0, 1)), ("sum_tanh_sq", "(X,)", 0), ("f", "(W,)", 0)]
