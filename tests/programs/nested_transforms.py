"""User programs for ``tests/test_nested_transforms.py``: transforms called inside
functions that are themselves transformed (a gradient penalty, a MAML step, a
Newton step, per-sample gradient norms)."""
import numpy as np

import s2s_ad as ad


def inner(x):
    """sum(sin(x)); its gradient is cos(x)."""
    return np.sum(np.sin(x))


def penalty(x):
    """sum(cos(x)^2): the squared norm of inner's gradient; gradient -2 sin(x) cos(x)."""
    return np.sum(ad.grad(inner)(x) ** 2)


def penalty_value_and_grad(x):
    """inner(x) + sum(cos(x)^2) from ad.value_and_grad; gradient cos(x) - 2 sin(x) cos(x)."""
    value, g = ad.value_and_grad(inner)(x)
    return value + np.sum(g * g)


def loss(w, X, y):
    """Least squares with a tanh model: mean((tanh(X w) - y)^2)."""
    r = np.tanh(np.dot(X, w)) - y
    return np.mean(r ** 2)


def maml(w, X, y, lr):
    """The loss after one inner gradient step, differentiated through the step."""
    w1 = w - lr * ad.grad(loss)(w, X, y)
    return loss(w1, X, y)


def maml_two_steps(w, X, y, lr):
    """Two inner steps in a loop."""
    for _ in range(2):
        w = w - lr * ad.grad(loss)(w, X, y)
    return loss(w, X, y)


def sep(w):
    """A separable function: its Hessian is diagonal, diag(12 w^2 + 2)."""
    return np.sum(w ** 4 + w ** 2)


def newton_diag(w):
    """sep after a damped diagonal Newton step, written with ad.hessian inside."""
    H = ad.hessian(sep)(w)
    g = ad.grad(sep)(w)
    return sep(w - 0.5 * g / np.sum(H, axis=1))     # H is diagonal: its row sums


def quartic(a):
    """A scalar function of a scalar: a^4 / 4 + sin(a)."""
    return a ** 4 / 4.0 + np.sin(a)


def newton_scalar(a):
    """quartic after a Newton step in one dimension (a scalar Hessian)."""
    return quartic(a - ad.grad(quartic)(a) / ad.hessian(quartic)(a))


def sample_loss(w, x):
    """One example's loss: (tanh(w . x))^2."""
    return np.tanh(np.dot(w, x)) ** 2


def per_sample_norms(w, X):
    """The sum of the squared per-sample gradient norms."""
    G = ad.vmap(ad.grad(sample_loss), in_axes=(None, 0))(w, X)
    return np.sum(G ** 2)


def two_args(x, y):
    return np.sum(np.sin(x) * y)


def argnums_tuple(x, y):
    """Both gradients of two_args: (cos(x) y, sin(x)); the sum of their squares."""
    gx, gy = ad.grad(two_args, argnums=(0, 1))(x, y)
    return np.sum(gx ** 2) + np.sum(gy ** 2)


def argnums_one(x, y):
    """The gradient of two_args w.r.t. y: sin(x), times x."""
    return np.sum(ad.grad(two_args, argnums=1)(x, y) * x)


def with_aux(x):
    return np.sum(x ** 3), np.sum(x)


def aux_penalty(x):
    """grad of sum(x^3) is 3x^2; aux is sum(x)."""
    g, aux = ad.grad(with_aux, has_aux=True)(x)
    return np.sum(g) * aux


def vec_fn(x):
    """An R^n -> R^n map: sin(x) * x[0]."""
    return np.sin(x) * x[0]


def jac_trace_fwd(x):
    """trace of d vec_fn / dx = sum(cos(x)) x0 + sin(x0)."""
    return np.sum(ad.jacfwd(vec_fn)(x) * np.eye(x.shape[0]))


def jac_trace_rev(x):
    return np.sum(ad.jacrev(vec_fn)(x) * np.eye(x.shape[0]))


def hvp_inside(x, v):
    """v . H v for inner: -sum(sin(x) v^2)."""
    return np.sum(ad.hvp(inner, (x,), (v,)) * v)


def jvp_of_grad(x, v):
    """The directional derivative of inner's gradient: -sin(x) v, summed with weights x."""
    _, t = ad.jvp(ad.grad(inner), (x,), (v,))
    return np.sum(t * x)


def vjp_inside(x, c):
    """c^T J of vec_fn, through ad.vjp inside; summed squared."""
    out, vjp_fn = ad.vjp(vec_fn, x)
    (ct,) = vjp_fn(c)
    return np.sum(ct ** 2) + np.sum(out)


def level1(x):
    return np.sum(np.sin(x) * x)


def level2(x):
    return np.sum(ad.grad(level1)(x) ** 2)


def level3(x):
    """Depth three: grad inside grad inside grad (the outer test takes one more)."""
    return np.sum(np.cos(ad.grad(level2)(x)))


def scalar_depth(a):
    """d/da of d/da of a^5 = 20 a^3."""
    return ad.grad(ad.grad(quintic))(a)


def quintic(a):
    return a ** 5


def returns_transform(x):
    g = ad.grad(inner)
    return g(x)


def returns_vjp_fn(x):
    out, vjp_fn = ad.vjp(inner, x)
    return vjp_fn


def vector_grad(x):
    """ad.grad of a function whose output is an array: a TypeError when it runs."""
    return np.sum(ad.grad(vec_fn)(x))


def aux_not_pair(x):
    g, aux = ad.grad(inner, has_aux=True)(x)
    return np.sum(g)


def grad_field(x):
    """An R^n -> R^n map through an inner gradient: cos(x) x; Jacobian
    diag(cos(x) - x sin(x))."""
    return ad.grad(inner)(x) * x


def module_level_grad(x):
    """A transformed function bound at module level, called inside."""
    return np.sum(D_INNER(x) ** 2)


D_INNER = ad.grad(inner)
