"""Repeat calls of ``ad.jit(ad.jacfwd(g))`` (the vector-mode plan's lean call,
s2s_ad/api/jacobian_columns.py): the same Jacobian as the first, checked
call and as finite differences, for a vector input (its block is every
column), a padded last call, a matrix input and two arguments."""
import numpy as np
import pytest

import s2s_ad as ad


def vector_fn(x):
    return np.tanh(x) * x[0] + np.sin(x)


def two_args(x, w):
    return np.sin(x * w) + w[0] * x


def _fd(f, args, i, eps=1e-6):
    args = [np.asarray(a, dtype=float) for a in args]
    cols = []
    for k in range(args[i].size):
        e = np.zeros(args[i].size)
        e[k] = eps
        up = list(args)
        down = list(args)
        up[i] = args[i] + e.reshape(args[i].shape)
        down[i] = args[i] - e.reshape(args[i].shape)
        cols.append((np.asarray(f(*up)) - np.asarray(f(*down))) / (2 * eps))
    out = np.stack(cols, axis=-1)
    return out.reshape(np.shape(f(*args)) + args[i].shape)


@pytest.mark.parametrize("n", [20, 23])          # 23: the last call is padded
def test_vector_input(n):
    J = ad.jit(ad.jacfwd(vector_fn), compile="eager")
    x = np.linspace(0.1, 1.0, n)
    first = J(x)
    assert J._fast                               # later calls take the lean path
    for scale in (1.0, 2.0):                     # the lean call, twice
        got = J(scale * x)
        assert got.flags.c_contiguous and got.shape == (n, n)
        np.testing.assert_allclose(got, _fd(vector_fn, [scale * x], 0), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(J(x), first, rtol=1e-15)
    np.testing.assert_allclose(first, ad.jacfwd(vector_fn)(x), rtol=1e-12)


def test_matrix_input_and_two_arguments():
    J = ad.jit(ad.jacfwd(vector_fn), compile="eager")
    x = np.linspace(0.1, 1.0, 20).reshape(4, 5)
    for _ in range(3):
        np.testing.assert_allclose(J(x), _fd(vector_fn, [x], 0), rtol=1e-6, atol=1e-8)
    J2 = ad.jit(ad.jacfwd(two_args, argnums=(0, 1)), compile="eager")
    x, w = np.linspace(0.1, 1.0, 6), np.linspace(1.0, 2.0, 6)
    for _ in range(3):
        jx, jw = J2(x, w)
        np.testing.assert_allclose(jx, _fd(two_args, [x, w], 0), rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(jw, _fd(two_args, [x, w], 1), rtol=1e-6, atol=1e-8)
