"""Workload: the loss gradient of a 2-layer tanh MLP with softmax cross-entropy.

A batch of 256 inputs of width 64, a hidden tanh layer of 128 units and 10
classes; the loss is the mean cross-entropy of a stable log-softmax (max
subtracted) against one-hot labels.  The gradient is taken with respect to
all four weights, passed as separate arguments (``argnums=(0, 1, 2, 3)``)
and checked against the vectorised closed-form backpropagation.  Target:
s2s_ad no slower than JAX's ``jit(grad)``.
"""
import numba
import numpy as np

import s2s_ad as ad

from . import core

NAME = "mlp_loss"
SIZES = {"full": (256, 64, 128, 10), "tiny": (8, 4, 6, 3)}


def mlp_loss(W1, b1, W2, b2, X, Y):
    h = np.tanh(X @ W1 + b1)
    z = h @ W2 + b2
    m = np.max(z, axis=1, keepdims=True)
    zs = z - m
    lse = np.log(np.sum(np.exp(zs), axis=1, keepdims=True))
    logp = zs - lse
    return -np.sum(Y * logp) / X.shape[0]


def backprop(W1, b1, W2, b2, X, Y):
    """The closed-form gradient, vectorised in NumPy (the oracle)."""
    h = np.tanh(X @ W1 + b1)
    z = h @ W2 + b2
    e = np.exp(z - z.max(axis=1, keepdims=True))
    dz = (e / e.sum(axis=1, keepdims=True) - Y) / X.shape[0]
    da = (dz @ W2.T) * (1.0 - h * h)
    return X.T @ da, da.sum(axis=0), h.T @ dz, dz.sum(axis=0)


@numba.njit
def _hand_grad(W1, b1, W2, b2, X, Y):
    """Forward with BLAS matmuls, softmax row by row in place, backward with
    BLAS matmuls on contiguous transposes; bias gradients as column sums."""
    n = X.shape[0]
    H = X @ W1
    nh = H.shape[1]
    for i in range(n):
        for j in range(nh):
            H[i, j] = np.tanh(H[i, j] + b1[j])
    Z = H @ W2
    nc = Z.shape[1]
    inv_n = 1.0 / n
    db2 = np.zeros(nc)
    for i in range(n):
        mx = Z[i, 0] + b2[0]
        for j in range(1, nc):
            mx = max(mx, Z[i, j] + b2[j])
        s = 0.0
        for j in range(nc):
            e = np.exp(Z[i, j] + b2[j] - mx)
            Z[i, j] = e
            s += e
        inv = 1.0 / s
        for j in range(nc):
            d = (Z[i, j] * inv - Y[i, j]) * inv_n
            Z[i, j] = d
            db2[j] += d
    dW2 = np.ascontiguousarray(H.T) @ Z
    dA = Z @ np.ascontiguousarray(W2.T)
    db1 = np.zeros(nh)
    for i in range(n):
        for j in range(nh):
            hij = H[i, j]
            d = dA[i, j] * (1.0 - hij * hij)
            dA[i, j] = d
            db1[j] += d
    dW1 = np.ascontiguousarray(X.T) @ dA
    return dW1, db1, dW2, db2


def oracle(args, grads):
    return core.compare(grads, backprop(*args))


# -- peers --------------------------------------------------------------------

def jax_as_written(args):
    jax, jnp, _ = core.load_jax()
    grad = jax.jit(jax.grad(core.rebind(mlp_loss, np=jnp), argnums=(0, 1, 2, 3)))
    return core.Impl("jax", lambda *a: core.jax_ready(grad(*a)),
                     tuple(jnp.asarray(a) for a in args),
                     note="the user's function on jax.numpy")


def torch_eager(args):
    torch = core.load_torch()

    def mlp_loss_t(W1, b1, W2, b2, X, Y):
        h = torch.tanh(X @ W1 + b1)
        z = h @ W2 + b2
        m = torch.amax(z, dim=1, keepdim=True)
        zs = z - m
        lse = torch.log(torch.sum(torch.exp(zs), dim=1, keepdim=True))
        logp = zs - lse
        return -torch.sum(Y * logp) / X.shape[0]

    def grad(W1, b1, W2, b2, X, Y):
        return torch.autograd.grad(mlp_loss_t(W1, b1, W2, b2, X, Y), (W1, b1, W2, b2))

    tensors = [torch.from_numpy(a.copy()) for a in args]
    for t in tensors[:4]:
        t.requires_grad_()
    return core.Impl("torch", grad, tuple(tensors),
                     note="the user's code, torch.amax/sum(dim=)")


def autograd_hips(args):
    autograd, anp = core.load_autograd()
    return core.Impl("autograd", autograd.grad(core.rebind(mlp_loss, np=anp),
                                               argnum=(0, 1, 2, 3)), args,
                     note="the user's function on autograd.numpy")


def inputs(size):
    """(W1, b1, W2, b2, X, Y): seeded weights, a batch and one-hot labels."""
    n, d, h, c = SIZES[size]
    rng = np.random.default_rng(0)
    W1 = rng.standard_normal((d, h)) / np.sqrt(d)
    b1 = 0.1 * rng.standard_normal(h)
    W2 = rng.standard_normal((h, c)) / np.sqrt(h)
    b2 = 0.1 * rng.standard_normal(c)
    X = rng.standard_normal((n, d))
    Y = np.eye(c)[rng.integers(0, c, n)]
    return W1, b1, W2, b2, X, Y


def build(size="full"):
    n, d, h, c = SIZES[size]
    W1, b1, W2, b2, X, Y = inputs(size)
    return core.Workload(
        name=NAME, title="2-layer tanh MLP, softmax cross-entropy",
        size=f"batch {n}, {d}-{h}-{c}",
        args=(W1, b1, W2, b2, X, Y), argnums=(0, 1, 2, 3), primal=mlp_loss,
        numba_primal=ad.jit(mlp_loss),
        numba_note="numba.njit cannot compile np.max(..., axis=1, keepdims=True): the Numba "
                   "primal is ad.jit(f), the same function on s2s_ad's runtime",
        hand_grad=_hand_grad, oracle=oracle,
        oracle_name="closed-form backpropagation in NumPy", oracle_tol=1e-12,
        peers={"jax": jax_as_written, "torch": torch_eager, "autograd": autograd_hips},
        targets=[core.Target("s2s_ad", "jax", 1.0)])
