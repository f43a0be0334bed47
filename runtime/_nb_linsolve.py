"""Numba versions of the matrix functions: registered sources and LAPACK/BLAS overloads.

The matrix functions of ``linalg_matrix``/``linalg_linear`` that Numba
compiles as written are registered with ``register_jitable`` (one source for
both backends, 2-D matrices); the rest are overloads: triangular solves
through BLAS ``trsm``, symmetric positive definite factors and inverses
through LAPACK ``potrf``/``potri``, the triangle test, and ``diag``, ``kron``
and ``cross``, which Numba lacks or types differently.  Each overload is
keyed on the function object :mod:`runtime.linalg` re-exports.  Guarantees:
the values the Python versions give, in the operands' float dtype.
"""

import numpy as np
from numba import types
from numba.extending import overload, register_jitable

from . import linalg
from ._nb_lapack import potrf, potri, trmm, trsm
from ._nbutil import compile_impl, dtype_src, np_dtype

# -- matrix functions: the same source as linalg_matrix.py, for 2-D matrices ----------
for _name in ("_c", "_matrix", "_eye_like", "_cols", "_sym_lower", "_from_lower",
              "_gaps", "solve", "solve_grad_a", "solve_grad_b", "solve_jvp_a", "inv",
              "inv_grad", "inv_jvp", "det", "det_grad", "det_jvp", "slogdet_sign",
              "slogdet_logabsdet", "slogdet_grad", "slogdet_jvp", "cholesky", "cholesky_grad",
              "cholesky_jvp", "eigh_w", "eigh_v", "eigh_w_grad", "eigh_v_grad", "eigh_w_jvp",
              "eigh_v_jvp", "_pinv_cutoff", "_pinv_truncation", "pinv", "pinv_grad", "pinv_jvp",
              "vdot", "kron_grad_a", "kron_grad_b", "_kron_blocks", "_logdet_factor", "inv_t"):
    register_jitable(getattr(linalg, _name))


# -- triangular solves (BLAS trsm) and symmetric positive definite matrices ------------

def _blas_dtype(*tys):
    """The float32/float64 dtype BLAS can take for these array types, else None."""
    if not all(isinstance(t, types.Array) for t in tys):
        return None
    ct = np.result_type(*[np_dtype(t) for t in tys])
    return ct if ct in (np.float32, np.float64) else None


def _as_src(name, ty, ct):
    """Source of a C-contiguous ``name`` of dtype ct (a copy only when needed)."""
    if np_dtype(ty) != ct:
        return f"np.ascontiguousarray({name}).astype({dtype_src(ct)})"
    return f"np.ascontiguousarray({name})"


@overload(linalg._triangle)
def _triangle(a):
    def impl(a):      # stops at the first entry that rules a triangle out
        n = a.shape[0]
        if n == 0 or a.shape[1] != n:
            return 0
        for i in range(n):
            if a[i, i] == 0:
                return 0
        lower = True
        for i in range(n - 1):
            for j in range(i + 1, n):
                if a[i, j] != 0:
                    lower = False
                    break
            if not lower:
                break
        if lower:
            return 1
        for i in range(1, n):
            for j in range(i):
                if a[i, j] != 0:
                    return 0
        return -1
    return impl


@overload(linalg.lin_solve)
def _lin_solve(a, b):
    ct = _blas_dtype(a, b)
    if ct is None or a.ndim != 2 or b.ndim not in (1, 2):
        return lambda a, b: np.linalg.solve(np.ascontiguousarray(a), np.ascontiguousarray(b))
    src = f"""
def impl(a, b):
    kind = _triangle(a)
    if kind == 0:
        return np.linalg.solve({_as_src('a', a, ct)}, {_as_src('b', b, ct)})
    if a.shape[0] != b.shape[0]:
        raise ValueError('solve: shapes do not match')
    x = np.empty(b.shape, {dtype_src(ct)})
    x[...] = b
    if a.strides[0] >= a.strides[1]:      # C order: pass a as it is
        trsm({_as_src('a', a, ct)}, x, kind > 0, False, True)
    else:                                 # F order: a.T is C-contiguous, other triangle
        trsm({_as_src('a.T', a, ct)}, x, kind < 0, True, True)
    return x
"""
    return compile_impl(src, {"_triangle": linalg._triangle, "trsm": trsm})


