"""User code for tests/test_lambdas.py: lambdas, nested defs and methods.

Lines the tests locate end in a ``# <- KEY`` marker.
"""
import numpy as np


def loss(w, X, y):
    return np.sum((X @ w - y) ** 2)


def make_pair(c):
    """Two lambdas on one line, closing over the same value."""
    f, g = (lambda x: np.sum(np.sin(x) * c)), (lambda x: np.sum(x ** 3 * c))  # <- pair
    return f, g


def make_scaled(C, s):
    """A lambda closing over an array and a float."""
    return lambda w: np.sum(np.sin(w) * C) + s * np.dot(w, w)


def make_vector(C):
    return lambda w: np.sin(w) * C


def local_lambda(x):
    sq = lambda z: z ** 2  # noqa: E731
    return np.sum(sq(x)) + (lambda z, k=3.0: z * k)(x[0])


def nested_def(x):
    a = np.sum(x)

    def h(z):
        acc = 0.0
        for i in range(z.shape[0]):
            if z[i] > 10.0:
                return acc            # an early return inside a loop
            acc = acc + z[i] * x[0] * a
        return acc
    return h(x) + h(x * 2.0)


def late_binding(x):
    g = lambda z: z * a  # noqa: E731  (reads a at the call, as Python does)
    a = x ** 2
    return np.sum(g(x))


def apply(fn, v):
    return fn(v)


def apply_twice(fn, v):
    return apply(fn, fn(v))


def passes_lambda(x):
    a = x[1]
    return np.sum(apply(lambda z: z * a, x))


def passes_nested_def(x):
    def cube(z):
        return z ** 3 * x[0]
    return np.sum(apply_twice(cube, x))


def writes_closed_over(x):
    u = np.zeros(3)

    def put(i, v):
        u[i] = v
    put(0, x[0] ** 2)
    put(2, x[1] * x[0])
    return np.sum(u)


def returns_a_lambda(x):
    return lambda z: z * x  # <- returns_lambda


def make_nonlocal():
    count = 0.0

    def bump(x):
        nonlocal count  # <- nonlocal
        return x * 2.0
    return bump


class Model:
    def __init__(self, W, scale):
        self.W = W
        self.scale = scale
        self.power = 2

    def penalty(self, x):
        return self.scale * np.sum(x ** self.power)

    def loss(self, x, y):
        return np.sum(np.tanh(self.W @ x) * y) + self.penalty(x)


def sum_over(fn, n):
    total = 0.0
    for i in range(n):
        total = total + fn(i)
    return total


def energy(u):
    """The example of docs/lambdas.md."""
    k = u[0]
    spring = lambda d: 0.5 * k * d ** 2  # noqa: E731

    def bond(i):
        return spring(u[i + 1] - u[i])
    return sum_over(bond, u.shape[0] - 1)


def _square(v):
    return v * v


def functions_in_a_list(x):
    """Functions as values: a list of lambdas, NumPy functions and a module-level
    helper, called through the loop variable."""
    layers = [lambda v: v ** 2, np.cos, _square, np.tanh]
    total = 0.0
    for f in layers:
        total = total + np.sum(f(x))
    return total


def functions_by_index_and_key(x):
    """A tuple of functions indexed by an unrolled loop's counter; a dict of
    activations picked by constant keys, into a name and directly."""
    fs = (np.sin, lambda v: v ** 3, _square)
    total = 0.0
    for i in range(len(fs)):
        total = total + np.sum(fs[i](x) * (i + 1))
    acts = {"exp": lambda v: np.exp(v), "cos": np.cos}
    act = acts["cos"]
    return total + np.sum(acts["exp"](x)) + np.sum(act(x))
