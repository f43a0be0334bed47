"""Workload: the extended Rosenbrock function as an explicit loop.

    f(x) = sum_{i < n-1} 100 (x[i+1] - x[i]^2)^2 + (1 - x[i])^2

over a vector of 10,000 float64, written as a user writes it: one scalar
loop.  The gradient is checked against the closed form, vectorised in NumPy.
Target: s2s_ad's jitted gradient at most 1.3x the hand-written Numba one.
"""
import numpy as np

from . import core

NAME = "rosen_loop"
SIZES = {"full": 10_000, "tiny": 50}


def rosen(x):
    n = x.shape[0]
    s = 0.0
    for i in range(n - 1):
        a = x[i + 1] - x[i] * x[i]
        b = 1.0 - x[i]
        s += 100.0 * a * a + b * b
    return s


def _hand_grad(x):
    """One pass; the term that lands on g[i + 1] is carried in a register
    to the next iteration instead of being read back from memory."""
    n = x.shape[0]
    g = np.empty(n)
    carry = 0.0
    for i in range(n - 1):
        xi = x[i]
        a = x[i + 1] - xi * xi
        g[i] = carry - 400.0 * a * xi - 2.0 * (1.0 - xi)
        carry = 200.0 * a
    g[n - 1] = carry
    return g


def analytic_grad(x):
    """The closed form, vectorised: independent of any loop above."""
    a = x[1:] - x[:-1] ** 2
    g = np.zeros_like(x)
    g[:-1] = -400.0 * a * x[:-1] - 2.0 * (1.0 - x[:-1])
    g[1:] += 200.0 * a
    return g


def oracle(args, grads):
    return core.compare(grads, analytic_grad(args[0]))


# -- peers --------------------------------------------------------------------

def jax_as_written(args):
    raise core.Unavailable(f"jax.jit unrolls the Python loop ({args[0].shape[0] - 1:,} "
                           "iterations) at trace time; see the lax column")


def rosen_lax(lax, x):
    """The same function for JAX, its loop as ``lax.fori_loop`` (static bounds)."""
    def body(i, s):
        a = x[i + 1] - x[i] * x[i]
        b = 1.0 - x[i]
        return s + 100.0 * a * a + b * b
    return lax.fori_loop(0, x.shape[0] - 1, body, 0.0)


def jax_lax(args):
    jax, jnp, lax = core.load_jax()
    grad = jax.jit(jax.grad(lambda x: rosen_lax(lax, x)))
    return core.Impl("jax_lax", lambda x: core.jax_ready(grad(x)), (jnp.asarray(args[0]),),
                     note="lax.fori_loop with static bounds (reverse mode via scan)")


def torch_eager(args):
    torch = core.load_torch()

    def grad(x):
        return torch.autograd.grad(rosen(x), x)[0]

    x = torch.from_numpy(args[0].copy()).requires_grad_()
    return core.Impl("torch", grad, (x,), note="the user's function itself, on tensors")


def autograd_hips(args):
    autograd, anp = core.load_autograd()
    del anp         # the loop uses only indexing and arithmetic
    return core.Impl("autograd", autograd.grad(rosen), (args[0],),
                     note="the user's function itself, traced by autograd")


def build(size="full"):
    import numba
    n = SIZES[size]
    x = np.random.default_rng(0).uniform(-2.0, 2.0, n)
    return core.Workload(
        name=NAME, title="extended Rosenbrock, scalar loop", size=f"n = {n:,}",
        args=(x,), argnums=0, primal=rosen, numba_primal=numba.njit(rosen),
        hand_grad=numba.njit(_hand_grad), oracle=oracle,
        oracle_name="closed-form gradient (vectorised NumPy)", oracle_tol=1e-12,
        peers={"jax": jax_as_written, "jax_lax": jax_lax, "torch": torch_eager,
               "autograd": autograd_hips},
        slow_peers=("torch", "autograd"),
        targets=[core.Target("s2s_ad", "hand", 1.3)])
