"""np.add.at(a, [i, j, ...], b): a list is an index array (NumPy), a tuple one index per
axis.  Before Rule.index_params, the list was read as a tuple: z[0, 1] += s instead of
rows 0 and 1 (a silently wrong value and gradient)."""
import numpy as np

import s2s_ad as ad

WEIGHTS = np.array([[1.0, 2.0], [3.0, 4.0]])


def rows(s):
    z = np.zeros((2, 2))
    np.add.at(z, [0, 1], s)
    return np.sum(z * WEIGHTS)


def element(s):
    z = np.zeros((2, 2))
    np.add.at(z, (0, 1), s)
    return np.sum(z * WEIGHTS)


def repeats(x):
    z = np.zeros(3)
    np.add.at(z, [0, 1, 0], x)
    return np.sum(np.sin(z))


def test_a_list_is_an_index_array_and_a_tuple_one_index_per_axis():
    for f, want in ((rows, 10.0), (element, 2.0)):
        value, grad = ad.value_and_grad(f)(1.5)
        assert value == f(1.5) and grad == want
    x = np.array([0.3, 0.5, 0.9])
    z = np.array([x[0] + x[2], x[1], 0.0])
    want = np.cos(z)[[0, 1, 0]]
    np.testing.assert_allclose(ad.grad(repeats)(x), want, rtol=1e-12)
    np.testing.assert_allclose(ad.vmap(ad.grad(repeats))(np.stack([x, x])), [want, want],
                               rtol=1e-12)
