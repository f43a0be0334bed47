"""The compile-time cuts of docs/compile_time.md ("Where the compile time
goes"): Numba's slice-assignment error without string formatting, and the
cached kernels (runtime/_nb_kernels.py) the overloads call instead of typing
np.dot and broadcast products inline.  Results are checked against NumPy;
one compiled function covers every kernel path.
"""
import numba
import numpy as np
import pytest
from s2s_ad.runtime import _nb_kernels, _nb_patches

from s2s_ad import runtime as rt

RNG = np.random.default_rng(3)


@numba.njit
def _assign_column(a, b):
    a[:, 0] = b
    return a


def test_slice_assignment_mismatch_still_names_both_shapes():
    assert _nb_patches.PATCHED
    np.testing.assert_array_equal(_assign_column(np.zeros((3, 2)), np.ones(3))[:, 0], 1.0)
    with pytest.raises(ValueError) as info:
        _assign_column(np.zeros((3, 2)), np.ones(4))
    assert info.value.args == ("cannot assign slice of shape", (3,), "from input of shape",
                               (4,))


@numba.njit
def _all_paths(g_rows, g_cols, g_full, g_one, p, v, a, b):
    return (rt.times_kept(g_rows, p), rt.times_kept(g_cols, p), rt.times_kept(g_full, p),
            rt.times_kept(g_one, v), rt.times_kept(v, v),
            rt.unbroadcast(g_full, g_cols), rt.unbroadcast(g_full, g_rows),
            rt.unbroadcast(g_full, v[:p.shape[1]]),
            rt.matmul(a, b), rt.matmul(a, np.asfortranarray(b)), rt.matmul(v[:a.shape[0]], a),
            rt.matmul_grad_a(g_full, a, b), rt.matmul_grad_b(g_full, a, b))


def test_kernel_paths_match_numpy():
    p, v = RNG.standard_normal((5, 4)), RNG.standard_normal(6)
    g_rows, g_cols, g_full = RNG.standard_normal((5, 1)), RNG.standard_normal((1, 4)), \
        RNG.standard_normal((5, 4))
    g_one = RNG.standard_normal(1)
    a, b = RNG.standard_normal((5, 3)), RNG.standard_normal((3, 4))
    got = _all_paths(g_rows, g_cols, g_full, g_one, p, v, a, b)
    want = (g_rows * p, g_cols * p, g_full * p, g_one * v, v * v,
            g_full.sum(axis=0, keepdims=True), g_full.sum(axis=1, keepdims=True),
            g_full.sum(axis=0), a @ b, a @ b, v[:5] @ a, g_full @ b.T, a.T @ g_full)
    for x, y in zip(got, want):
        np.testing.assert_allclose(x, y, rtol=1e-13, atol=1e-15)
    # The same helpers as plain NumPy (the tiered first call runs these).
    np.testing.assert_allclose(rt.times_kept(g_rows, p), g_rows * p, rtol=1e-15)
    # Compiled once as stand-alone, cacheable functions.
    for kernel in (_nb_kernels.dot, _nb_kernels.times_rows, _nb_kernels.multiply):
        assert kernel.signatures
