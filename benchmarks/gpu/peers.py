"""The GPU benchmarks' other implementations (benchmarks/gpu/run.py): JAX
``jit(vmap(grad))``, ``torch.func`` ``vmap(grad)`` and, for TD(0), a
hand-written numba.cuda kernel.

Each workload function returns {name: factory or None (not installed)}; a
factory takes the NumPy arguments, moves them to the device once, and
returns ``(run, sync, to_numpy)``: ``run()`` computes on device-resident
inputs, ``sync()`` waits for the device, ``to_numpy(result)`` gives the
result leaves in s2s_ad's layout.
"""
import numpy as np
from numba import cuda  # (after run.py set NUMBA_ENABLE_CUDASIM for a dry run)


def _jax(dry):
    try:
        import jax
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)     # float64 arguments stay float64
    return jax


def _torch(dry):
    try:
        import torch
        import torch.func  # noqa: F401
    except ImportError:
        return None
    if not dry and not torch.cuda.is_available():
        return None
    return torch


def _jax_factory(jax, batched, static=()):
    def factory(*args):
        import jax.numpy as jnp
        inputs = [jax.device_put(jnp.asarray(a)) if isinstance(a, np.ndarray) else _py(a)
                  for a in args]
        fun = jax.jit(batched, static_argnums=static)

        def run():
            return jax.block_until_ready(fun(*inputs))
        return run, lambda: None, _leaves_jax
    return factory


def _py(x):
    """A NumPy scalar as a Python number (weakly typed for JAX; NumPy scalars
    would turn PyTorch tensors into arrays)."""
    return x.item() if isinstance(x, np.generic) else x


def _leaves_jax(result):
    out = result if isinstance(result, (tuple, list)) else (result,)
    return [np.asarray(x) for x in out]


def _torch_factory(torch, batched, dry):
    device = "cpu" if dry else "cuda"

    def factory(*args):
        inputs = [torch.as_tensor(a, device=device) if isinstance(a, np.ndarray) else _py(a)
                  for a in args]

        def run():
            return batched(*inputs)

        def sync():
            if device == "cuda":
                torch.cuda.synchronize()

        def leaves(result):
            out = result if isinstance(result, (tuple, list)) else (result,)
            return [x.detach().cpu().numpy() for x in out]
        return run, sync, leaves
    return factory


# -- TD(0) ---------------------------------------------------------------------------
def td0(dry):
    jax, torch = _jax(dry), _torch(dry)
    peers = {"jax": None, "torch": None, "hand": _hand_td0}
    if jax is not None:
        def loss(theta, s_t, r, s_tp1):
            return (jax.lax.stop_gradient(r + s_tp1 @ theta) - s_t @ theta) ** 2
        peers["jax"] = _jax_factory(jax, jax.vmap(jax.grad(loss), in_axes=(None, 0, 0, 0)))
    if torch is not None:
        from torch.func import grad, vmap

        def tloss(theta, s_t, r, s_tp1):
            return ((r + s_tp1 @ theta).detach() - s_t @ theta) ** 2
        peers["torch"] = _torch_factory(torch, vmap(grad(tloss), in_dims=(None, 0, 0, 0)), dry)
    return peers


