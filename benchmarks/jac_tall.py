"""Workload: the Jacobian of a 10 -> 1000 map by forward mode (``ad.jacfwd``).

A sum of five damped cosines sampled at 1,000 times, the model of an
exponential / Prony fit, as a user writes it: a loop over the samples
with an inner loop over the modes, writing each output in place,

    y[i] = sum_j p[2j] exp(-p[2j+1] t[i]) cos(omega[j] t[i]),

differentiated with respect to the 10 parameters ``p`` (amplitudes and
decay rates; ``t`` and ``omega`` are data).  The Jacobian is 1000 x 10:
ten tangents through the loop.  The hand-written Numba Jacobian fills it
row by row from the closed form, and is checked against that closed form
vectorised in NumPy.  Target: s2s_ad's ``jit(jacfwd)`` at most 15x the
Numba primal.
"""
import numba
import numpy as np

from . import core

NAME = "jac_tall"
SIZES = {"full": (5, 1000), "tiny": (2, 20)}


def damped_modes(p, t, omega):
    m = t.shape[0]
    k = omega.shape[0]
    y = np.zeros(m)
    for i in range(m):
        s = 0.0
        for j in range(k):
            s += p[2 * j] * np.exp(-p[2 * j + 1] * t[i]) * np.cos(omega[j] * t[i])
        y[i] = s
    return y


def _hand_jacobian(p, t, omega):
    """dy_i/dp_2j = e c, dy_i/dp_2j+1 = -p_2j t_i e c with e = exp(-p_2j+1 t_i),
    c = cos(omega_j t_i): one exp and one cos per entry pair."""
    m = t.shape[0]
    k = omega.shape[0]
    J = np.empty((m, 2 * k))
    for i in range(m):
        ti = t[i]
        for j in range(k):
            ec = np.exp(-p[2 * j + 1] * ti) * np.cos(omega[j] * ti)
            J[i, 2 * j] = ec
            J[i, 2 * j + 1] = -p[2 * j] * ti * ec
    return J


def analytic_jacobian(p, t, omega):
    """The closed form, vectorised in NumPy."""
    amp, rate = p[0::2], p[1::2]
    ec = np.exp(-rate[None, :] * t[:, None]) * np.cos(omega[None, :] * t[:, None])
    J = np.empty((t.shape[0], p.shape[0]))
    J[:, 0::2] = ec
    J[:, 1::2] = -amp[None, :] * t[:, None] * ec
    return J


def oracle(args, out):
    return core.compare(out, analytic_jacobian(*args))


def _modes_vec(lib):
    def modes(p, t, omega):
        amp, rate = p[0::2], p[1::2]
        return lib.sum(amp[None, :] * lib.exp(-rate[None, :] * t[:, None])
                       * lib.cos(omega[None, :] * t[:, None]), 1)
    return modes


# -- peers --------------------------------------------------------------------

def jax_vectorised(args):
    jax, jnp, _ = core.load_jax()
    jac = jax.jit(jax.jacfwd(_modes_vec(jnp)))
    return core.Impl("jax", lambda *a: core.jax_ready(jac(*a)), tuple(jnp.asarray(a) for a in args),
                     note="jit(jacfwd(f)) on the vectorised formulation (samples x modes "
                          "broadcast): jax.numpy arrays cannot take the user's y[i] = s")


def jax_lax(args):
    jax, jnp, lax = core.load_jax()

    def modes(p, t, omega):
        def body(i, y):
            s = 0.0
            for j in range(omega.shape[0]):      # the user's inner loop (5 modes), unrolled
                s += p[2 * j] * jnp.exp(-p[2 * j + 1] * t[i]) * jnp.cos(omega[j] * t[i])
            return y.at[i].set(s)
        return lax.fori_loop(0, t.shape[0], body, jnp.zeros(t.shape[0], p.dtype))

    jac = jax.jit(jax.jacfwd(modes))
    return core.Impl("jax_lax", lambda *a: core.jax_ready(jac(*a)),
                     tuple(jnp.asarray(a) for a in args),
                     note="the user's loop over samples as lax.fori_loop with y.at[i].set(s); "
                          "the inner loop over modes unrolled at trace time")


def torch_func(args):
    torch = core.load_torch()
    from torch.func import jacfwd
    return core.Impl("torch", jacfwd(_modes_vec(torch)),
                     tuple(torch.from_numpy(a.copy()) for a in args),
                     note="torch.func.jacfwd on the vectorised formulation")


def autograd_hips(args):
    autograd, anp = core.load_autograd()
    return core.Impl("autograd", autograd.jacobian(_modes_vec(anp)), args,
                     note="autograd.jacobian (reverse mode, one pass per output) on the "
                          "vectorised formulation: autograd has no forward-mode Jacobian")


def build(size="full"):
    k, m = SIZES[size]
    rng = np.random.default_rng(0)
    p = np.empty(2 * k)
    p[0::2] = rng.normal(1.0, 0.3, k)            # amplitudes
    p[1::2] = rng.uniform(0.05, 0.5, k)          # decay rates
    t = np.linspace(0.0, 10.0, m)
    omega = np.linspace(0.5, 3.0, k)

    def s2s_ad_jacfwd(ad, jit):
        jac = ad.jacfwd(damped_modes)
        return ad.jit(jac) if jit else jac

    return core.Workload(
        name=NAME, title="Jacobian of a 10 -> 1000 map (damped modes), forward mode",
        size=f"{2 * k} -> {m}", kind="jacobian",
        args=(p, t, omega), argnums=0, primal=damped_modes,
        numba_primal=numba.njit(damped_modes), hand_grad=numba.njit(_hand_jacobian, cache=True),
        s2s_ad=s2s_ad_jacfwd, oracle=oracle,
        oracle_name="closed-form Jacobian (vectorised NumPy)", oracle_tol=1e-12,
        labels={"hand": "hand-written Numba Jacobian", "s2s_ad": "s2s_ad jit(jacfwd)",
                "s2s_ad_py": "s2s_ad jacfwd (NumPy)", "jax": "JAX jit(jacfwd)",
                "jax_lax": "JAX jit(jacfwd), lax", "torch": "PyTorch func.jacfwd",
                "autograd": "HIPS autograd jacobian"},
        peers={"jax": jax_vectorised, "jax_lax": jax_lax, "torch": torch_func,
               "autograd": autograd_hips},
        targets=[core.Target("s2s_ad", "numba", 15.0)])
