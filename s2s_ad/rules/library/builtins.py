"""Python's builtins ``sum`` and ``round`` on array values (``abs``, ``pow``,
``min`` and ``max`` of two values are spellings of rules: np.abs, np.power,
np.minimum, np.maximum; ``sum`` of a comprehension is lowered as a loop,
s2s_ad/frontend/comprehensions.py)."""
import builtins

import numpy as np

from .registry import implements


@implements(builtins.sum, name="sum")
def sum_(iterable, start=0):
    """Its items added (an array's rows: ``np.sum(a, axis=0)``), plus ``start``."""
    total = np.sum(np.asarray(iterable), axis=0)
    if np.ndim(start) > 0:          # (known while lowering: the test below is a number's)
        return total + start
    if start == 0:
        return total
    return total + start


@implements(builtins.round, name="round")
def round_(number, ndigits=None):
    """``np.round`` of a number (zero derivative); an integer without ``ndigits``."""
    if ndigits is None:
        return int(np.round(number))
    return np.round(number, ndigits)
