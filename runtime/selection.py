"""``np.argpartition``: the permutation ``np.partition`` applies.

Python: NumPy's own (so ``np.take_along_axis(a, argpartition(a, k), axis)``
is ``np.partition(a, k)`` element for element).  Numba: the sorting
permutation (rt.argsort), which is a valid partition for every ``kth``; the
elements other than the kth ones may then be ordered differently from
NumPy's, which leaves them in an unspecified order anyway.
"""
import numpy as np
from numba.extending import overload

from . import scans


def argpartition(a, kth, axis=-1):
    """np.argpartition(a, kth, axis)."""
    return np.argpartition(a, kth, axis)


@overload(argpartition, prefer_literal=True)
def _argpartition(a, kth, axis=-1):
    def impl(a, kth, axis=-1):
        return scans.argsort(a, axis)
    return impl





def nonzero_axis(a, axis):
    """``np.nonzero(a)[axis]``: the positions of the true elements along one axis."""
    return np.nonzero(a)[axis]


@overload(nonzero_axis)
def _nonzero_axis(a, axis):
    return lambda a, axis: np.nonzero(a)[axis]
EXPORTS = ("argpartition", "nonzero_axis")
