"""Padding, tiling, repeating and splitting, over slices, concatenate and reshape.

Pad widths, repeat counts, tile repetitions and split points are constants
(normalised while lowering by the ``@static`` helpers below); axis lengths
are read at run time with ``np.shape``.  Where NumPy refuses an input whose
validity depends on an axis length (an uneven ``np.split``, a reflection
wider than the axis), a ``np.reshape`` to the shape NumPy's result would
have (or of ``np.arange(n)``) raises a ValueError instead of returning a
wrong shape.
"""
import numpy as np

from ._axes import axis_index, normalize
from .registry import implements, static

# -- constants, while lowering ------------------------------------------------------


@static
def pad_pairs(pad_width, ndim):
    """``pad_width`` as one ``(before, after)`` pair per axis (NumPy's broadcasting)."""
    widths = np.asarray(pad_width)
    if widths.dtype.kind not in "iu":
        raise TypeError(f"pad_width must be integers, got {pad_width!r}")
    try:
        pairs = np.broadcast_to(widths, (ndim, 2))
    except ValueError:
        raise ValueError(f"pad_width {pad_width!r} does not fit an array of dimension "
                         f"{ndim}") from None
    if (pairs < 0).any():
        raise ValueError("pad widths must be non-negative")
    return tuple((int(b), int(a)) for b, a in pairs)


@static
def pad_values(values, ndim):
    """Constant ``constant_values`` as one ``(before, after)`` pair per axis."""
    pairs = np.broadcast_to(np.asarray(values, dtype=float), (ndim, 2))
    return tuple((float(b), float(a)) for b, a in pairs)


_PAD_MODES = ("constant", "edge", "reflect", "symmetric", "wrap")


@static
def pad_mode(mode, reflect_type):
    """Check ``mode`` (one of the modes implemented) and ``reflect_type``."""
    if mode not in _PAD_MODES:
        raise ValueError(f"mode={mode!r} is not supported (supported: "
                         f"{', '.join(map(repr, _PAD_MODES))})")
    if reflect_type != "even":
        raise ValueError("reflect_type='odd' is not supported")
    return mode


@static
def counts(reps, ndim, what):
    """A non-negative integer or tuple of them, as a tuple."""
    values = reps if isinstance(reps, tuple) else (reps,)
    if not all(isinstance(r, (int, np.integer)) and not isinstance(r, bool) and r >= 0
               for r in values):
        raise TypeError(f"{what} must be non-negative integers written as constants, "
                        f"got {reps!r}")
    return tuple(int(r) for r in values)


@static
def tile_reps(reps, ndim):
    """``reps`` padded with ones in front to at least ``ndim`` entries."""
    reps = counts(reps, ndim, "reps")
    return (1,) * (ndim - len(reps)) + reps


@static
def is_count(value):
    """Whether ``indices_or_sections``/``repeats`` is one integer (else a sequence)."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return True
    if isinstance(value, tuple) and all(isinstance(v, (int, np.integer)) for v in value):
        return False
    raise TypeError(f"expected an integer or a sequence of integers written as constants, "
                    f"got {value!r}")


@static
def sections(n):
    if n <= 0:
        raise ValueError("the number of sections must be positive")
    return n


@static
def split_bounds(indices):
    """Split points as ``(start, stop)`` slice bounds (None: the ends)."""
    points = (None,) + tuple(int(i) for i in indices) + (None,)
    return tuple(zip(points[:-1], points[1:]))


@static
def split_axis(ndim, least, axis, name):
    """``hsplit``/``vsplit``'s axis, refusing arrays of too low a rank."""
    if ndim < least:
        raise ValueError(f"{name} only works on arrays of {least} or more dimensions")
    return axis


# -- shapes at run time, built while lowering --------------------------------------


def _dims(shape, k, nd, axis, size):
    """``shape[k:nd]`` with entry ``axis`` replaced by ``size``, as a tuple."""
    return () if k == nd else \
        ((size if k == axis else shape[k]),) + _dims(shape, k + 1, nd, axis, size)


def _shape_with(x, axis, size):
    """``np.shape(x)`` with entry ``axis`` replaced by ``size``."""
    return _dims(np.shape(x), 0, np.ndim(x), axis, size)


