"""A product's adjoint added straight into a slice of an argument's adjoint
must see its operands as the forward pass left them.

Found by the in-place fuzz run (seed 46, program 7609): for ``k = K[0]`` and
``k @ v`` the reverse sweep prints ``rt.add_matmul_grad_a(bK[0], g, k, v)``
where ``k``'s adjoint is complete, after the adjoints of the statements
between.  When ``v`` is a join copy of an array written element by element in
a loop (``v2[i] = ...``, then ``if c: v2 = v2 * 2.0``), the sweep restores
``v2``'s overwritten elements in between, and with the branch not taken ``v``
is ``v2``: the derivative with respect to ``K`` came back 0.0.  The fold now
refuses when a later line writes an array an operand may share memory with.
"""
import pathlib

import numpy as np
import pytest
from conftest import fd_jacobian, load_program

import s2s_ad as ad
from s2s_ad import oracle

prog = load_program(pathlib.Path(__file__).resolve().parent / "programs" / "fuzz_46_7609.py")


def first_slice(x, K):
    k = K[0]
    v2 = np.zeros(3)
    for i in range(3):
        v2[i] = np.tanh(x[i]) * x[2]
    if x[2] > 0.31:
        v2 = v2 * 2.0
    return np.sum(k @ v2) + np.dot(K[1, 0], v2)


K = np.random.default_rng(1).normal(size=(2, 3, 3))


@pytest.mark.parametrize("taken", [False, True])
@pytest.mark.parametrize("compiled", [False, True])
def test_slice_adjoint_of_a_product_with_a_restored_join_copy(taken, compiled):
    x = np.array([0.35, 0.82, 0.6 if taken else -0.5])
    grad = ad.grad(first_slice, argnums=(0, 1))
    if compiled:
        grad = ad.jit(grad)
    gx, gK = grad(x, K)
    np.testing.assert_allclose(gK, fd_jacobian(lambda k: first_slice(x, k), K), rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(gx, fd_jacobian(lambda v: first_slice(v, K), x), rtol=1e-7, atol=1e-9)
    assert np.abs(gK[0]).max() > 0.1


def test_jacrev_of_vmap_agrees_with_finite_differences():
    report = oracle.check(prog.f, prog.ARGS, "vmap_jacrev", argnums=(0, 1), in_axes=(0, 0),
                          only={"jacrev(vmap)"}, seed=7609)
    assert report.checks and not report.disagreements, "\n".join(map(str, report.disagreements))
