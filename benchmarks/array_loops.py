"""Workload group "array loops" (issue 22): loops over slices of arrays.

Five problems written the way scientific NumPy code writes them, each with
its inputs copied first (so repeated calls see the same inputs):

- ``tri_product``: a triangular product, ``B[i, j] += np.dot(A[i+1:, i],
  B[i+1:, j])`` in a double loop, then ``B *= alpha``; loss ``sum(B)``.
- ``jacobi_1d``: ``B[1:-1] = c * (A[:-2] + A[1:-1] + A[2:])`` and back, in a
  time loop; loss ``sum(A) + sum(B)``.
- ``stencil_2d``: the five-point Jacobi stencil on a square, in a time loop;
  loss ``sum(A ** 2) + sum(B)``.
- ``covariance_columns``: center the columns, then a column loop writing a
  symmetric matrix, ``cov[i:, i] = cov[i, i:] = X[:, i] @ X[:, i:] / (n - 1)``;
  loss ``sum(cov * cov)``.
- ``diagonal_loop``: ``trace += np.tanh(a[i, i])`` over the diagonal, then
  ``np.sum(a + trace)``.
- ``heat_3d``: the seven-point 3-D heat stencil on a cube, in a time loop;
  loss ``sum(A) + sum(B)``.
- ``scaled_products``: ``alpha * A @ x + beta * B @ x``; loss its sum, the
  gradient with respect to both matrices.

Each hand-written gradient is checked against a closed form (tri_product,
covariance_columns, diagonal_loop) or central differences along random
directions (the stencils), then every other gradient against it.  JAX runs
the same maths with ``.at[].set`` (stencils, columns) or ``lax.fori_loop``
with masks (the triangular and diagonal loops); the closed forms are a
further column where they differ.  Targets: s2s_ad <= 1x JAX and <= 3x its
own compiled primal (``ad.jit(f)``).

Run alone: ``python -m benchmarks --only array_loops [--quick]``.
"""
import numba
import numpy as np

import s2s_ad as ad

from . import core

NAME = "array_loops"
SIZES = {"full": {"tri": (50, 60), "j1": (400, 50), "j2": (60, 20), "cov": (200, 40),
                  "diag": 300, "heat": (24, 10), "gemv": 400},
         "tiny": {"tri": (6, 5), "j1": (12, 3), "j2": (6, 2), "cov": (8, 4), "diag": 5,
                  "heat": (5, 2), "gemv": 6}}
ALPHA, C1, C2 = 1.5, 0.33333, 0.2


# -- the user's functions -------------------------------------------------------

def tri_product(A, B):
    B = B.copy()
    for i in range(B.shape[0]):
        for j in range(B.shape[1]):
            B[i, j] += np.dot(A[i + 1:, i], B[i + 1:, j])
    B *= 1.5
    return np.sum(B)


def jacobi_1d(A, B, steps):
    A = A.copy()
    B = B.copy()
    for t in range(steps):
        B[1:-1] = 0.33333 * (A[:-2] + A[1:-1] + A[2:])
        A[1:-1] = 0.33333 * (B[:-2] + B[1:-1] + B[2:])
    return np.sum(A) + np.sum(B)


def stencil_2d(A, B, steps):
    A = A.copy()
    B = B.copy()
    for t in range(steps):
        B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:]
                               + A[2:, 1:-1] + A[:-2, 1:-1])
        A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:]
                               + B[2:, 1:-1] + B[:-2, 1:-1])
    return np.sum(A ** 2) + np.sum(B)


def covariance_columns(X):
    n, m = X.shape
    X = X - np.mean(X, axis=0)
    cov = np.zeros((m, m))
    for i in range(m):
        cov[i:, i] = cov[i, i:] = X[:, i] @ X[:, i:] / (n - 1.0)
    return np.sum(cov * cov)


def diagonal_loop(a):
    trace = 0.0
    for i in range(a.shape[0]):
        trace += np.tanh(a[i, i])
    return np.sum(a + trace)