def _tri_solve_impl(lower, b, ct, left):
    return compile_impl(f"""
def impl(lower, b, trans):
    x = {_as_src('b', b, ct)}.copy()
    trsm({_as_src('lower', lower, ct)}, x, True, trans, {left})
    return x
""", {"trsm": trsm})


@overload(linalg.tri_solve_right)
def _tri_solve_right(lower, b, trans):
    ct = _blas_dtype(lower, b)
    if ct is None:
        return lambda lower, b, trans: linalg.tri_solve(lower, np.ascontiguousarray(b.T),
                                                        not trans).T
    return _tri_solve_impl(lower, b, ct, False)


@overload(linalg.spd_factor)
def _spd_factor(a):
    ct = _blas_dtype(a)
    if ct is None or np_dtype(a) != ct:
        return lambda a: (np.empty((0, 0), np.float64), False)

    def impl(a):
        n = a.shape[0]
        if n == 0 or a.shape[1] != n:
            return np.empty((0, 0), a.dtype), False
        for i in range(1, n):           # exactly symmetric? (stops at the first pair that is not)
            for j in range(i):
                if a[i, j] != a[j, i]:
                    return np.empty((0, 0), a.dtype), False
        c = np.ascontiguousarray(a).copy()
        if potrf(c) != 0:
            return np.empty((0, 0), a.dtype), False
        return c, True
    return impl


@overload(linalg.spd_inverse)
def _spd_inverse(c):
    def impl(c):
        x = np.ascontiguousarray(c).copy()
        if potri(x) != 0:
            raise np.linalg.LinAlgError("Singular matrix")
        n = x.shape[0]
        for i in range(n):              # mirror the lower triangle
            for j in range(i + 1, n):
                x[i, j] = x[j, i]
        return x
    return impl


@overload(linalg._lt_times)
def _lt_times(lower, g):
    ct = _blas_dtype(lower, g)
    if ct is None or g.ndim != 2:
        return lambda lower, g: lower.T @ g
    return compile_impl(f"""
def impl(lower, g):
    x = {_as_src('g', g, ct)}.copy()
    trmm({_as_src('lower', lower, ct)}, x, True, True, True)
    return x
""", {"trmm": trmm})


@overload(linalg._phi)
def _phi(x):
    def impl(x):        # the lower triangle with the diagonal halved, in one pass
        n, m = x.shape
        out = np.zeros((n, m), x.dtype)
        for i in range(n):
            for j in range(min(i, m)):
                out[i, j] = x[i, j]
            if i < m:
                out[i, i] = 0.5 * x[i, i]
        return out
    return impl


@overload(linalg._fold_lower)
def _fold_lower(s):
    def impl(s):
        n = s.shape[0]
        out = np.zeros((n, n), s.dtype)
        for i in range(n):
            for j in range(i):
                out[i, j] = s[i, j] + s[j, i]
            out[i, i] = s[i, i]
        return out
    return impl


@overload(linalg.tri_solve)
def _tri_solve(lower, b, trans):
    ct = _blas_dtype(lower, b)
    if ct is not None and b.ndim == 2:
        return _tri_solve_impl(lower, b, ct, True)

    def impl(lower, b, trans):      # substitution, one row of X at a time (BLAS gemv)
        n, k = b.shape
        x = np.zeros((n, k), dtype=lower.dtype)
        if trans:
            lt = np.ascontiguousarray(lower.T)
            for i in range(n - 1, -1, -1):
                x[i] = (b[i] - np.dot(lt[i, i + 1:], x[i + 1:])) / lower[i, i]
        else:
            low = np.ascontiguousarray(lower)
            for i in range(n):
                x[i] = (b[i] - np.dot(low[i, :i], x[:i])) / lower[i, i]
        return x
    return impl


@overload(linalg._as2d)
def _as2d(x):
    if x.ndim == 1:
        return lambda x: np.ascontiguousarray(x).reshape(1, x.shape[0])
    return lambda x: x


# trace, diagonal and their adjoints (any axes): see _nb_matfun.


@overload(linalg.diag)
def _diag(v, k=0):
    return lambda v, k=0: np.diag(np.ascontiguousarray(v), k)


@overload(linalg.kron)
def _kron(a, b):
    return lambda a, b: np.kron(np.ascontiguousarray(a), np.ascontiguousarray(b))


@overload(linalg.cross)
def _cross(a, b):
    return lambda a, b: np.cross(a, b)
