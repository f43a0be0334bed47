"""Views read after their array is written into (tests/test_stale_views.py).

NumPy's view shows the write; the derivative must too."""
import numpy as np


def view_before_loop(a, w):
    v = a[1:]
    s = 0.0
    for i in range(a.shape[0] - 1):
        s += np.dot(v, w[1:]) * a[i]
        a[i + 1] = a[i] * 0.5 + np.sin(a[i + 1])
    return s + np.sum(v * v)


def view_then_branch_write(a, w):
    v = a[:3]
    if a[0] > 0.0:
        a[1] = a[1] * a[0]
    else:
        a[2] = a[2] + 1.0
    return np.dot(v, w[:3]) + np.sum(a)


def row_view_of_matrix(m, x):
    r = m[1]
    m[1, 0] = m[1, 0] * x[0]
    m[1] += x
    return np.sum(r * x) + np.sum(m)


def reshaped_then_written(a):
    r = a.reshape(2, 2)
    a[0] = 3.0 * a[0]
    return np.sum(r * r)


def reshaped_slice_then_written(a):
    r = a[1:].reshape(2, 2).T
    a[1] = 3.0 * a[0]
    return np.sum(r * r * np.arange(4.0).reshape(2, 2))


def element_then_write(a):
    t = a[1]                    # a number: NumPy copies it
    a[1] = 5.0 * a[0]
    return t * a[1] + np.sum(a)
