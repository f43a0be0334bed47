"""``scipy.special`` functions written over ruled primitives."""
import numpy as np
import scipy.special as sc

from ..._stop import stop_gradient
from ._axes import unsupported
from .registry import implements


@implements(sc.expit, "scipy.special.expit")
def expit(x):
    """The logistic sigmoid, as ``(tanh(x / 2) + 1) / 2`` (no overflow)."""
    return 0.5 * (np.tanh(0.5 * x) + 1.0)


if hasattr(sc, "log_expit"):              # SciPy 1.8 and later
    @implements(sc.log_expit, "scipy.special.log_expit")
    def log_expit(x):
        """``log(expit(x))`` as ``-logaddexp(0, -x)`` (no overflow, no log of 0)."""
        return -np.logaddexp(0.0, -x)


@implements(sc.logit, "scipy.special.logit")
def logit(x):
    """``log(x / (1 - x))``."""
    return np.log(x) - np.log1p(-x)


@implements(sc.logsumexp, "scipy.special.logsumexp")
def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    """``log(sum(b * exp(a)))`` shifted by the maximum (which has no derivative
    of its own: the shift cancels)."""
    if return_sign:
        _ = unsupported(return_sign=return_sign)
    shift = stop_gradient(np.max(a, axis=axis, keepdims=True))
    e = np.exp(a - shift)
    if b is not None:
        e = e * b
    total = np.sum(e, axis=axis, keepdims=keepdims)
    return np.log(total) + stop_gradient(np.max(a, axis=axis, keepdims=keepdims))


@implements(sc.softmax, "scipy.special.softmax")
def softmax(x, axis=None):
    """``exp(x) / sum(exp(x))`` along ``axis``, shifted by the maximum."""
    e = np.exp(x - stop_gradient(np.max(x, axis=axis, keepdims=True)))
    return e / np.sum(e, axis=axis, keepdims=True)


@implements(sc.log_softmax, "scipy.special.log_softmax")
def log_softmax(x, axis=None):
    """``x - logsumexp(x)`` along ``axis``."""
    return x - sc.logsumexp(x, axis=axis, keepdims=True)


@implements(sc.xlogy, "scipy.special.xlogy")
def xlogy(x, y):
    """``x * log(y)``, zero where ``x == 0``."""
    safe = np.where(x == 0, 1.0, y)
    return np.where(x == 0, 0.0, x * np.log(safe))


@implements(sc.xlog1py, "scipy.special.xlog1py")
def xlog1py(x, y):
    """``x * log1p(y)``, zero where ``x == 0``."""
    safe = np.where(x == 0, 0.0, y)
    return np.where(x == 0, 0.0, x * np.log1p(safe))


@implements(sc.betaln, "scipy.special.betaln")
def betaln(a, b):
    """``log |B(a, b)|`` as ``gammaln(a) + gammaln(b) - gammaln(a + b)``."""
    return sc.gammaln(a) + sc.gammaln(b) - sc.gammaln(a + b)
