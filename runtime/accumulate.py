"""Product adjoints added in place into a slice of an adjoint array.

``rt.add_dot_grad_a(bA[s], g, a, b)`` is ``bA[s] += rt.dot_grad_a(g, a, b)``
for a basic (view) index ``s``, with no temporary for the vector and
matrix-vector cases under Numba: a loop over the view adds ``g * b[k]``
(a dot of vectors), a row of an outer product, or a matrix-vector product.
The reverse transform prints them for the adjoint of a product whose
operand is a slice read (``np.dot(A[i+1:, i], B[i+1:, j])`` in a loop).
``out`` must be a view (or an array) the caller owns; nothing is returned.
"""
from numba.core import types
from numba.extending import overload

from . import linalg

EXPORTS = ("add_dot_grad_a", "add_dot_grad_b", "add_matmul_grad_a", "add_matmul_grad_b",
           "add_into")


def add_into(out, value):
    """``out += value`` for a view ``out`` (``bx[1:-1, :-2]``), in place.

    The same as the statement ``bx[s] += value``, which Numba runs as an
    in-place add into the view followed by a copy of the view onto itself
    (the subscript store): this skips the copy.
    """
    out += value


def add_dot_grad_a(out, g, a, b):
    """``out += dot_grad_a(g, a, b)`` in place."""
    out += linalg.dot_grad_a(g, a, b)


def add_dot_grad_b(out, g, a, b):
    """``out += dot_grad_b(g, a, b)`` in place."""
    out += linalg.dot_grad_b(g, a, b)


def add_matmul_grad_a(out, g, a, b):
    """``out += matmul_grad_a(g, a, b)`` in place."""
    out += linalg.matmul_grad_a(g, a, b)


def add_matmul_grad_b(out, g, a, b):
    """``out += matmul_grad_b(g, a, b)`` in place."""
    out += linalg.matmul_grad_b(g, a, b)


def _vec(t, ndim):
    return isinstance(t, types.Array) and t.ndim == ndim


def _scalar_g(g):
    return isinstance(g, (types.Number, types.Boolean)) or _vec(g, 0)


def _impl(which, fallback):
    """The loop for (a.ndim, b.ndim) in (1, 1), (1, 2), (2, 1), else ``fallback``."""
    def typer(out, g, a, b):
        if not isinstance(out, types.Array):
            return None
        shape = (a.ndim if isinstance(a, types.Array) else 0,
                 b.ndim if isinstance(b, types.Array) else 0)
        if shape == (1, 1) and _scalar_g(g) and out.ndim == 1:
            zero_d = isinstance(g, types.Array)
            if which == "a":              # d(a . b)/da = g b
                def impl(out, g, a, b):
                    s = g[()] if zero_d else g
                    for k in range(out.shape[0]):
                        out[k] += s * b[k]
            else:                         # d(a . b)/db = g a
                def impl(out, g, a, b):
                    s = g[()] if zero_d else g
                    for k in range(out.shape[0]):
                        out[k] += s * a[k]
            return impl
        if shape == (1, 2) and _vec(g, 1) and which == "a" and out.ndim == 1:
            def impl(out, g, a, b):         # out += b @ g
                for k in range(out.shape[0]):
                    acc = 0.0
                    for m in range(g.shape[0]):
                        acc += b[k, m] * g[m]
                    out[k] += acc
            return impl
        if shape == (1, 2) and _vec(g, 1) and which == "b" and out.ndim == 2:
            def impl(out, g, a, b):         # out += outer(a, g)
                for k in range(out.shape[0]):
                    ak = a[k]
                    for m in range(out.shape[1]):
                        out[k, m] += ak * g[m]
            return impl
        if shape == (2, 1) and _vec(g, 1) and which == "a" and out.ndim == 2:
            def impl(out, g, a, b):         # out += outer(g, b)
                for k in range(out.shape[0]):
                    gk = g[k]
                    for m in range(out.shape[1]):
                        out[k, m] += gk * b[m]
            return impl
        if shape == (2, 1) and _vec(g, 1) and which == "b" and out.ndim == 1:
            def impl(out, g, a, b):         # out += a.T @ g
                for m in range(a.shape[0]):
                    gm = g[m]
                    for k in range(out.shape[0]):
                        out[k] += a[m, k] * gm
            return impl

        def impl(out, g, a, b):
            out += fallback(g, a, b)
        return impl
    return typer

overload(add_dot_grad_a)(_impl("a", linalg.dot_grad_a))
overload(add_dot_grad_b)(_impl("b", linalg.dot_grad_b))
overload(add_matmul_grad_a)(_impl("a", linalg.matmul_grad_a))
overload(add_matmul_grad_b)(_impl("b", linalg.matmul_grad_b))


@overload(add_into)
def _add_into(out, value):
    if not isinstance(out, types.Array):
        return None

    def impl(out, value):
        out += value
    return impl
