"""Small NumPy helpers shared by the plain-Python runtime functions.

Guarantees: nothing here allocates more than its result; every helper is
pure and works on Python scalars, NumPy scalars and arrays alike.
"""

import numpy as np
from numpy.lib.array_utils import normalize_axis_tuple


def is_array(x):
    """True for ndarrays (0-d included); Python and NumPy scalars are not."""
    return isinstance(x, np.ndarray)


def grad_dtype(x):
    """dtype a cotangent of `x` gets: x's own if inexact, else float64.

    Integer primals have no meaningful gradient dtype of their own; float64
    keeps the arithmetic exact enough and mirrors NumPy's int -> float rule.
    """
    dt = np.result_type(x)
    return dt if np.issubdtype(dt, np.inexact) else np.dtype(np.float64)


def scalar_like(v, x):
    """Value `v` (scalar or size-1 array) as a scalar of scalar `x`'s type.

    NumPy inexact scalars keep their precision (float32 stays float32);
    a Python complex gives a Python complex; other Python numbers and
    integer scalars give a Python float.
    """
    if isinstance(v, np.ndarray):
        v = v.item()
    if isinstance(x, np.inexact):
        return x.dtype.type(v)
    return complex(v) if type(x) is complex else float(v)


def norm_axes(axis, ndim):
    """Normalise `axis` (None, int or tuple of ints) to a sorted tuple."""
    if axis is None:
        return tuple(range(ndim))
    if type(axis) is int and -ndim <= axis < ndim:
        return (axis % ndim,)
    return tuple(sorted(normalize_axis_tuple(axis, ndim)))


def broadcast_view(g, shape, axes):
    """Read-only view of reduction output `g` repeated along `axes` to `shape`.

    `g` is shaped like the reduction's output, with the reduced `axes`
    dropped or kept as length 1.  ``np.broadcast_to`` with the axes
    re-inserted, at a fraction of its overhead (it matters on small arrays).
    """
    if np.ndim(g) == 0:                  # one value everywhere
        axes = range(len(shape))
    kept = tuple(1 if d in axes else n for d, n in enumerate(shape))
    g = np.ascontiguousarray(g).reshape(kept)
    strides = tuple(0 if d in axes else s for d, s in enumerate(g.strides))
    view = np.ndarray(shape, g.dtype, g, 0, strides)
    view.flags.writeable = False
    return view


def expand_reduced(g, axes, keepdims):
    """Re-insert reduced axes into a reduction's output/cotangent `g`.

    After this `g` broadcasts against the reduction's input, which is what
    every reduction adjoint needs.
    """
    g = np.asarray(g)
    return g if keepdims else np.expand_dims(g, axes)


def weak_scalar(s, arr):
    """Scalar `s` converted to `arr`'s float dtype (NEP 50 "weak" scalar).

    Both backends treat a scalar operand this way, so float32 arrays stay
    float32 whatever the scalar's own precision is.
    """
    dt = arr.dtype if np.issubdtype(arr.dtype, np.inexact) else None
    return s if dt is None else dt.type(s)
