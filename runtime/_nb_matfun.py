"""Numba versions of the matrix functions Numba cannot take from linalg.py as they are.

svd, qr, lstsq, matrix_power and cross share linalg.py's source
(``register_jitable``).  Here are the ones that need another form in
Numba: ``lstsq`` (Numba's has no ``rcond=None``), ``diagonal``/``trace``
and their adjoints for any axes (Numba has no ``np.diagonal``), and
``norm`` with its adjoint for every order, ``axis`` and ``keepdims``
(Numba's ``np.linalg.norm`` has no ``axis``).  The reduced axes are moved
last at run time (a tuple ``axis`` is not a constant in Numba), so each
norm is computed over the rows of a 2-D (vector norms) or the matrices of a
3-D (matrix norms) array.  A numeric ``ord`` is read at run time; strings,
``None``, ``axis`` ranks and ``keepdims`` are specialised on.  Guarantees:
the values NumPy and the Python helpers give, in x's float dtype.
"""
import numpy as np
from numba import types
from numba.core.errors import TypingError
from numba.extending import overload, register_jitable

from . import linalg
from ._nbutil import compile_impl, dtype_src, grad_dtype, is_absent, np_dtype, static_bool

for _name in ("_svd_check", "svd_u", "svd_s", "svd_vh", "_svd_gaps", "svd_s_grad",
              "svd_u_grad", "svd_vh_grad", "_svd_jvp", "svd_s_jvp", "svd_u_jvp", "svd_vh_jvp",
              "qr_q", "qr_r", "_copyltu", "_qr_check", "qr_grad", "qr_q_grad", "qr_r_grad",
              "_qr_jvp", "qr_q_jvp", "qr_r_jvp", "lstsq_x", "lstsq_residuals", "lstsq_rank",
              "lstsq_sv", "lstsq_grad_a", "lstsq_grad_b", "lstsq_jvp_a", "lstsq_jvp_b",
              "_power_base", "_powers", "matrix_power_grad", "matrix_power_jvp",
              "cross_grad_a", "cross_grad_b"):
    register_jitable(getattr(linalg, _name))


@overload(linalg.lstsq)
def _lstsq(a, b, rcond=None):
    if is_absent(rcond):
        def impl(a, b, rcond=None):     # NumPy's default: machine precision * max(m, n)
            eps = np.finfo(a.dtype).eps * max(a.shape[0], a.shape[1])
            return np.linalg.lstsq(np.ascontiguousarray(a), np.ascontiguousarray(b), eps)
        return impl
    return lambda a, b, rcond=None: np.linalg.lstsq(np.ascontiguousarray(a),
                                                    np.ascontiguousarray(b), rcond)


@overload(linalg.matrix_power)
def _matrix_power(a, n):
    def impl(a, n):              # by squaring (Numba's np.linalg version is Optional-typed)
        linalg._matrix(a)
        b = linalg._power_base(a, n)
        out = linalg._eye_like(a.shape[0], b)
        m = abs(n)
        while m:
            if m & 1:
                out = out @ b
            m >>= 1
            if m:
                b = b @ b
        return out
    return impl


# -- diagonal and trace, any two axes ----------------------------------------------

@register_jitable
def _end_perm(ndim, axis1, axis2):
    """The axes order that moves axis1, axis2 last (the others keep their order)."""
    a1, a2 = axis1 % ndim, axis2 % ndim
    if a1 == a2:
        raise ValueError("s2s_ad: axis1 and axis2 cannot be the same")
    p = np.empty(ndim, np.int64)
    k = 0
    for d in range(ndim):
        if d != a1 and d != a2:
            p[k] = d
            k += 1
    p[ndim - 2] = a1
    p[ndim - 1] = a2
    return p


@register_jitable
def _diag_span(n, m, offset):
    """(length, first row, first column) of the diagonal at ``offset``."""
    return max(0, min(n + min(offset, 0), m - max(offset, 0))), -min(offset, 0), max(offset, 0)


def _tup(name, n):
    return "(" + "".join(f"{name}[{k}], " for k in range(n)) + ")"


def _moved_lines(nd, src="a"):
    """Source: X = src with axis1, axis2 moved last, as (M, n, m); lead = the rest's shape."""
    return [f"    p = _end_perm({nd}, axis1, axis2)",
            f"    x = np.ascontiguousarray(np.transpose({src}, {_tup('p', nd)}))",
            f"    lead = x.shape[:{nd - 2}]",
            f"    n, m = x.shape[{nd - 2}], x.shape[{nd - 1}]",
            "    X = x.reshape((x.size // max(n * m, 1), n, m))",
            "    size, r0, c0 = _diag_span(n, m, offset)"]