def _copies(x, r):
    """``(x,) * r`` for a constant ``r >= 1``."""
    return (x,) + (_copies(x, r - 1) if r > 1 else ())


# -- np.pad -------------------------------------------------------------------------


@implements(np.pad)
def pad(array, pad_width, mode="constant", constant_values=0, reflect_type="even"):
    """Blocks concatenated before and after each axis (modes constant, edge,
    reflect, symmetric, wrap)."""
    nd = np.ndim(array)
    widths = pad_pairs(pad_width, nd)
    kind = pad_mode(mode, reflect_type)
    if np.ndim(constant_values) == 0:
        values = constant_values
    else:
        values = pad_values(constant_values, nd)
    return _pad_axes(array, widths, kind, values, 0, nd)


def _pad_axes(x, widths, mode, values, k, nd):
    if k == nd:
        result = x
    else:
        result = _pad_axes(_pad_axis(x, widths[k][0], widths[k][1], mode, values, k, nd),
                           widths, mode, values, k + 1, nd)
    return result


def _pad_axis(x, before, after, mode, values, k, nd):
    """``x`` padded along axis ``k``."""
    if before == 0 and after == 0:
        result = x
    elif mode == "constant":
        if np.ndim(values) == 0:
            lo, hi = values, values
        else:
            lo, hi = values[k][0], values[k][1]
        result = np.concatenate(
            ((np.zeros(_shape_with(x, k, before)) + lo,) if before > 0 else ()) + (x,) +
            ((np.zeros(_shape_with(x, k, after)) + hi,) if after > 0 else ()), axis=k)
    elif mode == "edge":
        result = np.concatenate(
            ((np.broadcast_to(x[axis_index(k, nd, slice(0, 1))], _shape_with(x, k, before)),)
             if before > 0 else ()) + (x,) +
            ((np.broadcast_to(x[axis_index(k, nd, slice(-1, None))], _shape_with(x, k, after)),)
             if after > 0 else ()), axis=k)
    else:
        if mode == "reflect":       # the edge value is not repeated
            lo = slice(before, 0, -1)
            hi = slice(-2, -2 - after, -1)
        elif mode == "symmetric":   # the edge value is repeated
            lo = slice(before - 1, None, -1)
            hi = slice(-1, -1 - after, -1)
        else:                       # wrap: the other end
            lo = slice(-before, None)
            hi = slice(0, after)
        joined = np.concatenate(
            ((x[axis_index(k, nd, lo)],) if before > 0 else ()) + (x,) +
            ((x[axis_index(k, nd, hi)],) if after > 0 else ()), axis=k)
        # A width past the axis length gives short slices: the reshape refuses them.
        result = np.reshape(joined, _shape_with(x, k, np.shape(x)[k] + before + after))
    return result


# -- np.tile, np.repeat --------------------------------------------------------------


@implements(np.tile)
def tile(A, reps):
    """Copies of ``A`` concatenated along each axis (``reps`` a constant)."""
    nd = np.ndim(A)
    reps = tile_reps(reps, nd)
    if nd == 0:
        x = np.reshape(A, (1,) * len(reps))
    elif len(reps) > nd:
        x = _lead(A, len(reps) - nd)
    else:
        x = A
    return _tile_axes(x, reps, 0)


def _lead(x, k):
    """``x`` with ``k`` leading axes of length 1 (one int axis at a time, for Numba)."""
    return x if k == 0 else _lead(np.expand_dims(x, 0), k - 1)


def _tile_axes(x, reps, k):
    if k == len(reps):
        result = x
    else:
        result = _tile_axes(_tile_axis(x, reps[k], k), reps, k + 1)
    return result


def _tile_axis(x, r, k):
    if r == 1:
        result = x
    elif r == 0:
        result = x[axis_index(k, np.ndim(x), slice(0, 0))]
    else:
        result = np.concatenate(_copies(x, r), axis=k)
    return result


