"""User functions for the error paths of the transforms (tests/test_errors.py).

Lines the errors must point at end in a ``# <- KEY`` marker.
"""
import numpy as np

import s2s_ad as ad


def loss(x):
    return np.sum(np.sin(x) * x)


def weighted(x, w):
    return np.sum(w * x * x)


def vector_out(x):
    return np.sin(x) * 2.0


def pair_out(x):
    return np.sum(x * x), np.cos(x)


def scaled(x, n):
    return np.sum(x * n)


def through_unknown(x):
    y = x * 2.0
    z = np.spacing(y)  # <- unknown_call
    return np.sum(z)


def unknown_off_path(x, c):
    k = np.spacing(c)
    return np.sum(x * k)


def unknown_stopped(x):
    k = np.spacing(ad.stop_gradient(x))
    return np.sum(x * k)


def helper_unknown(y):
    return np.spacing(y * y)  # <- helper_unknown


def calls_helper_unknown(x):
    return np.sum(helper_unknown(x) + x)


def pytree_in(p):
    a, b = p
    return np.sum(a * b)


square = lambda x: x * x

def make_wrapped_lambda():
    return ad.grad(
        lambda x: x * 3.0)
