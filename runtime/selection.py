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


EXPORTS = ("argpartition",)
