"""In-place scatters and selection: ``np.add.at``, ``np.put``, ``np.partition``,
``np.nonzero`` (and ``np.where`` with one argument).

``np.add.at(a, idx, b)`` and ``np.put(a, ind, v)`` write into ``a``: each is
lowered as ``a[:] = <the new array>``, the new array computed by one
primitive (``rt.add_at``/``rt.put_into``, s2s_ad/rules/extras.py), so the
write is an ordinary element write the transforms already differentiate
(the overwritten values are saved and restored in reverse mode).  Repeated
indices count every time in ``np.add.at`` and only the last write in
``np.put``, as in NumPy.  ``np.partition`` gathers through
``np.argpartition``, as ``np.sort`` gathers through ``np.argsort``.
"""
import numpy as np

from ... import runtime as _rt
from ._axes import unsupported
from .registry import implements, static


@static
def _one_to_three_axes(ndim):
    raise ValueError(f"np.nonzero/np.where of a {ndim}-D array: 1 to 3 dimensions are "
                     f"supported (the number of dimensions must be known)")


@implements(np.add.at, name="np.add.at")
def add_at(a, indices, b=None):
    """`a[:] = rt.add_at(a, indices, b)`: a's new values, every repeat added."""
    a[:] = _rt.add_at(a, indices, b)
    return None


@implements(np.put)
def put(a, ind, v, mode="raise"):
    """`a[:] = rt.put_into(a, ind, v, mode)`: the last write of a position wins."""
    a[:] = _rt.put_into(a, ind, v, mode)
    return None


@implements(np.partition)
def partition(a, kth, axis=-1, kind="introselect", order=None):
    """`np.take_along_axis` through `np.argpartition`."""
    _ = unsupported(order=order)
    if axis is None:
        flat = np.ravel(a)
        result = np.take_along_axis(flat, np.argpartition(flat, kth), 0)
    else:
        result = np.take_along_axis(a, np.argpartition(a, kth, axis), axis)
    return result


@implements(np.nonzero)
def nonzero(a):
    """One index array per axis (`np.where(a)` with one argument is this too)."""
    if np.ndim(a) == 1:
        result = (_rt.nonzero_axis(a, 0),)
    elif np.ndim(a) == 2:
        result = (_rt.nonzero_axis(a, 0), _rt.nonzero_axis(a, 1))
    elif np.ndim(a) == 3:
        result = (_rt.nonzero_axis(a, 0), _rt.nonzero_axis(a, 1), _rt.nonzero_axis(a, 2))
    else:
        result = _one_to_three_axes(np.ndim(a))
    return result
