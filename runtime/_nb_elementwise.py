"""Numba overloads of the elementwise helpers (see elementwise.py)."""

from numba.extending import overload

from . import elementwise
from ._nbutil import compile_impl


@overload(elementwise.clip)
def _clip(a, a_min, a_max):
    # minimum(maximum(a, lo), hi) is NumPy's definition of clip, and Numba's
    # ufuncs broadcast.
    return compile_impl(
        "def impl(a, a_min, a_max):\n"
        "    return np.minimum(np.maximum(a, a_min), a_max)")
