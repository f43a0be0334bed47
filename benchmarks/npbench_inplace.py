"""``python -m benchmarks.npbench_inplace``: s2s_ad vs JAX on the in-place
NPBench kernels of ``tests/programs/inplace_kernels.py`` (issue 22).

For each kernel, ``ad.jit(ad.grad(loss, argnums=all), compile="eager",
cache=False)`` runs the kernel as NumPy writes it (helpers that write into
their arguments); JAX runs ``jax.jit(jax.grad(...))`` of a functional version
written with ``.at[].set()`` / slices.  The two gradients must agree to 1e-8
before anything is timed.  Sizes are small, NPBench-like; the loss is the sum
of the kernel's outputs as in the tests.  Times: median of >= 20 calls after
warm-up; "first" is the first call (trace + compile + run), in seconds.
"""
import os

for _k, _v in (("OMP_WAIT_POLICY", "PASSIVE"), ("OMP_NUM_THREADS", "1"),
               ("OPENBLAS_NUM_THREADS", "1"), ("MKL_NUM_THREADS", "1")):
    os.environ.setdefault(_k, _v)

import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import s2s_ad as ad  # noqa: E402
from tests.programs.inplace_kernels import (  # noqa: E402
    fdtd_2d_kernel,
    gemm_kernel,
    heat_3d_kernel,
    jacobi_1d_kernel,
    jacobi_2d_kernel,
    trmm_kernel,
)

# Time steps (NPBench's convention: ``for t in range(1, TSTEPS)``; fdtd: range(TMAX)).
T_JACOBI_1D, T_JACOBI_2D, T_HEAT, T_FDTD = 50, 20, 10, 20


# -- the kernels as the tests write them, at benchmark step counts -------------

def jacobi_1d_loss(A, B):
    jacobi_1d_kernel(50, A, B)
    return np.sum(A) + np.sum(B)


def jacobi_2d_loss(A, B):
    jacobi_2d_kernel(20, A, B)
    return np.sum(A ** 2) + np.sum(B)


def heat_3d_loss(A, B):
    heat_3d_kernel(10, A, B)
    return np.sum(A ** 2) + np.sum(B)


def fdtd_2d_loss(ex, ey, hz, _fict_):
    fdtd_2d_kernel(20, ex, ey, hz, _fict_)
    return np.sum(ex) + np.sum(ey ** 2) + np.sum(hz)


def gemm_loss(C, A, B):
    gemm_kernel(1.5, 1.2, C, A, B)
    return np.sum(C)


def trmm_loss(A, B):
    trmm_kernel(1.5, A, B)
    return np.sum(B)


# -- functional JAX versions ---------------------------------------------------

def jax_versions(jnp):
    def jacobi_1d(A, B):
        for _ in range(1, T_JACOBI_1D):
            B = B.at[1:-1].set(0.33333 * (A[:-2] + A[1:-1] + A[2:]))
            A = A.at[1:-1].set(0.33333 * (B[:-2] + B[1:-1] + B[2:]))
        return jnp.sum(A) + jnp.sum(B)

    def jacobi_2d(A, B):
        for _ in range(1, T_JACOBI_2D):
            B = B.at[1:-1, 1:-1].set(0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:]
                                            + A[2:, 1:-1] + A[:-2, 1:-1]))
            A = A.at[1:-1, 1:-1].set(0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:]
                                            + B[2:, 1:-1] + B[:-2, 1:-1]))
        return jnp.sum(A ** 2) + jnp.sum(B)

    def step(src, dst):
        c = src[1:-1, 1:-1, 1:-1]
        return dst.at[1:-1, 1:-1, 1:-1].set(
            0.125 * (src[2:, 1:-1, 1:-1] - 2.0 * c + src[:-2, 1:-1, 1:-1])
            + 0.125 * (src[1:-1, 2:, 1:-1] - 2.0 * c + src[1:-1, :-2, 1:-1])
            + 0.125 * (src[1:-1, 1:-1, 2:] - 2.0 * c + src[1:-1, 1:-1, 0:-2])
            + c)

    def heat_3d(A, B):
        for _ in range(1, T_HEAT):
            B = step(A, B)
            A = step(B, A)
        return jnp.sum(A ** 2) + jnp.sum(B)

    def fdtd_2d(ex, ey, hz, fict):
        for t in range(T_FDTD):
            ey = ey.at[0, :].set(fict[t])
            ey = ey.at[1:, :].add(-0.5 * (hz[1:, :] - hz[:-1, :]))
            ex = ex.at[:, 1:].add(-0.5 * (hz[:, 1:] - hz[:, :-1]))
            hz = hz.at[:-1, :-1].add(-0.7 * (ex[:-1, 1:] - ex[:-1, :-1]
                                             + ey[1:, :-1] - ey[:-1, :-1]))
        return jnp.sum(ex) + jnp.sum(ey ** 2) + jnp.sum(hz)

    def gemm(C, A, B):
        return jnp.sum(1.2 * C + 1.5 * A @ B)

    def trmm(A, B):
        # B[i, j] += A[i+1:, i] . B[i+1:, j], rows in increasing i: row i reads
        # only rows > i, not yet updated, so B_new = (I + strictly_lower(A)^T) B.
        return jnp.sum(1.5 * (B + jnp.tril(A, -1).T @ B))

    return {"jacobi_1d": jacobi_1d, "jacobi_2d": jacobi_2d, "heat_3d": heat_3d,
            "fdtd_2d": fdtd_2d, "gemm": gemm, "trmm": trmm}


