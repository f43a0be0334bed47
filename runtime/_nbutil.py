"""Typing-time helpers shared by the Numba overloads of the runtime.

The overloads specialise on what Numba knows while typing a call: array
ranks and dtypes, and literal `axis`/`keepdims` values.  This module turns
those Numba types into plain Python facts (or a clear TypingError) and
compiles the per-specialisation source text the overloads generate.
Guarantees: each distinct generated source is exec'd once per process;
inside a compile with a cache folder, it is a cached kernel (_nb_cached).
"""

import numpy as np
from numba import types
from numba.core.errors import TypingError
from numba.np.numpy_support import as_dtype

from ._nb_cached import cached_impl

_IMPL_CACHE = {}


def compile_impl(src, env=None):
    """exec `src` (defining `impl`) once and return that function.

    `env` supplies the globals the source refers to besides `np`; it must
    be the same for a given `src`, which is the cache key.
    """
    cached = cached_impl(src, env or {})
    if cached is not None:      # a kernel in Numba's disk cache (see _nb_cached)
        return cached
    impl = _IMPL_CACHE.get(src)
    if impl is None:
        scope = {"np": np, **(env or {})}
        # Generated from typing-time facts only, never from user input.
        exec(compile(src, "<s2s_ad.runtime generated>", "exec"), scope)  # noqa: S102
        impl = _IMPL_CACHE[src] = scope["impl"]
    return impl


def is_absent(x):
    """True for an omitted argument or an explicit None."""
    if isinstance(x, types.Omitted):
        x = x.value
    return x is None or isinstance(x, types.NoneType)


def is_scalar(x):
    """True for Numba number/boolean types (the scalar primals)."""
    return isinstance(x, (types.Number, types.Boolean))


def _axis_value(ax, fname):
    """One literal axis as a Python int, else a TypingError."""
    if isinstance(ax, int) and not isinstance(ax, bool):
        return ax
    if isinstance(ax, types.IntegerLiteral):
        return ax.literal_value
    raise TypingError(
        f"s2s_ad.runtime.{fname}: axis must be a compile-time constant "
        f"(an int literal, a tuple of int literals or None), got {ax}")


def static_axes(axis, ndim, fname):
    """Literal `axis` as a sorted tuple of non-negative axes (None: all)."""
    if is_absent(axis):
        return tuple(range(ndim))
    if isinstance(axis, (tuple, types.BaseTuple)):
        raw = [_axis_value(ax, fname) for ax in axis]
    else:
        raw = [_axis_value(axis, fname)]
    axes = []
    for ax in raw:
        if not -ndim <= ax < ndim:
            raise TypingError(f"s2s_ad.runtime.{fname}: axis {ax} is out "
                              f"of bounds for array of dimension {ndim}")
        axes.append(ax % ndim)
    if len(set(axes)) != len(axes):
        raise TypingError(f"s2s_ad.runtime.{fname}: repeated axis in {raw}")
    return tuple(sorted(axes))


def static_axis(axis, ndim, fname):
    """A single literal axis (negative allowed) normalised to [0, ndim)."""
    if is_absent(axis) or isinstance(axis, (tuple, types.BaseTuple)):
        raise TypingError(
            f"s2s_ad.runtime.{fname}: axis must be a single int literal")
    return static_axes(axis, ndim, fname)[0]


def static_bool(flag, fname, name="keepdims"):
    """Literal boolean `flag` (omitted means False) as a Python bool."""
    if isinstance(flag, types.Omitted):
        flag = flag.value
    if isinstance(flag, (bool, int)):
        return bool(flag)
    if isinstance(flag, (types.BooleanLiteral, types.IntegerLiteral)):
        return bool(flag.literal_value)
    raise TypingError(
        f"s2s_ad.runtime.{fname}: {name} must be a compile-time constant "
        f"(True/False literal), got {flag}")


def np_dtype(ty):
    """NumPy dtype of a Numba array or scalar type."""
    return as_dtype(ty.dtype if isinstance(ty, types.Array) else ty)


def grad_dtype(ty):
    """Cotangent dtype for a primal of Numba type `ty` (see _common)."""
    dt = np_dtype(ty)
    return dt if np.issubdtype(dt, np.inexact) else np.dtype(np.float64)


def dtype_src(dt):
    """Source naming NumPy dtype `dt`'s scalar type, e.g. "np.float32".

    Dtypes are spelled into the generated text (not passed as globals) so
    the source alone is a sound cache key.
    """
    return f"np.{np.dtype(dt).name}"


def elementwise_impl(kernel, x, name, lead=""):
    """The implementation applying the scalar `kernel` (a float -> float
    jitable) to the number or array of Numba type `x`: a float, or a new
    array of `x`'s gradient dtype filled element by element.  `lead` names
    arguments passed to the kernel before the element ("n, "); `name` is the
    runtime function's, for the TypingError raised for any other `x`."""
    if is_scalar(x):
        src = f"def impl({lead}x):\n    return kernel({lead}float(x))"
    elif isinstance(x, types.Array):
        src = (f"def impl({lead}x):\n"
               f"    out = np.empty(x.shape, {dtype_src(grad_dtype(x))})\n"
               "    for i in np.ndindex(x.shape):\n"
               f"        out[i] = kernel({lead}float(x[i]))\n"
               "    return out")
    else:
        raise TypingError(f"s2s_ad.runtime.{name}: expected a number or an array, got {x}")
    return compile_impl(f"{src}\n# {name}", {"kernel": kernel})


def elementwise_overload(kernel, name):
    """The typing function of ``overload(f)`` for an ``f`` of one argument
    that applies `kernel` elementwise (see :func:`elementwise_impl`)."""
    def typer(x):
        return elementwise_impl(kernel, x, name)
    return typer


def index(names):
    """Source of an index expression over `names` ("()" when empty)."""
    return ", ".join(names) if names else "()"


def shape_tuple(exprs):
    """Source of a shape tuple literal made of `exprs`."""
    if not exprs:
        return "()"
    return "(" + ", ".join(exprs) + ("," if len(exprs) == 1 else "") + ")"


def loops(names, bounds, body, indent=1, reverse=False):
    """Source of nested `for` loops over `names` wrapping `body` lines."""
    lines = []
    for depth, (name, bound) in enumerate(zip(names, bounds)):
        rng = (f"range({bound} - 1, -1, -1)" if reverse
               else f"range({bound})")
        lines.append("    " * (indent + depth) + f"for {name} in {rng}:")
    pad = "    " * (indent + len(names))
    return lines + [pad + line for line in body]
