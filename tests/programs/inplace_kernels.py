"""NPBench (polybench) kernels written as NumPy code writes them: helpers that
update the arrays they are passed, called as statements.  Each ``*_loss``
differentiates the kernel through those writes (loss = sum of its outputs)."""
import numpy as np


def jacobi_1d_sweep(A, B):
    B[1:-1] = 0.33333 * (A[:-2] + A[1:-1] + A[2:])
    A[1:-1] = 0.33333 * (B[:-2] + B[1:-1] + B[2:])


def jacobi_1d_kernel(TSTEPS, A, B):
    for t in range(1, TSTEPS):
        jacobi_1d_sweep(A, B)


def jacobi_1d_loss(A, B):
    jacobi_1d_kernel(4, A, B)
    return np.sum(A) + np.sum(B)


def jacobi_2d_kernel(TSTEPS, A, B):
    for t in range(1, TSTEPS):
        B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1]
                               + A[:-2, 1:-1])
        A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1]
                               + B[:-2, 1:-1])


def jacobi_2d_loss(A, B):
    jacobi_2d_kernel(3, A, B)
    return np.sum(A ** 2) + np.sum(B)


def heat_3d_step(src, dst):
    dst[1:-1, 1:-1, 1:-1] = (
        0.125 * (src[2:, 1:-1, 1:-1] - 2.0 * src[1:-1, 1:-1, 1:-1] + src[:-2, 1:-1, 1:-1])
        + 0.125 * (src[1:-1, 2:, 1:-1] - 2.0 * src[1:-1, 1:-1, 1:-1] + src[1:-1, :-2, 1:-1])
        + 0.125 * (src[1:-1, 1:-1, 2:] - 2.0 * src[1:-1, 1:-1, 1:-1] + src[1:-1, 1:-1, 0:-2])
        + src[1:-1, 1:-1, 1:-1])


def heat_3d_kernel(TSTEPS, A, B):
    for t in range(1, TSTEPS):
        heat_3d_step(A, B)
        heat_3d_step(B, A)


def heat_3d_loss(A, B):
    heat_3d_kernel(3, A, B)
    return np.sum(A ** 2) + np.sum(B)


def fdtd_2d_kernel(TMAX, ex, ey, hz, _fict_):
    for t in range(TMAX):
        ey[0, :] = _fict_[t]
        ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])
        ex[:, 1:] -= 0.5 * (hz[:, 1:] - hz[:, :-1])
        hz[:-1, :-1] -= 0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1])


def fdtd_2d_loss(ex, ey, hz, _fict_):
    fdtd_2d_kernel(3, ex, ey, hz, _fict_)
    return np.sum(ex) + np.sum(ey ** 2) + np.sum(hz)


def gemm_kernel(alpha, beta, C, A, B):
    C *= beta
    C += alpha * A @ B


def gemm_loss(C, A, B):
    gemm_kernel(1.5, 1.2, C, A, B)
    return np.sum(C)


def trmm_kernel(alpha, A, B):
    for i in range(B.shape[0]):
        for j in range(B.shape[1]):
            B[i, j] += np.dot(A[i + 1:, i], B[i + 1:, j])
    B *= alpha


def trmm_loss(A, B):
    trmm_kernel(1.5, A, B)
    return np.sum(B)


def _rand(rng, *shape):
    return rng.uniform(0.1, 1.0, size=shape)


def inputs(name, rng):
    """Small inputs for kernel ``name`` (the ``*_loss`` function's arguments)."""
    if name == "jacobi_1d":
        return (_rand(rng, 8), _rand(rng, 8))
    if name == "jacobi_2d":
        return (_rand(rng, 5, 6), _rand(rng, 5, 6))
    if name == "heat_3d":
        return (_rand(rng, 4, 4, 5), _rand(rng, 4, 4, 5))
    if name == "fdtd_2d":
        return (_rand(rng, 4, 5), _rand(rng, 4, 5), _rand(rng, 4, 5), _rand(rng, 3))
    if name == "gemm":
        return (_rand(rng, 3, 4), _rand(rng, 3, 2), _rand(rng, 2, 4))
    if name == "trmm":
        return (_rand(rng, 4, 4), _rand(rng, 4, 3))
    raise KeyError(name)


KERNELS = {"jacobi_1d": jacobi_1d_loss, "jacobi_2d": jacobi_2d_loss, "heat_3d": heat_3d_loss,
           "fdtd_2d": fdtd_2d_loss, "gemm": gemm_loss, "trmm": trmm_loss}