_ENV = {"_end_perm": _end_perm, "_diag_span": _diag_span}


def _need_matrix(fname, a):
    if not isinstance(a, types.Array) or a.ndim < 2:
        raise TypingError(f"s2s_ad.runtime.{fname}: needs an array of at least 2 dimensions")


@overload(linalg.diagonal)
def _diagonal(a, offset=0, axis1=0, axis2=1):
    _need_matrix("diagonal", a)
    src = ["def impl(a, offset=0, axis1=0, axis2=1):"] + _moved_lines(a.ndim) + [
        "    out = np.empty((X.shape[0], size), a.dtype)",
        "    for i in range(X.shape[0]):",
        "        for k in range(size):",
        "            out[i, k] = X[i, r0 + k, c0 + k]",
        "    return out.reshape(lead + (size,))"]
    return compile_impl("\n".join(src), _ENV)


def _rows_src(g, rows):
    """Source of the cotangent g as a 2-D C array with ``rows`` rows."""
    if isinstance(g, types.Array) and g.ndim > 0:
        return f"np.ascontiguousarray(g).reshape(({rows}, -1))"
    return f"np.full(({rows}, 1), g)"


def _grad_from_diagonal(g, a, fill):
    """Impl of a cotangent that is zero off the diagonal; ``fill`` sets
    ``out[i, r0 + k, c0 + k]`` from the cotangent rows ``G``."""
    nd = a.ndim
    dt = dtype_src(np.result_type(grad_dtype(a), grad_dtype(g)))
    src = ["def impl(g, a, offset=0, axis1=0, axis2=1):"] + _moved_lines(nd) + [
        f"    out = np.zeros(X.shape, {dt})",
        f"    G = {_rows_src(g, 'X.shape[0]')}",
        "    for i in range(X.shape[0]):",
        "        for k in range(size):",
        f"            out[i, r0 + k, c0 + k] = {fill}",
        "    inv = np.argsort(p)",
        f"    return np.ascontiguousarray(np.transpose(out.reshape(x.shape), {_tup('inv', nd)}))"]
    return compile_impl("\n".join(src), _ENV)


@overload(linalg.diagonal_grad)
def _diagonal_grad(g, a, offset=0, axis1=0, axis2=1):
    _need_matrix("diagonal_grad", a)
    return _grad_from_diagonal(g, a, "G[i, k]")


@overload(linalg.trace_grad)
def _trace_grad(g, a, offset=0, axis1=0, axis2=1):
    _need_matrix("trace_grad", a)
    return _grad_from_diagonal(g, a, "G[i, 0]")


@overload(linalg.trace)
def _trace(a, offset=0, axis1=0, axis2=1):
    _need_matrix("trace", a)
    if a.ndim == 2:
        return lambda a, offset=0, axis1=0, axis2=1: np.sum(
            linalg.diagonal(a, offset, axis1, axis2))
    return lambda a, offset=0, axis1=0, axis2=1: np.sum(
        linalg.diagonal(a, offset, axis1, axis2), axis=-1)


@overload(linalg.diag_grad)
def _diag_grad(g, v, k=0):
    if v.ndim == 1:       # v was put on a diagonal: read it back
        return lambda g, v, k=0: linalg.diagonal(g, k, 0, 1)
    return lambda g, v, k=0: linalg.diagonal_grad(g, v, k, 0, 1)


# -- norms ----------------------------------------------------------------------------

@register_jitable
def _vnorms(x, p):
    """The p-norm of each row of the 2-D x (p = inf, -inf, 0, 1, 2 or any)."""
    out = np.empty(x.shape[0], x.dtype)
    for i in range(x.shape[0]):
        r = np.abs(x[i])
        if p == np.inf:
            out[i] = np.max(r) if r.size else 0.0
        elif p == -np.inf:
            out[i] = np.min(r)
        elif p == 0:
            out[i] = np.sum(r != 0)
        elif p == 1:
            out[i] = np.sum(r)
        elif p == 2:
            out[i] = np.sqrt(np.sum(r * r))
        else:
            out[i] = np.sum(r ** p) ** (1.0 / p)
    return out


