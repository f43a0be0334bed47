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
"""
import numpy as np
from numba import types
from numba.extending import overload, register_jitable

EXPORTS = ("at3", "put3", "shape3", "fusable", "apart")


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
