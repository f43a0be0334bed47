"""Sorting and order statistics written over ``np.argsort`` and
``np.take_along_axis``.

``np.sort`` gathers through the sorting permutation, so its adjoint scatters
the cotangent back through it.  Quantiles use NumPy's default "linear"
method as a weighted sum of the sorted values: the weight of the k-th is
``max(0, 1 - |k - q (n - 1)|)`` (the two neighbours of ``q (n - 1)`` get
``1 - f`` and ``f``), so one formula serves a scalar and a 1-D ``q``, and the
derivative in ``a`` goes to the one or two values used.  With ties in ``a``
the derivative goes to the tied value the sort put in that position (a
valid subgradient).
"""
import numpy as np

from ._axes import normalize, unsupported
from .registry import implements, static


@static
def _linear_only(method):
    if method != "linear":
        raise ValueError(f"method={method!r} is not supported (only 'linear', NumPy's default)")
    return None


def _expand_to(x, rank):
    """``x`` with axes of length 1 appended up to ``rank`` (one at a time: Numba's
    np.expand_dims takes a single axis)."""
    if np.ndim(x) < rank:
        result = _expand_to(np.expand_dims(x, -1), rank)
    else:
        result = x
    return result


@implements(np.sort)
def sort(a, axis=-1, kind=None, order=None, stable=None):
    """``np.take_along_axis`` through the sorting permutation (``np.argsort``)."""
    _ = unsupported(order=order)
    if axis is None:
        flat = np.ravel(a)
        result = np.take_along_axis(flat, np.argsort(flat), 0)
    else:
        result = np.take_along_axis(a, np.argsort(a, axis), axis)
    return result


@implements(np.quantile)
def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, weights=None, interpolation=None):
    """Linear interpolation between the sorted values (NumPy's default method)."""
    _ = unsupported(out=out, weights=weights, interpolation=interpolation)
    _ = _linear_only(method)
    if axis is None:
        b = np.sort(np.ravel(a))
    else:
        b = np.sort(np.moveaxis(a, axis, 0), axis=0)
    n = np.shape(b)[0]
    if np.ndim(q) == 0:
        w = np.maximum(0.0, 1.0 - np.abs(np.arange(n) - q * (n - 1)))
        if np.ndim(b) > 1:
            w = _expand_to(w, np.ndim(b))
        result = np.sum(w * b, axis=0)
    else:
        pos = np.expand_dims(q * (n - 1), 1)
        w = np.maximum(0.0, 1.0 - np.abs(np.arange(n) - pos))
        if np.ndim(b) > 1:
            w = _expand_to(w, np.ndim(b) + 1)
        result = np.sum(w * b, axis=1)
    if keepdims and axis is None:
        result = _expand_to(result, np.ndim(q) + np.ndim(a))
    elif keepdims:
        result = np.expand_dims(result, normalize(axis, np.ndim(a)) + np.ndim(q))
    return result


@implements(np.percentile)
def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, weights=None, interpolation=None):
    """``np.quantile`` of ``q / 100``."""
    _ = unsupported(out=out, weights=weights, interpolation=interpolation)
    return np.quantile(a, q / 100.0, axis=axis, method=method, keepdims=keepdims)


@implements(np.median)
def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """``np.quantile(a, 0.5)``: the middle value, or the mean of the two middle ones."""
    _ = unsupported(out=out)
    return np.quantile(a, 0.5, axis=axis, keepdims=keepdims)
