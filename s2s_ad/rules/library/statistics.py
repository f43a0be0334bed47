"""Reductions and statistics written over ruled primitives."""
import numpy as np

from ._axes import along_index, axis_index, unsupported
from .registry import implements


@implements(np.var, methods=("var",))
def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    """Mean squared deviation from the mean, divided by ``n - ddof``."""
    _ = unsupported(dtype=dtype, out=out)
    mean = np.mean(a, axis=axis, keepdims=True)
    d = a - mean
    n = np.size(a) / np.size(mean)         # the number of values reduced
    return np.sum(d * d, axis=axis, keepdims=keepdims) / (n - ddof)


@implements(np.std, methods=("std",))
def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    """The square root of ``np.var``."""
    _ = unsupported(dtype=dtype, out=out)
    return np.sqrt(np.var(a, axis=axis, ddof=ddof, keepdims=keepdims))


@implements(np.average)
def average(a, axis=None, weights=None, returned=False, keepdims=False):
    """``sum(w * a) / sum(w)``; weights of ``a``'s shape, or 1-D along ``axis``."""
    if returned:
        _ = unsupported(returned=returned)
    if weights is None:
        result = np.mean(a, axis=axis, keepdims=keepdims)
    elif axis is None or np.ndim(weights) == np.ndim(a):
        w = weights + np.zeros_like(a)
        result = np.sum(a * w, axis=axis, keepdims=keepdims) / np.sum(
            w, axis=axis, keepdims=keepdims)
    else:
        w = weights[along_index(np.ndim(a), axis)]
        result = np.sum(a * w, axis=axis, keepdims=keepdims) / np.sum(
            w + np.zeros_like(a), axis=axis, keepdims=keepdims)
    return result


@implements(np.ptp)
def ptp(a, axis=None, out=None, keepdims=False):
    """``max - min``."""
    _ = unsupported(out=out)
    return np.max(a, axis=axis, keepdims=keepdims) - np.min(a, axis=axis, keepdims=keepdims)


@implements(np.nansum)
def nansum(a, axis=None, dtype=None, out=None, keepdims=False):
    """``np.sum`` with NaNs counted as zero (their derivative is zero)."""
    _ = unsupported(dtype=dtype, out=out)
    return np.sum(np.where(np.isnan(a), 0.0, a), axis=axis, keepdims=keepdims)


@implements(np.nanmean)
def nanmean(a, axis=None, dtype=None, out=None, keepdims=False):
    """The mean of the values that are not NaN."""
    _ = unsupported(dtype=dtype, out=out)
    nan = np.isnan(a)
    total = np.sum(np.where(nan, 0.0, a), axis=axis, keepdims=keepdims)
    return total / np.sum(np.where(nan, 0.0, 1.0), axis=axis, keepdims=keepdims)


@implements(np.nanmax)
def nanmax(a, axis=None, out=None, keepdims=False):
    """``np.max`` ignoring NaNs."""
    _ = unsupported(out=out)
    return np.max(np.where(np.isnan(a), -np.inf, a), axis=axis, keepdims=keepdims)


@implements(np.nanmin)
def nanmin(a, axis=None, out=None, keepdims=False):
    """``np.min`` ignoring NaNs."""
    _ = unsupported(out=out)
    return np.min(np.where(np.isnan(a), np.inf, a), axis=axis, keepdims=keepdims)


@implements(np.diff)
def diff(a, n=1, axis=-1):
    """Differences of neighbours along ``axis``, ``n`` times."""
    upper = axis_index(axis, np.ndim(a), slice(1, None))
    lower = axis_index(axis, np.ndim(a), slice(None, -1))
    d = a[upper] - a[lower]
    if n > 1:
        d = np.diff(d, n - 1, axis)
    return d


@implements(np.logaddexp)
def logaddexp(x1, x2):
    """``log(exp(x1) + exp(x2))`` without overflow."""
    m = np.maximum(x1, x2)
    return m + np.log1p(np.exp(-np.abs(x1 - x2)))


@implements(np.logaddexp2)
def logaddexp2(x1, x2):
    """``log2(2**x1 + 2**x2)`` without overflow."""
    m = np.maximum(x1, x2)
    return m + np.log1p(np.exp2(-np.abs(x1 - x2))) / 0.6931471805599453

