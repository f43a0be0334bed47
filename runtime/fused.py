"""Helpers of the fused slice loops (``s2s_ad/transforms/fuse_slices.py``).

Compiled code runs a chain of elementwise statements over equally shaped
slices as one loop nest over three indices (``rt.shape3`` pads a shape of
one or two axes with leading ones).  ``at3`` / ``put3`` read and write one
element of an array of one to three axes at those indices, and read a
scalar as itself, so one generated nest serves every rank; the guard in
front of the nest asks ``fusable`` (every operand an array of the first
one's shape, of at most three axes, or a scalar) and ``apart`` (two arrays
share no memory, or are the same elements) and falls back to the
statements as NumPy evaluates them when either says no.  In plain Python
(the cpu module run by NumPy: a tiered first call while Numba compiles)
``fusable`` always says no: there the statements are the fast path, a loop
nest one element at a time the slow one.

Each is a plain NumPy function and, through ``numba.extending.overload``,
the same inside ``numba.njit`` (where the rank is known at compile time, so
the index arithmetic is what a hand-written nest would do).

A nest that adds one value into several shifted slices of one array (a
stencil's adjoint: ``bB[:-2, 1:-1] += c``, ``bB[1:-1, :-2] += c``, ...)
stores the value once in a zero-padded buffer instead (``gather_buffer``),
and ``gather_add`` then adds to every element of the array what reaches it
from each slice, one pass with no store-to-load chain from one element to
the next (which keeps LLVM from vectorising the scatter).
"""
import numpy as np
from numba import types
from numba.extending import overload, register_jitable

from ._nbutil import compile_impl

EXPORTS = ("at3", "put3", "shape3", "fusable", "apart", "gather_buffer", "gather_add")


def _index(x, i, j, k):
    return ((i, j, k)[3 - x.ndim:])


def at3(x, i, j, k):
    """``x[i, j, k]`` of a 3-D array, ``x[j, k]`` of a 2-D one, ``x[k]`` of a
    vector; a scalar ``x`` itself."""
    if isinstance(x, np.ndarray):
        return x[_index(x, i, j, k)]
    return x


def put3(x, i, j, k, value):
    """``x[i, j, k] = value`` (``x[j, k]``, ``x[k]`` for fewer axes)."""
    x[_index(x, i, j, k)] = value


def shape3(x):
    """``x.shape`` with leading ones up to three axes."""
    return (1,) * (3 - x.ndim) + tuple(x.shape)


def fusable(first, *others):
    """Compiled: whether ``first`` is an array of one to three axes and every
    one of ``others`` an array of its shape or a scalar.  In plain Python:
    False (NumPy's statements beat a Python loop nest)."""
    return False


def apart(a, b):
    """Whether arrays ``a`` and ``b`` touch no common memory, or are the very
    same elements (one start, strides and shape); True when either is a scalar."""
    if not isinstance(a, np.ndarray) or not isinstance(b, np.ndarray):
        return True
    if a.size == 0 or b.size == 0:
        return True
    if (a.ctypes.data == b.ctypes.data and a.strides == b.strides and a.shape == b.shape
            and a.dtype == b.dtype):
        return True
    lo_a, hi_a = _extent(a.ctypes.data, a.shape, a.strides, a.itemsize)
    lo_b, hi_b = _extent(b.ctypes.data, b.shape, b.strides, b.itemsize)
    return hi_a <= lo_b or hi_b <= lo_a


@register_jitable
def _extent(start, shape, strides, itemsize):
    """The first byte and one past the last byte an array's elements occupy
    (plain Python, and inside numba.njit)."""
    lo = hi = start
    for n, s in zip(shape, strides):
        if s > 0:
            hi += (n - 1) * s
        else:
            lo += (n - 1) * s
    return lo, hi + itemsize


# -- the same inside numba.njit --------------------------------------------------

def _scalar(x):
    return isinstance(x, (types.Number, types.Boolean))


# Arrays of no axis or more than three never pass ``fusable``; they get an
# implementation all the same, so that the nest the guard skips compiles.

