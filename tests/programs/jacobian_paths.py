"""Programs for tests/test_regress_jacobians.py: Jacobians (plain, compiled,
batched) of functions that read module constants, call helpers with loops
(whose reverse sweeps keep stacks), use where/maximum/minimum/clip, or have
several outputs."""
import math

import numpy as np

COEF = np.array([0.4, -0.1, 0.6, 0.9])
PROJ = np.array([[0.5, -0.2, 0.3], [0.1, 0.7, -0.4]])
SHIFT = np.array([0.3, -0.6])


def horner(y):
    p = np.zeros_like(y)
    for k in range(COEF.shape[0]):
        p = p * y + COEF[k]
    return p


def model(x):
    """Module constants and a helper whose loop keeps a stack of arrays."""
    return horner(PROJ @ x) + SHIFT * np.sum(x ** 2)


def model_total(x):
    return np.sum(model(x))


def gate(x, y):
    a = np.where(x > 0.0, x, 0.2 * x)
    return a * np.maximum(x, y) + np.minimum(x * y, 0.4) - np.clip(y, -0.5, 0.5) ** 2


def _running(v):
    """A float carried through a loop (allocated storage), and an array out."""
    s = 0.0
    out = np.zeros_like(v)
    for i in range(v.shape[0]):
        s = 0.7 * s + math.sin(v[i])
        out[i] = s * v[i]
    return out


def _smooth(v):
    """Overwritten elements: the adjoint restores them."""
    y = v.copy()
    for k in range(2):
        for i in range(1, y.shape[0]):
            y[i] = 0.5 * math.sin(y[i - 1]) + y[i] * 0.8
    return y


def mixed(x, w):
    """Output length follows ``w`` (m, n): helpers with loops on an (m,) vector."""
    z = np.tanh(w @ x)
    return _running(z) + _smooth(z) * z + horner(z)


def in_loop(x, w):
    """Helpers called in the caller's loop: stacks of the helpers' stacks."""
    z = w @ x
    acc = np.zeros_like(z)
    for j in range(3):
        acc = 0.5 * acc + horner(np.tanh(z * (j + 1.0))) * _running(np.sin(z + acc))
    return acc


def gated(x, w):
    """where / maximum / minimum / clip on a vector of ``w``'s rows."""
    z = w @ x
    a = np.where(z > 0.0, z, 0.2 * z)
    return a * np.maximum(z, 0.1 * x[0]) + np.minimum(z * z, 0.4) - np.clip(z, -0.5, 0.5) ** 2


def two_outputs(x, w):
    """Several outputs: a vector from a helper with a loop, and a scalar."""
    z = w @ x
    return horner(z) * np.sum(x), np.sum(np.maximum(z, 0.0) ** 2)
