"""Writing helpers that s2s_ad refuses, each with a clear error at the call."""
import numpy as np


def smooth(u):
    u[1:-1] = 0.5 * (u[:-2] + u[2:])


def swap_average(a, b):
    b[1:-1] = np.tanh(a[:-2] + a[2:])
    a[1:-1] = b[1:-1] * a[1:-1]


def countdown(u, n):
    if n > 0:
        u[0] = u[0] * 2.0
        countdown(u, n - 1)  # <- recursion


def recursive_writer(u):
    v = u.copy()
    countdown(v, 3)
    return np.sum(v)


def reshaped_view(u):
    v = u.copy()
    smooth(v.reshape(2, 3)[0])  # <- reshape
    return np.sum(v)


def overlapping_arguments(u):
    v = u.copy()
    swap_average(v[1:-1], v)  # <- overlap
    return np.sum(v)


def pure_statement(u):
    np.sin(u)  # <- pure
    return np.sum(u)


def fancy_index_view(u):
    v = u.copy()
    smooth(v[np.arange(4)])  # <- fancy
    return np.sum(v)