def _hand_td0(theta, s_t, r, s_tp1):
    """The limit: one thread per transition, a grid-stride loop, nothing else."""
    kernel = td0_grad
    inputs = [cuda.to_device(a) for a in (theta, s_t, r, s_tp1)]
    out = cuda.device_array(s_t.shape, dtype=s_t.dtype)
    threads = 256
    blocks = min(-(-s_t.shape[0] // threads), 65_536)

    def run():
        kernel[blocks, threads](*inputs, out)
        return out
    return run, cuda.synchronize, lambda o: [o.copy_to_host()]


@cuda.jit
def td0_grad(theta, s_t, r, s_tp1, out):
    """d/dtheta of (stop_gradient(r + s_tp1 . theta) - s_t . theta)^2, per transition."""
    d = theta.shape[0]
    for b in range(cuda.grid(1), s_t.shape[0], cuda.gridsize(1)):
        v_t = theta[0] * s_t[b, 0]
        v_tp1 = theta[0] * s_tp1[b, 0]
        for k in range(1, d):
            v_t += theta[k] * s_t[b, k]
            v_tp1 += theta[k] * s_tp1[b, k]
        delta = r[b] + v_tp1 - v_t
        for k in range(d):
            out[b, k] = -(delta + delta) * s_t[b, k]       # no float64 constant


# -- MLP 64 -> 128 -> 10 ---------------------------------------------------------------
def mlp(dry):
    jax, torch = _jax(dry), _torch(dry)
    peers = {"jax": None, "torch": None}
    if jax is not None:
        import jax.numpy as jnp

        def loss(W1, b1, W2, b2, x, y):
            h = jnp.tanh(W1.reshape(128, 64) @ x + b1)
            z = W2.reshape(10, 128) @ h + b2
            return jax.nn.logsumexp(z) - y @ z
        peers["jax"] = _jax_factory(jax, jax.vmap(jax.grad(loss, argnums=(0, 1, 2, 3)),
                                                  in_axes=(None,) * 4 + (0, 0)))
    if torch is not None:
        from torch.func import grad, vmap

        def tloss(W1, b1, W2, b2, x, y):
            h = torch.tanh(W1.reshape(128, 64) @ x + b1)
            z = W2.reshape(10, 128) @ h + b2
            return torch.logsumexp(z, 0) - y @ z
        peers["torch"] = _torch_factory(
            torch, vmap(grad(tloss, argnums=(0, 1, 2, 3)), in_dims=(None,) * 4 + (0, 0)), dry)
    return peers


# -- RK4 Lotka-Volterra ------------------------------------------------------------------
def rk4(mode, dry):
    jax, torch = _jax(dry), _torch(dry)
    peers = {"jax": None, "torch": None}
    if jax is not None:
        def loss(theta, state0, h, n):
            def step(_, s):
                x, y = _rk4_step(s[0], s[1], theta, h)
                return (x, y)
            x, y = jax.lax.fori_loop(0, n, step, (state0[0], state0[1]))
            return x * x + y * y
        transform = jax.grad if mode == "grad" else jax.jacfwd
        peers["jax"] = _jax_factory(jax, jax.vmap(transform(loss), in_axes=(0, 0, None, None)),
                                    static=(3,))
    if torch is not None:
        from torch.func import grad, jacfwd, vmap

        def tloss(theta, state0, h, n):
            x, y = state0[0], state0[1]
            for _ in range(n):
                x, y = _rk4_step(x, y, theta, h)
            return x * x + y * y
        transform = grad if mode == "grad" else jacfwd
        peers["torch"] = _torch_factory(torch, vmap(transform(tloss),
                                                    in_dims=(0, 0, None, None)), dry)
    return peers


def _lv(x, y, theta):
    return theta[0] * x - theta[1] * x * y, theta[2] * x * y - theta[3] * y


def _rk4_step(x, y, theta, h):
    """One RK4 step, as tests/programs/cuda_seeds.py's ode_loss takes it
    (array-library agnostic: JAX and PyTorch trace it)."""
    k1x, k1y = _lv(x, y, theta)
    k2x, k2y = _lv(x + 0.5 * h * k1x, y + 0.5 * h * k1y, theta)
    k3x, k3y = _lv(x + 0.5 * h * k2x, y + 0.5 * h * k2y, theta)
    k4x, k4y = _lv(x + h * k3x, y + h * k3y, theta)
    return (x + h / 6.0 * (k1x + 2.0 * k2x + 2.0 * k3x + k4x),
            y + h / 6.0 * (k1y + 2.0 * k2y + 2.0 * k3y + k4y))