def heat_3d(A, B, steps):
    A = A.copy()
    B = B.copy()
    for t in range(steps):
        B[1:-1, 1:-1, 1:-1] = (
            0.125 * (A[2:, 1:-1, 1:-1] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[:-2, 1:-1, 1:-1])
            + 0.125 * (A[1:-1, 2:, 1:-1] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[1:-1, :-2, 1:-1])
            + 0.125 * (A[1:-1, 1:-1, 2:] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[1:-1, 1:-1, :-2])
            + A[1:-1, 1:-1, 1:-1])
        A[1:-1, 1:-1, 1:-1] = (
            0.125 * (B[2:, 1:-1, 1:-1] - 2.0 * B[1:-1, 1:-1, 1:-1] + B[:-2, 1:-1, 1:-1])
            + 0.125 * (B[1:-1, 2:, 1:-1] - 2.0 * B[1:-1, 1:-1, 1:-1] + B[1:-1, :-2, 1:-1])
            + 0.125 * (B[1:-1, 1:-1, 2:] - 2.0 * B[1:-1, 1:-1, 1:-1] + B[1:-1, 1:-1, :-2])
            + B[1:-1, 1:-1, 1:-1])
    return np.sum(A) + np.sum(B)


def scaled_products(alpha, beta, A, B, x):
    return np.sum(alpha * A @ x + beta * B @ x)


# -- hand-written gradients (scalar Numba) -------------------------------------

@numba.njit
def _tri_hand(A, B):
    """B_new = B + L^T B (L = A strictly below the diagonal; row i reads rows
    > i, not yet updated): gA[k, i] = alpha sum_j B[k, j] (k > i),
    gB[k, j] = alpha (1 + sum_{i<k} A[k, i])."""
    n, m = B.shape
    gA = np.zeros_like(A)
    gB = np.empty_like(B)
    for k in range(n):
        rows = 0.0
        for j in range(m):
            rows += B[k, j]
        lower = 0.0
        for i in range(k):
            gA[k, i] = ALPHA * rows
            lower += A[k, i]
        for j in range(m):
            gB[k, j] = ALPHA * (1.0 + lower)
    return gA, gB


@numba.njit
def _jacobi_1d_hand(A, B, steps):
    """The adjoint of the two sweeps, backwards in time (linear: no tape)."""
    n = A.shape[0]
    gA = np.ones(n)
    gB = np.ones(n)
    g = np.empty(n)
    for t in range(steps):
        for k in range(1, n - 1):
            g[k] = C1 * gA[k]
            gA[k] = 0.0
        for k in range(1, n - 1):
            gB[k - 1] += g[k]
            gB[k] += g[k]
            gB[k + 1] += g[k]
        for k in range(1, n - 1):
            g[k] = C1 * gB[k]
            gB[k] = 0.0
        for k in range(1, n - 1):
            gA[k - 1] += g[k]
            gA[k] += g[k]
            gA[k + 1] += g[k]
    return gA, gB


@numba.njit
def _stencil_2d_hand(A, B, steps):
    """Forward sweeps keep nothing but the final A (the loss's square); the
    adjoint sweeps run backwards, five neighbours per interior point."""
    A = A.copy()
    B = B.copy()
    n = A.shape[0]
    for t in range(steps):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                B[i, j] = C2 * (A[i, j] + A[i, j - 1] + A[i, j + 1] + A[i + 1, j] + A[i - 1, j])
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                A[i, j] = C2 * (B[i, j] + B[i, j - 1] + B[i, j + 1] + B[i + 1, j] + B[i - 1, j])
    gA = 2.0 * A
    gB = np.ones_like(B)
    g = np.zeros_like(A)
    for t in range(steps):
        for src, dst in ((gA, gB), (gB, gA)):
            for i in range(1, n - 1):
                for j in range(1, n - 1):
                    g[i, j] = C2 * src[i, j]
                    src[i, j] = 0.0
            for i in range(1, n - 1):
                for j in range(1, n - 1):
                    dst[i, j] += g[i, j]
                    dst[i, j - 1] += g[i, j]
                    dst[i, j + 1] += g[i, j]
                    dst[i + 1, j] += g[i, j]
                    dst[i - 1, j] += g[i, j]
    return gA, gB


