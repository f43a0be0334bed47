"""Numba overloads of the scans and permutations in scans.py.

Each overload generates, for its (rank, literal axis), loops over every
position off the axis that hand 1-D views along the axis to a small
``register_jitable`` kernel; axis None runs the kernel on the flattened
array.  Guarantees: NumPy's values and shapes for any layout.  Limits:
``axis`` must be a literal; ``take_along_axis`` wants ``indices`` and ``arr``
of equal sizes off the axis (no broadcasting) and refuses others at run time.
"""

import numpy as np
from numba import types
from numba.core.errors import TypingError
from numba.extending import overload, register_jitable

from . import scans
from ._nbutil import compile_impl, dtype_src, grad_dtype, is_absent, is_scalar, loops, np_dtype
from ._nbutil import static_axis as _static_axis


@register_jitable
def _k_cumsum(x, out):
    for k in range(x.shape[0]):
        out[k] = out[k - 1] + x[k] if k > 0 else x[k]


@register_jitable
def _k_rcumsum(g, out):
    n = g.shape[0]
    for k in range(n - 1, -1, -1):
        out[k] = out[k + 1] + g[k] if k + 1 < n else g[k]


@register_jitable
def _k_cumprod(x, out):
    for k in range(x.shape[0]):
        out[k] = out[k - 1] * x[k] if k > 0 else x[k]


@register_jitable
def _k_cumprod_grad(g, a, o, out):
    # s[k] = g[k] + a[k+1] s[k+1] into out, then b[k] = o[k-1] s[k]
    n = a.shape[0]
    for k in range(n - 1, -1, -1):
        out[k] = g[k] + a[k + 1] * out[k + 1] if k + 1 < n else g[k]
    for k in range(1, n):
        out[k] *= o[k - 1]


@register_jitable
def _k_cumprod_jvp(d, a, o, out):
    for k in range(a.shape[0]):
        out[k] = out[k - 1] * a[k] + o[k - 1] * d[k] if k > 0 else d[k]


@register_jitable
def _k_argsort(x, out):
    out[:] = np.argsort(x)


@register_jitable
def _k_take(x, i, out):
    n = x.shape[0]
    for k in range(i.shape[0]):
        j = i[k]
        out[k] = x[j + n if j < 0 else j]


@register_jitable
def _k_take_grad(g, i, out):
    n = out.shape[0]
    for k in range(i.shape[0]):
        j = i[k]
        out[j + n if j < 0 else j] += g[k]


_KERNELS = {"_k_cumsum": _k_cumsum, "_k_rcumsum": _k_rcumsum, "_k_cumprod": _k_cumprod,
            "_k_cumprod_grad": _k_cumprod_grad, "_k_cumprod_jvp": _k_cumprod_jvp,
            "_k_argsort": _k_argsort, "_k_take": _k_take, "_k_take_grad": _k_take_grad}


def _axis(axis, x, fname):
    """None, or the literal axis normalised for array type ``x``."""
    if is_absent(axis):
        return None
    if not isinstance(x, types.Array) or x.ndim == 0:
        raise TypingError(f"s2s_ad.runtime.{fname}: an axis needs an array of rank >= 1")
    return _static_axis(axis, x.ndim, fname)


def _flat(name, ty):
    """Source of ``name`` as a 1-D array (the flattened array of axis None)."""
    if is_scalar(ty):
        return f"np.full(1, {name})"
    return f"np.ascontiguousarray({name}).reshape(-1)"


def _impl(sig, kernel, ins, ndim, ax, ref, dt, result="res"):
    """``impl(sig)`` running ``kernel(*views of ins, view of res)`` on every line
    along ``ax`` of ``ref`` (``ax`` None: ``ins`` are 1-D, made by the caller)."""
    lines = [f"def impl({sig}):"]
    if ax is None:
        lines += [f"    res = np.empty({ins[-1]}.shape, {dt})",
                  f"    {kernel}({', '.join(ins)}, res)"]
    else:
        names = [f"i{d}" for d in range(ndim) if d != ax]
        sel = ", ".join(":" if d == ax else f"i{d}" for d in range(ndim))
        bounds = [f"{ref}.shape[{d}]" for d in range(ndim) if d != ax]
        lines.append(f"    res = np.empty({ref}.shape, {dt})")
        call = f"{kernel}({', '.join(f'{x}[{sel}]' for x in ins)}, res[{sel}])"
        lines += loops(names, bounds, [call])
    lines.append(f"    return {result}")
    return "\n".join(lines)


def _flattened(sig, kernel, pairs, dt, result):
    """``impl`` for axis None: each (name, type) flattened, then one kernel call."""
    src = _impl(sig, kernel, [n.upper() for n, _ in pairs], 1, None, None, dt, result)
    head, rest = src.split("\n", 1)
    prep = "".join(f"    {n.upper()} = {_flat(n, t)}\n" for n, t in pairs)
    return compile_impl(head + "\n" + prep + rest, _KERNELS)


def _scan_dtype(kind, ty):
    return getattr(np, kind)(np.ones(1, np_dtype(ty))).dtype


def _shaped_like(a):
    """Source of the flat result ``res`` with the shape of ``a`` (axis None)."""
    return "res[0]" if is_scalar(a) else "res.reshape(a.shape)"


