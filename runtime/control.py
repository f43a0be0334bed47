"""Helpers for the reverse sweep of loops and element writes.

``range_last`` gives the last value a ``range`` produces, so the adjoint
sweep can walk a loop's indices backwards; ``snapshot`` copies what an
element write is about to overwrite (a copy for array views, the value
itself for scalars).  Both run in plain Python and inside ``numba.njit``.
"""
import numpy as np
from numba import types
from numba.extending import overload, register_jitable


@register_jitable
def range_last(start, stop, step):
    """The last element of ``range(start, stop, step)``; ``start - step`` if empty.

    ``range(range_last(a, b, s), a - s, -s)`` visits ``range(a, b, s)`` in
    reverse.
    """
    if step > 0:
        if stop <= start:
            return start - step
        return start + ((stop - start - 1) // step) * step
    if stop >= start:
        return start - step
    return start + ((start - stop - 1) // -step) * step


def snapshot(x):
    """``x`` if it is a scalar, else a copy of the array (view) ``x``."""
    if isinstance(x, np.ndarray):
        return x.copy()
    return x


@overload(snapshot)
def _snapshot(x):
    if isinstance(x, types.Array):
        return lambda x: x.copy()
    return lambda x: x
