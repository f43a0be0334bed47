"""Sums of squares: ``np.sum(x * x, axis)`` compiles to one loop nest
(``rt.sum_squares``) when nothing else reads the square, in a primal and in
a gradient's primal sweep; the runtime function matches NumPy's two steps."""
import os
import sys

import numba
import numpy as np
import pytest

import s2s_ad as ad
from s2s_ad import runtime as rt
from s2s_ad.testing import check_grad

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs"))
import sums_of_squares as P

RNG = np.random.default_rng(11)
NORMS = (RNG.normal(size=(7, 3)), RNG.normal(size=(4, 3)), RNG.normal(size=4))


_COMPILED = {
    (None, False): numba.njit(lambda a: rt.sum_squares(a)),
    (0, False): numba.njit(lambda a: rt.sum_squares(a, axis=0)),
    (1, False): numba.njit(lambda a: rt.sum_squares(a, axis=1)),
    (0, True): numba.njit(lambda a: rt.sum_squares(a, axis=0, keepdims=True)),
    (1, True): numba.njit(lambda a: rt.sum_squares(a, axis=1, keepdims=True)),
}


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int8, np.bool_])
@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_sum_squares_is_numpys_sum_of_the_square(dtype, axis, keepdims):
    a = (RNG.normal(size=(5, 3)) * 40).astype(dtype)      # int8 squares wrap, as NumPy's do
    keep = keepdims and axis is not None
    want = np.sum(np.square(a), axis=axis, keepdims=keep)
    for got in (rt.sum_squares(a, axis, keep), _COMPILED[axis, keep](a)):
        assert np.shape(got) == np.shape(want)
        if np.ndim(want):
            assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == np.float32 else 1e-15)


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_gradient_of_a_sum_of_squares_in_a_loop(target):
    check_grad(P.centred_norms, NORMS, (0, 1, 2), target=target)


def test_the_square_is_not_printed():
    for fn in (ad.jit(P.centred_norms), ad.jit(ad.grad(P.centred_norms, argnums=(1, 2)))):
        src = ad.source(fn, *NORMS)
        # (y is read once in the function itself: written into the call, see
        # s2s_ad/codegen/fusion.py)
        assert ("rt.sum_squares(y, axis=1)" in src or
                "rt.sum_squares((x - means[j]) * scale[j], axis=1)" in src) and \
            "np.square" not in src, src
    np.testing.assert_allclose(ad.jit(P.centred_norms)(*NORMS), P.centred_norms(*NORMS),
                               rtol=1e-14)


@pytest.mark.parametrize("program, args", [
    (P.square_read_twice, (RNG.normal(size=(3, 4)),)),
    (P.written_between, (RNG.normal(size=(3, 4)),)),
])
def test_look_alikes_keep_the_square(program, args):
    src = ad.source(ad.jit(program), *args)
    assert "rt.sum_squares" not in src, src
    np.testing.assert_allclose(ad.jit(program)(*[a.copy() for a in args]),
                               program(*[a.copy() for a in args]), rtol=1e-14)
    check_grad(program, args, 0, target="cpu")


def test_a_rebound_operand_is_a_new_name():
    x = RNG.normal(size=(3, 4))
    src = ad.source(ad.jit(P.reassigned_between), x)
    assert "rt.sum_squares(y, axis=-1, keepdims=True)" in src, src
    np.testing.assert_allclose(ad.jit(P.reassigned_between)(x), P.reassigned_between(x),
                               rtol=1e-14)
    check_grad(P.reassigned_between, (x,), 0, target="cpu")
