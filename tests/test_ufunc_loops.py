"""Numba's elementwise loops (ufunc calls and array expressions) built in
two versions by runtime/_nb_patches.py: one where every operand has the
result's shape, one stepping zero along broadcast dimensions.  Every
result is compared with NumPy bit for bit (the same IEEE operations on the
same elements), over ranks 0-3, C / F / strided / reversed layouts,
broadcasting along each dimension and from lower ranks, ``out=`` arrays,
in-place updates, two-result ufuncs and non-float dtypes.  Each compiled
function is shared by the cases of its test.
"""
import itertools

import numba
import numpy as np
import pytest
from numba.np import npyimpl
from s2s_ad.runtime import _nb_patches

RNG = np.random.default_rng(11)


def test_patch_is_installed():
    assert _nb_patches.UFUNC_LOOPS_PATCHED
    assert npyimpl.numpy_ufunc_kernel is _nb_patches.ufunc_loops


@numba.njit
def _expr(a, b):
    return a * 0.5 + b - a * b


@numba.njit
def _ufunc(a, b):
    return np.add(a, b)


def _layouts(shape):
    """The same values as C, F, strided (every other element of a larger
    array) and reversed arrays."""
    base = RNG.standard_normal(shape)
    big = np.zeros(tuple(2 * n for n in shape))
    strided = big[tuple(slice(None, None, 2) for _ in shape)]
    strided[...] = base
    return {"C": base, "F": np.asfortranarray(base), "strided": strided,
            "reversed": base[tuple(slice(None, None, -1) for _ in shape)].copy()[
                tuple(slice(None, None, -1) for _ in shape)]}


def _broadcast_partners(shape):
    """Shapes that broadcast against ``shape``: each dimension set to 1, each
    lower rank, a scalar."""
    out = [shape]
    for d in range(len(shape)):
        out.append(shape[:d] + (1,) + shape[d + 1:])
    for r in range(len(shape)):
        out.append(shape[len(shape) - r:])
    return out


SHAPES = [(5,), (4, 3), (3, 4, 2)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_broadcasting_in_every_layout_matches_numpy(shape):
    for layout, a in _layouts(shape).items():
        for other in _broadcast_partners(shape):
            b = RNG.standard_normal(other) if other else 0.25
            for x, y in ((a, b), (b, a)):
                np.testing.assert_array_equal(_expr(x, y), x * 0.5 + y - x * y,
                                              err_msg=f"{layout} {shape} {other}")
                np.testing.assert_array_equal(_ufunc(x, y), np.add(x, y))


def test_both_operands_broadcast_and_extent_one_results():
    for sa, sb in [((4, 1), (1, 3)), ((1, 1), (2, 3)), ((3, 1, 2), (4, 1)),
                   ((1,), (1,)), ((1, 1, 1), (1, 1, 1)), ((0, 3), (1, 3)), ((2, 0), (2, 1))]:
        a, b = RNG.standard_normal(sa), RNG.standard_normal(sb)
        np.testing.assert_array_equal(_expr(a, b), a * 0.5 + b - a * b, err_msg=f"{sa} {sb}")
        # A broadcast view of one array: extent > 1 with a zero stride.
        v = np.broadcast_to(RNG.standard_normal(sb[-1:]), sa[:-1] + sb[-1:])
        x = a[..., :1] if sa[-1] else a
        np.testing.assert_array_equal(_expr(x, v), x * 0.5 + v - x * v)


def test_zero_dimensional_operands():
    a, b = np.array(1.5), RNG.standard_normal((2, 3))
    np.testing.assert_array_equal(_expr(a, b), a * 0.5 + b - a * b)
    np.testing.assert_array_equal(_expr(a, np.array(-2.0)), a * 0.5 - 2.0 + a * 2.0)


def test_incompatible_shapes_still_raise():
    with pytest.raises(ValueError):
        _expr(np.ones((3, 4)), np.ones(3))
    with pytest.raises(ValueError):
        _ufunc(np.ones((2, 3)), np.ones((3, 2)))


@numba.njit
def _into(a, b, out):
    np.multiply(a, b, out)
    return out


@numba.njit
def _in_place(a, b):
    a += b
    a[1:] -= 2.0 * b[-1:]
    return a


def test_out_arrays_and_in_place_updates():
    for sa, sb in [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 4), (1, 4)), ((3, 4), (3, 1))]:
        a, b = RNG.standard_normal(sa), RNG.standard_normal(sb)
        out = np.zeros(sa)[:, ::-1]     # a non-contiguous result
        np.testing.assert_array_equal(_into(a, b, out), a * b)
        want = a.copy()
        want += b
        want[1:] -= 2.0 * b[-1:]
        np.testing.assert_array_equal(_in_place(a.copy(), b), want, err_msg=f"{sb}")