@numba.njit
def _cov_hand(X):
    """C = Xc^T Xc / (n-1), loss |C|^2: gXc = 4 Xc C / (n-1), then centred."""
    n, m = X.shape
    Xc = X - X.sum(axis=0) / n
    C = np.dot(Xc.T, Xc) / (n - 1.0)
    G = np.dot(Xc, C) * (4.0 / (n - 1.0))
    return G - G.sum(axis=0) / n


@numba.njit
def _diag_hand(a):
    """sum(a + trace) = sum(a) + n^2 trace: ones, plus n^2 (1 - tanh^2) on the diagonal."""
    n = a.shape[0]
    g = np.ones_like(a)
    scale = float(a.size)
    for i in range(n):
        t = np.tanh(a[i, i])
        g[i, i] += scale * (1.0 - t * t)
    return g


@numba.njit
def _heat_3d_hand(A, B, steps):
    """The adjoint of the two linear sweeps, backwards in time: each interior
    point's cotangent goes 0.25 to itself and 0.125 to its six neighbours."""
    n0, n1, n2 = A.shape
    gA = np.ones_like(A)
    gB = np.ones_like(B)
    g = np.zeros_like(A)
    for t in range(steps):
        for src, dst in ((gA, gB), (gB, gA)):
            for i in range(1, n0 - 1):
                for j in range(1, n1 - 1):
                    for k in range(1, n2 - 1):
                        g[i, j, k] = src[i, j, k]
                        src[i, j, k] = 0.0
            for i in range(1, n0 - 1):
                for j in range(1, n1 - 1):
                    for k in range(1, n2 - 1):
                        c = 0.125 * g[i, j, k]
                        dst[i, j, k] += 0.25 * g[i, j, k]
                        dst[i - 1, j, k] += c
                        dst[i + 1, j, k] += c
                        dst[i, j - 1, k] += c
                        dst[i, j + 1, k] += c
                        dst[i, j, k - 1] += c
                        dst[i, j, k + 1] += c
    return gA, gB


@numba.njit
def _scaled_hand(alpha, beta, A, B, x):
    """d/dA sum(alpha A x) = alpha 1 x^T; the same for B with beta."""
    n, m = A.shape
    gA = np.empty_like(A)
    gB = np.empty_like(B)
    for i in range(n):
        for j in range(m):
            gA[i, j] = alpha * x[j]
            gB[i, j] = beta * x[j]
    return gA, gB


# -- oracles --------------------------------------------------------------------

def _tri_closed(A, B):
    L = np.tril(A, -1)
    gA = ALPHA * np.tril(np.outer(B.sum(axis=1), np.ones(A.shape[0])), -1)
    gB = ALPHA * np.outer(1.0 + L.sum(axis=1), np.ones(B.shape[1]))
    return gA, gB


def _cov_closed(X):
    n = X.shape[0]
    Xc = X - X.mean(axis=0)
    G = 4.0 * Xc @ (Xc.T @ Xc) / (n - 1.0) ** 2
    return (G - G.mean(axis=0),)


def _diag_closed(a):
    return (np.ones_like(a) + np.diag(a.size * (1.0 - np.tanh(np.diag(a)) ** 2)),)


def _scaled_closed(alpha, beta, A, B, x):
    ones = np.ones(A.shape[0])
    return alpha * np.outer(ones, x), beta * np.outer(ones, x)


