"""Array loops: slices read and written in loops (issue 22), for the oracle.

Each program reads slices of arrays inside loops: products of slices
(adjoints added into the slice in place), stencils in a time loop over
arrays written in place (views recomputed by the adjoint sweep, not
stacked), column loops writing a matrix, and a scalar loop over a diagonal.
``CASES`` maps each name to (function, argument maker, argnums);
``VECTOR_CASES`` the same for vector outputs (jacrev, vjp).
"""
import numpy as np


def tri_product(A, B):
    """Triangular product: B[i, j] += A[i+1:, i] . B[i+1:, j], then B *= 1.5."""
    for i in range(B.shape[0]):
        for j in range(B.shape[1]):
            B[i, j] += np.dot(A[i + 1:, i], B[i + 1:, j])
    B *= 1.5
    return np.sum(B * B)


def lower_solve_like(L, b):
    """Forward substitution with a dot of the solved prefix: x[i] reads x[:i]."""
    x = np.zeros(b.shape[0])
    for i in range(b.shape[0]):
        x[i] = (b[i] - np.dot(L[i, :i], x[:i])) / (2.0 + L[i, i] ** 2)
    return np.sum(np.sin(x))


def jacobi_1d(A, B):
    for t in range(3):
        B[1:-1] = 0.33333 * (A[:-2] + A[1:-1] + A[2:])
        A[1:-1] = 0.33333 * (B[:-2] + B[1:-1] + B[2:])
    return np.sum(A * A) + np.sum(np.tanh(B))


def jacobi_2d(A, B):
    for t in range(2):
        B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:]
                               + A[2:, 1:-1] + A[:-2, 1:-1])
        A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:]
                               + B[2:, 1:-1] + B[:-2, 1:-1])
    return np.sum(A ** 2) + np.sum(B)


def nonlinear_stencil(u):
    """A stencil whose adjoint reads the slices' values (they are views of u)."""
    for t in range(3):
        u[1:-1] = u[1:-1] + 0.1 * u[:-2] * u[2:]
    return np.sum(u * u)


def covariance_columns(X):
    n = X.shape[1]
    cov = np.zeros((n, n))
    for i in range(n):
        cov[i:, i] = cov[i, i:] = X[:, i] @ X[:, i:]
    return np.sum(cov * cov)


def matrix_times_slice(M, x):
    """A matrix slice times a vector slice, in a loop (matmul of 2-D by 1-D)."""
    s = 0.0
    for i in range(x.shape[0] - 1):
        y = M[:, i:] @ x[i:]
        s += np.sum(np.cos(y))
    return s


def view_of_view(A, w):
    s = 0.0
    for i in range(A.shape[0]):
        row = A[i]
        s += np.dot(row[1:], w) * np.dot(row[:-1], w)
    return s


def rebound_base(a, w):
    """The array a slice reads is rebound in the loop: its views differ per step."""
    s = 0.0
    for i in range(3):
        a = a * 1.1 + 0.05
        s += np.dot(a[1:], w)
    return s * s


def written_after_read(a, w):
    """The array a slice view reads is written between the read and its use."""
    s = 0.0
    for i in range(a.shape[0] - 1):
        v = a[i:]
        a[i] = a[i] * 0.5 + 1.0
        s += np.dot(v, w[i:]) ** 2
    return s


def trace_then_shift(a):
    trace = 0.0
    for i in range(a.shape[0]):
        trace += np.tanh(a[i, i])
    return np.sum(a + trace)


def linear_stencil_sum(A, B):
    """A linear stencil whose loss is a sum of its outputs: the gradient reads
    neither array's values, so it needs none of the primal sweep's writes."""
    for t in range(3):
        B[1:-1] = 0.33333 * (A[:-2] + A[1:-1] + A[2:])
        A[1:-1] = 0.33333 * (B[:-2] + B[1:-1] + B[2:])
    return np.sum(A) + 2.0 * np.sum(B)


