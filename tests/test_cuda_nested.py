"""The CUDA target with transforms written inside the per-example function:
``ad.jit(ad.vmap(lambda x, v: ad.hvp(f, (x,), (v,))), target="cuda")`` and
``ad.grad``/``ad.jacrev``/``ad.hessian``/``ad.vjp`` inside, whose results
are arrays of static shape kept in ``cuda.local.array`` (s2s_ad/api/cuda_local.py),
and forward-mode transforms of such functions.

Kernels run on a GPU or in Numba's CUDA simulator: tests/test_cuda.py's
``test_under_simulator`` runs this file too, in its one simulator subprocess.
Without either, the kernels are compiled to PTX (libNVVM only), which
checks what the simulator cannot: that a GPU can compile them (nothing
allocated, no array returned from a device function's frame).
"""
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import s2s_ad as ad
from s2s_ad.errors import UnsupportedSyntaxError

sys.path.insert(0, str(Path(__file__).parent))
from conftest import fd_jacobian  # noqa: E402
from cuda_support import nvvm, ptx_only, runs  # noqa: E402,F401
from programs.cuda_nested import (  # noqa: E402
    carried_gradient,
    clipped_grad,
    grad_inside,
    grad_returned,
    hessian_inside,
    hvp_inside,
    jacrev_inside,
    quartic,
    vjp_inside,
)
from programs.cuda_seeds import ode_hvp, ode_loss  # noqa: E402

B, C = 3, 0.7
rng = np.random.default_rng(11)
X, V, U = rng.random((B, 3)), rng.random((B, 3)), rng.random(B)


def quartic_grad(x, c=C):
    """The gradient of programs.cuda_nested.quartic, by hand."""
    cos = np.cos(x[1] * x[2])
    return np.array([2 * c * x[0] * x[1] + x[2] ** 3, c * x[0] ** 2 + x[2] * cos,
                     x[1] * cos + 3 * x[0] * x[2] ** 2])


def quartic_hessian(x):
    return fd_jacobian(quartic_grad, x)


def _both(fun, in_axes, *args):
    """The kernel's result, checked equal to the CPU's (the NumPy backend: the
    Numba one takes seconds to compile these, and tests/test_cuda.py compares
    with it)."""
    gpu = ad.jit(ad.vmap(fun, in_axes=in_axes), target="cuda")(*args)
    cpu = ad.vmap(fun, in_axes=in_axes)(*args)
    for a, b in zip(*(ad.pytree.flatten(v)[0] for v in (gpu, cpu))):
        assert isinstance(a, np.ndarray) and a.shape == np.shape(b)
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    return gpu


@runs
def test_hvp_inside_equals_cpu_and_finite_differences():
    hv = _both(hvp_inside, (0, 0, None), X, V, C)
    assert hv.shape == (B, 3)
    for b in range(B):
        np.testing.assert_allclose(hv[b], quartic_hessian(X[b]) @ V[b], rtol=1e-6, atol=1e-8)


def quartic_c(x):
    return quartic(x, C)


@runs
def test_hvp_of_a_lambda_batched_directly():
    hv = ad.jit(ad.vmap(lambda x, v: ad.hvp(quartic_c, (x,), (v,)), in_axes=(0, 0)),
                target="cuda")(X, V)
    for b in range(B):
        np.testing.assert_allclose(hv[b], quartic_hessian(X[b]) @ V[b], rtol=1e-6, atol=1e-8)


@runs
def test_grad_inside_returned_whole_and_reduced():
    g = _both(grad_returned, (0, None), X, C)
    np.testing.assert_allclose(g, [quartic_grad(x) for x in X], rtol=1e-12)
    s = _both(grad_inside, (0, None), X, C)
    np.testing.assert_allclose(s, g[:, 0] * g[:, 1] + g[:, 2], rtol=1e-12)


@runs
def test_jacrev_and_hessian_inside_equal_cpu_and_finite_differences():
    a, b = _both(jacrev_inside, (0, None), X, C)
    trace = _both(hessian_inside, (0, None), X, C)
    for k in range(B):
        h = quartic_hessian(X[k])
        np.testing.assert_allclose([a[k], b[k], trace[k]],
                                   [h[0, 0] + h[1, 2], h[2, 1], np.trace(h)], rtol=1e-6)


@runs
def test_vjp_inside_equals_cpu():
    out, g = _both(vjp_inside, (0, 0, None), X, U, C)
    np.testing.assert_allclose(g, U[:, None] * np.array([quartic_grad(x) for x in X]),
                               rtol=1e-12)
    assert out.shape == (B,)


@runs
def test_hvp_of_an_ode_inside_equals_cpu_and_finite_differences():
    theta, state0, v = 1 + 0.1 * rng.random((B, 4)), rng.random((B, 2)), rng.random((B, 4))
    hv = _both(ode_hvp, (0, 0, 0, None, None), theta, state0, v, 0.05, 6)
    grad = ad.grad(ode_loss)               # the NumPy backend's gradient
    eps = 1e-5
    fd = (grad(theta[1] + eps * v[1], state0[1], 0.05, 6)
          - grad(theta[1] - eps * v[1], state0[1], 0.05, 6)) / (2 * eps)
    np.testing.assert_allclose(hv[1], fd, rtol=1e-5, atol=1e-8)


