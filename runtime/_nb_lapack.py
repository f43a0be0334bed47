"""BLAS/LAPACK routines Numba does not expose: triangular solves and products
(``trsm``, ``trmm``), and the Cholesky factorisation and inverse (``potrf``,
``potri``) reporting failure instead of raising.

The routines are SciPy's (``scipy.linalg.cython_blas``/``cython_lapack``, the
library NumPy's and Numba's linear algebra already use), registered with LLVM
under ``s2s_ad_<name>`` and called as external functions by symbol name, so
compiled code that uses them stays in Numba's disk cache (a ctypes pointer
would not).  Every helper takes C-contiguous float32/float64 arrays and
works in place; the Fortran (column-major) view of a C array is its transpose,
which the helpers account for.
"""
import ctypes

import llvmlite.binding as ll
import numpy as np
from numba import types
from numba.core.errors import TypingError
from numba.extending import overload, register_jitable
from scipy.linalg import cython_blas, cython_lapack


def _address(module, name):
    capsule = module.__pyx_capi__[name]
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return get_pointer(capsule, get_name(capsule))


def _external(module, name, nargs):
    symbol = f"s2s_ad_{name}"
    ll.add_symbol(symbol, _address(module, name))
    return types.ExternalFunction(symbol, types.void(*([types.voidptr] * nargs)))


_dtrsm = _external(cython_blas, "dtrsm", 11)
_strsm = _external(cython_blas, "strsm", 11)
_dtrmm = _external(cython_blas, "dtrmm", 11)
_strmm = _external(cython_blas, "strmm", 11)
_dpotrf = _external(cython_lapack, "dpotrf", 5)
_spotrf = _external(cython_lapack, "spotrf", 5)
_dpotri = _external(cython_lapack, "dpotri", 5)
_spotri = _external(cython_lapack, "spotri", 5)


def trsm(a, b, lower, trans, left):
    """Solve op(A) X = B (``left``) or X op(A) = B in place of B; op(A) is A or A.T
    (``trans``), A square and triangular (``lower`` or upper), both C-contiguous."""
    raise NotImplementedError("s2s_ad.runtime._nb_lapack.trsm runs in Numba only")


def trmm(a, b, lower, trans, left):
    """B := op(A) B (``left``) or B op(A) in place, A triangular (as in ``trsm``)."""
    raise NotImplementedError("s2s_ad.runtime._nb_lapack.trmm runs in Numba only")


def potrf(a):
    """Overwrite the lower triangle of C-contiguous symmetric ``a`` with its Cholesky
    factor; returns LAPACK's info (0: positive definite)."""
    raise NotImplementedError("s2s_ad.runtime._nb_lapack.potrf runs in Numba only")


def potri(a):
    """From the Cholesky factor in the lower triangle of ``a``, overwrite that
    triangle with the lower triangle of the inverse; returns LAPACK's info."""
    raise NotImplementedError("s2s_ad.runtime._nb_lapack.potri runs in Numba only")


def _kind(*tys):
    for ty in tys:
        if not isinstance(ty, types.Array) or ty.layout != "C":
            raise TypingError(f"s2s_ad.runtime._nb_lapack: C-contiguous arrays expected, got {ty}")
    dts = {ty.dtype for ty in tys}
    if dts == {types.float64}:
        return "d"
    if dts == {types.float32}:
        return "s"
    raise TypingError(f"s2s_ad.runtime._nb_lapack: float32 or float64 arrays of one dtype "
                      f"expected, got {', '.join(map(str, tys))}")


@register_jitable
def _chars(*codes):
    out = np.empty(len(codes), np.int8)
    for k in range(len(codes)):
        out[k] = codes[k]
    return out


def _triangular_impl(fname, routines):
    """The impl of trsm/trmm (same arguments, same Fortran view)."""
    def generic(a, b, lower, trans, left):
        fn = routines[_kind(a, b)]
        return _triangular_call(fn, a.dtype)
    return generic


def _triangular_call(fn, dt):
    def impl(a, b, lower, trans, left):
        n = a.shape[0]
        if a.shape[1] != n:
            raise ValueError("trsm/trmm: the triangular matrix must be square")
        # Fortran sees A.T and B.T: X op(A) = B is op(A).T X.T = B.T (side 'L').
        rows, cols = (b.shape[1], b.shape[0]) if b.ndim == 2 else (1, b.shape[0])
        if b.ndim == 1 and not left:
            raise ValueError("trsm/trmm: a vector must be multiplied from the left")
        if (cols if left else rows) != n:
            raise ValueError("trsm/trmm: shapes do not match")
        if rows == 0 or cols == 0:
            return
        # side, uplo (A.T is upper where A is lower), transa, diag
        ch = _chars(82 if left else 76, 85 if lower else 76, 84 if trans else 78, 78)
        ints = np.array([rows, cols, n, max(rows, 1)], np.int32)
        alpha = np.ones(1, dt)
        fn(ch[0:].ctypes, ch[1:].ctypes, ch[2:].ctypes, ch[3:].ctypes, ints[0:].ctypes,
           ints[1:].ctypes, alpha.ctypes, a.ctypes, ints[2:].ctypes, b.ctypes, ints[3:].ctypes)
    return impl


overload(trsm)(_triangular_impl("trsm", {"d": _dtrsm, "s": _strsm}))
overload(trmm)(_triangular_impl("trmm", {"d": _dtrmm, "s": _strmm}))


def _factor_impl(fname, routines):
    # A constant message: Numba compiles an f-string in jitted code as string
    # code (about a second of the first compile, docs/compile_time.md §4).
    not_square = f"{fname}: the matrix must be square"

    def generic(a):
        fn = routines[_kind(a)]

        def impl(a):
            n = a.shape[0]
            if a.shape[1] != n:
                raise ValueError(not_square)
            if n == 0:
                return 0
            # Fortran's upper triangle of A.T is the lower triangle of A.
            ch = _chars(85)
            ints = np.array([n, n, 0], np.int32)
            fn(ch.ctypes, ints[0:].ctypes, a.ctypes, ints[1:].ctypes, ints[2:].ctypes)
            return ints[2]
        return impl
    return generic


overload(potrf)(_factor_impl("potrf", {"d": _dpotrf, "s": _spotrf}))
overload(potri)(_factor_impl("potri", {"d": _dpotri, "s": _spotri}))
