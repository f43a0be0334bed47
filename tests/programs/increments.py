"""Element increments ``x[i] += v`` and look-alikes that are not."""
import numpy as np


def histogram_energy(x, bins):
    h = np.zeros(3)
    for i in range(x.shape[0]):
        h[bins[i]] += np.sin(x[i])
    return np.sum(h * h)


def write_between(x):
    """The read and the write of y[k] have another write into y between them."""
    y = x * 1.0
    for k in range(x.shape[0] - 1):
        t = y[k]
        y[k + 1] = 2.0 * y[k + 1]
        y[k] = t + np.cos(y[k + 1])
    return np.sum(y * x)


def named_increment(x, bins):
    """The sum is a named variable, which the loop carries (Python keeps it
    after the loop) but nothing reads after it."""
    h = np.zeros(3)
    for i in range(x.shape[0]):
        total = h[bins[i]] + np.sin(x[i])
        h[bins[i]] = total
    return np.sum(h * h)


def named_then_read(x, bins):
    """As named_increment, but the named sum is read after the loop: its
    adjoint is not the histogram's alone."""
    h = np.zeros(3)
    total = 0.0
    for i in range(x.shape[0]):
        total = h[bins[i]] + np.sin(x[i])
        h[bins[i]] = total
    return np.sum(h * h) + total * total