@overload(at3)
def _at3(x, i, j, k):
    if isinstance(x, types.Array):
        if x.ndim == 3:
            return lambda x, i, j, k: x[i, j, k]
        if x.ndim == 2:
            return lambda x, i, j, k: x[j, k]
        if x.ndim == 1:
            return lambda x, i, j, k: x[k]
        rest = (0,) * max(x.ndim - 3, 0)
        if x.ndim == 0:
            return lambda x, i, j, k: x[()]
        return lambda x, i, j, k: x[(i, j, k) + rest]
    if _scalar(x):
        return lambda x, i, j, k: x
    return None


@overload(put3)
def _put3(x, i, j, k, value):
    if not isinstance(x, types.Array):
        return None
    if x.ndim == 3:
        def impl(x, i, j, k, value):
            x[i, j, k] = value
    elif x.ndim == 2:
        def impl(x, i, j, k, value):
            x[j, k] = value
    elif x.ndim == 1:
        def impl(x, i, j, k, value):
            x[k] = value
    elif x.ndim == 0:
        def impl(x, i, j, k, value):
            x[()] = value
    else:
        rest = (0,) * (x.ndim - 3)

        def impl(x, i, j, k, value):
            x[(i, j, k) + rest] = value
    return impl


@overload(shape3)
def _shape3(x):
    if not isinstance(x, types.Array):
        return None
    if x.ndim == 3:
        return lambda x: x.shape
    if x.ndim == 2:
        return lambda x: (1, x.shape[0], x.shape[1])
    if x.ndim == 1:
        return lambda x: (1, 1, x.shape[0])
    if x.ndim == 0:
        return lambda x: (1, 1, 1)
    return lambda x: (x.shape[0], x.shape[1], x.shape[2])


def _shape_test(first, x):
    """The test of one operand against ``first`` (an array of 1-3 axes)."""
    if isinstance(x, types.Array):
        if x.ndim != first.ndim:
            return lambda first, x: False
        return lambda first, x: x.shape == first.shape
    if _scalar(x):
        return lambda first, x: True
    return lambda first, x: False


def _same_shape(first, x):
    pass


@overload(_same_shape)
def _same_shape_nb(first, x):
    return _shape_test(first, x)


@overload(fusable)
def _fusable(first, *others):
    if not isinstance(first, types.Array) or not 1 <= first.ndim <= 3:
        return lambda first, *others: False
    n = len(others[0]) if others and isinstance(others[0], types.BaseTuple) else len(others)
    terms = " and ".join(f"_same_shape(first, others[{k}])" for k in range(n)) or "True"
    scope = {"_same_shape": _same_shape}
    exec(f"def impl(first, *others):\n    return {terms}\n", scope)     # noqa: S102
    return scope["impl"]


@overload(apart)
def _apart(a, b):
    if not (isinstance(a, types.Array) and isinstance(b, types.Array)):
        return lambda a, b: True

    def impl(a, b):
        if a.size == 0 or b.size == 0:
            return True
        pa = a.ctypes.data
        pb = b.ctypes.data
        if pa == pb and a.itemsize == b.itemsize and a.shape == b.shape \
                and a.strides == b.strides:
            return True
        lo_a, hi_a = _extent(pa, a.shape, a.strides, a.itemsize)
        lo_b, hi_b = _extent(pb, b.shape, b.strides, b.itemsize)
        return hi_a <= lo_b or hi_b <= lo_a
    return impl


def gather_buffer(window, spans):
    """(a zero array of ``window``'s shape grown by ``spans[a]`` at both ends of
    each axis ``a`` (axes past ``len(spans)`` not grown), the view of its
    interior: ``window``'s shape)."""
    pads = tuple(spans) + (0,) * (window.ndim - len(spans))
    full = np.zeros(tuple(n + 2 * p for n, p in zip(window.shape, pads)), window.dtype)
    return full, full[tuple(slice(p, p + n) for n, p in zip(window.shape, pads))]