def heat_3d_sum(A, B):
    """Seven-point 3-D heat stencil in a time loop, loss the sum of both grids."""
    for t in range(2):
        B[1:-1, 1:-1, 1:-1] = (0.125 * (A[2:, 1:-1, 1:-1] - 2.0 * A[1:-1, 1:-1, 1:-1]
                                        + A[:-2, 1:-1, 1:-1])
                               + 0.125 * (A[1:-1, 2:, 1:-1] - 2.0 * A[1:-1, 1:-1, 1:-1]
                                          + A[1:-1, :-2, 1:-1])
                               + A[1:-1, 1:-1, 1:-1])
        A[1:-1, 1:-1, 1:-1] = 0.5 * (B[1:-1, 1:-1, 1:-1] + B[1:-1, 1:-1, 2:]
                                     + B[1:-1, 1:-1, :-2])
    return np.sum(A) + np.sum(B)


def read_through_an_earlier_view(a):
    """A view taken before the writes into its array and read for its values
    afterwards (the writes must stay although the array itself is read for
    its shape alone)."""
    b = a.copy()
    v = b[2:]
    for t in range(3):
        b[1:-1] = 0.5 * (b[:-2] + b[2:])
    return np.sum(b) + np.sum(v ** 2)


def shape_read_then_value_read(a):
    """An array read for its shape by one adjoint (the sum) and for its values
    by a later statement of the primal (the product)."""
    b = a.copy()
    for t in range(2):
        b[1:] = b[1:] + 0.5 * b[:-1]
    s = np.sum(b)
    return s + np.sum(b * a)


def tri_rows(A, B):
    """The triangular product's rows as a vector output (jacrev widens its
    in-place product adjoints, rt.add_dot_grad_*)."""
    for i in range(B.shape[0]):
        for j in range(B.shape[1]):
            B[i, j] += np.dot(A[i + 1:, i], B[i + 1:, j])
    return np.sum(B * B, axis=1)


def covariance_rows(X):
    """The column loop's matrix as row sums (rt.add_matmul_grad_* widened)."""
    n = X.shape[1]
    cov = np.zeros((n, n))
    for i in range(n):
        cov[i:, i] = cov[i, i:] = X[:, i] @ X[:, i:]
    return np.sum(cov * cov, axis=0)


def matrix_slice_rows(M, x):
    y = np.zeros(M.shape[0])
    for i in range(x.shape[0] - 1):
        y = y + np.cos(M[:, i:] @ x[i:])
    return y


def scaled_products(A, B, x, alpha):
    """alpha * A @ x + beta * B @ x: the scalings move onto the vectors."""
    y = alpha * A @ x + 1.2 * B @ x
    z = x @ (B * alpha) + (A / 3.0) @ y
    return np.sum(y * z)


def scaled_product_kept(A, x):
    """The scaled matrix is read twice: it stays a matrix."""
    S = 2.0 * A
    return np.sum(np.tanh(S @ x)) + np.sum(S * S)


def scaled_products_in_a_loop(A, x, c):
    for t in range(3):
        x = np.tanh(c * A @ x + 0.1)
    return np.sum(x * x)


def flux_limited_diffusion(u, coeff):
    """Horizontal diffusion of a 3-D field: a Laplacian of slices, fluxes
    zeroed by np.where on their sign against the field's gradient."""
    lap = 4.0 * u[1:-1, 1:-1, :] - (u[2:, 1:-1, :] + u[:-2, 1:-1, :]
                                    + u[1:-1, 2:, :] + u[1:-1, :-2, :])
    flx = lap[1:, 1:-1, :] - lap[:-1, 1:-1, :]
    flx = np.where(flx * (u[2:-1, 2:-2, :] - u[1:-2, 2:-2, :]) > 0.0, 0.0, flx)
    fly = lap[1:-1, 1:, :] - lap[1:-1, :-1, :]
    fly = np.where(fly * (u[2:-2, 2:-1, :] - u[2:-2, 1:-2, :]) > 0.0, 0.0, fly)
    out = u[2:-2, 2:-2, :] - coeff[2:-2, 2:-2, :] * (flx[1:, :, :] - flx[:-1, :, :]
                                                     + fly[:, 1:, :] - fly[:, :-1, :])
    return np.sum(out)


