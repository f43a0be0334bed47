"""Workload: the dense Hessian of a 100-dimensional pairwise energy.

    f(x) = sum_i (x_i^2 / 2 + cos x_i) + sum_{i < j} log(1 + (x_i - x_j)^2) / (j - i)

written as a user writes it: a loop over i with an inner loop over j > i
(4,950 pair terms).  Every pair couples two coordinates, so the Hessian is
dense.  s2s_ad's column is ``ad.jit(ad.hessian(f))`` (forward over reverse);
an extra column times one ``ad.hvp(ad.jit(f), (x,), (v,))``, so that the
Hessian can be set against 100 HVPs.  The hand-written Numba Hessian fills
the matrix pair by pair from the closed form, and is checked against that
closed form vectorised in NumPy.  Targets: the Hessian at most 1.2x the
time of 100 HVPs, and no slower than JAX's ``jit(hessian)``.
"""
import numba
import numpy as np

from . import core

NAME = "hessian_dense"
SIZES = {"full": 100, "tiny": 6}


def pair_energy(x):
    n = x.shape[0]
    s = 0.0
    for i in range(n):
        s += 0.5 * x[i] * x[i] + np.cos(x[i])
        for j in range(i + 1, n):
            d = x[i] - x[j]
            s += np.log(1.0 + d * d) / (j - i)
    return s


def _hand_hessian(x):
    """phi(d) = log(1 + d^2) has phi'' = 2 (1 - d^2) / (1 + d^2)^2: each pair
    adds c = phi''(x_i - x_j) / (j - i) to H[i, i] and H[j, j] and -c to
    H[i, j] and H[j, i]; the diagonal starts at 1 - cos x_i."""
    n = x.shape[0]
    H = np.zeros((n, n))
    for i in range(n):
        H[i, i] += 1.0 - np.cos(x[i])
        for j in range(i + 1, n):
            d = x[i] - x[j]
            d2 = d * d
            q = 1.0 + d2
            c = 2.0 * (1.0 - d2) / (q * q * (j - i))
            H[i, i] += c
            H[j, j] += c
            H[i, j] = -c
            H[j, i] = -c
    return H


def _weights(n):
    """1 / (j - i) above the diagonal, 0 elsewhere."""
    gap = np.arange(n)[None, :] - np.arange(n)[:, None]
    return np.where(gap > 0, 1.0 / np.where(gap > 0, gap, 1), 0.0)


def analytic_hessian(x):
    """The closed form, vectorised in NumPy."""
    W = _weights(x.shape[0])
    W = W + W.T
    d2 = (x[:, None] - x[None, :]) ** 2
    C = W * 2.0 * (1.0 - d2) / (1.0 + d2) ** 2
    return np.diag(1.0 - np.cos(x) + C.sum(axis=1)) - C


def oracle(args, out):
    return core.compare(out, analytic_hessian(args[0]))


def _energy_vec(lib, W):
    """The vectorised formulation the peers differentiate (``W`` from
    :func:`_weights`, converted to the peer's arrays)."""
    def energy(x):
        d = x[:, None] - x[None, :]
        return lib.sum(0.5 * x * x + lib.cos(x)) + lib.sum(W * lib.log(1.0 + d * d))
    return energy


# -- peers --------------------------------------------------------------------

def jax_vectorised(args):
    jax, jnp, _ = core.load_jax()
    x = args[0]
    hess = jax.jit(jax.hessian(_energy_vec(jnp, jnp.asarray(_weights(x.shape[0])))))
    return core.Impl("jax", lambda a: core.jax_ready(hess(a)), (jnp.asarray(x),),
                     note="jit(hessian(f)) on the vectorised formulation (all pairs as an "
                          "n x n matrix, weights 0 below the diagonal): the user's loops "
                          "unroll at trace time, and XLA takes 66 s to compile them at n = 20")


def jax_lax(args):
    jax, jnp, lax = core.load_jax()
    x = args[0]
    n = x.shape[0]
    cols = jnp.arange(n)

    def energy(x):
        def body(i, s):
            d = x[i] - x
            gap = cols - i
            w = jnp.where(gap > 0, 1.0 / jnp.where(gap > 0, gap, 1), 0.0)
            return s + 0.5 * x[i] * x[i] + jnp.cos(x[i]) + jnp.sum(w * jnp.log(1.0 + d * d))
        return lax.fori_loop(0, n, body, 0.0)

    hess = jax.jit(jax.hessian(energy))
    return core.Impl("jax_lax", lambda a: core.jax_ready(hess(a)), (jnp.asarray(x),),
                     note="lax.fori_loop over i (static bounds), the inner loop over j as a "
                          "masked vector operation")


def torch_func(args):
    torch = core.load_torch()
    from torch.func import hessian
    x = args[0]
    h = hessian(_energy_vec(torch, torch.from_numpy(_weights(x.shape[0]))))
    return core.Impl("torch", h, (torch.from_numpy(x.copy()),),
                     note="torch.func.hessian on the vectorised formulation")


def autograd_hips(args):
    autograd, anp = core.load_autograd()
    x = args[0]
    return core.Impl("autograd", autograd.hessian(_energy_vec(anp, _weights(x.shape[0]))),
                     args, note="autograd.hessian on the vectorised formulation")


def build(size="full"):
    import s2s_ad as ad
    n = SIZES[size]
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n)
    v = rng.standard_normal(n)

    def s2s_ad_hessian(ad, jit):
        h = ad.hessian(pair_energy)
        return ad.jit(h) if jit else h

    def s2s_ad_hvp():
        f = ad.jit(pair_energy)
        return core.Impl("s2s_ad_hvp", lambda x, v: ad.hvp(f, (x,), (v,)), (x, v), kind="hvp",
                         reference=lambda hand: hand[0] @ v,
                         note="ad.hvp(ad.jit(f), (x,), (v,)), one HVP; checked against the "
                              "hand-written Hessian times v")

    return core.Workload(
        name=NAME, title="dense Hessian of a pairwise energy, nested loops",
        size=f"n = {n}, {n * (n - 1) // 2:,} pairs", kind="hessian",
        args=(x,), argnums=0, primal=pair_energy, numba_primal=numba.njit(pair_energy),
        hand_grad=numba.njit(_hand_hessian, cache=True), s2s_ad=s2s_ad_hessian, oracle=oracle,
        oracle_name="closed-form Hessian (vectorised NumPy)", oracle_tol=1e-12,
        extra={"s2s_ad_hvp": s2s_ad_hvp},
        labels={"hand": "hand-written Numba Hessian", "s2s_ad": "s2s_ad jit(hessian)",
                "s2s_ad_py": "s2s_ad hessian (NumPy)", "s2s_ad_hvp": "s2s_ad hvp(jit(f)), one",
                "jax": "JAX jit(hessian)", "jax_lax": "JAX jit(hessian), lax",
                "torch": "PyTorch func.hessian", "autograd": "HIPS autograd hessian"},
        peers={"jax": jax_vectorised, "jax_lax": jax_lax, "torch": torch_func,
               "autograd": autograd_hips},
        slow_peers=("s2s_ad_py",),
        targets=[core.Target("s2s_ad", "s2s_ad_hvp", 1.2, scale=n),
                 core.Target("s2s_ad", "jax", 1.0)])
