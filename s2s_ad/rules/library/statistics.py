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



# -- covariance and correlation ------------------------------------------------------
# NumPy's np.cov returns c.squeeze(): a 0-d array for one variable.  The number of
# variables is known while lowering for a 1-D x (one) or when y is given (two or
# more); for a 2-D x alone it is a run-time length, and the result is the 2-D matrix:
# one variable there raises a ValueError at run time (_several) rather than returning
# a (1, 1) matrix where NumPy returns a 0-d array.

def _variables(m, rowvar, other):
    """``m`` as (variables, observations).  NumPy transposes ``x`` when not ``rowvar``
    (unless 1-D), and ``y`` then unless it has one row."""
    if np.ndim(m) == 1:
        return np.reshape(m, (1, -1))
    if rowvar:
        return m
    if not other:
        return np.transpose(m)
    return np.transpose(m) if np.shape(m)[0] != 1 else m


def _several(c):
    """``c``, (k, k) with k > 1; k == 1 fails a reshape (NumPy would return a 0-d
    array: np.cov/np.corrcoef of a 2-D array with a single variable)."""
    k = np.shape(c)[0]
    rows = np.shape(np.reshape(np.arange(k * k), (k + (k == 1), k)))[1]
    return np.reshape(c, (rows, rows))


@implements(np.cov)
def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None,
        dtype=None):
    """Covariance of the variables (rows unless not ``rowvar``) over the observations,
    with ``fweights``/``aweights``; one variable (a 1-D ``m``) gives a 0-d array."""
    _ = unsupported(dtype=dtype)
    x = _variables(m, rowvar, False)
    if y is not None:
        x = np.concatenate((x, _variables(y, rowvar, True)), axis=0)
    if ddof is None:
        ddof = 0 if bias else 1
    if fweights is None and aweights is None:
        d = x - np.mean(x, axis=1, keepdims=True)
        c = (d @ np.transpose(d)) / (np.shape(x)[1] - ddof)
    else:
        if aweights is None:
            w = fweights
        elif fweights is None:
            w = aweights
        else:
            w = fweights * aweights
        w_sum = np.sum(w)
        d = x - np.sum(x * w, axis=1, keepdims=True) / w_sum
        if ddof == 0:
            fact = w_sum
        elif aweights is None:
            fact = w_sum - ddof
        else:
            fact = w_sum - ddof * np.sum(w * aweights) / w_sum
        c = ((d * w) @ np.transpose(d)) / fact
    if np.ndim(m) == 1 and y is None:
        return c[0, 0]
    if y is None:
        return _several(c)
    return c


@implements(np.corrcoef)
def corrcoef(x, y=None, rowvar=True, bias=None, ddof=None, dtype=None):
    """Pearson correlation coefficients: ``np.cov`` over the outer product of its
    diagonal's square roots, clipped to [-1, 1] (``bias`` and ``ddof`` have no effect,
    as in NumPy); one variable gives ``c / c``, a 0-d array."""
    c = np.cov(x, y, rowvar, dtype=dtype)
    if np.ndim(c) == 0:
        return c / c
    d = np.sqrt(np.diagonal(c))
    return np.clip(c / np.reshape(d, (-1, 1)) / np.reshape(d, (1, -1)), -1.0, 1.0)
