"""Indexing with an index array of two or more dimensions, in compiled code.

Numba indexes with one 1-D index array (``x[idx]``, ``x[mask]`` for a 1-D
mask) but not with a boolean mask over several axes (``x[x > 0]`` for a
matrix ``x``: an internal error) and differentiates no N-d integer index.
Under ``ad.jit`` such reads and writes (s2s_ad/transforms/index_arrays.py)
are these helpers, which lower them to 1-D indexing of the raveled arrays:

- ``index_take(x, index)`` is ``x[index]``;
- ``index_put(a, index, v)`` is a copy of ``a`` with ``a[index] = v`` (the
  write is then ``a[:] = index_put(a, index, v)``);
- ``index_take_grad`` and ``index_written`` are their cotangents (every
  repeated integer position added / only the last write of a position kept,
  as NumPy does).

An index is a boolean mask over all of ``x``'s axes or over its leading axes,
or an integer array of any rank (positions along axis 0).  In plain Python
each is NumPy's own indexing.
"""
import numpy as np
from numba import types
from numba.core.errors import TypingError
from numba.extending import overload

from ._common import grad_dtype
from ._nbutil import compile_impl, dtype_src
from ._nbutil import grad_dtype as nb_grad_dtype
from .scatter import index_add, written


def index_take(x, index):
    """``x[index]``."""
    return x[index]


def index_take_grad(g, x, index):
    """Zeros shaped like ``x`` with ``g`` added at ``index`` (every repeat counted)."""
    z = np.zeros(np.shape(x), grad_dtype(x))
    index_add(z, index, g)
    return z


def index_put(a, index, v):
    """A copy of ``a`` with ``v`` written at ``index`` (the last write of a position wins)."""
    out = np.array(a, copy=True)
    out[index] = v
    return out


def index_written(b, index):
    """``b[index]`` with zeros where a later write takes the same position: the
    cotangent of ``v`` in :func:`index_put`."""
    return written(b, index)


EXPORTS = ("index_take", "index_take_grad", "index_put", "index_written")


# -- Numba: one 1-D index of the raveled arrays --------------------------------------------

def _kind(x, index):
    """"mask" (over all axes), "rows" (a mask over the leading axes), "positions" (an
    N-d integer array), "tuple" (integers and integer arrays of one shape, one per
    leading axis, an N-d one among them) or None (what Numba indexes itself)."""
    if isinstance(index, types.BaseTuple) and isinstance(x, types.Array) and \
            0 < len(index) <= x.ndim and all(
                isinstance(t, types.Integer) or (isinstance(t, types.Array) and isinstance(
                    t.dtype, types.Integer)) for t in index) and \
            any(isinstance(t, types.Array) and t.ndim > 1 for t in index):
        return "tuple"
    if not isinstance(index, types.Array) or not isinstance(x, types.Array):
        return None
    if isinstance(index.dtype, types.Boolean):
        if index.ndim == x.ndim and x.ndim > 1:
            return "mask"
        if 1 < index.ndim < x.ndim:
            return "rows"
        if index.ndim > x.ndim:
            raise TypingError(f"s2s_ad: a {index.ndim}-D boolean index for a {x.ndim}-D array")
        return None
    if isinstance(index.dtype, types.Integer) and index.ndim > 1:
        return "positions"
    return None


def _flat(kind, x, index):
    """Source binding ``flat`` (the 1-D index) and ``xs`` (array ``x`` with one leading
    axis for it), after checking a mask's shape, and for integer positions ``shape``
    (the index arrays' shape).  ``xs`` is a view of ``x`` when ``x`` is new storage
    (``z``, ``out``: written through ``xs``), else of a contiguous copy."""
    src = "    flat = np.ascontiguousarray(index).reshape(index.size)\n"
    arr = x if x in ("z", "out") else f"np.ascontiguousarray({x})"
    if kind == "tuple":         # the positions in x's leading axes, counted row-major
        n = len(index)
        first = next(i for i, t in enumerate(index) if isinstance(t, types.Array))
        src = (f"    shape = index[{first}].shape\n"
               f"    flat = np.zeros(index[{first}].size, np.intp)\n")
        for i, t in enumerate(index):
            if isinstance(t, types.Array):
                src += (f"    if index[{i}].shape != shape:\n"
                        "        raise IndexError('s2s_ad: under ad.jit, index arrays of "
                        "more than one dimension must have one shape')\n"
                        f"    flat = flat * {x}.shape[{i}] + np.ascontiguousarray(index[{i}])"
                        f".reshape(index[{i}].size) % {x}.shape[{i}]\n")
            else:
                src += f"    flat = flat * {x}.shape[{i}] + index[{i}] % {x}.shape[{i}]\n"
        lead = " * ".join(f"{x}.shape[{i}]" for i in range(n))
        return src + f"    xs = {arr}.reshape(({lead},) + {x}.shape[{n}:])\n"
    k = getattr(index, "ndim", 0)
    if kind == "mask":
        return (f"    if index.shape != {x}.shape:\n"
                "        raise IndexError('boolean index does not match the indexed array')\n"
                + src + f"    xs = {arr}.reshape({x}.size)\n")
    if kind == "rows":
        return (f"    if index.shape != {x}.shape[:{k}]:\n"
                "        raise IndexError('boolean index does not match the indexed array')\n"
                + src + f"    xs = {arr}.reshape((index.size,) + {x}.shape[{k}:])\n")
    return src + f"    xs = {x}\n    shape = index.shape\n"


