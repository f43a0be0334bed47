"""Numba overloads of the elementwise helpers (see elementwise.py)."""

import numpy as np
from numba import objmode, types
from numba.extending import overload

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

    @overload(getattr(elementwise, name))
    def _transcendental(x):
        if isinstance(x, types.Array) and isinstance(x.dtype, types.Float) and x.ndim:
            # Large float arrays: NumPy's SIMD kernel, called from compiled
            # code in object mode (about 3 us per call); small ones: Numba's.
            # Written here, not exec'd: a function with an object-mode block
            # needs an importable home to be loaded from Numba's disk cache.
            out_type = types.Array(x.dtype, x.ndim, "C")

            def impl(x):
                if x.size < SIMD_MIN:
                    return ufunc(x)
                with objmode(out=out_type):
                    out = ufunc(x)
                return out
            return impl
        return lambda x: ufunc(x)


for _name in elementwise.TRANSCENDENTAL:
    _register_simd(_name)
del _name
