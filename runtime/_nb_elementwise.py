"""Numba overloads of the elementwise helpers (see elementwise.py)."""

import numpy as np
from numba import types
from numba.extending import overload

from . import _nb_kernels as kernels
from . import elementwise
from ._nbutil import compile_impl

SIMD_MIN = elementwise.SIMD_MIN


@overload(elementwise.clip)
def _clip(a, a_min, a_max):
    # minimum(maximum(a, lo), hi) is NumPy's definition of clip, and Numba's
    # ufuncs broadcast.
    return compile_impl(
        "def impl(a, a_min, a_max):\n"
        "    return np.minimum(np.maximum(a, a_min), a_max)")


def _register_simd(name):
    ufunc = getattr(np, name)
    kernel = kernels.TRANSCENDENTAL[name]

    @overload(getattr(elementwise, name))
    def _transcendental(x):
        if isinstance(x, types.Array) and isinstance(x.dtype, types.Float) and x.ndim:
            # Large float arrays: NumPy's SIMD kernel, called from compiled
            # code in object mode (about 3 us per call); small ones: Numba's.
            # A cached kernel on the raveled array (_nb_kernels): typing the
            # object-mode call and the ufunc loop inline cost 0.1-0.4 s of
            # every compile, per rank.
            if x.ndim == 1 and x.layout == "C":
                return lambda x: kernel(x)
            return lambda x: kernel(np.ravel(x)).reshape(x.shape)
        return lambda x: ufunc(x)


for _name in elementwise.TRANSCENDENTAL:
    _register_simd(_name)
del _name
