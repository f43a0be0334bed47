"""``ad.checkpoint`` on the CUDA target: a per-example gradient kernel whose
checkpointed helper runs again in the backward sweep equals the CPU path and
finite differences.  Under the simulator (tests/test_cuda.py::test_under_simulator
runs this file in its subprocess)."""
import sys
from pathlib import Path

import numpy as np

import s2s_ad as ad

sys.path.insert(0, str(Path(__file__).parent))
from conftest import fd_jacobian  # noqa: E402
from cuda_support import runs  # noqa: E402


@ad.checkpoint
def step(w, h):
    out = np.zeros_like(h)
    for i in range(h.shape[0]):
        out[i] = np.tanh(w * h[i] + h[(i + 1) % 3])
    return out


def loss(w, h):
    for _ in range(4):
        h = step(w, h)
    return np.sum(h ** 2)


def loss_plain(w, h):
    for _ in range(4):
        h = step.fun(w, h)
    return np.sum(h ** 2)


@runs
def test_per_example_gradient_kernel_with_a_checkpointed_helper():
    hs = np.array([[0.3, -0.5, 0.9], [1.1, 0.2, -0.4]])
    grad = ad.vmap(ad.grad(loss, 1), in_axes=(None, 0))
    gpu = ad.jit(grad, target="cuda")(0.7, hs)
    cpu = ad.jit(grad)(0.7, hs)
    np.testing.assert_allclose(gpu, cpu, rtol=1e-10, atol=1e-12)
    for b in range(2):
        np.testing.assert_allclose(gpu[b], fd_jacobian(lambda v: loss_plain(0.7, v), hs[b]),
                                   atol=1e-7)


def _likes(h):
    a = np.ones_like(h)
    b = np.zeros_like(h)
    for i in range(h.shape[0]):
        b[i] = a[i] * np.sin(h[i]) + h[i] ** 2
    return np.sum(b * a)


@runs
def test_arrays_like_an_argument_on_a_thread():
    """np.zeros_like / np.ones_like of a small static array: thread-local arrays."""
    hs = np.array([[0.3, -0.5, 0.9], [1.1, 0.2, -0.4]])
    grad = ad.vmap(ad.grad(_likes), in_axes=0)
    gpu = ad.jit(grad, target="cuda")(hs)
    np.testing.assert_allclose(gpu, np.cos(hs) + 2 * hs, rtol=1e-12)
