"""Adjoints that read values for their shape alone (issue 22), for the oracle.

Slice expressions along one axis (``A[:-2] + A[1:-1] + A[2:]``) provably
do not broadcast, so their adjoints read nothing but the cotangent; the
value a slice write stores is un-broadcast to the shape of a view of its
shape class, not kept on a stack; a write saves what it overwrites only
when some adjoint reads the array's values after the restore would run.
Each program below exercises one side of those rules, including the cases
where a save or an un-broadcast must stay.  ``CASES`` maps each name to
(function, argument maker, argnums).
"""
import numpy as np


def linear_jacobi(A, B):
    """Linear stencils, a linear loss: no adjoint reads A's or B's values."""
    for t in range(3):
        B[1:-1] = 0.33333 * (A[:-2] + A[1:-1] + A[2:])
        A[1:-1] = 0.33333 * (B[:-2] + B[1:-1] + B[2:])
    return np.sum(A) + np.sum(B)


def product_stencil(A, B):
    """The product's adjoint reads A's slices: A's writes keep their saves,
    B's (read for shapes only) do not."""
    for t in range(3):
        B[1:-1] = A[:-2] * A[2:]
        A[1:-1] = 0.5 * (B[:-2] + B[2:])
    return np.sum(A) + np.sum(B)


def read_before_loop(A):
    """A's values are read before the loop that writes A: the adjoint of that
    read runs after the restores, which must therefore run."""
    s = np.sum(A * A)
    for t in range(2):
        A[1:-1] = 0.5 * (A[:-2] + A[2:])
    return s + np.sum(A * A)


def broadcast_corner(A, B):
    """Slices of different lengths: A[:1] broadcasts (its adjoint is summed),
    and a value shaped like A[:1] written into B[1:-1] is summed back."""
    for t in range(2):
        B[1:-1] = A[1:-1] * A[:1]
        A[1:-1] = 3.0 * B[:1] + B[2:]
    return np.sum(A * A) + np.sum(np.tanh(B))


def rows_of_a_matrix(X):
    """An integer index drops an axis: X[i, 1:] and X[i, :-1] share a shape."""
    out = np.zeros(X.shape)
    for i in range(X.shape[0]):
        out[i, 1:] = 2.0 * X[i, 1:] + X[i, :-1]
    return np.sum(out * out)


def from_the_end(a, b):
    """Bounds counted from the end (a[-3:], a[:-1]) and a capped slice (b[1:4])."""
    s = 0.0
    for t in range(2):
        b[1:4] = a[-3:] * 0.5 + b[1:4]
        s += np.sum(np.sin(a[:-1] + a[1:]))
    return s + np.sum(b * b)


def shifted_sums(a, s):
    """Sums of an array plus a scalar: the scalar's cotangent is the sum of a
    broadcast value (times the element count), and ``2.0 * a`` is computed
    for its shape alone (``a`` has it)."""
    trace = s * 1.0
    for i in range(a.shape[0]):
        trace += np.tanh(a[i, i])
    return 3.0 * np.sum(a * 2.0 + trace) - np.sum(a - trace) + np.mean(a + s)


def written_after_the_sum(a, s):
    """The sum's cotangent is written into (the element set to a constant has
    none) before the scalar's cotangent sums it: no element-count shortcut."""
    t = a + s
    t[0, 1] = 2.0
    t[1:, 0] = 0.5
    return np.sum(t) * s


def shifted_in_a_loop(x, w):
    """The broadcast-sum cotangent inside a loop's adjoint."""
    acc = 0.0
    for k in range(w.shape[0]):
        acc += np.sum(x * w[k] + acc) * 0.5
    return acc


def _r(rng, *shape):
    return rng.uniform(0.1, 1.0, size=shape)


CASES = {
    "linear_jacobi": (linear_jacobi, lambda r: (_r(r, 9), _r(r, 9)), (0, 1)),
    "product_stencil": (product_stencil, lambda r: (_r(r, 8), _r(r, 8)), (0, 1)),
    "read_before_loop": (read_before_loop, lambda r: (_r(r, 7),), 0),
    "broadcast_corner": (broadcast_corner, lambda r: (_r(r, 6), _r(r, 6)), (0, 1)),
    "rows_of_a_matrix": (rows_of_a_matrix, lambda r: (_r(r, 4, 5),), 0),
    "from_the_end": (from_the_end, lambda r: (_r(r, 5), _r(r, 6)), (0, 1)),
    "shifted_sums": (shifted_sums, lambda r: (_r(r, 4, 4), 0.3), (0, 1)),
    "written_after_the_sum": (written_after_the_sum, lambda r: (_r(r, 3, 4), 0.7), (0, 1)),
    "shifted_in_a_loop": (shifted_in_a_loop, lambda r: (_r(r, 5), _r(r, 3)), (0, 1)),
}


def smooth_vector(x):
    """A vector output (so jacrev carries several cotangents through one
    sweep): each cotangent is added into slices of the adjoint in place."""
    y = x * 1.0
    for t in range(2):
        y[1:-1] = 0.5 * (y[:-2] + y[2:]) + np.sin(y[1:-1])
    return y[::2] * 3.0