@implements(np.repeat, methods=("repeat",))
def repeat(a, repeats, axis=None):
    """Each element repeated along ``axis`` (of the flattened array: None);
    ``repeats`` a constant integer or one per element."""
    if axis is None:
        result = np.repeat(np.ravel(a), repeats, 0)
    else:
        ax = normalize(axis, np.ndim(a))
        b = np.moveaxis(a, ax, 0)
        if is_count(repeats):
            r = counts(repeats, 0, "repeats")[0]
            if r == 0:
                merged = b[0:0]
            else:   # (n, ...) -> (n, r, ...) -> (n * r, ...)
                merged = np.reshape(np.stack(_copies(b, r), axis=1),
                                    _shape_with(b, 0, np.shape(b)[0] * r))
        else:
            each = counts(repeats, 0, "repeats")
            if len(each) == 1:
                merged = np.repeat(b, each[0], 0)
            else:    # one count per element (as many as elements: checked)
                rows = b[0:len(each) * _equal(np.shape(b)[0], len(each), 1)]
                merged = np.concatenate(_repeated_rows(rows, each, 0), axis=0)
        result = np.moveaxis(merged, 0, ax)
    return result


def _repeated_rows(b, each, i):
    """Row ``i`` of ``b`` ``each[i]`` times, then the rows after it."""
    rest = _repeated_rows(b, each, i + 1) if i + 1 < len(each) else ()
    return (_copies(b[i:i + 1], each[i]) if each[i] > 0 else ()) + rest


# -- np.split and its variants: tuples of pieces -------------------------------------


@implements(np.split)
def split(ary, indices_or_sections, axis=0):
    """Equal sections (an integer) or pieces between split points, as a tuple."""
    ax = normalize(axis, np.ndim(ary))
    b = np.moveaxis(ary, ax, 0)
    if is_count(indices_or_sections):
        k = sections(indices_or_sections)
        size = _equal(np.shape(b)[0], k, np.shape(b)[0] // k)
        result = _sections(b, k, 0, size, ax)
    else:
        result = _cut(b, split_bounds(indices_or_sections), 0, ax)
    return result


def _equal(n, k, size):
    """``size`` where ``n == k * size``; else the reshape raises a ValueError
    (an uneven split, a count per element for another number of elements)."""
    return np.shape(np.reshape(np.arange(n), (k, size)))[1]


def _sections(b, k, j, size, ax):
    piece = np.moveaxis(b[j * size:(j + 1) * size], 0, ax)
    return (piece,) + (_sections(b, k, j + 1, size, ax) if j + 1 < k else ())


def _cut(b, bounds, j, ax):
    piece = np.moveaxis(b[bounds[j][0]:bounds[j][1]], 0, ax)
    return (piece,) + (_cut(b, bounds, j + 1, ax) if j + 1 < len(bounds) else ())


@implements(np.array_split)
def array_split(ary, indices_or_sections, axis=0):
    """As ``np.split``; ``k`` sections of an axis of length ``n`` need not be
    equal: the first ``n % k`` get one more element."""
    if is_count(indices_or_sections):
        ax = normalize(axis, np.ndim(ary))
        b = np.moveaxis(ary, ax, 0)
        k = sections(indices_or_sections)
        n = np.shape(b)[0]
        result = _uneven(b, k, 0, n // k, n % k, ax)
    else:
        result = np.split(ary, indices_or_sections, axis)
    return result


def _uneven(b, k, j, size, extra, ax):
    lo = j * size + np.minimum(j, extra)
    hi = (j + 1) * size + np.minimum(j + 1, extra)
    return (np.moveaxis(b[lo:hi], 0, ax),) + (_uneven(b, k, j + 1, size, extra, ax)
                                              if j + 1 < k else ())


@implements(np.hsplit)
def hsplit(ary, indices_or_sections):
    """``np.split`` along axis 1 (axis 0 for vectors)."""
    nd = np.ndim(ary)
    return np.split(ary, indices_or_sections, split_axis(nd, 1, 1 if nd > 1 else 0, "hsplit"))


@implements(np.vsplit)
def vsplit(ary, indices_or_sections):
    """``np.split`` along axis 0 of an array of at least 2 dimensions."""
    return np.split(ary, indices_or_sections, split_axis(np.ndim(ary), 2, 0, "vsplit"))