def _in_place_row(a):
    a += a[0]
    a[:, 1:] *= a[:, :1]


def test_updates_reading_what_they_write_keep_numbas_order():
    """NumPy copies an input that overlaps the result; Numba's loop reads it
    as it is being written.  The two-version loop keeps Numba's order."""
    patched = numba.njit(_in_place_row)
    original = numba.njit(_in_place_row)
    npyimpl.numpy_ufunc_kernel = _nb_patches.NUMBA_UFUNC_LOOPS
    try:
        want = RNG.standard_normal((4, 5))
        got = want.copy()
        original(want)
    finally:
        npyimpl.numpy_ufunc_kernel = _nb_patches.ufunc_loops
    patched(got)
    np.testing.assert_array_equal(got, want)


@numba.njit
def _two_results(a, b):
    return np.divmod(a, b)


@numba.njit
def _kinds(i, j, z, m):
    return i * j + 1, (i > j) & m, z * z + i, np.logical_not(m) | (j < 0)


def test_two_result_ufuncs_and_other_dtypes():
    a, b = RNG.standard_normal((3, 4)), RNG.uniform(0.5, 2.0, (1, 4))
    for got, want in zip(_two_results(a, b), np.divmod(a, b)):
        np.testing.assert_array_equal(got, want)
    i, j = RNG.integers(-5, 5, (3, 4)), RNG.integers(-5, 5, (4,))
    z = RNG.standard_normal((3, 1)) + 1j * RNG.standard_normal((3, 1))
    m = RNG.integers(0, 2, (1, 4)).astype(bool)
    for got, want in zip(_kinds(i, j, z, m),
                         (i * j + 1, (i > j) & m, z * z + i, np.logical_not(m) | (j < 0))):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@numba.vectorize(["float64(float64, float64)"])
def _hypot_like(x, y):
    return (x * x + y * y) ** 0.5


@numba.njit
def _calls_vectorized(a, b):
    return _hypot_like(a, b)


def test_vectorized_functions_broadcast():
    for sa, sb in itertools.product([(3, 4), (4,), (3, 1)], repeat=2):
        a, b = RNG.standard_normal(sa), RNG.standard_normal(sb)
        np.testing.assert_array_equal(_calls_vectorized(a, b), (a * a + b * b) ** 0.5)


@numba.njit
def _stencil(a):
    return 0.125 * (a[2:, 1:-1, 1:-1] - 2.0 * a[1:-1, 1:-1, 1:-1] + a[:-2, 1:-1, 1:-1]) \
        + a[1:-1, 1:-1, 1:-1]


def test_three_dimensional_slices_of_a_stencil():
    for a in _layouts((5, 6, 4)).values():
        np.testing.assert_array_equal(
            _stencil(a),
            0.125 * (a[2:, 1:-1, 1:-1] - 2.0 * a[1:-1, 1:-1, 1:-1] + a[:-2, 1:-1, 1:-1])
            + a[1:-1, 1:-1, 1:-1])