def inputs(name, rng):
    r = lambda *s: rng.uniform(0.1, 1.0, size=s)  # noqa: E731
    return {"jacobi_1d": lambda: (r(400), r(400)),
            "jacobi_2d": lambda: (r(60, 60), r(60, 60)),
            "heat_3d": lambda: (r(20, 20, 20), r(20, 20, 20)),
            "fdtd_2d": lambda: (r(40, 50), r(40, 50), r(40, 50), r(T_FDTD)),
            "gemm": lambda: (r(60, 70), r(60, 80), r(80, 70)),
            "trmm": lambda: (r(50, 50), r(50, 60))}[name]()


SIZES = {"jacobi_1d": f"N=400, T={T_JACOBI_1D}", "jacobi_2d": f"60x60, T={T_JACOBI_2D}",
         "heat_3d": f"20^3, T={T_HEAT}", "fdtd_2d": f"40x50, TMAX={T_FDTD}",
         "gemm": "60x70 (k=80)", "trmm": "50x60"}
LOSSES = {"jacobi_1d": jacobi_1d_loss, "jacobi_2d": jacobi_2d_loss,
          "heat_3d": heat_3d_loss, "fdtd_2d": fdtd_2d_loss, "gemm": gemm_loss,
          "trmm": trmm_loss}


def _median_ms(fn, args, calls, block):
    for _ in range(3):
        block(fn(*args))
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        block(fn(*args))
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    calls = int(argv[0]) if argv else 30
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    jfuns = jax_versions(jnp)

    def jblock(out):
        return jax.block_until_ready(out)

    rows = []
    for name, loss in LOSSES.items():
        args = inputs(name, np.random.default_rng(0))
        argnums = tuple(range(len(args)))
        g_s2s = ad.jit(ad.grad(loss, argnums=argnums), compile="eager", cache=False)
        t0 = time.perf_counter()
        got = g_s2s(*args)
        first_s2s = time.perf_counter() - t0

        g_jax = jax.jit(jax.grad(jfuns[name], argnums=argnums))
        jargs = tuple(jnp.asarray(a) for a in args)
        t0 = time.perf_counter()
        want = jblock(g_jax(*jargs))
        first_jax = time.perf_counter() - t0

        err = max(float(np.max(np.abs(np.asarray(g) - np.asarray(w))))
                  / max(1.0, float(np.max(np.abs(np.asarray(w)))))
                  for g, w in zip(got, want))
        if not err <= 1e-8:
            raise AssertionError(f"{name}: s2s_ad and JAX gradients differ by {err:.3g}")

        ms_s2s = _median_ms(g_s2s, args, calls, lambda out: out)
        ms_jax = _median_ms(g_jax, jargs, calls, jblock)
        rows.append((name, SIZES[name], ms_s2s, ms_jax, ms_s2s / ms_jax, first_s2s,
                     first_jax, err))
        print(f"  {name}: done", file=sys.stderr, flush=True)

    head = ("| kernel | size | s2s_ad ms | JAX ms | ratio (s2s/JAX) | s2s_ad first s "
            "| JAX first s | max rel. grad diff |")
    print(head)
    print("|" + "---|" * 8)
    for name, size, a, b, q, fa, fb, err in rows:
        print(f"| {name} | {size} | {a:.3f} | {b:.3f} | {q:.2f} | {fa:.2f} | {fb:.2f} "
              f"| {err:.1e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
