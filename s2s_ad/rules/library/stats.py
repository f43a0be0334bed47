"""``scipy.stats.norm``'s density and distribution functions written over
ruled primitives, as ``jax.scipy.stats.norm`` writes them: differentiable in
``x``, ``loc`` and ``scale``, passed positionally or by keyword.

Registered when the first ``scipy.stats`` method is looked up (see
:func:`s2s_ad.rules.library.registry.lookup`), so importing s2s_ad does not
import scipy.stats.  As in JAX, a scale that is not positive is not checked:
``logpdf`` gives NaN (the log of it), the others the formula's value.
"""
import numpy as np
import scipy.special as sc
import scipy.stats as st

from .registry import implements

_LOG_SQRT_2PI = 0.9189385332046727        # log(sqrt(2 pi))
_SQRT_2PI = 2.5066282746310002


@implements(st.norm.logpdf, "scipy.stats.norm.logpdf")
def norm_logpdf(x, loc=0.0, scale=1.0):
    """``-z**2 / 2 - log(scale) - log(sqrt(2 pi))`` with ``z = (x - loc) / scale``."""
    z = (x - loc) / scale
    return -0.5 * z * z - np.log(scale) - _LOG_SQRT_2PI


@implements(st.norm.pdf, "scipy.stats.norm.pdf")
def norm_pdf(x, loc=0.0, scale=1.0):
    """``exp(-z**2 / 2) / (scale sqrt(2 pi))`` with ``z = (x - loc) / scale``."""
    z = (x - loc) / scale
    return np.exp(-0.5 * z * z) / (scale * _SQRT_2PI)


@implements(st.norm.cdf, "scipy.stats.norm.cdf")
def norm_cdf(x, loc=0.0, scale=1.0):
    """``scipy.special.ndtr((x - loc) / scale)``."""
    return sc.ndtr((x - loc) / scale)


@implements(st.norm.logcdf, "scipy.stats.norm.logcdf")
def norm_logcdf(x, loc=0.0, scale=1.0):
    """``scipy.special.log_ndtr((x - loc) / scale)`` (accurate far in the lower tail)."""
    return sc.log_ndtr((x - loc) / scale)


@implements(st.norm.sf, "scipy.stats.norm.sf")
def norm_sf(x, loc=0.0, scale=1.0):
    """``scipy.special.ndtr((loc - x) / scale)``: ``1 - cdf``, accurate in the upper tail."""
    return sc.ndtr((loc - x) / scale)


@implements(st.norm.logsf, "scipy.stats.norm.logsf")
def norm_logsf(x, loc=0.0, scale=1.0):
    """``scipy.special.log_ndtr((loc - x) / scale)``."""
    return sc.log_ndtr((loc - x) / scale)