@register_jitable
def _vnorms_grad(g, x, out, p):
    """Cotangent of the row norms ``out`` of x (ties among maxima share equally)."""
    res = np.zeros(x.shape, x.dtype)
    for i in range(x.shape[0]):
        # conj and .real change nothing for real x; for complex x they give JAX's
        # cotangent, Re(g) times the derivative in conj(x) (see linalg.norm_grad)
        xc = np.conj(x[i])
        r, s, gi, oi = np.abs(xc), np.sign(xc), g[i].real, out[i]
        if p == np.inf or p == -np.inf:
            mask = r == oi
            res[i] = gi * s * mask / np.sum(mask)
        elif p == 0:
            pass
        elif p == 1:
            res[i] = gi * s
        elif p == 2:
            res[i] = gi * xc / oi
        else:
            res[i] = gi * s * (r / oi) ** (p - 1)
    return res


@register_jitable
def _edge_sums(m, p):
    """Sums of |m| over rows (p = +-1: column sums) or over columns (p = +-inf)."""
    return np.sum(np.abs(m), axis=0) if abs(p) == 1 else np.sum(np.abs(m), axis=1)


@register_jitable
def _mnorms(x, p, kind):
    """The matrix norm of each x[i] (kind 1: 'fro', 2: 'nuc', 0: the number p)."""
    out = np.empty(x.shape[0], x.dtype)
    for i in range(x.shape[0]):
        m = np.ascontiguousarray(x[i])
        if kind == 1:
            out[i] = np.sqrt(np.sum(m * m))
        elif kind == 2 or p == 2 or p == -2:
            s = np.linalg.svd(m, full_matrices=False)[1]
            out[i] = np.sum(s) if kind == 2 else (s[0] if p == 2 else s[-1])
        elif abs(p) == 1 or abs(p) == np.inf:
            sums = _edge_sums(m, p)
            out[i] = np.max(sums) if p > 0 else np.min(sums)
        else:
            raise ValueError("Invalid norm order for matrices.")
    return out


@register_jitable
def _mnorms_grad(g, x, out, p, kind):
    res = np.zeros(x.shape, x.dtype)
    for i in range(x.shape[0]):
        m = np.ascontiguousarray(x[i])
        if kind == 1:
            res[i] = g[i] * m / out[i]
        elif kind == 2 or p == 2 or p == -2:
            u, s, vh = np.linalg.svd(m, full_matrices=False)
            if kind == 2:
                res[i] = g[i] * (u @ vh)
            else:
                k = 0 if p == 2 else s.shape[0] - 1
                res[i] = g[i] * np.outer(u[:, k], vh[k])
        else:
            sums = _edge_sums(m, p)
            best = np.max(sums) if p > 0 else np.min(sums)
            picked = (sums == best) / np.sum(sums == best)
            if abs(p) == 1:
                res[i] = g[i] * np.sign(m) * picked.reshape(1, -1)
            else:
                res[i] = g[i] * np.sign(m) * picked.reshape(-1, 1)
    return res


def _norm_plan(x, ord, axis, keepdims, fname):
    """Typing-time facts: (number of reduced axes or None for all, matrix?, p source, kind)."""
    if not isinstance(x, types.Array):
        raise TypingError(f"s2s_ad.runtime.{fname} in Numba needs an array")
    nd = x.ndim
    if is_absent(axis):
        count = None
    elif isinstance(axis, (types.Integer, int)):
        count = 1
    elif isinstance(axis, types.BaseTuple) and len(axis) in (1, 2):
        count = len(axis)
    else:
        raise TypingError(f"s2s_ad.runtime.{fname}: axis must be None, an int or a pair")
    keep = static_bool(keepdims, fname)
    ordv = ord.value if isinstance(ord, types.Omitted) else ord
    if isinstance(ordv, types.StringLiteral):
        ordv = ordv.literal_value
    elif isinstance(ordv, types.IntegerLiteral):
        ordv = ordv.literal_value
    is_none = is_absent(ordv)
    matrix = count == 2 or (count is None and nd == 2 and not is_none)
    if count is None and nd > 2 and not is_none:
        raise TypingError("np.linalg.norm: improper number of dimensions to norm")
    if isinstance(ordv, str):
        if not matrix or ordv not in ("fro", "nuc"):
            raise TypingError(f"np.linalg.norm: invalid norm order {ordv!r}")
        return count, matrix, "2.0", 1 if ordv == "fro" else 2, keep
    if is_none:
        return count, matrix, "2.0", 1, keep
    if isinstance(ordv, (int, float)):
        return count, matrix, f"{float(ordv)!r}", 0, keep
    if isinstance(ordv, (types.Integer, types.Float)):
        return count, matrix, "float(ord)", 0, keep
    raise TypingError(f"np.linalg.norm: invalid norm order type {ord}")


