"""``print`` in transformed code: ``rt.debug_print((a, b, ...), sep, end)``
prints the values as ``print(a, b, ..., sep=sep, end=end)`` does, each time
the statement runs.  Inside ``numba.njit`` it leaves compiled code for that
one call (an object-mode block), so the text is Python's own and comes in
order with the rest of the program's output.
"""
import numba
from numba.extending import overload


def _print(values, sep, end):
    print(*values, sep=sep, end=end, flush=True)


def debug_print(values, sep=" ", end="\n"):
    """``print(*values, sep=sep, end=end)``; returns 0 (a value nothing reads)."""
    _print(values, sep, end)
    return 0


@overload(debug_print)
def _debug_print(values, sep=" ", end="\n"):
    def impl(values, sep=" ", end="\n"):
        with numba.objmode():
            _print(values, sep, end)
        return 0
    return impl
