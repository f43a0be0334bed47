"""User programs for the per-pass tests (``tests/test_pass_*.py``).

The compiler reads source from files, so every function a pass test
transforms lives here.  Lines a test must find (to check a reported line
number) end in a ``# <- KEY`` marker; the tests look the marker up, so this
file is free to grow.

The imports below are deliberately varied: ``parse`` must resolve NumPy and
``math`` functions under every usual import form.
"""
import math
from math import exp as e

import numpy as np
import numpy as onp
from numpy import sin

import s2s_ad as ad

W = np.array([0.5, -1.0, 2.0])      # an array constant
SCALE = 1.5                         # a float constant
PAIR = (2.0, -0.5)                  # a tuple constant
NESTED = ((1.0, 2.0), 3.0)          # nested tuples of floats
NP_SCALAR = np.float64(2.5)         # a NumPy scalar
ARRAYS = (np.array([1.0, 2.0, 3.0]), np.array([0.5, -0.5, 0.25]))   # a tuple of arrays
FACTORS = [1.0, 2.0, 3.0]           # a list of floats

# -- parse: name resolution ------------------------------------------------------


def alias_np(x):
    return np.sum(np.sin(x))


def alias_onp(x):
    return onp.sum(onp.cos(x))


def alias_from(x):
    return np.sum(sin(x))


def alias_math(t):
    return math.exp(t) * math.sin(t)


def alias_math_as(t):
    return e(t) * t


def module_constants(x):
    return np.sum(W * x) * SCALE + PAIR[0] * x[0] + PAIR[1]


def nested_constant(x):
    return np.sum(x * NESTED[0][1]) + NESTED[1]


def numpy_scalar_constant(x):
    return np.sum(x * NP_SCALAR)


def tuple_of_arrays_constant(x):
    return np.sum(ARRAYS[0] * x + ARRAYS[1])


def list_constant(x):
    return np.sum(x * FACTORS[1])


def make_closure(k, v):
    """A closure over a float ``k`` and an array ``v``."""
    def closed(x):
        return np.sum(x * v) * k
    return closed


CLOSED = make_closure(0.5, np.array([1.0, 2.0, 3.0]))


def make_closure_over_helper(h):
    """A closure over a user function."""
    def closed_helper(x):
        return np.sum(h(x))
    return closed_helper


def square(v):
    return v * v


CLOSED_HELPER = make_closure_over_helper(square)


def calls_helper(x):
    return np.sum(square(x) + square(np.cos(x)))


def uses_stop_gradient(x):
    return np.sum(ad.stop_gradient(x) * x)


def fenced_lambda(x):
    return np.sum((lambda *y: y[0] * 2.0)(x))  # noqa: PLC3002  # <- lambda


def fenced_try(x):
    try:  # <- try
        y = x * 2.0
    except ValueError:
        y = x
    return y


def located(x):
    """A docstring, which parse removes."""
    y = np.sin(x)  # <- located_sin
    return np.sum(y * y)  # <- located_return


# -- desugar: loops and jumps ------------------------------------------------------


def over_array(x):
    s = 0.0
    for v in x:
        s = s + v * v
    return s


def over_expression(m):
    s = 0.0
    for row in m * 2.0:  # <- over_expression
        s = s + np.sum(row * row)
    return s


def over_zip(x, y):
    s = 0.0
    for a, b in zip(x, y):
        s = s + a * b
    return s


def over_enumerate(x):
    s = 0.0
    for i, v in enumerate(x):
        s = s + i * v
    return s


def with_break(x):
    s = 0.0
    for v in x:
        if v > 1.0:
            break
        s = s + v * v
    return s


def with_continue(x):
    s = 0.0
    for v in x:
        if v < 0.0:
            continue
        s = s + v * v
    return s


def early_return(x, t):
    if t > 0.0:
        return np.sum(x * t)
    y = x * x
    return np.sum(y)


def return_in_loop(x):
    s = 0.0
    for i in range(x.shape[0]):
        s = s + x[i] * x[i]
        if s > 1.0:
            return s * 2.0
    return s


def two_returns_in_loop(x):
    s = 0.0
    i = 0
    while i < x.shape[0]:
        if x[i] < 0.0:
            return s - x[i]
        s = s + x[i] * x[i]
        if s > 2.0:
            return s * 2.0
        i = i + 1
    return s


def loop_else(x):
    s = 0.0
    for v in x:  # <- loop_else
        s = s + v
    else:  # noqa: PLW0120
        s = s * 2.0
    return s


