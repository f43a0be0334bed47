"""Transforms written inside transformed functions, run as reverse code
(tests/test_nested_reverse.py): inner gradients in MAML steps, gradient
penalties, Newton steps, loops, in-place writes and while loops, three
levels deep, beside inner ``ad.hvp``, ``ad.vjp`` and ``ad.value_and_grad``
with ``has_aux``."""
import numpy as np

import s2s_ad as ad


def loss(w, x):
    return np.sum(np.tanh(x @ w) ** 2)


def maml(w, x):
    w1 = w - 0.1 * ad.grad(loss)(w, x)
    return loss(w1, x)


def maml_x(w, x):
    """The outer derivative also with respect to the inner function's data."""
    w1 = w - 0.1 * ad.grad(loss)(w, x)
    return loss(w1, x * 1.5)


def penalty(x):
    g = ad.grad(lambda v: np.sum(np.sin(v) * v[0]))(x)
    return np.sum(g ** 2)


def value_and_grad_inside(w, x):
    v, g = ad.value_and_grad(loss)(w, x)
    return v * np.sum(g ** 3)


def loss_aux(w, x):
    y = np.tanh(x @ w)
    return np.sum(y ** 2), y


def with_aux(w, x):
    (v, y), g = ad.value_and_grad(loss_aux, has_aux=True)(w, x)
    g2, y2 = ad.grad(loss_aux, has_aux=True)(w, x)
    return v + np.sum(y * g[0]) + np.sum(g2 * y2[:3])


def two_argnums(w, x):
    gw, gx = ad.grad(loss, argnums=(0, 1))(w, x)
    return np.sum(gw ** 2) + np.sum(gx * x)


def dict_loss(p, x):
    return np.sum(np.tanh(x @ p["a"] + p["b"]) ** 2)


def dict_maml(w, x):
    p = {"a": w, "b": w[0] * 0.5}
    g = ad.grad(dict_loss)(p, x)
    q = {"a": p["a"] - 0.1 * g["a"], "b": p["b"] - 0.1 * g["b"]}
    return dict_loss(q, x)


def level1(x):
    return np.sum(np.sin(x) ** 3)


def level2(x):
    return np.sum(ad.grad(level1)(x) ** 2)


def level3(x):
    return np.sum(np.cos(ad.grad(level2)(x)))


def hvp_inside(x):
    v = np.ones_like(x) * 0.3
    return np.sum(ad.hvp(level1, (x,), (v,)) ** 2)


def jvp_of_grad_inside(x):
    _, t = ad.jvp(ad.grad(level1), (x,), (x * 0.5,))
    return np.sum(t * x)


def vjp_inside(w, x):
    out, vjp_fn = ad.vjp(lambda v: np.tanh(x @ v), w)
    (g,) = vjp_fn(out * 2.0)
    return np.sum(g ** 2) + np.sum(out)


def loop_loss(w, x):
    u = x @ w
    for _ in range(3):
        u = np.tanh(u) * w[0]
    return np.sum(u ** 2)


def unrolled(w, x):
    """An unrolled optimiser: two inner steps, then the loss."""
    w1 = w
    for _ in range(2):
        w1 = w1 - 0.05 * ad.grad(loop_loss)(w1, x)
    return loop_loss(w1, x)


def inplace_loss(w, x):
    u = x @ w
    for _ in range(2):
        u[1:] = u[1:] + u[:-1]
        u = np.tanh(u)
    return np.sum(u)


def inplace_maml(w, x):
    return inplace_loss(w - 0.1 * ad.grad(inplace_loss)(w, x), x)


def newton(w, x):
    H = ad.hessian(lambda v: loss(v, x))(w)
    g = ad.grad(loss)(w, x)
    return loss(w - np.linalg.solve(H + 3.0 * np.eye(w.size), g), x)


def while_loss(w, x):
    s = np.sum(x @ w)
    k = 0
    while k < 3:
        s = np.sin(s) + w[1]
        k += 1
    return s * s


def while_maml(w, x):
    return while_loss(w - 0.1 * ad.grad(while_loss)(w, x), x)


def scalar_inner(w, x):
    """An inner gradient with respect to a scalar."""
    a = w[0] * 1.0
    g = ad.grad(lambda s: np.sum(np.sin(s * x)))(a)
    return g * w[1]


def update(w, x):
    """JAX's training step: an inner gradient under jit, nothing around it."""
    g = ad.grad(loss)(w, x)
    return w - 0.1 * g


def elementwise(x):
    return np.sin(x)


def not_scalar(x):
    return np.sum(ad.grad(elementwise)(x))


def integer_argument(x):
    return ad.grad(lambda n, v: np.sum(v * n))(3, x)


#: name -> (function, argnums the outer gradient takes)
PROGRAMS = {
    "maml": (maml, (0,)), "maml_x": (maml_x, (0, 1)), "penalty": (penalty, (0,)),
    "value_and_grad_inside": (value_and_grad_inside, (0, 1)), "with_aux": (with_aux, (0, 1)),
    "two_argnums": (two_argnums, (0, 1)), "dict_maml": (dict_maml, (0, 1)),
    "level2": (level2, (0,)), "level3": (level3, (0,)), "hvp_inside": (hvp_inside, (0,)),
    "jvp_of_grad_inside": (jvp_of_grad_inside, (0,)), "vjp_inside": (vjp_inside, (0, 1)),
    "unrolled": (unrolled, (0,)), "inplace_maml": (inplace_maml, (0, 1)),
    "newton": (newton, (0,)), "while_maml": (while_maml, (0, 1)),
    "scalar_inner": (scalar_inner, (0, 1)),
}
