"""Numba overloads of the reduction adjoints (see reductions.py).

Like `_nb_reductions`, each call compiles a loop nest generated for its
(rank of a, literal axis, literal keepdims, rank of g).  Guarantees: the
result is a new C-contiguous array of a's shape in a's float dtype (a
scalar for scalar a) and is computed with the same operation order and
dtypes as the NumPy version, so both backends agree to the last bit
except for NumPy's pairwise summation elsewhere.
"""

import numpy as np
from numba import types
from numba.core.errors import TypingError
from numba.extending import overload
from numba.np.numpy_support import as_dtype

from . import _nb_kernels as kernels
from . import reductions
from ._nbutil import (
    compile_impl,
    dtype_src,
    grad_dtype,
    index,
    is_scalar,
    loops,
    shape_tuple,
    static_axes,
    static_bool,
)


def _ref(name, ty, names, axes, keepdims, fname):
    """Source reading reduction-output-shaped `name` at a's index `names`.

    `name` may be a scalar, a 0-d array (broadcast) or an array of the
    reduction's output rank; reduced axes are dropped (or read at 0 when
    keepdims).
    """
    if is_scalar(ty):
        return name
    if not isinstance(ty, types.Array):
        raise TypingError(f"s2s_ad.runtime.{fname}: unsupported {ty}")
    if keepdims:
        idx = ["0" if d in axes else n for d, n in enumerate(names)]
    else:
        idx = [n for d, n in enumerate(names) if d not in axes]
    if ty.ndim == 0:
        return f"{name}[()]"
    if ty.ndim != len(idx):
        raise TypingError(
            f"s2s_ad.runtime.{fname}: {name} has rank {ty.ndim}, the "
            f"reduction's output has rank {len(idx)}")
    return f"{name}[{index(idx)}]"


def _setup(g, a, axis, keepdims, fname):
    """Typing-time facts shared by the adjoints of one call."""
    if not isinstance(a, types.Array):
        raise TypingError(f"s2s_ad.runtime.{fname}: unsupported {a}")
    axes = static_axes(axis, a.ndim, fname)
    keep = static_bool(keepdims, fname)
    names = [f"i{d}" for d in range(a.ndim)]
    gref = _ref("g", g, names, axes, keep, fname)
    return axes, keep, names, gref, dtype_src(grad_dtype(a))


def _scalar_impl(g, a, params):
    """Impl for a scalar primal `a`: d reduce(a) / da is 1, so return g."""
    dt = dtype_src(grad_dtype(a))
    if is_scalar(g):
        return compile_impl(f"def impl({params}):\n    return {dt}(g)")
    if g.ndim != 0:
        raise TypingError("s2s_ad.runtime: scalar primal needs a scalar g")
    return compile_impl(f"def impl({params}):\n    return {dt}(g[()])")


def _bounds(names):
    """Loop bounds for index names "i<d>": a.shape[d]."""
    return [f"a.shape[{n[1:]}]" for n in names]


def _broadcast_src(g, a, axis, keepdims, fname, mean, kept=False):
    """Source of sum_grad (mean=False) or mean_grad (mean=True); with
    ``kept``, of sum_grad_kept / mean_grad_kept (the reduced axes length 1)."""
    axes, _, names, gref, dt = _setup(g, a, axis, keepdims, fname)
    bounds = ["1" if kept and d in axes else b for d, b in enumerate(_bounds(names))]
    shape = shape_tuple(bounds) if kept else "a.shape"
    lines = ["def impl(g, a, axis=None, keepdims=False):",
             f"    res = np.empty({shape}, {dt})"]
    value = f"{dt}({gref})"
    if mean:
        count = " * ".join(f"a.shape[{d}]" for d in axes) or "1"
        lines.append(f"    scale = {dt}({count})")
        value += " / scale"
    lines += loops(names, bounds, [f"res[{index(names)}] = {value}"])
    lines.append("    return res")
    return "\n".join(lines)


def _register(fn, mean, kept=False):
    """The Numba overload of one of sum_grad, mean_grad and their _kept forms."""
    def typer(g, a, axis=None, keepdims=False):
        if is_scalar(a):
            return _scalar_impl(g, a, "g, a, axis=None, keepdims=False")
        return compile_impl(
            _broadcast_src(g, a, axis, keepdims, fn.__name__, mean=mean, kept=kept))
    overload(fn, prefer_literal=True)(typer)


_register(reductions.sum_grad, mean=False)
_register(reductions.mean_grad, mean=True)
_register(reductions.sum_grad_kept, mean=False, kept=True)
_register(reductions.mean_grad_kept, mean=True, kept=True)


@overload(reductions.broadcast_total)
def _broadcast_total(g, a):
    if is_scalar(a):
        return _scalar_impl(g, a, "g, a")
    dt = dtype_src(grad_dtype(a))
    value = "g" if is_scalar(g) else "g[()]"
    return compile_impl(f"def impl(g, a):\n    return {dt}({value}) * {dt}(a.size)")


