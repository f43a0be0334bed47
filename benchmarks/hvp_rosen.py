"""Workload: a Hessian-vector product of the extended Rosenbrock loop.

The function is ``rosen_loop``'s (one scalar loop over 10,000 float64); the
derivative is ``H(x) v``, forward-over-reverse without forming ``H``, as a
user writes it with s2s_ad: ``ad.hvp(ad.jit(f), (x,), (v,))`` (a transform
of a jitted function is compiled).  The hand-written Numba HVP uses the
tridiagonal Hessian's entries directly; it is checked against the closed
form, vectorised in NumPy.  Target: the HVP at most 5x the Numba primal.
"""
import numba
import numpy as np

from . import core
from .rosen_loop import jax_as_written, rosen, rosen_lax

NAME = "hvp_rosen"
SIZES = {"full": 10_000, "tiny": 50}


def _hand_hvp(x, v):
    """One pass over the terms; term i couples x[i] and x[i + 1] only:
    d2/dx_i^2 = 1200 x_i^2 - 400 x_{i+1} + 2, d2/dx_i dx_{i+1} = -400 x_i,
    d2/dx_{i+1}^2 = 200.  What lands on out[i + 1] is carried in a register."""
    n = x.shape[0]
    out = np.empty(n)
    carry = 0.0
    for i in range(n - 1):
        xi = x[i]
        vi = v[i]
        vj = v[i + 1]
        out[i] = carry + (1200.0 * xi * xi - 400.0 * x[i + 1] + 2.0) * vi - 400.0 * xi * vj
        carry = 200.0 * vj - 400.0 * xi * vi
    out[n - 1] = carry
    return out


def analytic_hvp(x, v):
    """The closed-form tridiagonal Hessian times v, vectorised in NumPy."""
    xi, xj = x[:-1], x[1:]
    diag = np.zeros_like(x)
    diag[:-1] += 1200.0 * xi * xi - 400.0 * xj + 2.0
    diag[1:] += 200.0
    off = -400.0 * xi
    hv = diag * v
    hv[:-1] += off * v[1:]
    hv[1:] += off * v[:-1]
    return hv


def oracle(args, out):
    return core.compare(out, analytic_hvp(*args))


def s2s_ad_hvp(ad, jit):
    f = ad.jit(rosen) if jit else rosen
    return lambda x, v: ad.hvp(f, (x,), (v,))


# -- peers --------------------------------------------------------------------

def jax_lax(args):
    jax, jnp, lax = core.load_jax()
    grad = jax.grad(lambda x: rosen_lax(lax, x))
    hvp = jax.jit(lambda x, v: jax.jvp(grad, (x,), (v,))[1])
    return core.Impl("jax_lax", lambda x, v: core.jax_ready(hvp(x, v)),
                     tuple(jnp.asarray(a) for a in args),
                     note="jit(jvp(grad(f))) of lax.fori_loop with static bounds "
                          "(forward over reverse, the loop through scan); its first call "
                          "is the compile time")


def _rosen_vec(np_):
    def rosen_vec(x):
        a = x[1:] - x[:-1] * x[:-1]
        b = 1.0 - x[:-1]
        return np_.sum(100.0 * a * a + b * b)
    return rosen_vec


def torch_func(args):
    torch = core.load_torch()
    from torch.func import grad, jvp

    g = grad(_rosen_vec(torch))
    return core.Impl("torch", lambda x, v: jvp(g, (x,), (v,))[1],
                     tuple(torch.from_numpy(a.copy()) for a in args),
                     note="torch.func.jvp(grad(f)) (forward over reverse) on the vectorised "
                          "formulation (slices): the user's loop would run 10,000 Python "
                          "iterations, twice")


def autograd_hips(args):
    autograd, anp = core.load_autograd()
    from autograd import hessian_vector_product
    return core.Impl("autograd", hessian_vector_product(_rosen_vec(anp)), args,
                     note="hessian_vector_product (reverse over reverse) on the vectorised "
                          "formulation: on the user's loop it takes 10 s a call")


def build(size="full"):
    n = SIZES[size]
    rng = np.random.default_rng(0)
    x = rng.uniform(-2.0, 2.0, n)
    v = rng.standard_normal(n)
    return core.Workload(
        name=NAME, title="Hessian-vector product, extended Rosenbrock loop",
        size=f"n = {n:,}", kind="hvp",
        args=(x, v), primal_args=(x,), argnums=0, primal=rosen,
        numba_primal=numba.njit(rosen), hand_grad=numba.njit(_hand_hvp, cache=True),
        s2s_ad=s2s_ad_hvp, oracle=oracle,
        oracle_name="closed-form tridiagonal Hessian times v (vectorised NumPy)",
        oracle_tol=1e-12,
        labels={"hand": "hand-written Numba HVP", "s2s_ad": "s2s_ad hvp(jit(f))",
                "s2s_ad_py": "s2s_ad hvp (NumPy)", "jax": "JAX jit(jvp(grad))",
                "jax_lax": "JAX jit(jvp(grad)), lax", "torch": "PyTorch jvp(grad)",
                "autograd": "HIPS autograd HVP"},
        peers={"jax": jax_as_written, "jax_lax": jax_lax, "torch": torch_func,
               "autograd": autograd_hips},
        targets=[core.Target("s2s_ad", "numba", 5.0)])
