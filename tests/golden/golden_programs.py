"""User programs whose generated gradient source is kept in golden files.

Kept apart from the corpus so that editing the corpus does not move the
line numbers quoted in the golden files.
"""
import numpy as np


def cumsum_recurrence(x):
    s = 0.0
    acc = 0.0
    for i in range(x.shape[0]):
        s = s + x[i]
        acc = acc + s * s
    return acc


def newton_break(a):
    x = a
    it = 0
    while it < 50:
        step = (x * x - a) / (2.0 * x)
        x = x - step
        if abs(step) < 1e-13:
            break
        it += 1
    return x


def inplace_recurrence(a, u):
    x = np.zeros(u.shape[0])
    x[0] = u[0]
    for i in range(1, u.shape[0]):
        x[i] = a * x[i - 1] + u[i]
    return np.sum(x * x)
