"""Workload: ADBench's Gaussian mixture model objective, d = 10, k = 25, n = 1000.

The formulas of ADBench's GMM objective, written here from its documentation:
each component j has a weight logit ``alphas[j]``, a mean ``means[j]`` and
an inverse covariance ``Q_j = L_j L_j^T`` parametrised by ``icf[j]``: the
diagonal of the lower-triangular ``L_j`` is ``exp(icf[j, :d])`` and the
strictly lower triangle is ``icf[j, d:]``, column by column.  The objective
is

    sum_i logsumexp_j(alphas[j] + sum(icf[j, :d]) - 0.5 ||L_j (x_i - means[j])||^2)
    - n logsumexp(alphas) - n d / 2 log(2 pi)
    + sum_j [0.5 gamma^2 (||exp(icf[j, :d])||^2 + ||icf[j, d:]||^2) - m sum(icf[j, :d])]

(the last line is the Wishart prior; its normalising constant, which does
not depend on the parameters, is left out).  The gradient is taken with
respect to ``alphas``, ``means`` and ``icf`` (``argnums=(0, 1, 2)``).  The
user's code is a loop over components that builds each ``L_j`` entry by
entry.  The hand-written Numba gradient is checked against central
differences along random directions.  Target: s2s_ad no slower than JAX's
``jit(grad)``.
"""
import numba
import numpy as np

import s2s_ad as ad

from . import core

NAME = "gmm_objective"
SIZES = {"full": (10, 25, 1000), "tiny": (3, 4, 20)}
GAMMA = 1.0
M = 0


def gmm_objective(alphas, means, icf, x, wishart_gamma, wishart_m):
    n = x.shape[0]
    d = x.shape[1]
    k = alphas.shape[0]
    main = np.zeros((n, k))
    for j in range(k):
        L = np.zeros((d, d))
        idx = d
        for c in range(d):
            L[c, c] = np.exp(icf[j, c])
            for r in range(c + 1, d):
                L[r, c] = icf[j, idx]
                idx += 1
        xc = x - means[j]
        Lx = xc @ L.T
        main[:, j] = alphas[j] + np.sum(icf[j, :d]) - 0.5 * np.sum(Lx * Lx, axis=1)
    mx = np.max(main, axis=1)
    lse = np.log(np.sum(np.exp(main - mx[:, None]), axis=1)) + mx
    am = np.max(alphas)
    lse_alphas = np.log(np.sum(np.exp(alphas - am))) + am
    prior = (0.5 * wishart_gamma * wishart_gamma
             * (np.sum(np.exp(2.0 * icf[:, :d])) + np.sum(icf[:, d:] ** 2))
             - wishart_m * np.sum(icf[:, :d]))
    return np.sum(lse) - n * lse_alphas - 0.5 * n * d * np.log(2.0 * np.pi) + prior


# -- the hand-written gradient --------------------------------------------------

@numba.njit
def _unpack(icf, j, d, L):
    idx = d
    for c in range(d):
        L[c, c] = np.exp(icf[j, c])
        for r in range(c + 1, d):
            L[r, c] = icf[j, idx]
            idx += 1


