"""Programs for the fused slice loops (s2s_ad/transforms/fuse_slices.py).

Elementwise statements over slices that compiled code runs as one loop nest,
and the cases where it must not (or must fall back at run time): an array
written through one slice and read through an overlapping other one, a
written slice that overlaps a read operand only at run time, operands that
broadcast, scalars passed as arguments.  Each is checked against finite
differences and against NumPy's own evaluation by ``tests/test_fused_slices.py``.
"""
import numpy as np


def stencil_with_scalar(A, c):
    """A 1-D Jacobi time loop with the coefficient an argument (a scalar
    operand of the nest) and a nonlinear term."""
    A = A.copy()
    B = np.zeros_like(A)
    for t in range(3):
        B[1:-1] = c * (A[:-2] + A[1:-1] + A[2:]) - 0.1 * A[1:-1] * A[1:-1]
        A[1:-1] = np.maximum(B[1:-1], 0.2) + 0.25 * (B[:-2] - B[2:])
    return np.sum(A * A) + np.sum(B)


def shifted_in_place(a):
    """b[1:] = b[1:] + 0.5 * b[:-1]: NumPy reads all of b before writing; a
    nest would read elements it already wrote (not fused)."""
    b = a.copy()
    for t in range(3):
        b[1:] = b[1:] + 0.5 * b[:-1] * b[:-1]
    return np.sum(b * b)


def same_slice_update(a, w):
    """A slice updated from itself and another array: fused."""
    b = a.copy()
    for t in range(2):
        b[1:-1, 1:] = b[1:-1, 1:] * 0.9 + w[2:, :-1] * b[1:-1, 1:]
        b[1:-1, 1:] -= 0.1 * w[:-2, 1:]
    return np.sum(b ** 2)


def overlapping_view(a):
    """``d`` is ``c`` under another name (a reshape's view): the nest would
    read what it just wrote through ``c[1:]``, which only the guard's
    ``rt.apart`` sees at run time, and it falls back to NumPy's order."""
    c = a.copy()
    d = c.reshape(c.shape)
    for t in range(2):
        c[1:] = 0.5 * (d[:-1] + 1.0) * d[:-1]
    return np.sum(c * c)


def broadcast_operand(A, w):
    """A row vector broadcast against the slices: the guard falls back."""
    B = A.copy()
    for t in range(2):
        B[1:, :] = B[1:, :] * w - 0.5 * B[:-1, :] * A[1:, :]
    return np.sum(B * B)


def horizontal_diffusion(u, coeff):
    """Flux-limited horizontal diffusion in a time loop: np.where on the sign
    of a flux against the field's gradient, slices of slices."""
    u = u.copy()
    for t in range(2):
        lap = 4.0 * u[1:-1, 1:-1] - (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2])
        flx = lap[1:, 1:-1] - lap[:-1, 1:-1]
        flx = np.where(flx * (u[2:-1, 2:-2] - u[1:-2, 2:-2]) > 0.0, 0.0, flx)
        fly = lap[1:-1, 1:] - lap[1:-1, :-1]
        fly = np.where(fly * (u[2:-2, 2:-1] - u[2:-2, 1:-2]) > 0.0, 0.0, fly)
        u[2:-2, 2:-2] = u[2:-2, 2:-2] - coeff[2:-2, 2:-2] * (flx[1:] - flx[:-1]
                                                             + fly[:, 1:] - fly[:, :-1])
    return np.sum(u * u)


def _r(rng, *shape):
    return rng.uniform(0.1, 1.0, size=shape)


CASES = {
    "stencil_with_scalar": (stencil_with_scalar, lambda r: (_r(r, 9), 0.3), (0, 1)),
    "shifted_in_place": (shifted_in_place, lambda r: (_r(r, 6),), 0),
    "same_slice_update": (same_slice_update, lambda r: (_r(r, 5, 4), _r(r, 5, 4)), (0, 1)),
    "broadcast_operand": (broadcast_operand, lambda r: (_r(r, 4, 3), _r(r, 3)), (0, 1)),
    "horizontal_diffusion": (horizontal_diffusion, lambda r: (_r(r, 7, 8), _r(r, 7, 8)),
                             (0, 1)),
}

#: Compiled primal against NumPy only (s2s_ad's derivatives do not follow a
#: write into an array through a reshape's view of it).
PRIMAL_CASES = {
    "overlapping_view": (overlapping_view, lambda r: (_r(r, 6),), 0),
}
