"""Reverse mode over a transform written inside the per-example function, on
the CUDA target: ``ad.vmap(ad.grad(F))`` where ``F`` calls ``ad.grad`` or
``ad.hvp``, ``ad.hessian`` and ``ad.jacrev`` of such functions.  The forward
function's per-column stacks (slices of the thread's tape) are returned to
its reverse sweep (docs/cuda.md, "Reverse mode over inner transforms").

Kernels run under Numba's CUDA simulator (tests/test_cuda.py reruns this file
there) or on a GPU, and compile to PTX without either."""
import sys
from pathlib import Path

import numpy as np
import pytest

import s2s_ad as ad

sys.path.insert(0, str(Path(__file__).parent))
from conftest import fd_jacobian  # noqa: E402
from cuda_support import nvvm, ptx_only, runs  # noqa: E402,F401
from programs.cuda_nested import (  # noqa: E402
    grad_inside,
    grad_returned,
    hvp_reduced,
    two_gradients,
)

B, C = 3, 0.7
rng = np.random.default_rng(5)
X, V, Y = rng.random((B, 3)), rng.random((B, 3)), rng.random((B, 2))

CASES = {
    "grad(grad inside)": (ad.grad(grad_inside), (0, None), (X, C)),
    "grad(two grads inside)": (ad.grad(two_gradients), (0, 0, None), (X, Y, C)),
    "grad(hvp inside)": (ad.grad(hvp_reduced), (0, 0, None), (X, V, C)),
    "hessian(grad inside)": (ad.hessian(grad_inside), (0, None), (X, C)),
    "jacrev(grad returned)": (ad.jacrev(grad_returned), (0, None), (X, C)),
}
# the scalar function of example b's x each case differentiates (for jacrev, the vector one)
PRIMAL = {
    "grad(grad inside)": lambda x, b: grad_inside(x, C),
    "grad(two grads inside)": lambda x, b: two_gradients(x, Y[b], C),
    "grad(hvp inside)": lambda x, b: hvp_reduced(x, V[b], C),
    "hessian(grad inside)": lambda x, b: ad.grad(grad_inside)(x, C),
    "jacrev(grad returned)": lambda x, b: grad_returned(x, C),
}


@runs
@pytest.mark.parametrize("name", list(CASES))
def test_equals_cpu_and_finite_differences(name):
    fun, axes, args = CASES[name]
    gpu = ad.jit(ad.vmap(fun, in_axes=axes), target="cuda")(*args)
    cpu = ad.vmap(fun, in_axes=axes)(*args)
    assert isinstance(gpu, np.ndarray) and gpu.shape == np.shape(cpu)
    np.testing.assert_allclose(gpu, cpu, rtol=1e-10, atol=1e-12)
    for b in range(B):
        want = fd_jacobian(lambda x: PRIMAL[name](x, b), X[b])
        np.testing.assert_allclose(gpu[b], np.reshape(want, gpu[b].shape), rtol=1e-5,
                                   atol=1e-7)


@runs
def test_value_and_grad_equals_cpu():
    fun = ad.value_and_grad(grad_inside)
    value, grad = ad.jit(ad.vmap(fun, in_axes=(0, None)), target="cuda")(X, C)
    np.testing.assert_allclose(value, [grad_inside(x, C) for x in X], rtol=1e-12)
    np.testing.assert_allclose(grad, ad.vmap(ad.grad(grad_inside), in_axes=(0, None))(X, C),
                               rtol=1e-10, atol=1e-12)


def test_the_pullback_leaves_its_cotangent_alone():
    # the reverse sweep of a transform inside zeroes entries of its Jacobian's
    # cotangent as it goes: on a copy (the CUDA jacrev passes its unit cotangents
    # after the host's call on example 0)
    _, pull = ad.vjp(lambda z: grad_returned(z, C), X[0])
    u = np.array([1.0, 0.0, 0.0])
    (g,) = pull(u)
    np.testing.assert_array_equal(u, [1.0, 0.0, 0.0])
    np.testing.assert_allclose(g, fd_jacobian(lambda x: grad_returned(x, C), X[0])[0],
                               rtol=1e-5, atol=1e-7)


def test_the_stacks_go_to_the_reverse_sweep_in_the_source():
    f = ad.jit(ad.vmap(ad.grad(two_gradients), in_axes=(0, 0, None)), target="cuda")
    text = ad.source(f, X, Y, C)
    assert "e_stack[0:e_stack_len]" in text          # the slots the forward function filled
    assert "e_stack_len = e_stack.shape[0]" in text  # popped from there in the reverse sweep
    assert "e = None" not in text and "rt.jac_flat" not in text
    # each forward function's stacks stay taken: the tape past them comes back (without,
    # the second's stacks overwrite the first's, and "grad(two grads inside)" is wrong)
    assert ", tape_top = fwd_grad_quartic(" in text and ", tape_top = fwd_grad_quad(" in text


@ptx_only
@pytest.mark.usefixtures("nvvm")
def test_kernels_compile_to_ptx():
    for name in ("grad(two grads inside)", "grad(hvp inside)", "jacrev(grad returned)"):
        fun, axes, args = CASES[name]
        ptx = ad.jit(ad.vmap(fun, in_axes=axes), target="cuda").compile_ptx(*args)
        assert ".entry" in ptx and "malloc" not in ptx
