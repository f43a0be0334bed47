"""Workload: per-sample gradients of MindSpore's TD(0) loss (API.md's example).

    td_loss(theta, s_t, r_tp1, s_tp1) = (stop_gradient(r_tp1 + theta . s_tp1) - theta . s_t)^2

for 100,000 transitions, the gradient of each transition's loss with
respect to ``theta`` (the semi-gradient: the target is not
differentiated), as a (100,000, d) array.  s2s_ad's column is API.md's
``ad.jit(ad.vmap(ad.grad(td_loss), in_axes=(None, 0, 0, 0)))``; the
hand-written Numba version is a ``prange`` loop writing
``-2 (target - v) s_t`` into a preallocated (B, d) output, checked against
the same formula vectorised in NumPy.  Two workloads, theta of dimension 3
and 64.  Target: s2s_ad at most 1.3x the hand-written version.
"""
import types

import numba
import numpy as np

import s2s_ad as ad

from . import core

NAME = "per_sample_td0"
SIZES = {"full": (100_000, (3, 64)), "tiny": (50, (3, 5))}


def td_loss(theta, s_t, r_tp1, s_tp1):
    v_t = np.dot(theta, s_t)
    target = r_tp1 + np.dot(theta, s_tp1)
    return (ad.stop_gradient(target) - v_t) ** 2


def td_losses(theta, s_t, r_tp1, s_tp1):
    """The NumPy primal column: the user's function, sample by sample."""
    out = np.empty(s_t.shape[0])
    for b in range(s_t.shape[0]):
        out[b] = td_loss(theta, s_t[b], r_tp1[b], s_tp1[b])
    return out


@numba.njit(parallel=True, cache=True)
def _hand_grads(theta, s_t, r_tp1, s_tp1):
    n, d = s_t.shape
    g = np.empty((n, d))
    for b in numba.prange(n):
        v = 0.0
        target = r_tp1[b]
        for k in range(d):
            v += theta[k] * s_t[b, k]
            target += theta[k] * s_tp1[b, k]
        c = -2.0 * (target - v)
        for k in range(d):
            g[b, k] = c * s_t[b, k]
    return g


def analytic_grads(theta, s_t, r_tp1, s_tp1):
    """The closed form, vectorised in NumPy."""
    delta = r_tp1 + s_tp1 @ theta - s_t @ theta
    return -2.0 * delta[:, None] * s_t


def oracle(args, out):
    return core.compare(out, analytic_grads(*args))


def _numba_losses():
    """The user's function under numba.njit (``ad.stop_gradient`` as the
    identity), in a ``prange`` loop over samples like the hand-written one."""
    shim = types.ModuleType("stop_gradient_shim")
    shim.stop_gradient = numba.njit(lambda x: x)
    jtd = core.rebind(td_loss, wrap=numba.njit, ad=shim)

    @numba.njit(parallel=True)
    def losses(theta, s_t, r_tp1, s_tp1):
        out = np.empty(s_t.shape[0])
        for b in numba.prange(s_t.shape[0]):
            out[b] = jtd(theta, s_t[b], r_tp1[b], s_tp1[b])
        return out
    return losses


def s2s_ad_grads(ad, jit):
    fn = ad.vmap(ad.grad(td_loss), in_axes=(None, 0, 0, 0))
    return ad.jit(fn) if jit else fn


# -- peers --------------------------------------------------------------------

def jax_vmap(args):
    jax, jnp, lax = core.load_jax()
    loss = core.rebind(td_loss, np=jnp, ad=types.SimpleNamespace(stop_gradient=lax.stop_gradient))
    grads = jax.jit(jax.vmap(jax.grad(loss), in_axes=(None, 0, 0, 0)))
    return core.Impl("jax", lambda *a: core.jax_ready(grads(*a)),
                     tuple(jnp.asarray(a) for a in args),
                     note="the user's function on jax.numpy, lax.stop_gradient")


def torch_vmap(args):
    torch = core.load_torch()
    from torch.func import grad, vmap
    loss = core.rebind(td_loss, np=types.SimpleNamespace(dot=torch.dot),
                       ad=types.SimpleNamespace(stop_gradient=torch.Tensor.detach))
    grads = vmap(grad(loss), in_dims=(None, 0, 0, 0))
    return core.Impl("torch", grads, tuple(torch.from_numpy(a.copy()) for a in args),
                     note="torch.func vmap(grad) of the user's function (torch.dot, .detach())")


def autograd_hips(args):
    raise core.Unavailable("autograd has no vmap: a Python loop of grad calls over "
                           f"{args[1].shape[0]:,} samples")


def build(size="full"):
    n, dims = SIZES[size]
    numba_losses = _numba_losses()
    out = []
    for d in dims:
        rng = np.random.default_rng(d)
        theta = 0.3 * rng.standard_normal(d)
        s_t = rng.standard_normal((n, d))
        r = rng.standard_normal(n)
        s_tp1 = rng.standard_normal((n, d))
        out.append(core.Workload(
            name=f"{NAME}[d={d}]", title="TD(0) per-sample gradients",
            size=f"{n:,} transitions, d = {d}", kind="per-sample grad",
            args=(theta, s_t, r, s_tp1), argnums=0, primal=td_losses,
            numba_primal=numba_losses,
            numba_note="the user's function under numba.njit (stop_gradient as the "
                       "identity) in a prange loop over samples",
            hand_grad=_hand_grads, s2s_ad=s2s_ad_grads, oracle=oracle,
            oracle_name="closed form (vectorised NumPy)", oracle_tol=1e-12,
            labels={"numpy": "NumPy primal (loop)", "hand": "hand-written Numba prange",
                    "s2s_ad": "s2s_ad jit(vmap(grad))", "s2s_ad_py": "s2s_ad vmap(grad) (NumPy)",
                    "jax": "JAX jit(vmap(grad))", "torch": "PyTorch func vmap(grad)"},
            peers={"jax": jax_vmap, "torch": torch_vmap, "autograd": autograd_hips},
            slow_peers=("s2s_ad_py",),
            targets=[core.Target("s2s_ad", "hand", 1.3)]))
    return out
