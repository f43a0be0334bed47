"""np.expand_dims(a, (0, 2)) adds one axis per entry of the tuple (its declared rank);
before, the rank counted one, and vmap(method="vectorize") of np.sum of it (np.dstack,
np.atleast_3d of a vector) kept an axis of the batch: a wrong value."""
import numpy as np

import s2s_ad as ad
from s2s_ad import rules
from s2s_ad.ir import Const, Tup

Y = np.array([0.3, -0.2, 0.9, 0.4, 1.1])


def two_axes(x):
    return np.sum(np.sin(np.expand_dims(x, (0, 2))))


def planes(x):
    return np.sum(np.sin(np.dstack((x, Y)))) + np.sum(np.atleast_3d(x)[0, :, 0] * Y)


def test_the_rank_counts_every_new_axis():
    rank = rules.RULES["np.expand_dims"].rank
    assert rank([1], {"axis": Tup((Const(0), Const(2)))}) == 3
    assert rank([1], {"axis": Const((0, 2))}) == 3 and rank([2], {"axis": Const(1)}) == 3


def test_vectorized_sums_of_it():
    xs = np.stack([Y * 0.5, Y * 1.5])
    for f in (two_axes, planes):
        want = np.array([f(x) for x in xs])
        np.testing.assert_allclose(ad.vmap(f, method="vectorize")(xs), want, rtol=1e-12)
        grads = ad.vmap(ad.grad(f), method="vectorize")(xs)
        np.testing.assert_allclose(grads, np.stack([ad.grad(f)(x) for x in xs]), rtol=1e-12)
