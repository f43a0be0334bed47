"""Helpers that run while lowering (``@static``): axes and index tuples."""
from .registry import static


@static
def unsupported(**options):
    """Refuse NumPy options the implementation does not take (given as non-None)."""
    for name, value in options.items():
        if value is not None:
            raise ValueError(f"the argument {name}= is not supported")
    return None


@static
def axis_index(axis, ndim, part):
    """The index tuple selecting ``part`` (a slice) along ``axis``."""
    if ndim is None:
        raise ValueError("the rank of the array must be known here")
    axis = normalize(axis, ndim)
    return (slice(None),) * axis + (part,)


@static
def normalize(axis, ndim):
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise TypeError(f"axis must be an integer, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for an array of dimension {ndim}")
    return axis % ndim


@static
def flip_index(axis, ndim):
    """The index reversing the given axes (an int, a tuple, or None: all)."""
    axes = tuple(range(ndim)) if axis is None else (axis if isinstance(axis, tuple) else (axis,))
    axes = {normalize(a, ndim) for a in axes}
    return tuple(slice(None, None, -1) if i in axes else slice(None) for i in range(ndim))


@static
def moved(ndim, source, destination):
    """The permutation np.moveaxis(a, source, destination) applies."""
    src = source if isinstance(source, tuple) else (source,)
    dst = destination if isinstance(destination, tuple) else (destination,)
    if len(src) != len(dst):
        raise ValueError("source and destination must have the same number of axes")
    src = [normalize(a, ndim) for a in src]
    dst = [normalize(a, ndim) for a in dst]
    order = [i for i in range(ndim) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return tuple(order)


@static
def swapped(ndim, axis1, axis2):
    perm = list(range(ndim))
    a, b = normalize(axis1, ndim), normalize(axis2, ndim)
    perm[a], perm[b] = perm[b], perm[a]
    return tuple(perm)


@static
def reduced_count_axes(axis, ndim):
    """``axis`` as a tuple of normalised axes (None: all)."""
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, tuple) else (axis,)
    return tuple(sorted(normalize(a, ndim) for a in axes))


@static
def along_index(ndim, axis):
    """The index that lays a 1-D array along ``axis`` of an ndim array
    (``v[None, :, None]``: Numba's np.expand_dims takes one axis only)."""
    axis = normalize(axis, ndim)
    return tuple(slice(None) if i == axis else None for i in range(ndim))


@static
def rolled(shift, size):
    return shift % size if size else 0


@static
def one_axis(ndim):
    """0 for a 1-D index array (the rank it adds); others are refused."""
    if ndim != 1:
        raise ValueError("indices with more than one dimension along an axis are not supported")
    return 0


@static
def gradient_axes(axis, ndim):
    """np.gradient's axes: all (None), one, or a tuple, normalized."""
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, tuple) else (axis,)
    return tuple(normalize(a, ndim) for a in axes)


@static
def gradient_spacings(varargs, count):
    """One constant spacing per axis: none given (1.0), one for all, or one each.
    Sample-point arrays (non-uniform spacing) are refused."""
    varargs = tuple(v for v in varargs if v is not None)
    if any(not isinstance(v, (int, float)) or isinstance(v, bool) for v in varargs):
        raise ValueError("np.gradient takes constant spacings here (numbers known before "
                         "the run), not arrays of sample points")
    if not varargs:
        return (1.0,) * count
    if len(varargs) == 1:
        return (float(varargs[0]),) * count
    if len(varargs) != count:
        raise ValueError(f"np.gradient takes one spacing or {count}, got {len(varargs)}")
    return tuple(float(v) for v in varargs)
