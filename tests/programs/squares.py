"""Programs that multiply a value by itself (``a * a`` lowers to np.square)."""
import numpy as np


def self_product(x):
    y = x * x
    return np.sum(y * np.sin(x))


def scalar_square(t):
    return t * t + 3.0 * t


def product_of_two(x, w):
    return np.sum(x * w)


def squared_distances(x, c):
    """The ADBench GMM shape: a residual times itself, summed per row."""
    r = x - c
    return np.sum(np.exp(-0.5 * np.sum(r * r, axis=1)))


def square_in_loop(x):
    s = 0.0
    for i in range(x.shape[0]):
        v = x[i] - 0.5
        s += v * v
    return s
