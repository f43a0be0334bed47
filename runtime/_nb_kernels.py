"""Compiled kernels that the Numba overloads call, kept in Numba's disk cache.

An overload's implementation is compiled again in every process that needs
it, inside the generated function that calls it; Numba's own ``np.dot`` and
broadcasting array arithmetic are among the slowest pieces to type and lower
(about 0.3-1 s each, measured in docs/compile_time.md).  Called as plain
``@njit(cache=True)`` functions instead, they are compiled once per argument
types on a machine and loaded from Numba's cache afterwards (by any generated
module, in any process), and the caller only links them.

Each kernel does exactly what the overload did inline (the same NumPy call on
the same operands), so results are unchanged.  ``fastmath=False`` and
``error_model="python"`` are set explicitly: a nested compile would otherwise
inherit its first caller's flags, and a cached entry is reused whatever the
flags of later callers; these kernels are BLAS calls and elementwise products,
which fastmath does not change.
"""

import os

import numba
import numpy as np

from . import _nb_link, elementwise
from .elementwise import SIMD_MIN

_OPTIONS = {"fastmath": False, "error_model": "python"}


def _kernel(fn):
    try:
        kernel = numba.njit(cache=True, **_OPTIONS)(fn)
    except RuntimeError:        # no cache folder Numba can write: compiled per process
        return numba.njit(**_OPTIONS)(fn)
    _by_level(kernel)
    return _nb_link.register(kernel, ("kernels", fn.__name__))


def _by_level(kernel):
    """Key ``kernel``'s cache entries by LLVM's optimisation level too: Numba's
    cache does not tell levels apart, so a process compiling at -O0 (the test
    suite) would leave entries that every later process loads."""
    index_key = kernel._cache._index_key
    kernel._cache._index_key = lambda sig, codegen: index_key(sig, codegen) + (
        int(numba.config.OPT),)


@_kernel
def dot(a, b):
    """``np.dot(a, b)`` of float arrays of one dtype (1-D or 2-D)."""
    return np.dot(a, b)


@_kernel
def ones_dot(g):
    """The sums of a matrix's columns, as BLAS computes them: ones . g."""
    return np.dot(np.ones(g.shape[0], g.dtype), g)


@_kernel
def dot_ones(g):
    """The sums of a matrix's rows, as BLAS computes them: g . ones."""
    return np.dot(g, np.ones(g.shape[1], g.dtype))


@_kernel
def broadcast_extent(a, b):
    """The length two axes of lengths ``a`` and ``b`` broadcast to."""
    if a == b or b == 1:
        return a
    if a == 1:
        return b
    raise ValueError("operands could not be broadcast together")


@_kernel
def times_broadcast(g, p, out):
    """``out[i, j] = g[i, j] * p[i, j]``, a length-1 axis of ``g`` or ``p``
    repeated along ``out``'s (NumPy's broadcasting, checked by the caller).
    A plain loop: Numba's broadcasting product compiles several times more
    code, which every compile linking it optimised again."""
    n, m = out.shape
    gi, gj = int(g.shape[0] == n), int(g.shape[1] == m)
    pi, pj = int(p.shape[0] == n), int(p.shape[1] == m)
    for i in range(n):
        for j in range(m):
            out[i, j] = g[i * gi, j * gj] * p[i * pi, j * pj]


@_kernel
def times_broadcast_1d(g, p, out):
    """``out[i] = g[i] * p[i]`` (as :func:`times_broadcast`, 1-D)."""
    n = out.shape[0]
    gi, pi = int(g.shape[0] == n), int(p.shape[0] == n)
    for i in range(n):
        out[i] = g[i * gi] * p[i * pi]


@_kernel
def times_rows(g, p, out):
    """``out[i, j] = g[i, 0] * p[i, j]`` (g one row per row of p, or one for all)."""
    n, m = p.shape
    step = 1 if g.shape[0] == n else 0
    for i in range(n):
        s = g[i * step, 0]
        for j in range(m):
            out[i, j] = s * p[i, j]


@_kernel
def times_columns(g, p, out):
    """``out[i, j] = g[0, j] * p[i, j]``."""
    n, m = p.shape
    for i in range(n):
        for j in range(m):
            out[i, j] = g[0, j] * p[i, j]


def _transcendental(name):
    """The kernel of ``rt.<name>`` (runtime/elementwise.py) on a 1-D
    contiguous float array: Numba's loop below ``SIMD_MIN`` elements, NumPy's
    SIMD loop (called in object mode, writing into the result) from there on.
    The overload passes every array raveled, so each name is compiled once
    per dtype on a machine, not once per rank in every process."""
    ufunc = getattr(np, name)

    def kernel(x):
        if x.size < SIMD_MIN:
            return ufunc(x)
        out = np.empty_like(x)
        with numba.objmode():
            ufunc(x, out=out)
        return out
    # Its own name: Numba's cache index is named after the qualname.
    kernel.__name__ = kernel.__qualname__ = name
    kernel.__doc__ = f"np.{name}(x) of a 1-D contiguous float array (see _transcendental)."
    return _kernel(kernel)


TRANSCENDENTAL = {name: _transcendental(name) for name in elementwise.TRANSCENDENTAL}


def _locate(name):
    """The kernel named ``name`` (how runtime/_nb_link.py finds it)."""
    return TRANSCENDENTAL.get(name) or globals().get(name)


_nb_link.LOCATORS["kernels"] = _locate


def cache_files():
    """The files of these kernels in Numba's disk cache (one ``.nbi`` index
    per kernel, one ``.nbc`` file per compiled argument types; those of an
    earlier version of this file too), wherever Numba keeps them:
    ``__pycache__`` beside this file, or Numba's user-wide cache folder where
    that is not writable.  ``s2s-ad cache info|clear`` counts and removes
    them."""
    folders = set()
    for kernel in list(globals().values()) + list(TRANSCENDENTAL.values()):
        try:
            folders.add(kernel._cache._cache_path)
        except AttributeError:         # not a cached kernel
            continue
    stem = os.path.splitext(os.path.basename(__file__))[0] + "."
    out = []
    for folder in sorted(folders):
        try:
            names = os.listdir(folder)
        except OSError:                # nothing cached yet
            continue
        out += [os.path.join(folder, n) for n in sorted(names)
                if n.startswith(stem) and n.endswith((".nbi", ".nbc"))]
    return out
