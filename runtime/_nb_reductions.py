"""Numba overloads of the reductions sum, mean, prod, amax and amin.

Numba's own np.sum & co. accept no axis/keepdims (and np.sum of float32
returns float64), so each call is compiled from a loop nest generated for
its (rank, literal axis, literal keepdims).  Guarantees: result shape and
dtype are NumPy's; the loops visit `a` in C order (cache-friendly for the
usual C-contiguous input) and work on any layout; amax/amin propagate NaN
and raise ValueError on an empty reduction, as NumPy does.
"""

import numpy as np
from numba import types
from numba.core.errors import TypingError
from numba.extending import overload

from . import reductions
from ._nbutil import (
    compile_impl,
    dtype_src,
    index,
    is_scalar,
    loops,
    np_dtype,
    shape_tuple,
    static_axes,
    static_bool,
)

_NUMPY_FUNC = {"sum": np.sum, "mean": np.mean, "prod": np.prod,
               "amax": np.amax, "amin": np.amin}

# Per kind: the accumulator update, with {o} the accumulator and {v} the
# element.  The max/min tests are written so that a NaN element replaces
# the accumulator and is never replaced afterwards (NumPy propagates NaN).
_UPDATE = {
    "sum": ["{o} += {v}"],
    "mean": ["{o} += {v}"],
    "prod": ["{o} *= {v}"],
    "amax": ["if {v} > {o} or {v} != {v}:", "    {o} = {v}"],
    "amin": ["if {v} < {o} or {v} != {v}:", "    {o} = {v}"],
}


def _result_dtype(kind, dt):
    """dtype NumPy gives `kind` reducing an array of dtype `dt`."""
    return _NUMPY_FUNC[kind](np.ones(1, dt)).dtype


def _init_src(kind, rt):
    """Source of the accumulator's start value for `kind` in dtype `rt`."""
    if kind in ("sum", "mean"):
        return "0"
    if kind == "prod":
        return "1"
    big = kind == "amin"
    if rt.kind == "f":
        return "np.inf" if big else "-np.inf"
    if rt.kind == "b":
        return "True" if big else "False"
    info = np.iinfo(rt)
    return str(info.max if big else info.min)


def reduce_src(kind, ndim, axes, keepdims, rt, elem="a", square=None):
    """Source of `impl` reducing rank-`ndim` `a` over `axes`.

    `elem` names the value read: "a" (indexed when ndim > 0, or `a` itself
    for a scalar input) or "a[()]" for a 0-d array.  With `square` (the
    dtype of np.square(a)) each value is squared in that dtype first.
    """
    names = [f"i{d}" for d in range(ndim)]
    value = f"a[{index(names)}]" if ndim else elem
    # NumPy returns a scalar for a 0-d input even with keepdims.
    scalar_out = len(axes) == ndim and (not keepdims or ndim == 0)
    result = "acc" if scalar_out else "out"
    if scalar_out:
        acc = "acc"
    else:
        kept = [n for d, n in enumerate(names) if d not in axes]
        acc = "out[" + index(
            ["0" if d in axes else n for d, n in enumerate(names)]
            if keepdims else kept) + "]"
    dt = dtype_src(rt)
    count = " * ".join([f"a.shape[{d}]" for d in axes]) or "1"
    lines = ["def impl(a, axis=None, keepdims=False):"]
    if kind in ("amax", "amin"):
        # NumPy only complains when some output element has no input.
        size = " * ".join([f"a.shape[{d}]" for d in range(ndim)
                           if d not in axes]) or "1"
        lines += [f"    if {count} == 0 and {size} > 0:",
                  ("        raise ValueError('zero-size array to reduction "
                   "operation which has no identity')")]
    init = f"{dt}({_init_src(kind, rt)})"
    if scalar_out:
        lines.append(f"    acc = {init}")
    else:
        shape = [("1" if d in axes else f"a.shape[{d}]")
                 for d in range(ndim) if keepdims or d not in axes]
        lines.append(f"    out = np.full({shape_tuple(shape)}, {init}, {dt})")
    body = ["v = " + value]
    if square is not None:
        body.append(f"v = {dtype_src(square)}(v * v)")
    body += [u.format(o=acc, v="v") for u in _UPDATE[kind]]
    lines += loops(names, [f"a.shape[{d}]" for d in range(ndim)], body)
    if kind == "mean":
        # Divide in the result dtype: Numba would promote to float64.
        lines.append(f"    {result} /= {dt}({count})")
    lines.append(f"    return {result}")
    return "\n".join(lines)


def _reduction_overload(fname, kind, square=False):
    """Register the Numba overload of reductions.<fname>, a `kind` reduction
    (of the squares of `a`, with `square`)."""

    @overload(getattr(reductions, fname), prefer_literal=True)
    def _ov(a, axis=None, keepdims=False):
        if not (is_scalar(a) or isinstance(a, types.Array)):
            raise TypingError(f"s2s_ad.runtime.{fname}: unsupported {a}")
        ndim = 0 if is_scalar(a) else a.ndim
        axes = static_axes(axis, ndim, fname)
        keep = static_bool(keepdims, fname)
        dt = np_dtype(a)
        # Squares are taken in np.square's dtype (integers wrap as NumPy's
        # do), then reduced in the reduction's.
        squared = np.square(np.ones(1, dt)).dtype if square else None
        rt = _result_dtype(kind, dt if squared is None else squared)
        elem = "a" if is_scalar(a) else "a[()]"
        return compile_impl(reduce_src(kind, ndim, axes, keep, rt, elem, square=squared))

    return _ov


for _kind in _NUMPY_FUNC:
    _reduction_overload(_kind, _kind)
# One loop nest, no full-size square.
_reduction_overload("sum_squares", "sum", square=True)
