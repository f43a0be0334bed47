"""Convolutions, interpolation, polynomials, vector products and ``math`` reductions
written over ruled primitives: np.convolve, np.correlate, np.interp, np.polyval,
np.vecdot, np.matvec, np.vecmat, math.fsum, math.prod, math.dist."""
import math

import numpy as np

from ._axes import unsupported
from .registry import implements, static


@static
def _mode(mode):
    if mode not in ("full", "same", "valid"):
        raise ValueError(f"mode must be 'full', 'same' or 'valid', got {mode!r}")
    return mode


def _full_convolution(a, v):
    """Every product ``a[j] v[i]`` added at ``i + j``: one shifted, scaled copy of
    ``a`` per entry of ``v`` (both 1-D)."""
    a = np.asarray(a)              # a list ([1.0, -1.0]) too, as NumPy takes it
    v = np.asarray(v)
    n = np.size(a)
    m = np.size(v)
    full = np.zeros(n + m - 1, dtype=(a[:1] * v[:1]).dtype)
    for i in range(m):
        full[i:i + n] += v[i] * a
    return full


@implements(np.convolve)
def convolve(a, v, mode="full"):
    """Shifted copies of ``a`` scaled by ``v``'s entries, summed; ``same`` and
    ``valid`` are the centred and the fully overlapping parts, as NumPy's."""
    mode = _mode(mode)
    full = _full_convolution(a, v)
    if mode == "full":
        return full
    longer = max(np.size(a), np.size(v))
    shorter = min(np.size(a), np.size(v))
    if mode == "same":
        start = (shorter - 1) // 2
        return full[start:start + longer]
    return full[shorter - 1:longer]


@implements(np.correlate)
def correlate(a, v, mode="valid"):
    """``np.convolve`` with ``v`` reversed and conjugated (NumPy's centring of
    ``same`` when ``a`` is the shorter one)."""
    mode = _mode(mode)
    full = _full_convolution(a, np.conj(np.asarray(v)[::-1]))
    if mode == "full":
        return full
    longer = max(np.size(a), np.size(v))
    shorter = min(np.size(a), np.size(v))
    if mode == "same":
        start = (shorter - 1) // 2 if np.size(a) >= np.size(v) else shorter // 2
        return full[start:start + longer]
    return full[shorter - 1:longer]


@implements(np.interp)
def interp(x, xp, fp, left=None, right=None, period=None):
    """The line through the two points of ``(xp, fp)`` around each ``x`` (``xp``
    increasing); ``fp[0]`` / ``fp[-1]`` (or ``left`` / ``right``) outside.
    Differentiated in ``x``, ``xp`` and ``fp``."""
    _ = unsupported(period=period)
    xp = np.asarray(xp)            # lists of points too, as NumPy takes them
    fp = np.asarray(fp)
    n = np.size(xp)
    i = np.clip(np.searchsorted(xp, x, "right"), 1, n - 1)
    x0 = xp[i - 1]
    f0 = fp[i - 1]
    y = f0 + (x - x0) * ((fp[i] - f0) / (xp[i] - x0))
    below = fp[0] if left is None else left
    above = fp[n - 1] if right is None else right
    return np.where(x < xp[0], below, np.where(x > xp[n - 1], above, y))


def clip_open(a, a_min=None, a_max=None, min=None, max=None):
    """``np.clip`` with one bound, or bounds given as ``min=``/``max=`` (an array's
    ``x.clip(0)``): the other side is open."""
    lower = a_min if min is None else min
    upper = a_max if max is None else max
    if lower is None and upper is None:
        raise_no_bound()
    if lower is None:
        result = np.minimum(a, upper)
    elif upper is None:
        result = np.maximum(a, lower)
    else:
        result = np.clip(a, lower, upper)
    return result


@static
def raise_no_bound():
    raise ValueError("One of max or min must be given")


@implements(np.polyval)
def polyval(p, x):
    """Horner's rule: ``((p[0] x + p[1]) x + p[2]) ...``."""
    c = np.asarray(p)
    y = c[0] + 0.0 * x
    for i in range(1, np.size(c)):
        y = y * x + c[i]
    return y


@implements(np.vecdot)
def vecdot(x1, x2, axis=-1):
    """``sum(conj(x1) * x2)`` along ``axis``."""
    return np.sum(np.conj(x1) * x2, axis=axis)


@implements(np.matvec)
def matvec(x1, x2):
    """Matrix times vector over the last axes (stacks broadcast)."""
    return np.squeeze(np.matmul(x1, np.expand_dims(x2, -1)), axis=-1)


@implements(np.vecmat)
def vecmat(x1, x2):
    """Conjugated vector times matrix over the last axes (stacks broadcast)."""
    return np.squeeze(np.matmul(np.expand_dims(np.conj(x1), -2), x2), axis=-2)


@implements(math.fsum, name="math.fsum")
def fsum(seq):
    """``np.sum`` of the values (NumPy's pairwise summation, not fsum's exact one)."""
    return np.sum(np.asarray(seq))


@implements(math.prod, name="math.prod")
def prod(iterable, start=1):
    """``np.prod`` of the values, times ``start``."""
    return np.prod(np.asarray(iterable)) * start


@implements(math.dist, name="math.dist")
def dist(p, q):
    """The Euclidean distance ``sqrt(sum((p - q) ** 2))``."""
    d = np.asarray(p) - np.asarray(q)
    return np.sqrt(np.sum(d * d))
