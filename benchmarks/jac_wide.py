"""Workload: the Jacobian of a 1000 -> 10 map by reverse mode (``ad.jacrev``).

The log of a Gaussian kernel density estimate of 1,000 samples, evaluated
at 10 points, as a user writes it: a loop over the samples with an inner
loop over the evaluation points, accumulating in place,

    dens[c] = sum_i exp(-((x[i] - centers[c]) / width)^2 / 2),
    out = log(dens / (n width sqrt(2 pi))),

differentiated with respect to the 1,000 samples ``x`` (``centers`` and
``width`` are data).  The Jacobian is 10 x 1000: ten cotangents back
through the loop.  The hand-written Numba Jacobian is one pass (each entry
scaled by its row's density at the end), checked against the closed form
vectorised in NumPy.  Target: s2s_ad's ``jit(jacrev)`` at most 15x the
Numba primal.
"""
import numba
import numpy as np

from . import core

NAME = "jac_wide"
SIZES = {"full": (1000, 10), "tiny": (20, 3)}


def kde_log_density(x, centers, width):
    n = x.shape[0]
    k = centers.shape[0]
    dens = np.zeros(k)
    for i in range(n):
        for c in range(k):
            z = (x[i] - centers[c]) / width
            dens[c] += np.exp(-0.5 * z * z)
    return np.log(dens / (n * width * np.sqrt(2.0 * np.pi)))


def _hand_jacobian(x, centers, width):
    """d out_c / d x_i = -exp(-z^2 / 2) z / width / dens_c with
    z = (x_i - centers_c) / width: the numerators in one pass, the division
    by each row's density (the normalising constant cancels) at the end."""
    n = x.shape[0]
    k = centers.shape[0]
    J = np.empty((k, n))
    dens = np.zeros(k)
    inv_w = 1.0 / width
    for i in range(n):
        for c in range(k):
            z = (x[i] - centers[c]) * inv_w
            e = np.exp(-0.5 * z * z)
            dens[c] += e
            J[c, i] = -e * z * inv_w
    for c in range(k):
        inv = 1.0 / dens[c]
        for i in range(n):
            J[c, i] *= inv
    return J


def analytic_jacobian(x, centers, width):
    """The closed form, vectorised in NumPy."""
    z = (x[None, :] - centers[:, None]) / width
    e = np.exp(-0.5 * z * z)
    return -e * z / width / e.sum(axis=1, keepdims=True)


def oracle(args, out):
    return core.compare(out, analytic_jacobian(*args))


def _kde_vec(lib):
    def kde(x, centers, width):
        z = (x[None, :] - centers[:, None]) / width
        dens = lib.sum(lib.exp(-0.5 * z * z), 1)
        return lib.log(dens / (x.shape[0] * width * np.sqrt(2.0 * np.pi)))
    return kde


# -- peers --------------------------------------------------------------------

def jax_vectorised(args):
    jax, jnp, _ = core.load_jax()
    jac = jax.jit(jax.jacrev(_kde_vec(jnp)))
    return core.Impl("jax", lambda *a: core.jax_ready(jac(*a)),
                     tuple(jnp.asarray(a) for a in args),
                     note="jit(jacrev(f)) on the vectorised formulation (points x samples "
                          "broadcast): jax.numpy arrays cannot take the user's dens[c] += ...")


def jax_lax(args):
    jax, jnp, lax = core.load_jax()

    def kde(x, centers, width):
        def body(i, dens):
            for c in range(centers.shape[0]):     # the user's inner loop (10 points), unrolled
                z = (x[i] - centers[c]) / width
                dens = dens.at[c].add(jnp.exp(-0.5 * z * z))
            return dens
        dens = lax.fori_loop(0, x.shape[0], body, jnp.zeros(centers.shape[0], x.dtype))
        return jnp.log(dens / (x.shape[0] * width * np.sqrt(2.0 * np.pi)))

    jac = jax.jit(jax.jacrev(kde))
    return core.Impl("jax_lax", lambda *a: core.jax_ready(jac(*a)),
                     tuple(jnp.asarray(a) for a in args),
                     note="the user's loop over samples as lax.fori_loop (static bounds, "
                          "reverse through scan) with dens.at[c].add; the inner loop unrolled")


def torch_func(args):
    torch = core.load_torch()
    from torch.func import jacrev
    x, centers, width = args
    return core.Impl("torch", jacrev(_kde_vec(torch)),
                     (torch.from_numpy(x.copy()), torch.from_numpy(centers.copy()), width),
                     note="torch.func.jacrev on the vectorised formulation")


def autograd_hips(args):
    autograd, anp = core.load_autograd()
    return core.Impl("autograd", autograd.jacobian(_kde_vec(anp)), args,
                     note="autograd.jacobian on the vectorised formulation")


def build(size="full"):
    n, k = SIZES[size]
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n)
    centers = np.linspace(-2.0, 2.0, k)
    width = 0.5

    def s2s_ad_jacrev(ad, jit):
        jac = ad.jacrev(kde_log_density)
        return ad.jit(jac) if jit else jac

    return core.Workload(
        name=NAME, title="Jacobian of a 1000 -> 10 map (log KDE), reverse mode",
        size=f"{n} -> {k}", kind="jacobian",
        args=(x, centers, width), argnums=0, primal=kde_log_density,
        numba_primal=numba.njit(kde_log_density), hand_grad=numba.njit(_hand_jacobian, cache=True),
        s2s_ad=s2s_ad_jacrev, oracle=oracle,
        oracle_name="closed-form Jacobian (vectorised NumPy)", oracle_tol=1e-12,
        labels={"hand": "hand-written Numba Jacobian", "s2s_ad": "s2s_ad jit(jacrev)",
                "s2s_ad_py": "s2s_ad jacrev (NumPy)", "jax": "JAX jit(jacrev)",
                "jax_lax": "JAX jit(jacrev), lax", "torch": "PyTorch func.jacrev",
                "autograd": "HIPS autograd jacobian"},
        peers={"jax": jax_vectorised, "jax_lax": jax_lax, "torch": torch_func,
               "autograd": autograd_hips},
        targets=[core.Target("s2s_ad", "numba", 15.0)])