def _scan(kind, a, axis):
    ax = _axis(axis, a, kind)
    dt = dtype_src(_scan_dtype(kind, a))
    if ax is None:
        return _flattened("a, axis=None", f"_k_{kind}", [("a", a)], dt, "res")
    return compile_impl(_impl("a, axis=None", f"_k_{kind}", ["a"], a.ndim, ax, "a", dt),
                        _KERNELS)


@overload(scans.cumsum, prefer_literal=True)
def _cumsum(a, axis=None):
    return _scan("cumsum", a, axis)


@overload(scans.cumprod, prefer_literal=True)
def _cumprod(a, axis=None):
    return _scan("cumprod", a, axis)


@overload(scans.cumsum_grad, prefer_literal=True)
def _cumsum_grad(g, a, axis=None):
    ax = _axis(axis, a, "cumsum_grad")
    dt = dtype_src(grad_dtype(a))
    if ax is None:
        return _flattened("g, a, axis=None", "_k_rcumsum", [("g", g)], dt, _shaped_like(a))
    return compile_impl(_impl("g, a, axis=None", "_k_rcumsum", ["g"], a.ndim, ax, "a", dt),
                        _KERNELS)


@overload(scans.cumprod_grad, prefer_literal=True)
def _cumprod_grad(g, a, out, axis=None):
    ax = _axis(axis, a, "cumprod_grad")
    dt = dtype_src(grad_dtype(a))
    sig = "g, a, out, axis=None"
    if ax is None:
        return _flattened(sig, "_k_cumprod_grad", [("g", g), ("a", a), ("out", out)], dt,
                          _shaped_like(a))
    return compile_impl(_impl(sig, "_k_cumprod_grad", ["g", "a", "out"], a.ndim, ax, "a", dt),
                        _KERNELS)


@overload(scans.cumprod_jvp, prefer_literal=True)
def _cumprod_jvp(da, a, out, axis=None):
    ax = _axis(axis, a, "cumprod_jvp")
    dt = dtype_src(grad_dtype(a))
    sig = "da, a, out, axis=None"
    if ax is None:
        return _flattened(sig, "_k_cumprod_jvp", [("da", da), ("a", a), ("out", out)], dt,
                          "res")
    return compile_impl(_impl(sig, "_k_cumprod_jvp", ["da", "a", "out"], a.ndim, ax, "a", dt),
                        _KERNELS)


@overload(scans.argsort, prefer_literal=True)
def _argsort(a, axis=-1):
    ax = _axis(axis, a, "argsort")
    if ax is None:
        return _flattened("a, axis=-1", "_k_argsort", [("a", a)], "np.intp", "res")
    return compile_impl(_impl("a, axis=-1", "_k_argsort", ["a"], a.ndim, ax, "a", "np.intp"),
                        _KERNELS)


def _check_sizes(ndim, ax):
    """Source refusing arrays of different sizes off the axis."""
    conds = " or ".join(f"arr.shape[{d}] != indices.shape[{d}]" for d in range(ndim) if d != ax)
    if not conds:
        return []
    return [f"    if {conds}:",
            "        raise ValueError('take_along_axis in compiled code needs indices and arr "
            "of the same shape off the axis')"]


@overload(scans.take_along_axis, prefer_literal=True)
def _take_along_axis(arr, indices, axis):
    ax = _axis(axis, arr, "take_along_axis")
    dt = dtype_src(np_dtype(arr))
    sig = "arr, indices, axis"
    if ax is None:
        src = (f"def impl({sig}):\n    A = {_flat('arr', arr)}\n"
               f"    res = np.empty(indices.shape, {dt})\n    _k_take(A, indices, res)\n"
               "    return res")
        return compile_impl(src, _KERNELS)
    src = _impl(sig, "_k_take", ["arr", "indices"], arr.ndim, ax, "indices", dt)
    head, rest = src.split("\n", 1)
    return compile_impl("\n".join([head] + _check_sizes(arr.ndim, ax)) + "\n" + rest, _KERNELS)


@overload(scans.take_along_axis_grad, prefer_literal=True)
def _take_along_axis_grad(g, arr, indices, axis):
    ax = _axis(axis, arr, "take_along_axis_grad")
    dt = dtype_src(grad_dtype(arr))
    sig = "g, arr, indices, axis"
    if ax is None:
        src = (f"def impl({sig}):\n    res = np.zeros({'1' if is_scalar(arr) else 'arr.size'}, "
               f"{dt})\n    _k_take_grad(g, indices, res)\n"
               f"    return {'res[0]' if is_scalar(arr) else 'res.reshape(arr.shape)'}")
        return compile_impl(src, _KERNELS)
    names = [f"i{d}" for d in range(arr.ndim) if d != ax]
    sel = ", ".join(":" if d == ax else f"i{d}" for d in range(arr.ndim))
    bounds = [f"arr.shape[{d}]" for d in range(arr.ndim) if d != ax]
    lines = [f"def impl({sig}):"] + _check_sizes(arr.ndim, ax)
    lines.append(f"    res = np.zeros(arr.shape, {dt})")
    lines += loops(names, bounds, [f"_k_take_grad(g[{sel}], indices[{sel}], res[{sel}])"])
    lines.append("    return res")
    return compile_impl("\n".join(lines), _KERNELS)
