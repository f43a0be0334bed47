"""User programs for ``tests/test_vectorize.py``: vmap's vectorized lowering composed
with the other transforms (jvp inside the function, helpers, jit, nested vmap).

The one-rule-per-program cases of that test are generated from the rule registry
there; the programs here are the ones whose structure matters (calls, loops,
pytrees, several outputs).
"""
import numpy as np

import s2s_ad as ad


def sin_dot(x, y):
    """sum(sin(x) y)."""
    return np.sum(np.sin(x) * y)


def sin_dot_aux(x, y):
    """sin_dot with an auxiliary output."""
    return np.sum(np.sin(x) * y), x


def directional(x, v):
    """d/de sin_dot(x + e v, x + e v) at 0 by ad.jvp inside the user's function:
    sum(cos(x) x v + sin(x) v)."""
    _, t = ad.jvp(sin_dot, (x, x), (v, v))
    return t


def tanh_times(x):
    return np.tanh(x) * x


def jvp_pair(x, v):
    """Both results of ad.jvp of a loop-free elementwise function."""
    return ad.jvp(tanh_times, (x,), (v,))


def affine(x, w):
    """tanh(w x + 1): loop-free, for the vectorized lowering under ad.jit."""
    return np.tanh(np.dot(w, x) + 1.0)


def looping(x, w):
    """A loop (unbatched trip count) around array code: compiled, it runs per example."""
    s = x * 0.0
    for i in range(3):
        s = s + np.sin(x + i) * w
    return np.sum(s)


def helper(v, w):
    """A helper returning a tuple."""
    return np.tanh(v * w), np.sum(v)


def uses_helper(x, w):
    """The helper called on batched and on unbatched arguments."""
    a, b = helper(x, w)
    c, d = helper(w, w)
    return a * b + c * d


def helper_on_paths(x, w, flag):
    """The helper's result is batched on one path only (flag is unbatched)."""
    if flag > 0:
        y = helper(w, w)[0]
    else:
        y = helper(x, w)[0]
    return y * 2.0


def tree_loss(p, x):
    """p = (w, (b, c)): sum(tanh(x w) + b) c."""
    w, (b, c) = p
    return np.sum(np.tanh(x * w) + b) * c


def two_outputs(x, y):
    """(x y, (sin x, sum y)): a nested tuple output."""
    return x * y, (np.sin(x), np.sum(y))


def list_output(x, y):
    """A list output: the batched result is a list too."""
    return [x * y, np.sum(y)]


def shared_output(x, w):
    """An output that does not depend on the batched argument."""
    return np.sum(x * w), w * 2.0


def constant_output(x):
    return 1.0


def rank_grows(x):
    """s starts as a Python float and becomes an array in the loop: its rank is
    not one number, so the vectorized lowering refuses (the loop batches it)."""
    s = 0.0
    for i in range(3):
        s = s + np.sin(x) * i
    return s


def power(a, n):
    """a^n by a loop of n trips: with n batched, the loop bound is batched."""
    s = 1.0
    for _ in range(n):
        s = s * a
    return s


def grow(a):
    """A while loop whose condition reads a batched value."""
    x = a
    while x < 10.0:
        x = x * 1.5 + a
    return x


def branch(x, c):
    """A branch on c: vectorizes when c is unbatched, not when it is batched."""
    if c > 0.0:
        return x * c
    return np.sin(x)


def mlp(params, x):
    """A two-layer perceptron: dot, broadcasting, tanh, a reduction."""
    w1, b1, w2 = params
    h = np.tanh(np.dot(w1, x) + b1)
    return np.sum(np.dot(w2, h) ** 2)