def _directional_fd(f, args, grads, argnums, seed=0):
    """Central differences of ``f`` along 3 random directions, against
    ``grads``' directional derivatives (relative error)."""
    rng = np.random.default_rng(seed)
    worst = 0.0
    for _ in range(3):
        dirs = [rng.standard_normal(np.shape(args[k])) for k in argnums]
        eps = 1e-6

        def at(s):
            moved = list(args)
            for k, d in zip(argnums, dirs):
                moved[k] = args[k] + s * d
            return f(*moved)
        fd = (at(eps) - at(-eps)) / (2 * eps)
        want = sum(float(np.sum(g * d)) for g, d in zip(grads, dirs))
        worst = max(worst, abs(fd - want) / max(1.0, abs(want)))
    return worst


# -- JAX peers --------------------------------------------------------------------

def _jax_impl(key, fn, args, note, argnums):
    jax, jnp, _ = core.load_jax()
    grad = jax.jit(jax.grad(fn, argnums=argnums))
    arrays = tuple(jnp.asarray(a) if isinstance(a, np.ndarray) else a for a in args)
    return core.Impl(key, lambda *a: core.jax_ready(grad(*a)), arrays, note=note)


def _jax_tri(args, key="jax"):
    jax, jnp, lax = core.load_jax()

    def tri(A, B):
        n = B.shape[0]
        rows = jnp.arange(n)

        def body(i, B):    # row i reads only rows > i: a masked matrix-vector product
            return B.at[i].add(jnp.where(rows > i, A[:, i], 0.0) @ B)
        return jnp.sum(ALPHA * lax.fori_loop(0, n, body, B))
    return _jax_impl(key, tri, args, "lax.fori_loop over rows, masked column of A", (0, 1))


def _jax_tri_closed(args):
    _, jnp, _ = core.load_jax()
    return _jax_impl("jax (closed form)", lambda A, B: jnp.sum(ALPHA * (B + jnp.tril(A, -1).T @ B)),
                     args, "B + tril(A, -1).T @ B: one matrix product", (0, 1))


def _jax_jacobi_1d(args):
    jax, jnp, lax = core.load_jax()
    steps = args[2]

    def f(A, B):
        def body(t, AB):
            A, B = AB
            B = B.at[1:-1].set(C1 * (A[:-2] + A[1:-1] + A[2:]))
            A = A.at[1:-1].set(C1 * (B[:-2] + B[1:-1] + B[2:]))
            return A, B
        A, B = lax.fori_loop(0, steps, body, (A, B))
        return jnp.sum(A) + jnp.sum(B)
    return _jax_impl("jax", f, args[:2], ".at[].set in lax.fori_loop", (0, 1))


def _jax_stencil_2d(args):
    jax, jnp, lax = core.load_jax()
    steps = args[2]

    def five(S):
        return C2 * (S[1:-1, 1:-1] + S[1:-1, :-2] + S[1:-1, 2:] + S[2:, 1:-1] + S[:-2, 1:-1])

    def f(A, B):
        def body(t, AB):
            A, B = AB
            B = B.at[1:-1, 1:-1].set(five(A))
            A = A.at[1:-1, 1:-1].set(five(B))
            return A, B
        A, B = lax.fori_loop(0, steps, body, (A, B))
        return jnp.sum(A ** 2) + jnp.sum(B)
    return _jax_impl("jax", f, args[:2], ".at[].set in lax.fori_loop", (0, 1))


def _jax_cov(args):
    _, jnp, _ = core.load_jax()

    def f(X):
        n, m = X.shape
        X = X - jnp.mean(X, axis=0)
        cov = jnp.zeros((m, m))
        for i in range(m):          # static bounds: unrolled at trace time
            v = X[:, i] @ X[:, i:] / (n - 1.0)
            cov = cov.at[i:, i].set(v).at[i, i:].set(v)
        return jnp.sum(cov * cov)
    return _jax_impl("jax", f, args, "the user's loop, .at[].set (unrolled)", 0)


