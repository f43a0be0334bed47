"""np.add.at, np.put, x[idx] = v / x[idx] += v with repeated indices, np.where with
one argument (np.nonzero), np.partition, np.i0 and index arrays on several axes,
in every mode against finite differences (tests/programs/indexing_cases.py).

Repeated indices follow NumPy: np.add.at adds every repeat; an element write
(x[idx] = v, x[idx] += v, np.put) keeps each position's last write, so only
that element of the value has a derivative."""
import numpy as np
import pytest
from conftest import fd_jacobian

import s2s_ad as ad
from s2s_ad.testing import check_jvp, check_vjp
from tests.programs import indexing_cases as prog

RNG = np.random.default_rng(1702)
X = RNG.uniform(0.3, 1.7, 12) * RNG.choice([-1.0, 1.0], 12)
CASES = ["add_at", "add_at_scalar", "iadd_repeated", "set_repeated_scalar", "put", "put_wrap",
         "where_indices", "nonzero_2d", "partition", "partition_axis", "i0", "rows_cols",
         "set_rows_cols", "increment_rows_cols", "ix_rows_cols", "ix_3d", "sliced_columns"]
# Output shapes that depend on the data (the positive entries): no batch of them.
DATA_SHAPED = {"where_indices", "nonzero_2d"}


@pytest.mark.parametrize("name", CASES)
def test_jacobians(name):
    f = getattr(prog, name)
    expected = fd_jacobian(f, X)
    np.testing.assert_allclose(ad.jacrev(f)(X), expected, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(ad.jacfwd(f)(X), expected, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", CASES)
def test_grad_vjp_jvp(name):
    f = getattr(prog, name)
    w = RNG.uniform(-1.0, 1.0, np.shape(f(X)))
    np.testing.assert_allclose(ad.grad(lambda x: np.sum(f(x) * w))(X),
                               np.tensordot(w, fd_jacobian(f, X), axes=np.ndim(w)),
                               rtol=1e-6, atol=1e-8)
    check_vjp(f, (X,))
    check_jvp(f, (X,))


@pytest.mark.parametrize("name", sorted(set(CASES) - DATA_SHAPED))
def test_vmap(name):
    f = getattr(prog, name)
    xs = np.stack([X, 0.5 * X + 0.1, -X])
    np.testing.assert_allclose(ad.vmap(f)(xs), np.stack([f(x) for x in xs]), rtol=1e-12)
    np.testing.assert_allclose(ad.vmap(ad.jacrev(f))(xs),
                               np.stack([fd_jacobian(f, x) for x in xs]), rtol=1e-6, atol=1e-8)


def test_vmap_in_axes_none():
    """A batch of values scattered into one shared array, and the reverse."""
    def scatter(a, v):
        b = a * 1.0
        np.add.at(b, prog.IDX, v)
        return np.sum(b ** 2)
    a, vs = X[:4], RNG.normal(size=(3, 5))
    got = ad.vmap(ad.grad(scatter, argnums=(0, 1)), in_axes=(None, 0))(a, vs)
    for k in range(3):
        np.testing.assert_allclose(got[0][k], fd_jacobian(lambda a: scatter(a, vs[k]), a),
                                   rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(got[1][k], fd_jacobian(lambda v: scatter(a, v), vs[k]),
                                   rtol=1e-6, atol=1e-8)


@pytest.fixture(scope="module")
def jit_grad():
    return ad.jit(ad.grad(prog.loss))


@pytest.mark.slow
def test_jit_every_case_in_one_loss(jit_grad):
    np.testing.assert_allclose(jit_grad(X), fd_jacobian(prog.loss, X), rtol=1e-6, atol=1e-7)
    got = jit_grad(X.astype(np.float32))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, fd_jacobian(prog.loss, X), rtol=2e-3, atol=2e-3)


def test_repeated_writes_keep_the_last_value():
    """The value at an overwritten position has no effect, so no derivative."""
    def f(v):
        a = np.zeros(3)
        a[np.array([1, 1, 2])] = v
        return np.sum(a * np.array([1.0, 10.0, 100.0]))
    np.testing.assert_array_equal(ad.grad(f)(np.ones(3)), [0.0, 10.0, 100.0])
    np.testing.assert_array_equal(ad.jit(ad.grad(f))(np.ones(3)), [0.0, 10.0, 100.0])


def test_add_at_counts_every_repeat():
    def f(v):
        a = np.zeros(3)
        np.add.at(a, np.array([1, 1, 2]), v)
        return np.sum(a * np.array([1.0, 10.0, 100.0]))
    np.testing.assert_array_equal(ad.grad(f)(np.ones(3)), [10.0, 10.0, 100.0])


def test_values_are_numpys():
    for name in CASES:
        if name in ("partition", "partition_axis"):
            continue           # only the kth position is specified (checked below)
        np.testing.assert_allclose(ad.jit(getattr(prog, name))(X), getattr(prog, name)(X),
                                   rtol=1e-12, err_msg=name)
    y = X * X
    out = ad.jit(lambda x: np.partition(x, 3))(y)
    assert out[3] == np.sort(y)[3] and np.all(out[:3] <= out[3]) and np.all(out[4:] >= out[3])
    np.testing.assert_array_equal(ad.jit(lambda x: np.partition(x, 3), target="python")(y),
                                  np.partition(y, 3))


def test_i0_kernel_matches_numpy_and_scipy():
    import scipy.special as sc

    from s2s_ad import runtime as rt
    x = np.array([-30.0, -8.5, -1.0, 0.0, 0.3, 2.0, 7.9, 8.1, 50.0, 700.0])
    i0, i1 = ad.jit(lambda x: (rt.i0(x), rt.i1(x)))(x)
    np.testing.assert_allclose(i0, np.i0(x), rtol=1e-15)
    np.testing.assert_allclose(i1, sc.i1(x), rtol=1e-14)


def test_second_derivative_of_i0_is_refused():
    with pytest.raises(ad.NonDifferentiableError, match="rt.i1"):
        ad.hessian(lambda x: np.sum(np.i0(x)))(X)


def test_put_bad_mode_and_out_of_bounds():
    with pytest.raises(ValueError, match="mode"):
        ad.grad(lambda x: np.sum(_put(x, "nearest")))(X)
    with pytest.raises(IndexError):
        ad.grad(lambda x: np.sum(_put(x, "raise", 40)))(X)


def _put(x, mode, i=1):
    a = x * 1.0
    np.put(a, np.array([i]), 2.0 * x[0], mode=mode)
    return a
