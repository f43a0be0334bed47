"""Helpers for per-example code compiled for the GPU (``target="cuda"``).

A GPU thread cannot allocate, so the stacks a reverse sweep fills (see
``control.float_stack``) are slices of the thread's row of a *tape*, a
float64 device buffer of one row per thread allocated for each launch.
The first ``need[1]`` slots of a row are scratch: a stack that does not
fit gets them instead, the space it needed is recorded in ``need[0]``, and
the host launches again with rows that long.  Stack indices are clamped
into their stack (``slot``), so nothing is ever read or written outside
the buffer, and a result computed on a too-short tape is never returned.

The stacks the CPU code keeps as lists -- the values of a ``while`` loop,
the branches an ``if`` inside a loop took, integers -- have no length known
before the loop: each gets ``need[3]`` slots of the row (``list_take``);
a push past them records how many it needed in ``need[2]``, and the host
launches again with that many.  Once a thread ran out of room (``need[4]``
set), ``pop_as`` returns zeros, so a popped trip count cannot make it loop
long on values that were never stored.  Values keep their type: a popped
branch is a bool again, a popped count an integer (``pop_as``).

``need`` per thread: [tape length needed, scratch slots, list length
needed, list length given, ran out of room].
``register_jitable``: the same definition runs in Python (the simulator),
``numba.njit`` and ``numba.cuda.jit``.
"""
import numpy as np
from numba import types
from numba.extending import overload, register_jitable


@register_jitable
def tape_take(tape, top, n, need):
    """(``n`` slots of ``tape`` from ``top`` on, the new top)."""
    end = top + n
    if end > tape.shape[0]:
        if end > need[0]:
            need[0] = end
        need[4] = 1
        scratch = need[1] if n > need[1] else n
        return tape[0:scratch], end
    return tape[top:end], end


@register_jitable
def slot(stack, top):
    """``top`` clamped into ``stack`` (whose length is at least one).  Below zero
    too: once a thread ran out of room its popped branches are zeros, so a
    reverse sweep may pop a stack more often than it pushed."""
    last = stack.shape[0] - 1
    if top < 0:
        return 0
    return top if top < last else last


@register_jitable
def zero_fill(out):
    """``out`` (a row of a kernel output: the adjoint of a 1-D array argument,
    accumulated in place by the sweep) set to zeros."""
    for k in range(out.shape[0]):
        out[k] = 0.0


@register_jitable
def list_take(tape, top, need):
    """A stack the CPU code keeps as a list: ``need[3]`` slots of ``tape``."""
    return tape_take(tape, top, need[3], need)


@register_jitable
def push(stack, n, value, need):
    """``value`` pushed on ``stack`` holding ``n`` values; the new count.
    A push past its end stores nothing and records the length needed."""
    if n < stack.shape[0]:
        stack[n] = value
    else:
        need[4] = 1
        if n + 1 > need[2]:
            need[2] = n + 1
    return n + 1


def pop_as(stack, n, like, need):
    """Slot ``n`` of ``stack`` as a value of ``like``'s type (zero once the
    thread ran out of room, see the module docstring)."""
    if need[4]:
        return type(like)(0)
    return type(like)(stack[slot(stack, n)])


@overload(pop_as, target="generic")
def _pop_as(stack, n, like, need):
    if isinstance(like, types.Boolean):
        def as_bool(stack, n, like, need):
            if need[4]:
                return False
            return stack[slot(stack, n)] != 0.0
        return as_bool
    kind = like

    def as_number(stack, n, like, need):
        if need[4]:
            return kind(0)
        return kind(stack[slot(stack, n)])
    return as_number


# -- arrays of static shape in per-thread memory (see s2s_ad/api/cuda_local.py) --------
def fill(out, value):
    """Every element of ``out`` (a 1-D or 2-D local array) set to ``value``."""
    out[...] = value


def copy_into(out, x, scale):
    """``out`` set to ``scale * x``; a 2-D ``x`` into a 1-D ``out`` row by row
    (the kernel's output row of a Jacobian)."""
    out[...] = (scale * np.asarray(x)).reshape(out.shape)


@overload(fill, target="generic")
def _fill(out, value):
    if out.ndim == 1:
        def fill1(out, value):
            for i in range(out.shape[0]):
                out[i] = value
        return fill1

    def fill2(out, value):
        for i in range(out.shape[0]):
            for j in range(out.shape[1]):
                out[i, j] = value
    return fill2


@overload(copy_into, target="generic")
def _copy_into(out, x, scale):
    if out.ndim == x.ndim == 1:
        def copy1(out, x, scale):
            for i in range(x.shape[0]):
                out[i] = scale * x[i]
        return copy1
    if out.ndim == x.ndim == 2:
        def copy2(out, x, scale):
            for i in range(x.shape[0]):
                for j in range(x.shape[1]):
                    out[i, j] = scale * x[i, j]
        return copy2
    if out.ndim == 1 and x.ndim == 2:
        def flatten(out, x, scale):
            n = x.shape[1]
            for i in range(x.shape[0]):
                for j in range(n):
                    out[i * n + j] = scale * x[i, j]
        return flatten
    return None


# -- max and min of two scalars (Numba's CUDA target cannot compile Python's max/min) --
@register_jitable
def max2(a, b):
    """Python's ``max(a, b)``."""
    return b if b > a else a


@register_jitable
def min2(a, b):
    """Python's ``min(a, b)``."""
    return b if b < a else a


@register_jitable
def maximum(a, b):
    """``np.maximum`` of two scalars: a NaN wins."""
    return a if a > b or a != a else b


@register_jitable
def minimum(a, b):
    """``np.minimum`` of two scalars: a NaN wins."""
    return a if a < b or a != a else b


@register_jitable
def fmax(a, b):
    """``np.fmax`` of two scalars: a NaN loses."""
    return a if a > b or b != b else b


@register_jitable
def fmin(a, b):
    """``np.fmin`` of two scalars: a NaN loses."""
    return a if a < b or b != b else b