@numba.njit
def _hand_grad(alphas, means, icf, x, wishart_gamma, wishart_m):
    """Forward: every ``y_ij = L_j (x_i - mu_j)`` (kept) and the component
    terms; then the softmax weights per point; then per component the
    weighted sums give the mean gradient ``sum_i w_ij L_j^T y_ij`` and the
    triangle gradient ``-sum_i w_ij y_ij (x_i - mu_j)^T``."""
    n, d = x.shape
    k = alphas.shape[0]
    Ls = np.zeros((k, d, d))
    Y = np.empty((k, n, d))
    main = np.empty((n, k))
    for j in range(k):
        _unpack(icf, j, d, Ls[j])
        sq = alphas[j]
        for c in range(d):
            sq += icf[j, c]
        for i in range(n):
            s = 0.0
            for r in range(d):
                acc = 0.0
                for c in range(r + 1):
                    acc += Ls[j, r, c] * (x[i, c] - means[j, c])
                Y[j, i, r] = acc
                s += acc * acc
            main[i, j] = sq - 0.5 * s
    # softmax over components, per point (main becomes the weights)
    for i in range(n):
        mx = main[i, 0]
        for j in range(1, k):
            mx = max(mx, main[i, j])
        t = 0.0
        for j in range(k):
            e = np.exp(main[i, j] - mx)
            main[i, j] = e
            t += e
        inv = 1.0 / t
        for j in range(k):
            main[i, j] *= inv
    am = alphas.max()
    ta = 0.0
    for j in range(k):
        ta += np.exp(alphas[j] - am)
    g_alphas = np.empty(k)
    g_means = np.zeros((k, d))
    g_icf = np.zeros_like(icf)
    g2 = wishart_gamma * wishart_gamma
    dL = np.empty((d, d))
    for j in range(k):
        wsum = 0.0
        dL[:, :] = 0.0
        for i in range(n):
            w = main[i, j]
            wsum += w
            for r in range(d):
                wy = w * Y[j, i, r]
                for c in range(r + 1):
                    dL[r, c] -= wy * (x[i, c] - means[j, c])
                    g_means[j, c] += wy * Ls[j, r, c]
        g_alphas[j] = wsum - n * np.exp(alphas[j] - am) / ta
        idx = d
        for c in range(d):
            q = Ls[j, c, c]
            g_icf[j, c] = dL[c, c] * q + wsum + g2 * q * q - wishart_m
            for r in range(c + 1, d):
                g_icf[j, idx] = dL[r, c] + g2 * icf[j, idx]
                idx += 1
    return g_alphas, g_means, g_icf


def oracle(args, grads):
    """Central differences of the plain Python function along 4 random
    directions, against the hand-written gradient's directional derivatives."""
    alphas, means, icf, x, gamma, m = args
    rng = np.random.default_rng(1)
    got, want = [], []
    for _ in range(4):
        dirs = [rng.standard_normal(a.shape) for a in (alphas, means, icf)]
        eps = 1e-6
        up = gmm_objective(*(a + eps * v for a, v in zip((alphas, means, icf), dirs)), x, gamma, m)
        down = gmm_objective(*(a - eps * v for a, v in zip((alphas, means, icf), dirs)), x,
                             gamma, m)
        want.append((up - down) / (2 * eps))
        got.append(sum(float(np.sum(g * v)) for g, v in zip(grads, dirs)))
    return core.compare(np.array(got), np.array(want))


# -- peers: the vectorised formulation ADBench's array implementations use -------------

def _tri_maps(d):
    """(index, mask): ``icf[:, index] * mask`` is the strictly lower triangle."""
    index = np.zeros((d, d), dtype=np.int64)
    mask = np.zeros((d, d))
    idx = d
    for c in range(d):
        for r in range(c + 1, d):
            index[r, c] = idx
            mask[r, c] = 1.0
            idx += 1
    return index, mask


def gmm_vectorised(alphas, means, icf, x, wishart_gamma, wishart_m, index, mask, eye):
    n, d = x.shape
    Ls = icf[:, index] * mask + np.exp(icf[:, :d])[:, :, None] * eye       # (k, d, d)
    xc = x[None, :, :] - means[:, None, :]                                   # (k, n, d)
    Lx = np.einsum("krc,knc->knr", Ls, xc)
    main = alphas[:, None] + np.sum(icf[:, :d], axis=1)[:, None] - 0.5 * np.sum(Lx * Lx, axis=2)
    mx = np.max(main, axis=0)
    lse = np.log(np.sum(np.exp(main - mx[None, :]), axis=0)) + mx
    am = np.max(alphas)
    lse_alphas = np.log(np.sum(np.exp(alphas - am))) + am
    prior = (0.5 * wishart_gamma * wishart_gamma
             * (np.sum(np.exp(2.0 * icf[:, :d])) + np.sum(icf[:, d:] ** 2))
             - wishart_m * np.sum(icf[:, :d]))
    return np.sum(lse) - n * lse_alphas - 0.5 * n * d * np.log(2.0 * np.pi) + prior


