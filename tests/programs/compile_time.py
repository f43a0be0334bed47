"""Programs for tests/test_precompile.py and tests/test_tiered.py (tiered
execution, precompile, the disk cache).  Each has a closed-form derivative
in the tests."""
import math

import numpy as np


def loss(x, w):
    """Loop-free array code: sum(tanh(x * w) ** 2) + sum(w * w)."""
    return np.sum(np.tanh(x * w) ** 2) + np.sum(w * w)


def td_loss(theta, s):
    """A per-example loss for vmap(grad): (theta . s) ** 2 / 2."""
    v = np.dot(theta, s)
    return 0.5 * v * v


def scalar_loop(x, n):
    """A long scalar loop: sum over k < n of sin(x + k) * k / n."""
    total = 0.0
    for k in range(n):
        total = total + math.sin(x + k) * k / n
    return total


def loop_over_array(x):
    """A loop over the elements of an array: sum of x[i] ** 3."""
    total = 0.0
    for i in range(x.shape[0]):
        total = total + x[i] * x[i] * x[i]
    return total


def components(x, k):
    """A loop whose body is array code: sum over j < k of sum(tanh(x * j))."""
    total = 0.0
    for j in range(k):
        total = total + np.sum(np.tanh(x * j))
    return total


def tanh_vec(x):
    """Elementwise tanh: its Jacobian is diag(1 - tanh(x) ** 2)."""
    return np.tanh(x)


def value_bound(x):
    """A scalar loop whose trip count comes from a value, not a shape."""
    total = 0.0
    for k in range(int(x[0] * 10.0)):
        total = total + x[1] * k
    return total


def triangle(x):
    """A loop over the pairs i < j: sum of x[i] * x[j]."""
    total = 0.0
    n = x.shape[0]
    for i in range(n):
        for j in range(i + 1, n):
            total = total + x[i] * x[j]
    return total
