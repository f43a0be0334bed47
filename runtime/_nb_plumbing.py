"""Numba overloads of the adjoint plumbing helpers (see plumbing.py).

Every overload dispatches at typing time on scalar vs array arguments and
on ranks, so the compiled code has no type tests left; results match the
plain-Python versions in value, shape, dtype and "returns g unchanged"
behaviour.
"""

import numpy as np
from numba.core.errors import TypingError
from numba.extending import overload

from . import plumbing, reductions
from ._nbutil import compile_impl, dtype_src, grad_dtype, index, is_scalar, loops, np_dtype


def _first(name, ndim):
    """Source reading the only element of a size-1 array `name`."""
    return f"{name}[{index(['0'] * ndim)}]"


def _unbroadcast_src(gnd, xnd):
    """Source summing a rank-`gnd` g into a rank-`xnd` x's shape.

    Each element of g is added to x's element found by dropping g's
    leading axes and zeroing the index on axes where x has length 1; the
    zeroing is a multiplier m_j fixed before the loop, so no branches.
    """
    lead = gnd - xnd
    g_idx = [f"i{d}" for d in range(gnd)]
    x_idx = [f"i{lead + j} * m{j}" for j in range(xnd)]
    lines = ["def impl(g, x):"]
    if gnd == xnd:
        # Shapes are only known at run time; equal shapes need no work.
        lines.append("    if g.shape == x.shape:")
        lines.append("        return g")
    for j in range(xnd):
        lines += [f"    m{j} = 1",
                  f"    if x.shape[{j}] == 1:",
                  f"        m{j} = 0",
                  f"    elif x.shape[{j}] != g.shape[{lead + j}]:",
                  "        raise ValueError('unbroadcast: shapes differ')"]
    lines.append("    out = np.zeros(x.shape, g.dtype)")
    lines += loops(g_idx, [f"g.shape[{d}]" for d in range(gnd)],
                   [f"out[{index(x_idx)}] += g[{index(g_idx)}]"])
    lines.append("    return out")
    return "\n".join(lines)


@overload(plumbing.unbroadcast, prefer_literal=True)
def _unbroadcast(g, x):
    if is_scalar(x):
        if is_scalar(g):
            return lambda g, x: g
        return compile_impl("def impl(g, x):\n    return _sum(g)",
                            {"_sum": reductions.sum})
    gnd = 0 if is_scalar(g) else g.ndim
    if gnd == 0:
        if x.ndim == 0:
            return lambda g, x: g
        elem = "g" if is_scalar(g) else "g[()]"
        dt = dtype_src(grad_dtype(x))
        return compile_impl(
            f"def impl(g, x):\n    return np.full(x.shape, {elem}, {dt})")
    if gnd < x.ndim:
        raise TypingError(f"unbroadcast: cannot sum a {gnd}-d cotangent "
                          f"to a {x.ndim}-d primal")
    return compile_impl(_unbroadcast_src(gnd, x.ndim))


@overload(plumbing.zeros_like, prefer_literal=True)
def _zeros_like(x):
    if not is_scalar(x):
        return lambda x: np.zeros_like(x)
    return compile_impl(
        f"def impl(x):\n    return {dtype_src(grad_dtype(x))}(0.0)")


@overload(plumbing.like, prefer_literal=True)
def _like(b, x):
    if is_scalar(x):
        return _scalar_from(b, "b", dtype_src(grad_dtype(x)), "b, x")
    dt = dtype_src(np_dtype(x))
    if is_scalar(b):
        return compile_impl(
            f"def impl(b, x):\n    return np.full(x.shape, b, {dt})")
    if b.ndim != x.ndim:
        raise TypingError(f"like: a {b.ndim}-d cotangent for a {x.ndim}-d primal")
    # Adjoints already have their primal's shape; only the dtype may differ.
    # (A broadcasting ``out[...] = b`` here cost seconds of compile time.)
    cast = "b" if b.dtype == x.dtype else f"b.astype({dt})"
    return compile_impl(
        "def impl(b, x):\n"
        "    if b.shape != x.shape:\n"
        "        raise ValueError('like: the cotangent has the wrong shape')\n"
        f"    return {cast}")


def _scalar_from(v, name, dt, params):
    """Impl returning scalar-or-size-1-array argument `name` as type dt."""
    if is_scalar(v):
        return compile_impl(f"def impl({params}):\n    return {dt}({name})")
    return compile_impl(
        f"def impl({params}):\n"
        f"    if {name}.size != 1:\n"
        f"        raise ValueError('expected a size-1 array')\n"
        f"    return {dt}({_first(name, v.ndim)})")


@overload(plumbing.reshape_like, prefer_literal=True)
def _reshape_like(g, x):
    if is_scalar(x):
        if is_scalar(g):
            return lambda g, x: g
        return _scalar_from(g, "g", dtype_src(np_dtype(g)), "g, x")
    if is_scalar(g):
        return compile_impl(
            "def impl(g, x):\n"
            "    if x.size != 1:\n"
            "        raise ValueError('cannot reshape a scalar')\n"
            "    return np.full(x.shape, g)")
    # reshape needs a contiguous array; ascontiguousarray is free for one.
    return lambda g, x: np.ascontiguousarray(g).reshape(x.shape)


def _broadcast_like_src(tnd, xnd):
    """Source copying a rank-`tnd` t into a new array of x's shape.

    Each element of the result reads t's element found by dropping the
    result's leading axes and zeroing the index on axes where t has length 1.
    """
    lead = xnd - tnd
    x_idx = [f"i{d}" for d in range(xnd)]
    t_idx = [f"i{lead + j} * m{j}" for j in range(tnd)]
    lines = ["def impl(t, x):"]
    if tnd == xnd:
        lines.append("    if t.shape == x.shape:")
        lines.append("        return t")
    for j in range(tnd):
        lines += [f"    m{j} = 1",
                  f"    if t.shape[{j}] == 1:",
                  f"        m{j} = 0",
                  f"    elif t.shape[{j}] != x.shape[{lead + j}]:",
                  "        raise ValueError('broadcast_like: shapes differ')"]
    lines.append("    out = np.empty(x.shape, t.dtype)")
    lines += loops(x_idx, [f"x.shape[{d}]" for d in range(xnd)],
                   [f"out[{index(x_idx)}] = t[{index(t_idx)}]"])
    lines.append("    return out")
    return "\n".join(lines)


@overload(plumbing.broadcast_like, prefer_literal=True)
def _broadcast_like(t, x):
    if is_scalar(x):
        return lambda t, x: t
    if is_scalar(t):
        return compile_impl(
            f"def impl(t, x):\n    return np.full(x.shape, t, {dtype_src(grad_dtype(x))})")
    if t.ndim > x.ndim:
        raise TypingError(f"broadcast_like: a {t.ndim}-d tangent for a {x.ndim}-d primal")
    return compile_impl(_broadcast_like_src(t.ndim, x.ndim))