@overload(reductions.times_kept)
def _times_kept(g, p, temporary=False):
    if not (isinstance(g, types.Array) and isinstance(p, types.Array)
            and g.ndim == p.ndim and p.ndim in (1, 2)):
        return lambda g, p, temporary=False: g * p
    dt = dtype_src(np.result_type(as_dtype(g.dtype), as_dtype(p.dtype)))
    # p itself is scaled in place when it is the adjoint's own array of
    # the result's dtype.
    new = (f"p if temporary else np.empty(p.shape, {dt})" if g.dtype == p.dtype
           else f"np.empty(p.shape, {dt})")
    # Generated text, so a cached kernel (_nb_cached) around the cached
    # loops (_nb_kernels); any other broadcast is a loop too, not Numba's
    # broadcasting product, whose code every compile optimised again.
    if p.ndim == 1:
        return compile_impl(f"""def impl(g, p, temporary=False):
    if g.shape[0] != 1:
        out = np.empty({_extent(0)}, {dt})
        times_broadcast_1d(g, p, out)
        return out
    out = {new}
    s = g[0]
    for i in range(p.shape[0]):
        out[i] = s * p[i]
    return out
# times_kept""", _TIMES)
    return compile_impl(f"""def impl(g, p, temporary=False):
    n, m = p.shape
    rows = g.shape[1] == 1 and (g.shape[0] == n or g.shape[0] == 1)
    if not (rows or g.shape[0] == 1 and g.shape[1] == m):
        out = np.empty(({_extent(0)}, {_extent(1)}), {dt})
        times_broadcast(g, p, out)
        return out
    out = {new}
    if rows:
        times_rows(g, p, out)
    else:
        times_columns(g, p, out)
    return out
# times_kept""", _TIMES)


def _extent(d):
    """Source of the broadcast length of axis ``d`` of g and p (NumPy's rule;
    the same error where it fails)."""
    return f"_broadcast(g.shape[{d}], p.shape[{d}])"


_TIMES = {"times_broadcast": kernels.times_broadcast,
          "times_broadcast_1d": kernels.times_broadcast_1d,
          "times_rows": kernels.times_rows, "times_columns": kernels.times_columns,
          "_broadcast": kernels.broadcast_extent}


def _prod_grad_src(g, a, axis, keepdims):
    """Source of prod_grad: exclusive prefix times suffix products.

    For every output position the reduced elements are walked forward
    (storing the product of those before each) and then backward
    (multiplying in the product of those after it, and g), which is exact
    with zeros present and never divides.
    """
    axes, _, names, gref, dt = _setup(
        g, a, axis, keepdims, "prod_grad")
    kept = [n for d, n in enumerate(names) if d not in axes]
    red = [n for d, n in enumerate(names) if d in axes]
    at = f"[{index(names)}]"
    inner = ([f"acc = {dt}(1)"]
             + loops(red, _bounds(red), [f"res{at} = acc",
                                         f"acc *= {dt}(a{at})"], indent=0)
             + [f"acc = {dt}(1)"]
             + loops(red, _bounds(red), [f"res{at} = res{at} * acc * {gref}",
                                         f"acc *= {dt}(a{at})"],
                     indent=0, reverse=True))
    lines = ["def impl(g, a, axis=None, keepdims=False):",
             f"    res = np.empty(a.shape, {dt})"]
    lines += loops(kept, _bounds(kept), inner)
    lines.append("    return res")
    return "\n".join(lines)


@overload(reductions.prod_grad, prefer_literal=True)
def _prod_grad(g, a, axis=None, keepdims=False):
    if is_scalar(a):
        return _scalar_impl(g, a, "g, a, axis=None, keepdims=False")
    return compile_impl(_prod_grad_src(g, a, axis, keepdims))


def _minmax_grad_src(g, a, out, axis, keepdims, into=False):
    """Source of minmax_grad (or of add_minmax_grad, `into` its first
    argument `acc`): share g among the tied extrema of each lane.

    Per lane, a branch-free pass counts the extrema (LLVM vectorizes it) and
    a second one adds g / count where they are: 4x faster than counting
    for all lanes first, in a branching loop.
    """
    axes, keep, names, gref, dt = _setup(
        g, a, axis, keepdims, "minmax_grad")
    oref = _ref("out", out, names, axes, keep, "minmax_grad")
    kept = [n for d, n in enumerate(names) if d not in axes]
    red = [n for d, n in enumerate(names) if d in axes]
    at = f"[{index(names)}]"
    lane = ([f"o = {oref}", "c = 0"]
            + loops(red, _bounds(red), [f"c += a{at} == o"], indent=0)
            + ["if c > 0:", f"    share = {gref} / c"]
            + loops(red, _bounds(red), [f"if a{at} == o:", f"    res{at} += share"],
                    indent=1))
    params = "acc, g, a, out" if into else "g, a, out"
    lines = [f"def impl({params}, axis=None, keepdims=False):"]
    if into:
        lines += ["    if acc.shape != a.shape:",
                  "        raise ValueError('add_minmax_grad: acc is not shaped like a')",
                  "    res = acc"]
    else:
        lines.append(f"    res = np.zeros(a.shape, {dt})")
    lines += loops(kept, _bounds(kept), lane)
    lines.append("    return res")
    return "\n".join(lines)


@overload(reductions.minmax_grad, prefer_literal=True)
def _minmax_grad(g, a, out, axis=None, keepdims=False):
    if is_scalar(a):
        return _scalar_impl(g, a, "g, a, out, axis=None, keepdims=False")
    return compile_impl(_minmax_grad_src(g, a, out, axis, keepdims))


@overload(reductions.add_minmax_grad, prefer_literal=True)
def _add_minmax_grad(acc, g, a, out, axis=None, keepdims=False):
    if is_scalar(a) or is_scalar(acc):
        return compile_impl(
            "def impl(acc, g, a, out, axis=None, keepdims=False):\n"
            "    return acc + _minmax_grad(g, a, out, axis, keepdims)",
            {"_minmax_grad": reductions.minmax_grad})
    if acc.ndim != a.ndim:
        raise TypingError("s2s_ad.runtime.add_minmax_grad: acc is not shaped like a")
    return compile_impl(_minmax_grad_src(g, a, out, axis, keepdims, into=True))