def saved_matrix_elements(A, w):
    """Element writes of a matrix in a double loop whose inner bound is read
    from the matrix's shape inside the outer loop: the overwritten elements
    (the adjoint reads them, through sin) go on a preallocated float stack."""
    for i in range(A.shape[0]):
        for j in range(1, A.shape[1]):
            A[i, j] = np.sin(A[i, j]) * w[j] + 0.5 * A[i, j - 1]
    return np.sum(A * A)


def rebound_inner_bound(a):
    """The outer loop rebinds the array whose shape bounds the inner loop:
    the trips are not known before the outer loop (a list stack)."""
    s = 0.5
    for i in range(3):
        a = np.concatenate((a, a[:1] * 0.5))
        for j in range(a.shape[0]):
            s = 0.9 * s + np.tanh(a[j] * s)
    return s


def _r(rng, *shape):
    return rng.uniform(0.1, 1.0, size=shape)


CASES = {
    "tri_product": (tri_product, lambda r: (_r(r, 5, 5), _r(r, 5, 4)), (0, 1)),
    "lower_solve_like": (lower_solve_like, lambda r: (_r(r, 6, 6), _r(r, 6)), (0, 1)),
    "jacobi_1d": (jacobi_1d, lambda r: (_r(r, 9), _r(r, 9)), (0, 1)),
    "jacobi_2d": (jacobi_2d, lambda r: (_r(r, 6, 5), _r(r, 6, 5)), (0, 1)),
    "nonlinear_stencil": (nonlinear_stencil, lambda r: (_r(r, 8),), 0),
    "covariance_columns": (covariance_columns, lambda r: (_r(r, 7, 4),), 0),
    "matrix_times_slice": (matrix_times_slice, lambda r: (_r(r, 3, 5), _r(r, 5)), (0, 1)),
    "view_of_view": (view_of_view, lambda r: (_r(r, 3, 5), _r(r, 4)), (0, 1)),
    "rebound_base": (rebound_base, lambda r: (_r(r, 5), _r(r, 4)), (0, 1)),
    "written_after_read": (written_after_read, lambda r: (_r(r, 5), _r(r, 5)), (0, 1)),
    "trace_then_shift": (trace_then_shift, lambda r: (_r(r, 4, 4),), 0),
    "linear_stencil_sum": (linear_stencil_sum, lambda r: (_r(r, 9), _r(r, 9)), (0, 1)),
    "heat_3d_sum": (heat_3d_sum, lambda r: (_r(r, 5, 4, 5), _r(r, 5, 4, 5)), (0, 1)),
    "read_through_an_earlier_view": (read_through_an_earlier_view, lambda r: (_r(r, 7),), 0),
    "shape_read_then_value_read": (shape_read_then_value_read, lambda r: (_r(r, 6),), 0),
    "scaled_products": (scaled_products, lambda r: (_r(r, 4, 4), _r(r, 4, 4), _r(r, 4), 0.7),
                        (0, 1, 2, 3)),
    "scaled_product_kept": (scaled_product_kept, lambda r: (_r(r, 3, 4), _r(r, 4)), (0, 1)),
    "scaled_products_in_a_loop": (scaled_products_in_a_loop,
                                  lambda r: (_r(r, 4, 4), _r(r, 4), 0.8), (0, 1, 2)),
    "saved_matrix_elements": (saved_matrix_elements, lambda r: (_r(r, 4, 5), _r(r, 5)), (0, 1)),
    "rebound_inner_bound": (rebound_inner_bound, lambda r: (_r(r, 4),), 0),
}

#: Slow to compile (3-D slices and np.where: about 30 s): the slow tier.
SLOW_CASES = {
    "flux_limited_diffusion": (flux_limited_diffusion,
                               lambda r: (_r(r, 7, 8, 2), _r(r, 7, 8, 2)), (0, 1)),
}

#: Vector outputs, for jacrev (vector-mode adjoint sweeps) and vjp.
VECTOR_CASES = {
    "tri_rows": (tri_rows, lambda r: (_r(r, 5, 5), _r(r, 5, 4)), (0, 1)),
    "covariance_rows": (covariance_rows, lambda r: (_r(r, 7, 4),), 0),
    "matrix_slice_rows": (matrix_slice_rows, lambda r: (_r(r, 3, 5), _r(r, 5)), (0, 1)),
}
