"""Workload: Newton's iteration for the square root, with a while loop.

``newton_sqrt(a)`` iterates x <- (x + a/x) / 2 until |x^2 - a| <= 1e-12 a:
the trip count depends on the data (4 to 10 iterations here).  An outer
``for`` loop sums it over 1,000 inputs drawn from [0.01, 100].  The gradient
of the sum is the derivative of the iteration itself, which at convergence
equals the analytic 1 / (2 sqrt(a)); the hand-written gradient is checked
against that.  Target: s2s_ad's jitted gradient at most 3x the Numba primal.
"""
import numba
import numpy as np

from . import core

NAME = "newton_sqrt"
SIZES = {"full": 1_000, "tiny": 20}


def newton_sqrt(a):
    x = a if a > 1.0 else 1.0  # noqa: FURB136 (a branch, as users write it)
    while abs(x * x - a) > 1e-12 * a:
        x = 0.5 * (x + a / x)
    return x


def sum_sqrt(a):
    s = 0.0
    for i in range(a.shape[0]):
        s += newton_sqrt(a[i])
    return s


@numba.njit
def _hand_grad(a):
    """Forward mode inside each iteration: one input, one output, so the
    tangent rides along the loop and nothing is stored."""
    g = np.empty_like(a)
    for i in range(a.shape[0]):
        ai = a[i]
        if ai > 1.0:
            x, dx = ai, 1.0
        else:
            x, dx = 1.0, 0.0
        while abs(x * x - ai) > 1e-12 * ai:
            dx = 0.5 * (dx + 1.0 / x - ai * dx / (x * x))
            x = 0.5 * (x + ai / x)
        g[i] = dx
    return g


def oracle(args, grads):
    return core.compare(grads, 0.5 / np.sqrt(args[0]))


# -- peers --------------------------------------------------------------------

def jax_as_written(args):
    raise core.Unavailable("a Python `while` on a traced value cannot be jitted "
                           "(ConcretizationTypeError); see the lax column")


def jax_lax(args):
    jax, jnp, lax = core.load_jax()

    def newton_sqrt_lax(a):
        x0 = jnp.where(a > 1.0, a, 1.0)
        return lax.while_loop(lambda x: jnp.abs(x * x - a) > 1e-12 * a,
                              lambda x: 0.5 * (x + a / x), x0)

    # Reverse mode cannot go through lax.while_loop; forward mode can, and the
    # Jacobian of the sum is diagonal: one jvp per element, batched by vmap.
    grad = jax.jit(jax.vmap(jax.jacfwd(newton_sqrt_lax)))
    return core.Impl("jax_lax", lambda a: core.jax_ready(grad(a)), (jnp.asarray(args[0]),),
                     note="lax.while_loop; vmap(jacfwd) because jax.grad cannot reverse "
                          "a while_loop")


def torch_eager(args):
    torch = core.load_torch()

    def newton_sqrt_t(a):
        x = a if a > 1.0 else torch.ones((), dtype=a.dtype)
        while torch.abs(x * x - a) > 1e-12 * a:
            x = 0.5 * (x + a / x)
        return x

    def grad(a):
        s = 0.0
        for i in range(a.shape[0]):
            s = s + newton_sqrt_t(a[i])
        return torch.autograd.grad(s, a)[0]

    return core.Impl("torch", grad, (torch.from_numpy(args[0].copy()).requires_grad_(),),
                     note="the user's code; torch.abs for abs")


def autograd_hips(args):
    autograd, anp = core.load_autograd()
    del anp         # abs, indexing and arithmetic all work on autograd's boxes
    return core.Impl("autograd", autograd.grad(sum_sqrt), args,
                     note="the user's function itself, traced by autograd")


def build(size="full"):
    n = SIZES[size]
    a = np.random.default_rng(0).uniform(0.01, 100.0, n)
    return core.Workload(
        name=NAME, title="Newton sqrt, while loop, helper", size=f"{n:,} inputs",
        args=(a,), argnums=0, primal=sum_sqrt,
        numba_primal=core.njit_program(sum_sqrt, newton_sqrt),
        hand_grad=_hand_grad, oracle=oracle,
        oracle_name="analytic 1 / (2 sqrt(a))", oracle_tol=1e-9,
        peers={"jax": jax_as_written, "jax_lax": jax_lax, "torch": torch_eager,
               "autograd": autograd_hips},
        slow_peers=("torch", "autograd"),
        targets=[core.Target("s2s_ad", "numba", 3.0)])
