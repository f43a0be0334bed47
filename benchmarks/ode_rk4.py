"""Workload: sensitivities of an ODE solution, Lotka-Volterra with RK4.

The user's code: a helper for the right-hand side, a helper for one RK4
step, and a loop of 1,000 steps (h = 0.01); the loss is the squared final
state.  The gradient is taken with respect to the 4 parameters and the
2-element initial state (``argnums=(0, 1)``) and checked against central
finite differences.  Target: s2s_ad at most 1.3x the hand-written Numba
gradient.
"""
import numba
import numpy as np

from . import core

NAME = "ode_rk4"
SIZES = {"full": 1_000, "tiny": 20}
H = 0.01


def lotka_volterra(state, theta):
    x = state[0]
    y = state[1]
    alpha = theta[0]
    beta = theta[1]
    delta = theta[2]
    gamma = theta[3]
    return np.array([alpha * x - beta * x * y, delta * x * y - gamma * y])


def rk4_step(state, theta, h):
    k1 = lotka_volterra(state, theta)
    k2 = lotka_volterra(state + 0.5 * h * k1, theta)
    k3 = lotka_volterra(state + 0.5 * h * k2, theta)
    k4 = lotka_volterra(state + h * k3, theta)
    return state + h / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)


def ode_loss(theta, state0, h, n_steps):
    state = state0
    for _ in range(n_steps):
        state = rk4_step(state, theta, h)
    return np.sum(state ** 2)


# -- the hand-written gradient --------------------------------------------------
# Scalar code: the forward sweep stores only the state at each step; the
# reverse sweep recomputes a step's four stages from it and pulls the
# cotangent back through them.  No allocation inside the loops.

@numba.njit
def _lv(x, y, a, b, d, g):
    return a * x - b * x * y, d * x * y - g * y


@numba.njit
def _lv_vjp(x, y, a, b, d, g, cx, cy):
    """Cotangents of (x, y) and of the 4 parameters for output cotangent (cx, cy)."""
    bx = cx * (a - b * y) + cy * d * y
    by = -cx * b * x + cy * (d * x - g)
    return bx, by, cx * x, -cx * x * y, cy * x * y, -cy * y


@numba.njit
def _hand_grad(theta, state0, h, n_steps):
    a, b, d, g = theta[0], theta[1], theta[2], theta[3]
    xs = np.empty(n_steps + 1)
    ys = np.empty(n_steps + 1)
    x, y = state0[0], state0[1]
    xs[0], ys[0] = x, y
    for i in range(n_steps):
        k1x, k1y = _lv(x, y, a, b, d, g)
        k2x, k2y = _lv(x + 0.5 * h * k1x, y + 0.5 * h * k1y, a, b, d, g)
        k3x, k3y = _lv(x + 0.5 * h * k2x, y + 0.5 * h * k2y, a, b, d, g)
        k4x, k4y = _lv(x + h * k3x, y + h * k3y, a, b, d, g)
        x = x + h / 6.0 * (k1x + 2.0 * k2x + 2.0 * k3x + k4x)
        y = y + h / 6.0 * (k1y + 2.0 * k2y + 2.0 * k3y + k4y)
        xs[i + 1], ys[i + 1] = x, y
    bx, by = 2.0 * x, 2.0 * y
    ba = bb = bd = bg = 0.0
    for i in range(n_steps - 1, -1, -1):
        x, y = xs[i], ys[i]
        k1x, k1y = _lv(x, y, a, b, d, g)
        u2, v2 = x + 0.5 * h * k1x, y + 0.5 * h * k1y
        k2x, k2y = _lv(u2, v2, a, b, d, g)
        u3, v3 = x + 0.5 * h * k2x, y + 0.5 * h * k2y
        k3x, k3y = _lv(u3, v3, a, b, d, g)
        u4, v4 = x + h * k3x, y + h * k3y
        # new state = state + h/6 k1 + h/3 k2 + h/3 k3 + h/6 k4
        bu4, bv4, pa, pb, pd, pg = _lv_vjp(u4, v4, a, b, d, g, h / 6.0 * bx, h / 6.0 * by)
        ba += pa
        bb += pb
        bd += pd
        bg += pg
        bu3, bv3, pa, pb, pd, pg = _lv_vjp(u3, v3, a, b, d, g,
                                           h / 3.0 * bx + h * bu4, h / 3.0 * by + h * bv4)
        ba += pa
        bb += pb
        bd += pd
        bg += pg
        bu2, bv2, pa, pb, pd, pg = _lv_vjp(u2, v2, a, b, d, g,
                                           h / 3.0 * bx + 0.5 * h * bu3,
                                           h / 3.0 * by + 0.5 * h * bv3)
        ba += pa
        bb += pb
        bd += pd
        bg += pg
        bu1, bv1, pa, pb, pd, pg = _lv_vjp(x, y, a, b, d, g,
                                           h / 6.0 * bx + 0.5 * h * bu2,
                                           h / 6.0 * by + 0.5 * h * bv2)
        ba += pa
        bb += pb
        bd += pd
        bg += pg
        bx = bx + bu4 + bu3 + bu2 + bu1
        by = by + bv4 + bv3 + bv2 + bv1
    return np.array([ba, bb, bd, bg]), np.array([bx, by])


