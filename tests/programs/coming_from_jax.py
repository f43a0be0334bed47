"""User code for tests/test_coming_from_jax.py: lambdas and nested defs given to
transforms inside transformed functions, and dict/NamedTuple pytrees."""
from typing import NamedTuple

import numpy as np

import s2s_ad as ad

A = np.array([[1.0, 2.0, 0.5], [0.5, -1.0, 0.3]])


def inner(v, X):
    return np.sum(np.tanh(X @ v) ** 2)


def f(x, W):
    return np.tanh(x @ W)


# -- a lambda or nested def as the function of an inner transform ------------------
def penalty_lambda(w):                      # closes over a module constant
    g = ad.grad(lambda v: inner(v, A))(w)
    return np.sum(g ** 2)


def penalty_captures_argument(w, X):        # the lambda reads w and X: differentiated outside
    g = ad.grad(lambda v: inner(v, X * w[0]))(w)
    return np.sum(g ** 2)


def vmap_lambda(W, X):
    return np.sum(ad.vmap(lambda x: f(x, W))(X) ** 2)


def jvp_nested_def(w, v):
    s = w[0]

    def h(u):
        return np.sin(u) * s
    out, t = ad.jvp(h, (w,), (v,))
    return np.sum(out * t)


def vjp_lambda(w, c):
    k = 2.0
    out, vjp_fn = ad.vjp(lambda u: np.sin(u) * k * w[1], w)
    (g,) = vjp_fn(c)
    return np.sum(g ** 2) + np.sum(out)


def hessian_lambda(w):
    sc = w[0] ** 2
    H = ad.hessian(lambda u: np.sum(u ** 3) * sc)(w)
    return np.sum(H)


def value_and_grad_default(w):
    lam = lambda v, a=2.0: np.sum(np.sin(v) * a * w)  # noqa: E731
    val, g = ad.value_and_grad(lam)(w)
    return val + np.sum(g ** 2)


def nested_def_calls_lambda(w):             # a local function read by the one transformed
    spring = lambda d: 0.5 * w[0] * d ** 2  # noqa: E731

    def bond(u):
        return np.sum(spring(u[1:] - u[:-1]))
    return np.sum(ad.grad(bond)(w) ** 2)


def jacrev_argnums_lambda(w, b):
    J = ad.jacrev(lambda u, c: np.sin(u) * c * w[2], argnums=1)(w, b)
    return np.sum(J ** 2)


def grad_has_aux_lambda(w):
    g, aux = ad.grad(lambda v: (np.sum(v ** 2 * w), v[0] * 3.0), has_aux=True)(w)
    return np.sum(g * aux)


def maml_lambda(w, X, y, lr):               # the MAML step with a lambda loss
    def task_loss(p):
        return np.mean((np.tanh(X @ p) - y) ** 2)
    w1 = w - lr * ad.grad(task_loss)(w)
    return task_loss(w1)


# -- dicts and NamedTuples ---------------------------------------------------------
class P(NamedTuple):
    w: np.ndarray
    b: float


def dict_loss(p, x, y):
    return (np.tanh(x @ p["w"] + p["b"]) - y) ** 2


def nt_loss(p, x, y):
    return (np.tanh(x @ p.w + p.b) - y) ** 2


def dict_aux(p, x, y):
    pred = np.tanh(x @ p["w"] + p["b"])
    return (pred - y) ** 2, {"pred": pred, "w2": np.sum(p["w"] ** 2)}


def dict_out(p, x):
    return {"h": np.tanh(x @ p["w"]), "s": P(x * p["b"], p["b"] * 2.0), "none": None}


def builds_a_dict(w, b, X, y):              # a dict display, d["k"] = v, dict in_axes inside
    params = {"w": w, "b": b}
    G = ad.vmap(ad.grad(dict_loss), in_axes=({"w": None, "b": None}, 0, 0))(params, X, y)
    params["w"] = G["w"]
    return np.sum(params["w"] ** 2) + np.sum(G["b"] ** 2)


def lambda_over_dict(w, X):
    d = {"a": w, "s": 2.0}
    return np.sum(ad.vmap(lambda x: np.sin(x @ d["a"]) * d["s"])(X) ** 2)


def writes_dict_argument(p):
    p["w"] = p["w"] * 2.0
    return np.sum(p["w"])