def break_in_zip(x, y):
    s = 0.0
    for a, b in zip(x, y):
        if a * b < 0.0:
            break
        s = s + a * b
    return s


# -- anf: A-normal form ------------------------------------------------------------


def nested_expression(x):
    return np.sum(np.exp(np.sin(x) * 2.0 + x))


def reassigned(x):
    y = x * 2.0
    y = y + 1.0
    y = np.sin(y)
    return np.sum(y)


def static_tuples(x):
    t = (x, x * 2.0)
    a, b = t
    pair = (a, (b, 3.0))
    return pair[1][0] * pair[0], pair


def sum_method(x):
    return x.sum(axis=0)


def sum_function(x):
    return np.sum(x, axis=0)


def mul_operator(a, b):
    return a * b


def mul_function(a, b):
    return np.multiply(a, b)


def matmul_operator(a, b):
    return a @ b


def matmul_function(a, b):
    return np.matmul(a, b)


def pow_operator(a, b):
    return a ** b


def pow_function(a, b):
    return np.power(a, b)


def neg_operator(a, b):
    return -a


def neg_function(a, b):
    return np.negative(a)


def abs_builtin(a, b):
    return abs(a)


def abs_function(a, b):
    return np.abs(a)


def reshape_method(a, b):
    return a.reshape(3, 2)


def reshape_function(a, b):
    return np.reshape(a, (3, 2))


def transpose_attribute(x):
    return x.T


def transpose_function(x):
    return np.transpose(x)


def transpose_loss(x, y):
    return np.sum((x.T @ y) ** 2)


# -- activity ----------------------------------------------------------------------


def mixed_activity(x, y):
    a = np.sin(y)                # never depends on x
    d = np.exp(x)                # depends on x, but only a comparison reads it
    c = x * a
    if np.sum(d) > 1.0:
        c = c * 2.0
    return np.sum(c)


def stopped(x):
    s = ad.stop_gradient(x * x)
    return np.sum(s * x)


def counted(x):
    n = 0
    acc = x
    for i in range(3):
        acc = np.sin(acc) * x
        n = n + 1
    k = 0
    while k < 2:
        k = k + 1
    return np.sum(acc) * n + k


# -- reverse -----------------------------------------------------------------------


def smooth(v):
    return np.tanh(v) * v


def two_calls(x):
    h = smooth(x)
    g = smooth(h * 2.0)
    return np.sum(g)


def mixed_calls(x):
    a = smooth(x)
    b = smooth(W)                # no derivative flows through this call
    c = smooth(a * b)
    return np.sum(c)


def dead_code(x, w):
    unused = np.arctan(x) + np.log1p(x * x)  # noqa: F841
    penalty = np.sum(np.log(w))          # reaches the value, not the gradient w.r.t. x
    y = np.cos(x) * x
    return np.sum(y) + penalty


def value_only_while(x):
    k = 0
    while k < 2:
        k = k + 1
    return np.sum(x * x) + k


def commented(x, w):
    y = np.sin(x)  # <- commented_sin
    z = y * w  # <- commented_mul
    return np.sum(z * z)  # <- commented_return


# -- backends ----------------------------------------------------------------------


def backend_loss(x, w):
    h = smooth(x * w)
    s = 0.0
    for i in range(x.shape[0]):
        s = s + h[i] * math.cos(w[i])
    return s + np.sum(np.exp(-h))


def cached_loss(x):
    return np.sum(np.tanh(x) * np.sin(x) + x * x)


# -- a reference for every derivative check ----------------------------------------


def fd_grad(f, args, argnum=0, eps=1e-6):
    """Central differences of scalar ``f`` w.r.t. each entry of ``args[argnum]``.

    Plain NumPy, independent of s2s_ad: the reference derivatives are checked
    against.  ``args[argnum]`` is a float or a float64 array.
    """
    args = list(args)
    x = args[argnum]
    if isinstance(x, float):
        hi, lo = list(args), list(args)
        hi[argnum], lo[argnum] = x + eps, x - eps
        return (float(f(*hi)) - float(f(*lo))) / (2 * eps)
    x = np.asarray(x, dtype=np.float64)
    out = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[idx] = eps
        hi, lo = list(args), list(args)
        hi[argnum], lo[argnum] = x + step, x - step
        out[idx] = (float(f(*hi)) - float(f(*lo))) / (2 * eps)
    return out