@runs
def test_clipped_per_example_gradients_equal_cpu():
    big = np.vstack([X, 3 + X[:1]])                # one gradient longer than 1, clipped
    a, b, c = _both(clipped_grad, (0, None), big, C)
    g = np.array([quartic_grad(x) for x in big])
    scale = np.minimum(1.0, 1.0 / np.linalg.norm(g, axis=1))
    assert scale.min() < 1.0 and scale.max() == 1.0
    np.testing.assert_allclose(np.stack([a, b], 1), scale[:, None] * g[:, :2], rtol=1e-12)
    np.testing.assert_allclose(c, np.maximum(np.maximum(scale * g[:, 2], -1.0), big[:, 0] - 2),
                               rtol=1e-12)


@runs
def test_forward_mode_over_transforms_inside():
    # jacfwd of a gradient computed inside: the Hessian
    h = _both(ad.jacfwd(grad_returned), (0, None), X, C)
    # jacfwd of the HVP in its vector: the Hessian again
    hv = _both(ad.jacfwd(hvp_inside, argnums=1), (0, 0, None), X, V, C)
    for b in range(B):
        np.testing.assert_allclose(h[b], quartic_hessian(X[b]), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(hv, h, rtol=1e-10)


@runs
def test_reverse_mode_over_a_hessian_inside_says_what_to_write():
    # reverse mode over ad.grad inside runs (tests/test_cuda_reverse_nested.py); over
    # ad.hessian inside, its reverse sweep computes with whole arrays
    f = ad.jit(ad.vmap(ad.grad(hessian_inside), in_axes=(0, None)), target="cuda")
    with pytest.raises(UnsupportedSyntaxError, match="beyond elementwise arithmetic") as info:
        f(X, C)
    assert "cuda_nested.py" in str(info.value)


@runs
def test_an_array_kept_past_its_loop_iteration_is_copied():
    # one buffer per thread for g, written again each iteration: g_prev = g copies it
    # (under the simulator, local arrays are one buffer per statement, as on a GPU)
    f = ad.jit(ad.vmap(carried_gradient, in_axes=(0, None)), target="cuda")
    got = f(X, C)
    np.testing.assert_allclose(got, ad.vmap(carried_gradient, in_axes=(0, None))(X, C),
                               rtol=1e-12)
    want = [quartic_grad(x)[0] * quartic_grad(x)[1] +
            quartic_grad(x)[0] * quartic_grad(2 * x)[1] for x in X]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert re.search(r"rtd\.copy_into\(g_prev\w*, g, 1\.0\)", ad.source(f))


def test_local_arrays_in_the_generated_source():
    f = ad.jit(ad.vmap(hvp_inside, in_axes=(0, 0, None)), target="cuda")
    text = ad.source(f, X, V, C)
    assert "cuda.local.array((1, 3), np.float64)" in text        # the gradient's storage
    assert "np.array(" not in text and "rt.unit_like" not in text
    assert "ret0" in text and "rtd.copy_into(" in text           # results in caller's arrays


# -- PTX: what a GPU compiles ----------------------------------------------------
@ptx_only
@pytest.mark.usefixtures("nvvm")
def test_kernels_compile_to_ptx():
    cases = [(hvp_inside, (0, 0, None), (X, V, C)), (jacrev_inside, (0, None), (X, C)),
             (clipped_grad, (0, None), (X, C)),
             (vjp_inside, (0, 0, None), (X, U, C)),
             (ad.jacfwd(grad_returned), (0, None), (X, C))]
    for fun, axes, args in cases:
        ptx = ad.jit(ad.vmap(fun, in_axes=axes), target="cuda").compile_ptx(*args)
        assert ".entry" in ptx and "malloc" not in ptx


def test_a_function_given_arrays_of_two_shapes_is_refused():
    from s2s_ad.api.cuda import device_source
    source = ("# Generated by s2s_ad: the function of f (prog.py:1).\n"
              "def first(a):\n    return a[0]\n\n\n"
              "def f(x, y, z):\n    # return first((x, y)) + first((x, y, z))  [line 2]\n"
              "    p = np.array((x, y))\n    q = np.array((x, y, z))\n"
              "    _t1 = first(p)\n    _t2 = first(q)\n    return _t1 + _t2\n")
    with pytest.raises(UnsupportedSyntaxError, match="first is called with arrays of different "
                       "shapes"):
        device_source(source, "f")
    # one shape: the arrays are per-thread arrays
    text, _, _ = device_source(source.replace("first(q)", "first(p)"), "f")
    assert "p = cuda.local.array((2,), np.float64)" in text
