"""Workload: per-example gradients of a 2-layer tanh MLP (``mlp_loss``'s
network), batch 256, 64 -> 128 -> 10, softmax cross-entropy.

The user writes the loss of ONE example (the same stable log-softmax as
``mlp_loss``, on a vector) and maps its gradient over the batch:
``ad.jit(ad.vmap(ad.grad(example_loss, argnums=(0, 1, 2, 3)),
in_axes=(None, None, None, None, 0, 0)))``, giving gradients of shapes
(256, 64, 128), (256, 128), (256, 128, 10) and (256, 10) -- 2.4 M numbers,
as for differential privacy (per-example clipping) or gradient-variance
estimates.  The hand-written Numba version runs the batch forward and
backward with BLAS matmuls and writes the per-example outer products in a
``prange`` loop; it is checked against closed-form backpropagation
vectorised in NumPy (``einsum``).  Target: s2s_ad no slower than JAX's
``jit(vmap(grad))``.
"""
import types

import numba
import numpy as np

from . import core, mlp_loss

NAME = "per_sample_mlp"
SIZES = mlp_loss.SIZES
IN_AXES = (None, None, None, None, 0, 0)


def example_loss(W1, b1, W2, b2, x, y):
    h = np.tanh(x @ W1 + b1)
    z = h @ W2 + b2
    m = np.max(z)
    zs = z - m
    logp = zs - np.log(np.sum(np.exp(zs)))
    return -np.sum(y * logp)


def example_losses(W1, b1, W2, b2, X, Y):
    """The NumPy primal column: the user's function, example by example."""
    out = np.empty(X.shape[0])
    for i in range(X.shape[0]):
        out[i] = example_loss(W1, b1, W2, b2, X[i], Y[i])
    return out


@numba.njit(parallel=True, cache=True)
def _hand_grads(W1, b1, W2, b2, X, Y):
    """Batch forward and the backward matmul with BLAS (on a contiguous
    transpose); tanh and the softmax-minus-one-hot cotangent row by row in
    place; then per example, in parallel, the outer products x dA^T and
    h dZ^T, and the bias rows."""
    n, d = X.shape
    nh = W1.shape[1]
    nc = W2.shape[1]
    H = X @ W1
    for i in numba.prange(n):
        for j in range(nh):
            H[i, j] = np.tanh(H[i, j] + b1[j])
    Z = H @ W2
    for i in numba.prange(n):
        mx = Z[i, 0] + b2[0]
        for j in range(1, nc):
            mx = max(mx, Z[i, j] + b2[j])
        s = 0.0
        for j in range(nc):
            e = np.exp(Z[i, j] + b2[j] - mx)
            Z[i, j] = e
            s += e
        ysum = 0.0
        for j in range(nc):
            ysum += Y[i, j]
        inv = 1.0 / s
        for j in range(nc):
            Z[i, j] = Z[i, j] * inv * ysum - Y[i, j]     # dZ (labels need not be one-hot)
    dA = Z @ np.ascontiguousarray(W2.T)
    gW1 = np.empty((n, d, nh))
    gb1 = np.empty((n, nh))
    gW2 = np.empty((n, nh, nc))
    for i in numba.prange(n):
        for j in range(nh):
            hij = H[i, j]
            dA[i, j] *= 1.0 - hij * hij
            gb1[i, j] = dA[i, j]
            for c in range(nc):
                gW2[i, j, c] = hij * Z[i, c]
        for k in range(d):
            xk = X[i, k]
            for j in range(nh):
                gW1[i, k, j] = xk * dA[i, j]
    return gW1, gb1, gW2, Z


def backprop(W1, b1, W2, b2, X, Y):
    """Closed-form per-example backpropagation, vectorised in NumPy."""
    h = np.tanh(X @ W1 + b1)
    z = h @ W2 + b2
    e = np.exp(z - z.max(axis=1, keepdims=True))
    dz = e / e.sum(axis=1, keepdims=True) * Y.sum(axis=1, keepdims=True) - Y
    da = (dz @ W2.T) * (1.0 - h * h)
    return (np.einsum("ik,ij->ikj", X, da), da, np.einsum("ij,ic->ijc", h, dz), dz)


def oracle(args, grads):
    return core.compare(grads, backprop(*args))


_jit_example_loss = numba.njit(example_loss, cache=True)


@numba.njit(parallel=True, cache=True)
def _numba_losses(W1, b1, W2, b2, X, Y):
    """The user's function under numba.njit, in a prange loop over examples."""
    out = np.empty(X.shape[0])
    for i in numba.prange(X.shape[0]):
        out[i] = _jit_example_loss(W1, b1, W2, b2, X[i], Y[i])
    return out


def s2s_ad_grads(ad, jit):
    fn = ad.vmap(ad.grad(example_loss, argnums=(0, 1, 2, 3)), in_axes=IN_AXES)
    return ad.jit(fn) if jit else fn


# -- peers --------------------------------------------------------------------

def jax_vmap(args):
    jax, jnp, _ = core.load_jax()
    grads = jax.jit(jax.vmap(jax.grad(core.rebind(example_loss, np=jnp), argnums=(0, 1, 2, 3)),
                             in_axes=IN_AXES))
    return core.Impl("jax", lambda *a: core.jax_ready(grads(*a)),
                     tuple(jnp.asarray(a) for a in args),
                     note="the user's function on jax.numpy")


def torch_vmap(args):
    torch = core.load_torch()
    from torch.func import grad, vmap
    tnp = types.SimpleNamespace(tanh=torch.tanh, max=torch.max, log=torch.log,
                                sum=torch.sum, exp=torch.exp)
    grads = vmap(grad(core.rebind(example_loss, np=tnp), argnums=(0, 1, 2, 3)),
                 in_dims=IN_AXES)
    return core.Impl("torch", grads, tuple(torch.from_numpy(a.copy()) for a in args),
                     note="torch.func vmap(grad) of the user's function on torch")


def autograd_hips(args):
    raise core.Unavailable("autograd has no vmap: a Python loop of grad calls over "
                           f"{args[4].shape[0]} examples")


def build(size="full"):
    n, d, h, c = SIZES[size]
    W1, b1, W2, b2, X, Y = mlp_loss.inputs(size)
    return core.Workload(
        name=NAME, title="per-example gradients, 2-layer tanh MLP, softmax cross-entropy",
        size=f"batch {n}, {d}-{h}-{c}", kind="per-sample grad",
        args=(W1, b1, W2, b2, X, Y), argnums=(0, 1, 2, 3), primal=example_losses,
        numba_primal=_numba_losses,
        numba_note="the user's function under numba.njit in a prange loop over examples",
        hand_grad=_hand_grads, s2s_ad=s2s_ad_grads, oracle=oracle,
        oracle_name="closed-form per-example backpropagation (vectorised NumPy)",
        oracle_tol=1e-12,
        labels={"numpy": "NumPy primal (loop)", "hand": "hand-written Numba",
                "s2s_ad": "s2s_ad jit(vmap(grad))", "s2s_ad_py": "s2s_ad vmap(grad) (NumPy)",
                "jax": "JAX jit(vmap(grad))", "torch": "PyTorch func vmap(grad)"},
        peers={"jax": jax_vmap, "torch": torch_vmap, "autograd": autograd_hips},
        targets=[core.Target("s2s_ad", "jax", 1.0)])
