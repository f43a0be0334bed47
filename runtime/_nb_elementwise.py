"""Numba overloads of the elementwise helpers (see elementwise.py)."""

from numba import objmode, types
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


def _register_simd(name):
    @overload(getattr(elementwise, name))
    def _transcendental(x):
        if isinstance(x, types.Array) and isinstance(x.dtype, types.Float) and x.ndim:
            # Large float arrays: NumPy's SIMD kernel, called from compiled
            # code in object mode (about 3 us per call); small ones: Numba's.
            out = f"{x.dtype}[{', '.join([':'] * (x.ndim - 1) + ['::1'])}]"
            return compile_impl(
                "def impl(x):\n"
                f"    if x.size < {elementwise.SIMD_MIN}:\n"
                f"        return np.{name}(x)\n"
                f"    with objmode(out='{out}'):\n"
                f"        out = np.{name}(x)\n"
                "    return out\n", {"objmode": objmode})
        return compile_impl(f"def impl(x):\n    return np.{name}(x)\n")


for _name in elementwise.TRANSCENDENTAL:
    _register_simd(_name)
del _name
