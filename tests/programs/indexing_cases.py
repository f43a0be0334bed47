"""Scatters, repeated indices, selection and np.i0 (tests/test_coverage_indexing.py).
Each takes a 12-vector and returns an array."""
import numpy as np

IDX = np.array([0, 2, 2, 1, 0])
R = np.array([0, 2, 1, 2])
C = np.array([3, 0, 3, 3])


def add_at(x):
    a = x[:4] * 1.0
    np.add.at(a, IDX, x[:5] * x[5:10])
    return a


def add_at_scalar(x):
    a = np.zeros(4)
    np.add.at(a, IDX, x[0])
    return a * x[:4]


def iadd_repeated(x):
    a = x[:4] * 1.0
    a[IDX] += x[:5]
    return a * a


def set_repeated_scalar(x):
    a = x[:4] * 1.0
    a[IDX] = x[6]
    return a * x[4:8]


def put(x):
    a = x[:6] * 1.0
    np.put(a, np.array([0, 3, 3, -1]), x[6:9])
    return a * x[:6]


def put_wrap(x):
    a = np.reshape(x, (3, 4)) * 1.0
    np.put(a, np.array([1, 13, 25]), x[0] * 3.0, mode="wrap")
    return a


def where_indices(x):
    i = np.where(x > 0.0)[0]
    return x[i] ** 2


def nonzero_2d(x):
    m = np.reshape(x, (3, 4))
    rows, cols = np.nonzero(m > 0.0)
    return m[rows, cols] * x[rows]


def partition(x):
    return np.partition(x * x, 3)[:4]


def partition_axis(x):
    return np.partition(np.reshape(x, (3, 4)), 1, axis=0)[1]


def i0(x):
    return np.i0(x) * x


def rows_cols(x):
    m = np.reshape(x, (3, 4))
    return m[R, C] ** 2


def set_rows_cols(x):
    m = np.reshape(x, (3, 4)) * 1.0
    m[R, C] = x[:4] * 2.0
    return m


def increment_rows_cols(x):
    m = np.reshape(x, (3, 4)) * 1.0
    m[R, C] += x[4:8]
    return m * m


RI, CI = np.array([2, 0, 2]), np.array([1, 3, 3, 0])


def ix_rows_cols(x):
    """np.ix_ (no Numba version): read as m[RI][:, CI], repeats in both."""
    m = np.reshape(x, (3, 4))
    return m[np.ix_(RI, CI)] ** 2


def ix_3d(x):
    t = np.reshape(x, (2, 3, 2))
    return np.sin(t[np.ix_([1, 1, 0], [0, 2], [1])]) * 2.0


def sliced_columns(x):
    """An index array after slices (the form np.ix_ lowers to): x[:, cols], x[1:, cols]."""
    m = np.reshape(x, (3, 4))
    return m[:, CI] * m[1:, CI[:2]].sum()


def loss(x):
    return (np.sum(add_at(x) ** 2) + np.sum(add_at_scalar(x)) + np.sum(iadd_repeated(x))
            + np.sum(set_repeated_scalar(x)) + np.sum(put(x)) + np.sum(put_wrap(x) ** 2)
            + np.sum(where_indices(x)) + np.sum(nonzero_2d(x)) + np.sum(partition(x))
            + np.sum(partition_axis(x) ** 2) + np.sum(i0(x)) + np.sum(rows_cols(x))
            + np.sum(set_rows_cols(x) ** 2) + np.sum(increment_rows_cols(x))
            + np.sum(ix_rows_cols(x)) + np.sum(ix_3d(x)) + np.sum(sliced_columns(x)))
