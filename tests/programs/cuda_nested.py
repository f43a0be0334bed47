"""Transforms written inside per-example functions, for the CUDA target
(tests/test_cuda_nested.py): their results are arrays of small static
length, which a GPU thread keeps in ``cuda.local.array``."""
import numpy as np

import s2s_ad as ad


def quartic(x, c):
    """A small scalar function of a 3-vector."""
    return c * x[0] ** 2 * x[1] + np.sin(x[1] * x[2]) + x[0] * x[2] ** 3


def hvp_inside(x, v, c):
    """A Hessian-vector product per example."""
    return ad.hvp(lambda z: quartic(z, c), (x,), (v,))


def grad_inside(x, c):
    """A gradient per example, then a scalar of it."""
    g = ad.grad(quartic)(x, c)
    return g[0] * g[1] + g[2]


def grad_returned(x, c):
    """A gradient per example, returned whole."""
    return ad.grad(quartic)(x, c)


def jacrev_inside(x, c):
    """A Jacobian (of the gradient) per example: the Hessian, returned as rows."""
    h = ad.jacrev(ad.grad(quartic))(x, c)
    return h[0, 0] + h[1, 2], h[2, 1]


def hessian_inside(x, c):
    """ad.hessian per example, reduced to its trace."""
    h = ad.hessian(quartic)(x, c)
    return h[0, 0] + h[1, 1] + h[2, 2]


def vjp_inside(x, u, c):
    """ad.vjp per example: the cotangent pulled back through the gradient."""
    out, pull = ad.vjp(lambda z: quartic(z, c), x)
    (g,) = pull(u)
    return out, g


def clipped_grad(x, c):
    """DP-SGD's per-example clipped gradient: the gradient scaled to norm <= 1
    (Python's min and max, np.maximum on the device)."""
    g = ad.grad(quartic)(x, c)
    norm = np.sqrt(g[0] * g[0] + g[1] * g[1] + g[2] * g[2])
    scale = min(1.0, 1.0 / np.maximum(norm, 1e-12))
    return scale * g[0], scale * g[1], max(scale * g[2], -1.0, x[0] - 2.0)


def carried_gradient(x, c):
    """A gradient computed in a loop and kept for the next iteration: on the
    CUDA target, copied out of the buffer the next iteration writes."""
    g_prev = ad.grad(quartic)(x, c)
    s = 0.0
    for k in range(2):
        g = ad.grad(quartic)(x * (1.0 + k), c)
        s = s + g_prev[0] * g[1]
        g_prev = g
    return s


def quad(y, c):
    """A small scalar function of a 2-vector."""
    return c * y[0] ** 2 * y[1] + np.sin(y[0])


def two_gradients(x, y, c):
    """Two gradients inside, of a 3- and a 2-vector: the stacks of both are kept
    until the reverse sweep over them (on the device, one after the other on the
    thread's tape)."""
    g = ad.grad(quartic)(x, c)
    h = ad.grad(quad)(y * x[1], c)
    return g[0] * h[1] + g[1] * h[0] + g[2] * h[1]


def hvp_reduced(x, v, c):
    """A Hessian-vector product inside (forward over reverse), reduced to a scalar."""
    h = ad.hvp(lambda z: quartic(z, c), (x,), (v,))
    return h[0] * h[1] + h[2]
