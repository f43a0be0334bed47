"""Workload: the gradient of a Gaussian-process negative log marginal likelihood.

A squared-exponential kernel on n = 500 points in one dimension, with a log
length-scale, a log signal scale and a log noise scale; the likelihood is
written as a user writes it: ``np.linalg.cholesky`` of the kernel matrix,
``np.linalg.solve`` with the factor for the data fit, ``np.linalg.slogdet``
for the complexity term.  The gradient with respect to the three
hyperparameters is checked against central differences of the likelihood.
Target: s2s_ad no slower than JAX's ``jit(grad)``.
"""
import math

import numba
import numpy as np

from . import core

NAME = "gp_nll"
SIZES = {"full": 500, "tiny": 12}


def gp_nll(log_ls, log_sf, log_sn, x, y):
    d = x.reshape(-1, 1) - x.reshape(1, -1)
    k = np.exp(2.0 * log_sf - 0.5 * d * d / np.exp(2.0 * log_ls)) \
        + np.exp(2.0 * log_sn) * np.eye(x.shape[0])
    lower = np.linalg.cholesky(k)
    z = np.linalg.solve(lower, y)          # y.K^-1.y = z.z
    sign, logdet = np.linalg.slogdet(k)
    return 0.5 * np.dot(z, z) + 0.5 * logdet + 0.5 * x.shape[0] * math.log(2.0 * math.pi)


@numba.njit
def _hand_grad(log_ls, log_sf, log_sn, x, y):
    """dNLL/dθ = ½ tr((K⁻¹ − ααᵀ) ∂K/∂θ), α = K⁻¹y, one Cholesky factorisation."""
    n = x.shape[0]
    ls2, sf2, sn2 = np.exp(2.0 * log_ls), np.exp(2.0 * log_sf), np.exp(2.0 * log_sn)
    kf = np.empty((n, n))
    r2 = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            d = x[i] - x[j]
            r2[i, j] = d * d / ls2
            kf[i, j] = sf2 * np.exp(-0.5 * r2[i, j])
    k = kf.copy()
    for i in range(n):
        k[i, i] += sn2
    lower = np.linalg.cholesky(k)
    kinv = np.linalg.inv(lower)
    kinv = np.ascontiguousarray(kinv.T) @ kinv
    alpha = kinv @ y
    g_ls = g_sf = g_sn = 0.0
    for i in range(n):
        for j in range(n):
            w = kinv[i, j] - alpha[i] * alpha[j]
            g_ls += w * kf[i, j] * r2[i, j]
            g_sf += w * kf[i, j]
        g_sn += kinv[i, i] - alpha[i] * alpha[i]
    return 0.5 * g_ls, g_sf, g_sn * sn2


def oracle(args, grads):
    eps, want = 1e-6, []
    for i in range(3):
        hi, lo = list(args), list(args)
        hi[i] += eps
        lo[i] -= eps
        want.append((gp_nll(*hi) - gp_nll(*lo)) / (2 * eps))
    return core.compare(grads, tuple(want))


# -- peers --------------------------------------------------------------------

def jax_as_written(args):
    jax, jnp, _ = core.load_jax()
    grad = jax.jit(jax.grad(core.rebind(gp_nll, np=jnp), argnums=(0, 1, 2)))
    return core.Impl("jax", lambda *a: core.jax_ready(grad(*a)),
                     tuple(jnp.asarray(a) for a in args),
                     note="the user's function on jax.numpy")


def torch_eager(args):
    torch = core.load_torch()

    def gp_nll_t(log_ls, log_sf, log_sn, x, y):
        d = x.reshape(-1, 1) - x.reshape(1, -1)
        k = torch.exp(2.0 * log_sf - 0.5 * d * d / torch.exp(2.0 * log_ls)) \
            + torch.exp(2.0 * log_sn) * torch.eye(x.shape[0], dtype=x.dtype)
        lower = torch.linalg.cholesky(k)
        z = torch.linalg.solve(lower, y)
        sign, logdet = torch.linalg.slogdet(k)
        return 0.5 * torch.dot(z, z) + 0.5 * logdet + 0.5 * x.shape[0] * math.log(2 * math.pi)

    def grad(*a):
        return torch.autograd.grad(gp_nll_t(*a), a[:3])

    tensors = [torch.tensor(a, dtype=torch.float64) for a in args]
    for t in tensors[:3]:
        t.requires_grad_()
    return core.Impl("torch", grad, tuple(tensors), note="the user's code, torch.linalg")


def autograd_hips(args):
    autograd, anp = core.load_autograd()
    return core.Impl("autograd", autograd.grad(core.rebind(gp_nll, np=anp), argnum=(0, 1, 2)),
                     args, note="the user's function on autograd.numpy")


def inputs(size):
    n = SIZES[size]
    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(0.0, 10.0, n))
    y = np.sin(x) + 0.1 * rng.standard_normal(n)
    return 0.0, 0.2, math.log(0.3), x, y


def build(size="full"):
    args = inputs(size)
    return core.Workload(
        name=NAME, title="Gaussian-process negative log marginal likelihood",
        size=f"n = {SIZES[size]}, 3 hyperparameters",
        args=args, argnums=(0, 1, 2), primal=gp_nll, numba_primal=numba.njit(gp_nll),
        hand_grad=_hand_grad, oracle=oracle,
        oracle_name="central differences of the likelihood", oracle_tol=1e-5,
        peers={"jax": jax_as_written, "torch": torch_eager, "autograd": autograd_hips},
        targets=[core.Target("s2s_ad", "jax", 1.0)])
