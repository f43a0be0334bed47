"""Programs for tests/test_dask.py: per-sample functions run on dask arrays."""
import math

import numpy as np

import s2s_ad as ad


def tanh_loss(theta, x):
    """sum_j tanh(theta_j x_j)^2; gradient in closed form: see test_dask."""
    return np.sum(np.tanh(x * theta) ** 2)


def td_loss(theta, s_t, r_tp1, s_tp1):
    v_t = np.dot(theta, s_t)
    target = r_tp1 + np.dot(theta, s_tp1)
    return (target - v_t) ** 2


def mlp_loss(params, x, y):
    W, b = params
    z = np.dot(np.tanh(np.dot(x, W) + b), np.ones(W.shape[1]))
    return np.log1p(np.exp(-y * z))


def cube(x):
    """A vector function R^n -> R^n with a known Jacobian, diag(3 x^2) plus a
    matrix of ones."""
    return x ** 3 + np.sum(x)


def cube_jvp(x, v):
    """The directional derivative of cube: (cube(x), 3 x^2 v + sum(v))."""
    return ad.jvp(cube, (x,), (v,))


def log_sum(x):
    """Defined only for positive x: np.log of a negative number is nan, and
    math.log raises, which is the error test_dask looks for."""
    total = 0.0
    for i in range(x.shape[0]):
        total += math.log(x[i])
    return total
