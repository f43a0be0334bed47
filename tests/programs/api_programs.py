"""User programs for ``tests/test_api.py``: the public transforms.

Each function's derivative has a short closed form, written next to it, that
the tests compute with plain NumPy.
"""
import math

import numpy as np

import s2s_ad as ad


def tree_loss(p, x):
    """p = (w, (b, c)): sum(tanh(x * w) + b) * c.

    d/dw = c (1 - tanh^2(x w)) x,  d/db = c,  d/dc = sum(tanh(x w) + b),
    d/dx = c (1 - tanh^2(x w)) w.
    """
    w, (b, c) = p
    return np.sum(np.tanh(x * w) + b) * c


def list_loss(ps):
    """ps = [a, b, [s, (t,)]]: sum(a * b) + s^2 t.

    Gradient [b, a, [2 s t, (s^2,)]].
    """
    a = ps[0]
    b = ps[1]
    s, (t,) = ps[2]
    return np.sum(a * b) + s * s * t


def three(a, b, c):
    """sum(a * b) + c^2 sum(a): d/da = b + c^2, d/db = a, d/dc = 2 c sum(a)."""
    return np.sum(a * b) + c * c * np.sum(a)


def with_aux(x):
    """(sum(x^2), (2 x, sum(x^2) + 1)): gradient 2 x."""
    y = np.sum(x ** 2)
    return y, (x * 2.0, y + 1.0)


def pair_out(x, y):
    """(x y, (sin x, y^2)).  For cotangents (u, (v, z)):
    d/dx = u y + v cos x,  d/dy = u x + 2 y z."""
    return x * y, (np.sin(x), y ** 2)


def exp_aux(x):
    """(exp x, sum x): d<u, exp x>/dx = u exp x."""
    return np.exp(x), np.sum(x)


def cubic(x):
    """sum(x^3 - 2 x): gradient 3 x^2 - 2."""
    return np.sum(x ** 3 - 2.0 * x)


def scalar_fn(t):
    """sin(t) t + t^2: derivative cos(t) t + sin(t) + 2 t."""
    return math.sin(t) * t + t ** 2


def tanh_dot(x, w):
    """sum(tanh(x w)): d/dx = (1 - tanh^2(x w)) w."""
    return np.sum(np.tanh(x * w))


def with_default(x, k=2.0):
    """sum(x^2) k: gradient 2 k x."""
    return np.sum(x * x) * k


@ad.jit
def jitted_bare(x):
    """sum(sin(x) x): gradient cos(x) x + sin(x)."""
    return np.sum(np.sin(x) * x)


@ad.jit(cache=False, fastmath=False)
def jitted_options(x):
    """sum(exp(-x^2)): gradient -2 x exp(-x^2)."""
    return np.sum(np.exp(-x * x))