@register_jitable
def _last_perm(ndim, axis):
    """The axes order that moves ``axis`` last (the others keep their order)."""
    a = axis % ndim
    p = np.empty(ndim, np.int64)
    k = 0
    for d in range(ndim):
        if d != a:
            p[k] = d
            k += 1
    p[ndim - 1] = a
    return p


def _norm_head(nd, count, matrix, axis):
    """Source: the axes order p moving the reduced axes last, X the rows/matrices."""
    if count is None:
        return ["    X = np.ascontiguousarray(x).reshape((1, x.size))" if not matrix else
                "    X = np.ascontiguousarray(x).reshape((1, x.shape[0], x.shape[1]))"]
    lines = []
    if count == 1:
        one = "axis" if isinstance(axis, (types.Integer, int)) else "axis[0]"
        lines.append(f"    p = _last_perm({nd}, {one})")
    else:
        lines.append(f"    p = _end_perm({nd}, axis[0], axis[1])")
    lines.append(f"    xm = np.ascontiguousarray(np.transpose(x, {_tup('p', nd)}))")
    if matrix:
        lines.append(f"    X = xm.reshape((-1, xm.shape[{nd - 2}], xm.shape[{nd - 1}]))")
    else:
        lines.append(f"    X = xm.reshape((-1, xm.shape[{nd - 1}]))")
    return lines


def _out_lines(nd, count, keep):
    """Source returning the norms ``r`` in np.linalg.norm's output shape."""
    if count is None:
        return [f"    return r.reshape({(1,) * nd})" if keep else "    return r[0]"]
    lead = nd - count
    if not keep:
        return [f"    return r.reshape(xm.shape[:{lead}])" if lead else "    return r[0]"]
    return ["    shape = np.ones(%d, np.int64)" % nd,
            f"    for d in range({lead}):",
            "        shape[p[d]] = xm.shape[d]",
            f"    return r.reshape({_tup('shape', nd)})"]


@overload(linalg.norm, prefer_literal=True)
def _norm(x, ord=None, axis=None, keepdims=False):
    count, matrix, p, kind, keep = _norm_plan(x, ord, axis, keepdims, "norm")
    nd = x.ndim
    call = f"_mnorms(X, {p}, {kind})" if matrix else f"_vnorms(X, {p})"
    src = (["def impl(x, ord=None, axis=None, keepdims=False):"]
           + _norm_head(nd, count, matrix, axis) + [f"    r = {call}"]
           + _out_lines(nd, count, keep))
    return compile_impl("\n".join(src), {"_last_perm": _last_perm, "_end_perm": _end_perm,
                                         "_vnorms": _vnorms, "_mnorms": _mnorms})


@overload(linalg.norm_grad, prefer_literal=True)
def _norm_grad(g, x, out, ord=None, axis=None, keepdims=False):
    count, matrix, p, kind, keep = _norm_plan(x, ord, axis, keepdims, "norm_grad")
    if matrix and kind != 1 and np_dtype(x).kind == "c":
        raise TypingError("np.linalg.norm of a complex matrix has a derivative rule in s2s_ad "
                          "for ord=None and 'fro' only")
    nd = x.ndim
    call = f"_mnorms_grad(G, X, O, {p}, {kind})" if matrix else f"_vnorms_grad(G, X, O, {p})"
    src = (["def impl(g, x, out, ord=None, axis=None, keepdims=False):"]
           + _norm_head(nd, count, matrix, axis)
           + [f"    G = {_flat_src('g', g)}", f"    O = {_flat_src('out', out)}",
              f"    r = {call}"])
    if count is None:
        src.append("    return r.reshape(x.shape)")
    else:
        src += ["    inv = np.argsort(p)",
                f"    return np.ascontiguousarray(np.transpose(r.reshape(xm.shape), "
                f"{_tup('inv', nd)}))"]
    return compile_impl("\n".join(src), {"_last_perm": _last_perm, "_end_perm": _end_perm,
                                         "_vnorms_grad": _vnorms_grad,
                                         "_mnorms_grad": _mnorms_grad})


def _flat_src(name, ty):
    """Source of ``name`` (the norms or their cotangent) as one value per row of X."""
    if isinstance(ty, types.Array) and ty.ndim > 0:
        return f"np.ascontiguousarray({name}).astype(X.dtype).reshape(X.shape[0])"
    return f"np.full(X.shape[0], {name}, X.dtype)"
