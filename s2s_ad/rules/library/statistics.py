"""Reductions and statistics written over ruled primitives."""
import numpy as np

from ._axes import along_index, axis_index, gradient_axes, gradient_spacings, unsupported
from .registry import implements


@implements(np.var, methods=("var",))
def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    """Mean squared deviation from the mean, divided by ``n - ddof``."""
    _ = unsupported(dtype=dtype, out=out)
    mean = np.mean(a, axis=axis, keepdims=True)
    d = a - mean
    n = np.size(a) / np.size(mean)         # the number of values reduced
    # |d|^2: NumPy's variance of complex values is real (conj and real are the
    # identity for real ones)
    return np.sum(np.real(d * np.conj(d)), axis=axis, keepdims=keepdims) / (n - ddof)


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


@implements(np.trapezoid)
def trapezoid(y, x=None, dx=1.0, axis=-1):
    """The trapezoid rule along ``axis``: spacing ``dx``, or the differences of
    the sample points ``x`` (1-D, laid along ``axis``, or shaped like ``y``)."""
    y = np.asarray(y)              # lists too, as NumPy takes them
    nd = np.ndim(y)
    upper = axis_index(axis, nd, slice(1, None))
    lower = axis_index(axis, nd, slice(None, -1))
    pairs = y[upper] + y[lower]
    if x is None:
        return np.sum(pairs, axis=axis) * (0.5 * dx)
    x = np.asarray(x)
    if np.ndim(x) == 1:
        steps = np.diff(x)[along_index(nd, axis)]
    else:
        steps = np.diff(x, 1, axis)
    return np.sum(steps * pairs, axis=axis) * 0.5


@implements(np.gradient)
def gradient(f, h0=None, h1=None, h2=None, h3=None, axis=None, edge_order=1):
    """Central differences inside, one-sided ones at the two ends (``edge_order``
    1), with a constant spacing per axis (NumPy's ``*varargs``: none, one for
    every axis, or one each, up to four); one array per axis (a tuple when
    there are several, as NumPy's)."""
    _ = unsupported(edge_order=None if edge_order == 1 else edge_order)
    nd = np.ndim(f)
    axes = gradient_axes(axis, nd)
    spacings = gradient_spacings((h0, h1, h2, h3), len(axes))
    grads = []
    for a, h in zip(axes, spacings):
        grads.append(_gradient_along(f, a, h, nd))
    if len(grads) == 1:
        return grads[0]
    return tuple(grads)


def _gradient_along(f, axis, h, nd):
    inner = (f[axis_index(axis, nd, slice(2, None))] -
             f[axis_index(axis, nd, slice(None, -2))]) / (2.0 * h)
    first = (f[axis_index(axis, nd, slice(1, 2))] - f[axis_index(axis, nd, slice(0, 1))]) / h
    last = (f[axis_index(axis, nd, slice(-1, None))] -
            f[axis_index(axis, nd, slice(-2, -1))]) / h
    return np.concatenate((first, inner, last), axis=axis)


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