def oracle(args, grads):
    """Central differences of the plain Python function, one input at a time."""
    theta, state0, h, n = args
    fd = []
    for base, which in ((theta, 0), (state0, 1)):
        col = np.empty(base.shape)
        for j in range(base.shape[0]):
            eps = 1e-6 * max(1.0, abs(base[j]))
            up, down = base.copy(), base.copy()
            up[j] += eps
            down[j] -= eps
            pair = [(up, state0), (down, state0)] if which == 0 else [(theta, up), (theta, down)]
            col[j] = (ode_loss(*pair[0], h, n) - ode_loss(*pair[1], h, n)) / (2 * eps)
        fd.append(col)
    return core.compare(grads, tuple(fd))


# -- peers --------------------------------------------------------------------

def jax_as_written(args):
    raise core.Unavailable(f"jax.jit unrolls the Python loop ({args[3]:,} RK4 steps, "
                           "4 right-hand sides each) at trace time; see the lax column")


def jax_lax(args):
    jax, jnp, lax = core.load_jax()
    step = core.rebind(rk4_step, [lotka_volterra], np=jnp)   # the user's helpers on jnp
    theta, state0, h, n_steps = args

    def loss(theta, state0):
        state = lax.fori_loop(0, n_steps, lambda i, s: step(s, theta, h), state0)
        return jnp.sum(state ** 2)

    grad = jax.jit(jax.grad(loss, argnums=(0, 1)))
    return core.Impl("jax_lax", lambda t, s: core.jax_ready(grad(t, s)),
                     (jnp.asarray(theta), jnp.asarray(state0)),
                     note="the user's helpers on jax.numpy; lax.fori_loop over the steps")


def torch_eager(args):
    torch = core.load_torch()

    def lotka_volterra_t(state, theta):
        x = state[0]
        y = state[1]
        alpha = theta[0]
        beta = theta[1]
        delta = theta[2]
        gamma = theta[3]
        return torch.stack([alpha * x - beta * x * y, delta * x * y - gamma * y])

    def rk4_step_t(state, theta, h):
        k1 = lotka_volterra_t(state, theta)
        k2 = lotka_volterra_t(state + 0.5 * h * k1, theta)
        k3 = lotka_volterra_t(state + 0.5 * h * k2, theta)
        k4 = lotka_volterra_t(state + h * k3, theta)
        return state + h / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)

    def grad(theta, state0, h, n_steps):
        state = state0
        for _ in range(n_steps):
            state = rk4_step_t(state, theta, h)
        return torch.autograd.grad(torch.sum(state ** 2), (theta, state0))

    theta, state0, h, n = args
    return core.Impl("torch", grad, (torch.from_numpy(theta.copy()).requires_grad_(),
                                     torch.from_numpy(state0.copy()).requires_grad_(), h, n),
                     note="the user's code with torch.stack for np.array")


def autograd_hips(args):
    autograd, anp = core.load_autograd()
    loss = core.rebind(ode_loss, [rk4_step, lotka_volterra], np=anp)
    return core.Impl("autograd", autograd.grad(loss, argnum=(0, 1)), args,
                     note="the user's code on autograd.numpy")


def build(size="full"):
    n = SIZES[size]
    theta = np.array([1.0, 0.1, 0.075, 1.5])       # alpha, beta, delta, gamma
    state0 = np.array([10.0, 5.0])
    return core.Workload(
        name=NAME, title="Lotka-Volterra, RK4, helpers", size=f"{n:,} steps",
        args=(theta, state0, H, n), argnums=(0, 1), primal=ode_loss,
        numba_primal=core.njit_program(ode_loss, rk4_step, lotka_volterra),
        hand_grad=_hand_grad, oracle=oracle,
        oracle_name="central finite differences", oracle_tol=1e-6,
        peers={"jax": jax_as_written, "jax_lax": jax_lax, "torch": torch_eager,
               "autograd": autograd_hips},
        slow_peers=("torch", "autograd"),
        targets=[core.Target("s2s_ad", "hand", 1.3)])
