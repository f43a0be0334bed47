"""Elementwise NumPy functions written over ruled ufuncs."""
import math

import numpy as np

from .registry import implements

_PI = 3.141592653589793


@implements(np.sinc)
def sinc(x):
    """``sin(pi x) / (pi x)``, 1 at 0 (derivative 0 there)."""
    zero = x == 0
    safe = _PI * np.where(zero, 1.0, x)
    return np.where(zero, 1.0, np.sin(safe) / safe)


@implements(np.deg2rad, also=(np.radians,))
def deg2rad(x):
    """``x * pi / 180``."""
    return x * (_PI / 180.0)


@implements(np.rad2deg, also=(np.degrees,))
def rad2deg(x):
    """``x * 180 / pi``."""
    return x * (180.0 / _PI)


@implements(np.angle)
def angle(z, deg=False):
    """The argument of ``z``: ``arctan2(imag z, real z)`` (0 or pi for real z), in
    degrees with ``deg``."""
    phase = np.arctan2(np.imag(z), np.real(z))
    return phase * (180.0 / _PI) if deg else phase


@implements(np.fmax)
def fmax(x1, x2):
    """``np.maximum`` ignoring NaNs (ties go to ``x1``)."""
    return np.where(np.logical_or(np.isnan(x2), x1 >= x2), x1, x2)


@implements(np.fmin)
def fmin(x1, x2):
    """``np.minimum`` ignoring NaNs (ties go to ``x1``)."""
    return np.where(np.logical_or(np.isnan(x2), x1 <= x2), x1, x2)


@implements(np.copysign)
def copysign(x1, x2):
    """``|x1|`` with the sign of ``x2`` (``x2 = -0.0`` counts as positive)."""
    return np.where(x2 >= 0, np.abs(x1), -np.abs(x1))


@implements(np.heaviside)
def heaviside(x1, x2):
    """0 below zero, 1 above, ``x2`` at zero: no derivative in ``x1``."""
    return np.where(x1 < 0, 0.0, np.where(x1 > 0, 1.0, x2))


def log_base(x, base):
    """``math.log(x, base)`` (the rule's two-argument form): log(x) / log(base)."""
    return math.log(x) / math.log(base)