@overload(index_take)
def _index_take(x, index):
    kind = _kind(x, index)
    if kind is None:
        return lambda x, index: x[index]
    body = ("    return np.ascontiguousarray(xs[flat]).reshape(shape + xs.shape[1:])\n"
            if kind in ("positions", "tuple") else "    return xs[flat]\n")
    return compile_impl("def impl(x, index):\n" + _flat(kind, "x", index) + body)


@overload(index_take_grad)
def _index_take_grad(g, x, index):
    kind = _kind(x, index)
    zeros = f"    z = np.zeros(x.shape, {dtype_src(nb_grad_dtype(x))})\n"
    if kind is None:
        return compile_impl("def impl(g, x, index):\n" + zeros +
                            "    index_add(z, index, g)\n    return z\n",
                            {"index_add": index_add})
    src = "def impl(g, x, index):\n" + zeros + _flat(kind, "z", index)
    if kind in ("positions", "tuple") and isinstance(g, types.Array):
        src += ("    index_add(xs, flat, np.ascontiguousarray(g).reshape((flat.size,) + "
                "xs.shape[1:]))\n")
    else:
        src += "    index_add(xs, flat, g)\n"
    return compile_impl(src + "    return z\n", {"index_add": index_add})


@overload(index_put)
def _index_put(a, index, v):
    kind = _kind(a, index)
    if kind is None:
        def plain(a, index, v):
            out = a.copy()
            out[index] = v
            return out
        return plain
    if kind == "tuple":
        rest, items = a.ndim - len(index), max(getattr(t, "ndim", 0) for t in index)
    else:                                   # the index's axes in x, and in v
        rest = a.ndim - {"mask": a.ndim, "rows": index.ndim, "positions": 1}[kind]
        items = index.ndim if kind == "positions" else 1
    if isinstance(v, types.Array) and v.ndim > rest + items:
        raise TypingError(f"s2s_ad: under ad.jit, x[index] = v: a {v.ndim}-D v does not fit "
                          f"the {rest + items} dimensions x[index] has")
    src = ("def impl(a, index, v):\n    out = a.copy()\n" + _flat(kind, "out", index))
    if isinstance(v, types.Array) and v.ndim == rest + items:   # a value per position
        shape = "(v.size,)" if rest == 0 else "(v.size // xs[0].size,) + xs.shape[1:]"
        src += (f"    vs = np.ascontiguousarray(v).reshape({shape})\n"
                "    n = 0\n"
                "    for k in range(flat.shape[0]):\n"
                + ("        n += 1\n" if kind in ("positions", "tuple") else
                   "        if flat[k]:\n            n += 1\n")
                + "    if vs.shape[0] != n and vs.shape[0] != 1:\n"
                "        raise ValueError('x[index] = v: v does not have one value per "
                "selected element')\n"
                "    last = vs.shape[0] - 1\n")
        value = "vs[min(j, last)]"
    else:                                                       # one value for all
        src += "    vs = v\n"
        value = "vs"
    positions = kind in ("positions", "tuple")
    at = "xs[flat[k]]" if positions else "xs[k]"
    src += ("    j = 0\n"
            "    for k in range(flat.shape[0]):\n"
            + (f"        {at} = {value}\n        j += 1\n" if positions else
               f"        if flat[k]:\n            {at} = {value}\n            j += 1\n")
            + "    return out\n")
    return compile_impl(src)


@overload(index_written)
def _index_written(b, index):
    kind = _kind(b, index)
    if kind is None:
        return lambda b, index: written(b, index)
    src = "def impl(b, index):\n" + _flat(kind, "b", index)
    if kind in ("positions", "tuple"):     # the last write of a repeated position wins
        return compile_impl(src + "    return np.ascontiguousarray(written(xs, flat))"
                            ".reshape(shape + xs.shape[1:])\n", {"written": written})
    return compile_impl(src + "    return xs[flat]\n")    # a mask selects each position once