def _consts(args):
    d = args[3].shape[1]
    index, mask = _tri_maps(d)
    return index, mask, np.eye(d)


def jax_vectorised(args):
    jax, jnp, _ = core.load_jax()
    f = core.rebind(gmm_vectorised, np=jnp)
    index, mask, eye = _consts(args)
    x, gamma, m = args[3:]
    xj, maskj, eyej = jnp.asarray(x), jnp.asarray(mask), jnp.asarray(eye)
    grad = jax.jit(jax.grad(lambda a, mu, q: f(a, mu, q, xj, gamma, m, index, maskj, eyej),
                            argnums=(0, 1, 2)))
    return core.Impl("jax", lambda *a: core.jax_ready(grad(*a)),
                     tuple(jnp.asarray(a) for a in args[:3]),
                     note="vectorised over components (gather for L, einsum) on jax.numpy: "
                          "jax.numpy arrays cannot take the user's L[r, c] = ... writes")


def torch_eager(args):
    torch = core.load_torch()
    index, mask, eye = _consts(args)
    x, gamma, m = args[3:]
    xt, maskt, eyet, indext = (torch.from_numpy(x), torch.from_numpy(mask),
                               torch.from_numpy(eye), torch.from_numpy(index))

    def loss(alphas, means, icf):
        n, d = xt.shape
        Ls = icf[:, indext] * maskt + torch.exp(icf[:, :d])[:, :, None] * eyet
        xc = xt[None, :, :] - means[:, None, :]
        Lx = torch.einsum("krc,knc->knr", Ls, xc)
        main = alphas[:, None] + torch.sum(icf[:, :d], dim=1)[:, None] \
            - 0.5 * torch.sum(Lx * Lx, dim=2)
        lse = torch.logsumexp(main, dim=0)
        prior = (0.5 * gamma * gamma * (torch.sum(torch.exp(2.0 * icf[:, :d]))
                                        + torch.sum(icf[:, d:] ** 2))
                 - m * torch.sum(icf[:, :d]))
        return (torch.sum(lse) - n * torch.logsumexp(alphas, dim=0)
                - 0.5 * n * d * np.log(2.0 * np.pi) + prior)

    def grad(alphas, means, icf):
        return torch.autograd.grad(loss(alphas, means, icf), (alphas, means, icf))

    return core.Impl("torch", grad,
                     tuple(torch.from_numpy(a.copy()).requires_grad_() for a in args[:3]),
                     note="vectorised over components (gather for L, einsum), torch.logsumexp")


def autograd_hips(args):
    autograd, anp = core.load_autograd()
    f = core.rebind(gmm_vectorised, np=anp)
    index, mask, eye = _consts(args)
    x, gamma, m = args[3:]
    grad = autograd.grad(lambda a, mu, q: f(a, mu, q, x, gamma, m, index, mask, eye),
                         argnum=(0, 1, 2))
    return core.Impl("autograd", grad, args[:3],
                     note="vectorised over components (autograd cannot write L[r, c] in place)")


def build(size="full"):
    d, k, n = SIZES[size]
    rng = np.random.default_rng(0)
    alphas = rng.standard_normal(k)
    means = rng.random((k, d))
    icf = 0.5 * rng.standard_normal((k, d * (d + 1) // 2))
    x = rng.random((n, d))
    return core.Workload(
        name=NAME, title="ADBench GMM objective, component loop",
        size=f"d={d}, k={k}, n={n:,}",
        args=(alphas, means, icf, x, GAMMA, M), argnums=(0, 1, 2), primal=gmm_objective,
        numba_primal=ad.jit(gmm_objective),
        numba_note="numba.njit cannot type the user's function (np.max(..., axis=1), "
                   "mx[:, None]): the Numba primal is ad.jit(f), the same function on "
                   "s2s_ad's runtime",
        hand_grad=_hand_grad, oracle=oracle,
        oracle_name="central differences along random directions", oracle_tol=1e-6,
        peers={"jax": jax_vectorised, "torch": torch_eager,
               "autograd": autograd_hips},
        targets=[core.Target("s2s_ad", "jax", 1.0)])
