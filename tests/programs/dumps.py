"""Programs whose builds run every pass (tests/test_dumps.py)."""
import numpy as np


def rows(x, A):
    return np.tanh(A @ x) * x[0]


def loss(x):
    total = 0.0
    for i in range(x.shape[0]):
        total = total + np.sin(x[i]) * x[0]
    return total


def rows_again(x, A):
    return np.cos(A @ x) * x[1]


def loss_again(x):
    return np.sum(np.sin(x) ** 2)
