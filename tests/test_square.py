"""``a * a`` lowers to ``np.square(a)``: one adjoint product (g * 2a), not two
contributions accumulated into one cotangent (measured: 20% of the GMM
gradient)."""
import os
import sys

import numpy as np
import pytest

import s2s_ad as ad
from s2s_ad.frontend.anf import Program
from s2s_ad.ir import Prim, walk
from s2s_ad.testing import check_grad, check_jvp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs"))
import squares as S

RNG = np.random.default_rng(7)
CASES = {
    "self_product": (S.self_product, lambda: (RNG.normal(size=6),)),
    "scalar_square": (S.scalar_square, lambda: (0.7,)),
    "squared_distances": (S.squared_distances,
                          lambda: (RNG.normal(size=(20, 3)), RNG.normal(size=3))),
    "square_in_loop": (S.square_in_loop, lambda: (RNG.normal(size=5),)),
}


def _rules(fn, trees):
    return [s.rule.name for s in walk(Program().lower(fn, trees).body) if isinstance(s, Prim)]


def test_self_product_lowers_to_square_and_other_products_do_not():
    assert "np.square" in _rules(S.self_product, (None,))
    assert _rules(S.scalar_square, (None,)).count("np.multiply") == 1     # 3.0 * t only
    names = _rules(S.product_of_two, (None, None))
    assert "np.multiply" in names and "np.square" not in names


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("target", ["python", "cpu"])
def test_gradients_match_finite_differences(name, target):
    fn, make = CASES[name]
    args = make()
    check_grad(fn, args, argnums=tuple(range(len(args))), target=target)


@pytest.mark.parametrize("name", ["self_product", "squared_distances"])
def test_forward_mode_and_second_order(name):
    fn, make = CASES[name]
    args = make()
    check_jvp(fn, args, tuple(RNG.normal(size=np.shape(a)) for a in args))
    x, rest = args[0], args[1:]
    g = ad.grad(fn, argnums=0)
    eps = 1e-6
    fd = np.stack([(g(x + eps * e, *rest) - g(x - eps * e, *rest)) / (2 * eps)
                   for e in np.eye(x.size).reshape((x.size,) + x.shape)], axis=-1)
    h = ad.hessian(fn, argnums=0)(*args)
    np.testing.assert_allclose(h, fd.reshape(h.shape), rtol=1e-6, atol=1e-8)


def test_generated_adjoint_is_one_product():
    src = ad.source(ad.grad(S.self_product), np.ones(3))
    assert "y = np.square(x)" in src
    body = src.split("adjoint of: y = x * x")[1]
    assert body.count("2.0 * x") == 1


def test_python_float_stays_a_float():
    out = S.scalar_square(0.5)
    assert ad.jit(S.scalar_square)(0.5) == pytest.approx(out)
    assert isinstance(ad.grad(S.scalar_square)(0.5), float)