def gather_add(root, lo, spans, buffer, shifts):
    """``root[lo + q] += sum_w buffer[q + shifts[w]]`` over the box of ``root``
    the slices cover: ``q`` from 0 to ``buffer.shape - spans`` along each
    axis.  A slice starting ``d`` past ``lo`` along an axis (``d <= spans``)
    has ``shifts = spans - d`` there, so the buffer is read where that
    slice's value for the element was stored, and its zero padding stands
    for the elements the slice does not reach.  ``lo``, ``spans`` and each
    of ``shifts`` name the first axes; later axes have no offset."""
    r = root.ndim
    lo, spans = _axes(lo, r), _axes(spans, r)
    box = tuple(n - p for n, p in zip(buffer.shape, spans))
    target = root[tuple(slice(a, a + m) for a, m in zip(lo, box))]
    for shift in shifts:
        target += buffer[tuple(slice(a, a + m) for a, m in zip(_axes(shift, r), box))]


def _axes(t, ndim):
    return tuple(t) + (0,) * (ndim - len(t))


def _gather_buffer_src(ndim, s):
    """Source of gather_buffer: the buffer is allocated empty and only its
    padding zeroed (the nest writes every element of the interior), one
    slab at each end of each padded axis."""
    shape = ", ".join(f"window.shape[{a}] + 2 * spans[{a}]" if a < s else f"window.shape[{a}]"
                      for a in range(ndim))
    inner = ", ".join(f"spans[{a}]:spans[{a}] + window.shape[{a}]" if a < s else ":"
                      for a in range(ndim))
    lines = ["def impl(window, spans):",
             f"    full = np.empty(({shape},), window.dtype)"]
    for a in range(s):
        lead = ":, " * a
        lines += [f"    full[{lead}:spans[{a}]] = 0",
                  f"    full[{lead}spans[{a}] + window.shape[{a}]:] = 0"]
    lines.append(f"    return full, full[{inner}]")
    return "\n".join(lines) + "\n"


@overload(gather_buffer)
def _gather_buffer(window, spans):
    if not isinstance(window, types.Array) or not isinstance(spans, types.BaseTuple) \
            or len(spans) > window.ndim:
        return None
    return compile_impl(_gather_buffer_src(window.ndim, len(spans)))


def _gather_add_src(ndim, s, k):
    """Source of gather_add for a root of ``ndim`` axes, offsets along its first
    ``s`` and ``k`` slices: one loop nest, each element of the root
    read-modified-written once.  Indices and offsets are unsigned, so that no
    index is checked for being negative (Numba wraps negative indices round)
    and LLVM vectorises the inner loop: measured, as fast as a hand-written
    nest with constant offsets, where signed offsets were 3.5x slower."""
    lines = ["def impl(root, lo, spans, buffer, shifts):"]
    for w in range(k):
        lines += [f"    a{w}_{a} = np.uint64(shifts[{w}][{a}])" for a in range(s)]
    lines += [f"    m{a} = np.uint64(buffer.shape[{a}]" + (f" - spans[{a}])" if a < s else ")")
              for a in range(ndim)]
    lines += [f"    l{a} = np.uint64(lo[{a}])" for a in range(s)]
    at = ", ".join(f"l{a} + q{a}" if a < s else f"q{a}" for a in range(ndim))
    terms = " + ".join(
        "buffer[{}]".format(", ".join(f"q{a} + a{w}_{a}" if a < s else f"q{a}"
                                      for a in range(ndim))) for w in range(k))
    for a in range(ndim):
        lines.append("    " * (a + 1) + f"for q{a} in range(m{a}):")
    lines.append("    " * (ndim + 1) + f"root[{at}] += {terms}")
    return "\n".join(lines) + "\n"


@overload(gather_add)
def _gather_add(root, lo, spans, buffer, shifts):
    if not (isinstance(root, types.Array) and isinstance(buffer, types.Array)
            and isinstance(lo, types.BaseTuple) and 1 <= len(lo) <= root.ndim
            and isinstance(shifts, types.BaseTuple)):
        return None
    return compile_impl(_gather_add_src(root.ndim, len(lo), len(shifts)))
