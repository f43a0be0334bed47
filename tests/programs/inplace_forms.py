"""Helpers that write into the arrays they are passed (the NumPy habit), and
the functions differentiated through them: one per form a helper's write
can take.  Each ``f_*`` maps a 1-D (or 2-D, noted) float array to a scalar."""
import numpy as np


def smooth(u):
    u[1:-1] = 0.5 * (u[:-2] + u[2:])


def f_statement_in_loop(u0):
    """``smooth(u)`` as a statement in a time loop (the issue's example)."""
    u = u0.copy()
    for t in range(3):
        smooth(u)
    return np.sum(u ** 2)


def f_argument_written(u):
    """The transformed function's own argument is passed to the helper."""
    smooth(u)
    return np.sum(np.sin(u) * u)


def swap_average(a, b):
    b[1:-1] = np.tanh(a[:-2] + a[2:])
    a[1:-1] = b[1:-1] * a[1:-1]


def f_several_arguments(u):
    """A helper writing into two arrays, each seen by the caller."""
    a = u.copy()
    b = np.zeros_like(u)
    for t in range(2):
        swap_average(a, b)
    return np.sum(a) + np.sum(b ** 2)


def add_outer(m, v):
    for i in range(m.shape[0]):
        for j in range(m.shape[1]):
            m[i, j] += v[i] * v[j]


def f_element_updates(u):
    """``m[i, j] += ...`` in a double loop inside the helper."""
    m = np.zeros((u.shape[0], u.shape[0]))
    add_outer(m, u)
    add_outer(m, np.sin(u))
    return np.sum(m * m)


def fill_all(u, v):
    u[:] = v * v


def f_whole_array(u):
    """``u[:] = ...`` overwrites every element of the caller's array."""
    w = np.ones_like(u)
    fill_all(w, np.cos(u))
    return np.sum(w * u)


def step_returning(u, dt):
    u[1:-1] += dt * (u[:-2] - 2.0 * u[1:-1] + u[2:])
    return np.sum(u * u)


def f_returns_value(u):
    """A helper that writes and also returns a value."""
    v = u.copy()
    e = step_returning(v, 0.1)
    e2 = step_returning(v, 0.2)
    return e + e2 * np.sum(v)


def outer_step(u):
    smooth(u)
    u[0] = u[0] * u[-1]
    smooth(u)


def f_nested_helpers(u):
    """A writing helper that calls another writing helper."""
    v = np.sin(u)
    outer_step(v)
    return np.sum(v ** 3)


def f_in_branch(u):
    """The helper called in one branch of an ``if``."""
    v = u.copy()
    if np.sum(u) > 0.0:
        smooth(v)
    else:
        fill_all(v, u)
    return np.sum(v * u)


def f_slice_view(u):
    """``smooth(v[1:-1])``: the write lands in ``v``, as in NumPy."""
    v = u * 2.0
    smooth(v[1:-1])
    smooth(v[::2])
    return np.sum(v ** 2)


def f_view_before_loop(u):
    """A view made once, before the loop, then written through each step."""
    v = u * 1.0
    k = u.shape[0] - 6
    w = v[k:]
    for t in range(2):
        smooth(w)
        k = k + 1
    return np.sum(v * u) + k


def scale_in_place(c, beta):
    c *= beta
    c += np.exp(c)


def f_augmented(u):
    """``c *= beta; c += ...`` on the argument updates the caller's array."""
    c = u.copy()
    scale_in_place(c, 0.5)
    return np.sum(c * u)


def advance(u, t, dt):
    u[1:-1] += dt * np.sin(t) * u[1:-1]
    t += dt          # a number: rebinds the helper's own name only
    return t


def f_scalar_argument(u):
    """``t += dt`` on a number argument does not change the caller's ``t``."""
    v = u.copy()
    t = np.sum(u) * 0.1
    t1 = advance(v, t, 0.25)
    t2 = advance(v, t, 0.25)
    return np.sum(v) * t1 * t2 + t


FORMS = [f_statement_in_loop, f_argument_written, f_several_arguments, f_element_updates,
         f_whole_array, f_returns_value, f_nested_helpers, f_in_branch, f_slice_view, f_view_before_loop,
         f_augmented, f_scalar_argument]


def vector_smoothed(u):
    """A vector output (for Jacobians): three smoothing steps."""
    v = u.copy()
    for t in range(3):
        smooth(v)
    return v * u
