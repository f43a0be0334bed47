"""Elementwise primals whose Numba versions need help.

Plain-Python (NumPy) implementations; `_nb_elementwise` registers the Numba
versions.  Guarantees: the result broadcasts all operands, as NumPy's does.
"""

import numpy as np


def clip(a, a_min, a_max):
    """np.clip(a, a_min, a_max) with array bounds broadcast against `a`.

    Numba's np.clip gives the result `a`'s shape, so bounds that broadcast
    `a` to a larger shape would be silently cut.
    """
    return np.clip(a, a_min, a_max)


#: Transcendental ufuncs that compiled code calls through the runtime: Numba
#: evaluates them one scalar libm call at a time, NumPy with SIMD kernels
#: (exp about 9 ns against 1.2 ns per element here, tanh 24 ns against 3 ns),
#: so on a large float array the compiled version hands the whole array to
#: NumPy (see _nb_elementwise).  ``sqrt`` and ``abs`` are not here: LLVM
#: vectorises them.
TRANSCENDENTAL = ("exp", "expm1", "exp2", "log", "log1p", "log2", "log10", "sin", "cos", "tan",
                  "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh",
                  "arctanh")


#: The smallest array for which compiled code calls NumPy's kernel.
SIMD_MIN = 512


def _through_numpy(name):
    ufunc = getattr(np, name)

    def f(x):
        return ufunc(x)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"np.{name}(x); compiled, a float array of {SIMD_MIN} elements or more "
                 f"runs NumPy's SIMD kernel (the call costs about 3 us).")
    return f


for _name in TRANSCENDENTAL:
    globals()[_name] = _through_numpy(_name)
del _name
