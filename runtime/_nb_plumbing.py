"""Numba overloads of the adjoint plumbing helpers (see plumbing.py).

Every overload dispatches at typing time on scalar vs array arguments and
on ranks, so the compiled code has no type tests left; results match the
plain-Python versions in value, shape, dtype and "returns g unchanged"
behaviour.
"""

import numpy as np
from numba import types
from numba.core.errors import TypingError
from numba.extending import overload
from numba.np.numpy_support import as_dtype

from . import _nb_kernels as kernels
from . import plumbing, reductions
from ._nbutil import compile_impl, dtype_src, grad_dtype, index, is_scalar, loops, np_dtype


def _first(name, ndim):
    """Source reading the only element of a size-1 array `name`."""
    return f"{name}[{index(['0'] * ndim)}]"


def _broadcast_src(fname, small, big, small_nd, big_nd, first, alloc, statement):
    """Source of a loop over every element of ``big`` (a broadcast of ``small``).

    ``small``'s element for a ``big`` index drops ``big``'s leading axes and
    zeroes the index on axes where ``small`` has length 1; the zeroing is a
    multiplier m_j fixed before the loop, so no branches.  ``first`` is the
    argument returned as is when the shapes are equal; ``statement`` formats
    the loop body from the big and small index texts.
    """
    lead = big_nd - small_nd
    big_idx = [f"i{d}" for d in range(big_nd)]
    small_idx = [f"i{lead + j} * m{j}" for j in range(small_nd)]
    params = ", ".join(sorted({small, big}, key=lambda n: n != first))
    lines = [f"def impl({params}):"]
    if big_nd == small_nd:
        # Shapes are only known at run time; equal shapes need no work.
        lines.append(f"    if {small}.shape == {big}.shape:")
        lines.append(f"        return {first}")
    for j in range(small_nd):
        lines += [f"    m{j} = 1",
                  f"    if {small}.shape[{j}] == 1:",
                  f"        m{j} = 0",
                  f"    elif {small}.shape[{j}] != {big}.shape[{lead + j}]:",
                  f"        raise ValueError('{fname}: shapes differ')"]
    lines.append(f"    out = {alloc}")
    lines += loops(big_idx, [f"{big}.shape[{d}]" for d in range(big_nd)],
                   [statement(index(big_idx), index(small_idx))])
    lines.append("    return out")
    return "\n".join(lines)


def _unbroadcast_src(gnd, xnd, blas=False):
    """Source summing a rank-`gnd` g into a rank-`xnd` x's shape.

    With `blas` (a C-contiguous float matrix g), summing g's rows or
    columns -- a bias's or a row-wise reduction's cotangent -- is a
    matrix-vector product with ones, as in the NumPy version: the loop's
    read-modify-write of one element serialises it (3x slower).  The product
    is a cached kernel (_nb_kernels), not Numba's np.dot typed inline.
    """
    src = _broadcast_src("unbroadcast", "x", "g", xnd, gnd, "g", "np.zeros(x.shape, g.dtype)",
                         lambda big, small: f"out[{small}] += g[{big}]")
    if not blas:
        return src
    rows = "x.shape[0] == g.shape[1]" if xnd == 1 else \
        "x.shape[0] == 1 and x.shape[1] == g.shape[1]"
    fast = ["    if g.size > 0 and g.shape[0] > 1:",
            f"        if {rows}:",
            "            return _ones_dot(g).reshape(x.shape)"]
    if xnd == 2:
        fast += ["        if x.shape[0] == g.shape[0] and x.shape[1] == 1 and g.shape[1] > 1:",
                 "            return _dot_ones(g).reshape(x.shape)"]
    head, rest = src.split("\n", 1)
    return "\n".join([head, *fast, rest])


def _is_complex(ty):
    dt = ty.dtype if isinstance(ty, types.Array) else ty
    return isinstance(dt, types.Complex)


def _real_part_first(fn, g="g"):
    """An impl calling ``fn`` with the real part of a complex cotangent of a real
    primal (``g``: the overload's name for the cotangent argument)."""
    return compile_impl(f"def impl({g}, x):\n    return fn(np.real({g}), x)\n# {fn.__name__}",
                        {"fn": fn})


@overload(plumbing.unbroadcast, prefer_literal=True)
def _unbroadcast(g, x):
    if _is_complex(g) and not _is_complex(x):
        return _real_part_first(plumbing.unbroadcast)
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
    blas = gnd == 2 and g.layout == "C" and np_dtype(g) in (np.float64, np.float32)
    return compile_impl(_unbroadcast_src(gnd, x.ndim, blas),
                        {"_ones_dot": kernels.ones_dot, "_dot_ones": kernels.dot_ones})


@overload(plumbing.writable)
def _writable(b):
    if isinstance(b, types.Array) and b.mutable:
        return lambda b: b
    return lambda b: np.copy(b)


@overload(plumbing.zeros_like, prefer_literal=True)
def _zeros_like(x):
    if not is_scalar(x):
        return lambda x: np.zeros_like(x)
    return compile_impl(
        f"def impl(x):\n    return {dtype_src(grad_dtype(x))}(0.0)")


@overload(plumbing.like, prefer_literal=True)
def _like(b, x):
    if _is_complex(b) and not _is_complex(x):
        return _real_part_first(plumbing.like, "b")
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


def _cast_dtype(dtype):
    """The NumPy dtype a Numba ``dtype`` argument (np.float32, int, ...) names."""
    builtin = getattr(dtype, "typing_key", None)     # int, float, bool: Function types
    if builtin in (int, float, bool):
        return np.dtype(builtin)
    target = getattr(dtype, "instance_type", getattr(dtype, "dtype", None))
    if target is None:
        raise TypingError(f"astype: {dtype} is not a dtype")
    return as_dtype(target)


@overload(plumbing.astype, prefer_literal=True)
def _astype(a, dtype):
    dt = dtype_src(_cast_dtype(dtype))
    if is_scalar(a):
        return compile_impl(f"def impl(a, dtype):\n    return {dt}(a)")
    return compile_impl(f"def impl(a, dtype):\n    return a.astype({dt})")


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
    """Source copying a rank-`tnd` t into a new array of x's shape."""
    return _broadcast_src("broadcast_like", "t", "x", tnd, xnd, "t",
                          "np.empty(x.shape, t.dtype)",
                          lambda big, small: f"out[{big}] = t[{small}]")


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
