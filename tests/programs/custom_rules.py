"""Functions with user derivative rules (ad.custom_vjp / ad.custom_jvp).

The rules deliberately differ from the true derivative (scaled by a known
factor), so a test can tell whether the rule or the body was differentiated.
"""
import numpy as np

import s2s_ad as ad


@ad.custom_vjp
def scaled_tanh(x, w):
    return np.tanh(x) * w


def scaled_tanh_fwd(x, w):
    t = np.tanh(x)
    return t * w, (t, w)


def scaled_tanh_bwd(res, g):
    t, w = res
    return (10.0 * g * w * (1.0 - t * t), np.sum(g * t))


scaled_tanh.defvjp(scaled_tanh_fwd, scaled_tanh_bwd)


def loop_user(x, w):
    s = 0.0
    for i in range(3):
        s += np.sum(scaled_tanh(x, w)) * (i + 1.0)
    return s


@ad.custom_jvp
def softplus(x):
    return np.log(1.0 + np.exp(x))


def softplus_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    return softplus(x), 2.0 * dx / (1.0 + np.exp(-x))


softplus.defjvp(softplus_jvp)


def softplus_user(x):
    return np.sum(softplus(x) * x)


@ad.custom_vjp
def bad_count(x, w):
    return x * w


def bad_count_fwd(x, w):
    return x * w, (x, w)


def bad_count_bwd(res, g):
    return (g,)


bad_count.defvjp(bad_count_fwd, bad_count_bwd)


@ad.custom_vjp
def safe_log(x):
    return np.log(x)


def safe_log_fwd(x):
    return np.log(x), x


def safe_log_bwd(x, g):
    return (g / np.maximum(x, 1e-12),)


safe_log.defvjp(safe_log_fwd, safe_log_bwd)


def sum_safe_log(x):
    return np.sum(safe_log(x))
