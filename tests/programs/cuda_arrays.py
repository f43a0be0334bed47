"""Per-example programs that make small arrays, for the CUDA target
(tests/test_cuda_arrays.py): of static length (per-thread arrays) and of
data-dependent length (refused at their line)."""
import numpy as np


def step(y, h, a):
    """A helper returning a new array: one explicit Euler step of y' = a * sin(y)."""
    dy = np.zeros(y.shape[0])
    for i in range(y.shape[0]):
        dy[i] = a * np.sin(y[i]) - 0.1 * y[(i + 1) % y.shape[0]]
    return y + h * dy


def integrate(y0, a, n):
    """Arrays carried by a loop, kept past it, reduced with np.sum and np.dot."""
    y = y0
    prev = y0 * 1.0
    for k in range(n):
        prev = y
        y = step(y, 0.1, a)
    return np.sum(y * y) + np.dot(prev, y0)


def data_length(x):
    """np.zeros whose length is known only from the data."""
    out = np.zeros(int(x[0] * 3.0) + 2)
    for i in range(out.shape[0]):
        out[i] = x[1] * i
    return np.sum(out * out)
