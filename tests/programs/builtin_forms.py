"""Python builtins on differentiated values (sum, pow, round, abs, min, max) and
NumPy call forms found missing in the issue-17 audit: np.cross along other axes,
np.linalg.eigvalsh / svdvals, the .diagonal() / .trace() methods, weighted
np.average along an axis, and out= on a function with a rule."""
import numpy as np

W3 = np.array([1.0, 2.0, 0.5])


def builtins_sum(x):
    return sum(x) * sum(x[0]) + sum([x[0, 0], 2.0 * x[1, 1]], 1.5) + sum(x[2], x[1])


def builtins_pow_round(x):
    return pow(x[0], 2) + pow(x[1], x[2]) + round(x[2, 2], 2) * x[0] + round(x[1, 1]) * x[1]


def builtins_abs_min_max(x):
    return abs(x[0] - 1.0) + min(x[0, 0], x[0, 1]) + max(x[1, 1], 1.0)


def cross_axes(x):
    return np.cross(x[:, :3].T, x[:, 1:].T, axis=0) + \
        np.cross(x[:, :3], x[:, 1:], axisc=0).T + np.cross(x[:, :3].T, x[:, 1:], axisa=0)


def spectra(x):
    a = x[:, :3] + x[:, :3].T + np.diag(np.array([0.0, 3.0, 6.0]))
    return np.sum(np.linalg.eigvalsh(a) * W3) + np.sum(np.linalg.svdvals(x) * W3)


def methods(x):
    return x.diagonal() + x.diagonal(1) + x.trace() + x[:, :3].trace(offset=-1)


def average_along(x):
    return np.average(x, axis=0, weights=W3) + np.average(x, 1, np.arange(1.0, 5.0))[0]


def out_on_rule(x):
    y = np.zeros(4)
    np.sum(x, axis=0, out=y)
    return y


def loss(x):
    """Every case in one scalar (one Numba compile for the jit test)."""
    return np.sum(np.sin(builtins_sum(x))) + np.sum(np.sin(builtins_pow_round(x) * 1.1)) + \
        np.sum(np.sin(builtins_abs_min_max(x))) + np.sum(np.sin(cross_axes(x) * 1.2)) + \
        np.sin(spectra(x)) + np.sum(np.sin(methods(x) * 1.3)) + \
        np.sum(np.sin(average_along(x) * 1.4))