def _jax_cov_closed(args):
    _, jnp, _ = core.load_jax()

    def f(X):
        X = X - jnp.mean(X, axis=0)
        cov = X.T @ X / (X.shape[0] - 1.0)
        return jnp.sum(cov * cov)
    return _jax_impl("jax (closed form)", f, args, "X.T @ X: one matrix product", 0)


def _jax_diag(args):
    jax, jnp, lax = core.load_jax()

    def f(a):
        trace = lax.fori_loop(0, a.shape[0], lambda i, s: s + jnp.tanh(a[i, i]), 0.0)
        return jnp.sum(a + trace)
    return _jax_impl("jax", f, args, "lax.fori_loop over the diagonal", 0)


def _jax_heat_3d(args):
    jax, jnp, lax = core.load_jax()
    steps = args[2]

    def heat(S):
        c = S[1:-1, 1:-1, 1:-1]
        return (0.125 * (S[2:, 1:-1, 1:-1] - 2.0 * c + S[:-2, 1:-1, 1:-1])
                + 0.125 * (S[1:-1, 2:, 1:-1] - 2.0 * c + S[1:-1, :-2, 1:-1])
                + 0.125 * (S[1:-1, 1:-1, 2:] - 2.0 * c + S[1:-1, 1:-1, :-2]) + c)

    def f(A, B):
        def body(t, AB):
            A, B = AB
            B = B.at[1:-1, 1:-1, 1:-1].set(heat(A))
            A = A.at[1:-1, 1:-1, 1:-1].set(heat(B))
            return A, B
        A, B = lax.fori_loop(0, steps, body, (A, B))
        return jnp.sum(A) + jnp.sum(B)
    return _jax_impl("jax", f, args[:2], ".at[].set in lax.fori_loop", (0, 1))


def _jax_scaled(args):
    _, jnp, _ = core.load_jax()
    return _jax_impl("jax", lambda alpha, beta, A, B, x: jnp.sum(alpha * A @ x + beta * B @ x),
                     args, "the same expression", (2, 3))


def _torch_scaled(args):
    def f(torch, alpha, beta, A, B, x):
        return torch.sum(alpha * A @ x + beta * B @ x)
    return _torch_impl(f, args, (2, 3), "the same expression")


def _torch_impl(fn, args, argnums, note):
    torch = core.load_torch()
    tensors = [torch.from_numpy(a.copy()).requires_grad_() if k in argnums else
               torch.from_numpy(a) if isinstance(a, np.ndarray) else a
               for k, a in enumerate(args)]

    def grad(*ts):
        out = fn(torch, *ts)
        return torch.autograd.grad(out, [ts[k] for k in argnums])
    return core.Impl("torch", grad, tuple(tensors), note=note)


def _torch_jacobi_1d(args):
    def f(torch, A, B, steps):
        for t in range(steps):
            B = torch.cat([B[:1], C1 * (A[:-2] + A[1:-1] + A[2:]), B[-1:]])
            A = torch.cat([A[:1], C1 * (B[:-2] + B[1:-1] + B[2:]), A[-1:]])
        return torch.sum(A) + torch.sum(B)
    return _torch_impl(f, args, (0, 1), "functional slices (torch.cat)")


def _torch_diag(args):
    def f(torch, a):
        return torch.sum(a + torch.sum(torch.tanh(torch.diagonal(a))))
    return _torch_impl(f, args, (0,), "torch.diagonal, vectorised")


def _torch_cov(args):
    def f(torch, X):
        X = X - X.mean(dim=0)
        cov = X.T @ X / (X.shape[0] - 1.0)
        return torch.sum(cov * cov)
    return _torch_impl(f, args, (0,), "closed form X.T @ X")


# -- the group ------------------------------------------------------------------

