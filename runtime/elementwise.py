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
