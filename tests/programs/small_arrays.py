"""Programs built on small fixed-size arrays (what ``scalarize`` rewrites).

Each entry of ``CORPUS`` is (function, make_args, argnums).  The compiled
backend splits these arrays into scalars; the Python backend does not, so
the two must agree, and both must match finite differences.
"""
import numpy as np


def _rhs(state, theta):
    x = state[0]
    y = state[1]
    return np.array([theta[0] * x - theta[1] * x * y, theta[2] * x * y - theta[3] * y])


def _midpoint(state, theta, h):
    k1 = _rhs(state, theta)
    k2 = _rhs(state + 0.5 * h * k1, theta)
    return state + h * k2


def ode_midpoint(theta, state0, h, n):
    state = state0
    for _ in range(n):
        state = _midpoint(state, theta, h)
    return np.sum(state ** 2)


def _cross(a, b):
    return np.array((a[1] * b[2] - a[2] * b[1],
                     a[2] * b[0] - a[0] * b[2],
                     a[0] * b[1] - a[1] * b[0]))


def torque_energy(r, f):
    t = _cross(r, f)
    n = np.sqrt(np.sum(t ** 2))
    return n + np.dot(r, f) * np.tanh(t[2])


def branch_join(x):
    if x[0] > 0:
        v = x * 2.0
    else:
        v = np.array((x[1], x[0], 1.0))
    return np.sum(v * v) + v[2]


def zeros_accumulate(x, n):
    acc = np.zeros(3)
    for i in range(n):
        acc = acc + np.sin(x * i)
    return np.dot(acc, acc)


def written_elements(x):
    v = np.zeros(3)
    v[0] = x[0] * 2.0
    v[1] = x[1] ** 2
    v[2] = x[0] * x[2]
    return np.sum(v ** 2)


def written_alias(x):
    w = x * 1.5
    u = w
    u[1] = 3.0 * w[0]
    return np.sum(w * x)


def matrix_times_small(m, x):
    v = np.array((x[0] * x[1], x[1] - x[0]))
    return np.sum(np.tanh(m @ v)) + v[0]


def slices_of_small(x):
    v = x * 2.0
    return np.sum(v[1:] * v[:-1]) + np.prod(v)


def length_one(x):
    v = np.array((x[0] * 2.0,))
    return v[-1] * x[1] + np.sum(v)


def variable_index(x):
    v = x * x
    s = 0.0
    for i in range(len(v)):
        s = s + v[i] * (i + 1)
    return s


def newton_2d(p):
    z = np.array((1.0, 1.0))
    r = z - p
    err = 1.0
    while err > 1e-12:
        f = np.array((z[0] ** 2 - p[0], z[1] ** 3 - p[1]))
        z = z - np.array((f[0] / (2.0 * z[0]), f[1] / (3.0 * z[1] ** 2)))
        err = np.abs(f[0]) + np.abs(f[1])
    return np.sum(z * r)


def integer_picks(x):
    idx = np.array((0, 2))
    return np.sum(x[idx] ** 2) * x[1]


def returns_small(x):
    return np.array((x[0] * x[1], np.sin(x[2]), x[0] - x[2]))


def _pair(x):
    return np.array((x[0] + x[1], x[0] * x[1]))


def pair_and_scalar(x, y):
    p = _pair(x)
    q = _pair(p * y)
    return np.dot(p, q) + np.exp(q[1] * 0.1)


def sliced_camera(cam, X):
    rot = cam[0:3]
    centre = cam[3:6]
    d = X - centre
    Y = d + _cross(rot, d)
    q = Y[0:2] / Y[2]
    return np.sum(q * cam[6]) + np.sum(cam[-2:] * q[::-1]) + np.sum(cam[1:7:2])


CORPUS = [
    (ode_midpoint, lambda: (np.array([1.1, 0.4, 0.1, 0.4]), np.array([2.0, 1.5]), 0.01, 50),
     (0, 1)),
    (torque_energy, lambda: (np.array([0.3, -1.2, 0.5]), np.array([0.7, 0.2, -0.4])), (0, 1)),
    (branch_join, lambda: (np.array([0.5, -0.3, 1.2]),), 0),
    (branch_join, lambda: (np.array([-0.5, -0.3, 1.2]),), 0),
    (zeros_accumulate, lambda: (np.array([0.5, -0.3, 1.2]), 4), 0),
    (written_elements, lambda: (np.array([0.5, -0.3, 1.2]),), 0),
    (written_alias, lambda: (np.array([0.5, -0.3, 1.2]),), 0),
    (matrix_times_small, lambda: (np.array([[0.3, -0.2], [0.1, 0.5]]), np.array([0.4, 0.9])),
     (0, 1)),
    (slices_of_small, lambda: (np.array([0.5, -0.3, 1.2, 0.8]),), 0),
    (length_one, lambda: (np.array([0.5, -0.3]),), 0),
    (variable_index, lambda: (np.array([0.5, -0.3, 1.2]),), 0),
    (newton_2d, lambda: (np.array([2.0, 3.0]),), 0),
    (integer_picks, lambda: (np.array([0.5, -0.3, 1.2]),), 0),
    (pair_and_scalar, lambda: (np.array([0.5, -0.3]), 0.7), (0, 1)),
    (sliced_camera, lambda: (np.array([0.01, -0.02, 0.03, 0.1, -0.2, 0.3, 1.5, 0.2, -0.1,
                                       0.05, 0.07]), np.array([0.4, -0.3, 8.0])), (0, 1)),
]