def _workload(key, title, size, args, argnums, primal, hand, oracle, oracle_name, peers,
              extra=None, numba_primal=None):
    wl = core.Workload(
        name=f"{NAME}[{key}]", title=title, size=size, args=args, argnums=argnums,
        primal=primal, numba_primal=numba_primal or ad.jit(primal),
        numba_note="the Numba primal is ad.jit(f): the user's function on s2s_ad's runtime",
        hand_grad=hand, oracle=oracle, oracle_name=oracle_name, oracle_tol=1e-6,
        peers=peers, targets=[core.Target("s2s_ad", "jax", 1.0),
                              core.Target("s2s_ad", "numba", 3.0)])
    if extra:
        wl.extra = extra
    return wl


def build(size="full"):
    s = SIZES[size]
    rng = np.random.default_rng(0)
    r = lambda *shape: rng.uniform(0.1, 1.0, size=shape)  # noqa: E731
    out = []

    n, m = s["tri"]
    args = (r(n, n), r(n, m))
    out.append(_workload(
        "tri_product", "triangular product, double loop of slice dots", f"{n}x{n} by {n}x{m}",
        args, (0, 1), tri_product, _tri_hand,
        lambda a, g: core.compare(g, _tri_closed(*a)), "closed form (tril)",
        {"jax": _jax_tri},
        extra={"jax (closed form)": lambda args=args: _jax_tri_closed(args)}))

    n, steps = s["j1"]
    args = (r(n), r(n), steps)
    out.append(_workload(
        "jacobi_1d", "1-D Jacobi, slices written in a time loop", f"N = {n}, {steps} steps",
        args, (0, 1), jacobi_1d, _jacobi_1d_hand,
        lambda a, g: _directional_fd(jacobi_1d, a, g, (0, 1)),
        "central differences along 3 random directions",
        {"jax": _jax_jacobi_1d, "torch": _torch_jacobi_1d}))

    n, steps = s["j2"]
    args = (r(n, n), r(n, n), steps)
    out.append(_workload(
        "stencil_2d", "2-D five-point Jacobi in a time loop", f"{n}x{n}, {steps} steps",
        args, (0, 1), stencil_2d, _stencil_2d_hand,
        lambda a, g: _directional_fd(stencil_2d, a, g, (0, 1)),
        "central differences along 3 random directions", {"jax": _jax_stencil_2d}))

    n, m = s["cov"]
    args = (r(n, m),)
    out.append(_workload(
        "covariance_columns", "column loop writing a symmetric matrix", f"{n}x{m}",
        args, 0, covariance_columns, _cov_hand,
        lambda a, g: core.compare(g, _cov_closed(*a)), "closed form (Xc Xc^T Xc)",
        {"jax": _jax_cov, "torch": _torch_cov},
        extra={"jax (closed form)": lambda args=args: _jax_cov_closed(args)}))

    n = s["diag"]
    args = (r(n, n),)
    out.append(_workload(
        "diagonal_loop", "scalar loop over a diagonal, then a + trace", f"{n}x{n}",
        args, 0, diagonal_loop, _diag_hand,
        lambda a, g: core.compare(g, _diag_closed(*a)), "closed form",
        {"jax": _jax_diag, "torch": _torch_diag}))

    n, steps = s["heat"]
    args = (r(n, n, n), r(n, n, n), steps)
    out.append(_workload(
        "heat_3d", "3-D heat stencil in a time loop", f"{n}x{n}x{n}, {steps} steps",
        args, (0, 1), heat_3d, _heat_3d_hand,
        lambda a, g: _directional_fd(heat_3d, a, g, (0, 1)),
        "central differences along 3 random directions", {"jax": _jax_heat_3d}))

    n = s["gemv"]
    args = (ALPHA, 1.2, r(n, n), r(n, n), r(n))
    out.append(_workload(
        "scaled_products", "alpha * A @ x + beta * B @ x, by both matrices", f"{n}x{n}",
        args, (2, 3), scaled_products, _scaled_hand,
        lambda a, g: core.compare(g, _scaled_closed(*a)), "closed form (outer products)",
        {"jax": _jax_scaled, "torch": _torch_scaled}))
    return out
