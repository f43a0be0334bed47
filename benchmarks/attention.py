"""Workload: the gradient of a small self-attention block with layer norm.

A batch of 32 sequences of 64 tokens of width 64: query, key and value
projections, scaled dot-product attention with a row softmax, a residual
connection and a layer norm (``np.var``), all written with ``np.einsum``;
the loss is the sum of the block's output against a fixed random tensor.
The gradient with respect to the three projection matrices is checked
against the vectorised closed-form backpropagation.  Target: s2s_ad no
slower than JAX's ``jit(grad)``.
"""
import numba
import numpy as np

import s2s_ad as ad

from . import core

NAME = "attention"
SIZES = {"full": (32, 64, 64), "tiny": (2, 5, 4)}


def attention(wq, wk, wv, x, t):
    q = np.einsum("btd,de->bte", x, wq)
    k = np.einsum("btd,de->bte", x, wk)
    v = np.einsum("btd,de->bte", x, wv)
    s = np.einsum("bqe,bke->bqk", q, k) / np.sqrt(q.shape[-1])
    e = np.exp(s - np.max(s, axis=-1, keepdims=True))
    p = e / np.sum(e, axis=-1, keepdims=True)
    h = x + np.einsum("bqk,bke->bqe", p, v)
    m = np.mean(h, axis=-1, keepdims=True)
    y = (h - m) / np.sqrt(np.var(h, axis=-1, keepdims=True) + 1e-5)
    return np.sum(y * t) / x.shape[0]


def backprop(wq, wk, wv, x, t):
    """The closed-form gradient, vectorised in NumPy (the oracle)."""
    q, k, v = x @ wq, x @ wk, x @ wv
    scale = 1.0 / np.sqrt(q.shape[-1])
    s = q @ np.swapaxes(k, 1, 2) * scale
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    h = x + p @ v
    c = h - h.mean(axis=-1, keepdims=True)
    r = 1.0 / np.sqrt((c * c).mean(axis=-1, keepdims=True) + 1e-5)
    y = c * r
    dy = t / x.shape[0]
    dh = r * (dy - dy.mean(axis=-1, keepdims=True) - y * (dy * y).mean(axis=-1, keepdims=True))
    dp = dh @ np.swapaxes(v, 1, 2)
    dv = np.swapaxes(p, 1, 2) @ dh
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True)) * scale
    dq, dk = ds @ k, np.swapaxes(ds, 1, 2) @ q
    xt = x.reshape(-1, x.shape[-1]).T
    return (xt @ dq.reshape(xt.shape[1], -1), xt @ dk.reshape(xt.shape[1], -1),
            xt @ dv.reshape(xt.shape[1], -1))


@numba.njit
def _hand_grad(wq, wk, wv, x, t):
    """One sequence at a time: BLAS products, softmax and layer norm row by row."""
    nb, nt, nd = x.shape
    scale = 1.0 / np.sqrt(wq.shape[1])
    gq, gk, gv = np.zeros(wq.shape), np.zeros(wk.shape), np.zeros(wv.shape)
    for b in range(nb):
        xb = np.ascontiguousarray(x[b])
        q, k, v = xb @ wq, xb @ wk, xb @ wv
        p = (q @ np.ascontiguousarray(k.T)) * scale
        for i in range(nt):
            mx = np.max(p[i])
            p[i] = np.exp(p[i] - mx)
            p[i] /= np.sum(p[i])
        h = xb + p @ v
        dh = np.empty_like(h)
        for i in range(nt):
            c = h[i] - np.mean(h[i])
            r = 1.0 / np.sqrt(np.mean(c * c) + 1e-5)
            y = c * r
            dy = t[b, i] / nb
            dh[i] = r * (dy - np.mean(dy) - y * np.mean(dy * y))
        dp = dh @ np.ascontiguousarray(v.T)
        dv = np.ascontiguousarray(p.T) @ dh
        for i in range(nt):
            dp[i] = p[i] * (dp[i] - np.sum(dp[i] * p[i])) * scale
        dq, dk = dp @ k, np.ascontiguousarray(dp.T) @ q
        xt = np.ascontiguousarray(xb.T)
        gq += xt @ dq
        gk += xt @ dk
        gv += xt @ dv
    return gq, gk, gv


def oracle(args, grads):
    return core.compare(grads, backprop(*args))


# -- peers --------------------------------------------------------------------

def jax_as_written(args):
    jax, jnp, _ = core.load_jax()
    grad = jax.jit(jax.grad(core.rebind(attention, np=jnp), argnums=(0, 1, 2)))
    return core.Impl("jax", lambda *a: core.jax_ready(grad(*a)),
                     tuple(jnp.asarray(a) for a in args),
                     note="the user's function on jax.numpy")


def torch_eager(args):
    torch = core.load_torch()

    def attention_t(wq, wk, wv, x, t):
        q = torch.einsum("btd,de->bte", x, wq)
        k = torch.einsum("btd,de->bte", x, wk)
        v = torch.einsum("btd,de->bte", x, wv)
        s = torch.einsum("bqe,bke->bqk", q, k) / q.shape[-1] ** 0.5
        e = torch.exp(s - torch.amax(s, dim=-1, keepdim=True))
        p = e / torch.sum(e, dim=-1, keepdim=True)
        h = x + torch.einsum("bqk,bke->bqe", p, v)
        m = torch.mean(h, dim=-1, keepdim=True)
        y = (h - m) / torch.sqrt(torch.var(h, dim=-1, keepdim=True, unbiased=False) + 1e-5)
        return torch.sum(y * t) / x.shape[0]

    def grad(*a):
        return torch.autograd.grad(attention_t(*a), a[:3])

    tensors = [torch.from_numpy(a.copy()) for a in args]
    for w in tensors[:3]:
        w.requires_grad_()
    return core.Impl("torch", grad, tuple(tensors),
                     note="the user's code, torch.einsum/amax/var(unbiased=False)")


def autograd_hips(args):
    autograd, anp = core.load_autograd()
    return core.Impl("autograd", autograd.grad(core.rebind(attention, np=anp),
                                               argnum=(0, 1, 2)), args,
                     note="the user's function on autograd.numpy")


def inputs(size):
    nb, nt, nd = SIZES[size]
    rng = np.random.default_rng(0)
    w = [rng.standard_normal((nd, nd)) / np.sqrt(nd) for _ in range(3)]
    return (*w, rng.standard_normal((nb, nt, nd)), rng.standard_normal((nb, nt, nd)))


def build(size="full"):
    nb, nt, nd = SIZES[size]
    return core.Workload(
        name=NAME, title="self-attention block with layer norm (einsum, softmax, var)",
        size=f"batch {nb}, {nt} tokens, width {nd}",
        args=inputs(size), argnums=(0, 1, 2), primal=attention,
        numba_primal=ad.jit(attention),
        numba_note="numba.njit has no np.einsum nor np.max(axis=, keepdims=): the Numba "
                   "primal is ad.jit(f), the same function on s2s_ad's runtime",
        hand_grad=_hand_grad, oracle=oracle,
        oracle_name="closed-form backpropagation in NumPy", oracle_tol=1e-12,
        peers={"jax": jax_as_written, "torch": torch_eager, "autograd": autograd_hips},
        targets=[core.Target("s2s_ad", "jax", 1.0)])
