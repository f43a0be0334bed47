"""Index arrays that differ per example, and boolean masks over several axes.

``BATCHED`` entries are (function, make, argnums): ``make(rng)`` returns
(batched arguments, in_axes) -- a batch of 3 examples where the index arrays
are batched too (or shared), so ``vmap(method="vectorize")`` runs its gather
and scatter rules (s2s_ad/transforms/batch_index.py).  ``MASKS`` entries are
(function, make, argnums) with ``make(rng)`` returning one example: boolean
masks over two or more axes and N-d integer index arrays, read and written,
which ``ad.jit`` lowers to runtime/index_arrays.py.  Every function returns a
number (a loss), so each transform applies.
"""
import numpy as np

B = 3


def gather(x, idx):
    return np.sum(np.sin(x[idx]) * x[0])


def gather_pairs(x, i, j):
    return np.sum(np.tanh(x[i, j]) ** 2)


def gather_columns(x, idx):
    return np.sum(np.cos(x[:, idx]) * x[:, 0:1])


def gather_split(x, i, j):
    return np.sum(np.sin(x[i, :, j]) * np.arange(5.0))


def gather_ix(x, i, j):
    return np.sum(x[np.ix_(i, j)] ** 3)


def write_positions(x, idx, v):
    y = x * 1.0
    y[idx] = np.sin(v) * x[1]
    return np.sum(y * y)


def add_positions(x, idx, v):
    y = x * x
    y[idx] += v * x[0]
    return np.sum(np.sin(y))


def scatter_add(x, idx, v):
    y = np.zeros(6)
    np.add.at(y, idx, v * x[idx])
    return np.sum(y * y) + np.sum(x)


def scatter_rows(x, idx, v):
    y = x * 1.0
    np.add.at(y, idx, v)
    return np.sum(np.tanh(y))


def rolled(x):
    return np.sum(np.roll(x, 2) * x)


def interpolated(x, d, fp):
    return np.sum(np.interp(x, np.cumsum(np.abs(d)), fp) ** 2)


def _ints(rng, hi, *shape):
    return rng.integers(0, hi, shape)


BATCHED = [
    (gather, lambda r: ((r.normal(size=(B, 6)), _ints(r, 6, B, 4)), (0, 0)), 0),
    (gather, lambda r: ((r.normal(size=6), _ints(r, 6, B, 5)), (None, 0)), 0),
    (gather_pairs, lambda r: ((r.normal(size=(B, 5, 4)), _ints(r, 5, B, 3), _ints(r, 4, 3)),
                              (0, 0, None)), 0),
    (gather_columns, lambda r: ((r.normal(size=(B, 5, 4)), _ints(r, 4, B, 3)), (0, 0)), 0),
    (gather_columns, lambda r: ((r.normal(size=(5, 4)), _ints(r, 4, B, 3)), (None, 0)), 0),
    (gather_split, lambda r: ((r.normal(size=(B, 2, 5, 4)), _ints(r, 2, B, 4),
                               _ints(r, 4, 4)), (0, 0, None)), 0),
    (gather_ix, lambda r: ((r.normal(size=(B, 5, 4)), _ints(r, 5, B, 2), _ints(r, 4, 3)),
                           (0, 0, None)), 0),
    (write_positions, lambda r: ((r.normal(size=(B, 6)), _ints(r, 6, B, 3),
                                  r.normal(size=(B, 3))), (0, 0, 0)), (0, 2)),
    (add_positions, lambda r: ((r.normal(size=(B, 5, 4)), _ints(r, 5, B, 2),
                                r.normal(size=4)), (0, 0, None)), (0, 2)),
    (scatter_add, lambda r: ((r.normal(size=(B, 6)), _ints(r, 6, B, 5),
                              r.normal(size=(B, 5))), (0, 0, 0)), (0, 2)),
    (scatter_rows, lambda r: ((r.normal(size=(B, 5, 4)), _ints(r, 5, 3),
                               r.normal(size=(B, 3, 4))), (0, None, 0)), (0, 2)),
    (rolled, lambda r: ((r.normal(size=(B, 3, 4)),), (0,)), 0),
    (interpolated, lambda r: ((r.uniform(-0.5, 4.0, (B, 5)), r.uniform(0.5, 1.5, (B, 4)),
                               r.normal(size=(B, 4))), (0, 0, 0)), (0, 2)),
]


def mask_read(x, m):
    return np.sum(np.sin(x[m]) * 2.0)


def mask_write(x, m):
    y = x * 2.0
    y[m] = np.cos(x[m]) * x[m]
    return np.sum(y * y)


def mask_add(x, m):
    y = x * 1.0
    y[m] += x[m] * x[m]
    return np.sum(np.tanh(y) * x)


def mask_of_values(x):
    y = np.exp(x)
    y[x > 0.0] = 1.0 + x[x > 0.0]
    return np.sum(y * x)


def positions_2d(x, idx):
    y = x * 1.0
    y[idx] = np.sin(x[idx]) * 3.0
    return np.sum(y * x)


def pairs_2d(x, i, j):
    y = x * 1.0
    y[i, j] = np.sin(x[i, j]) * 2.0
    return np.sum(y * x)


MASKS = [
    (mask_read, lambda r: (r.normal(size=(4, 5)), r.normal(size=(4, 5)) > 0), 0),
    (mask_read, lambda r: (r.normal(size=(4, 5, 3)), r.normal(size=(4, 5)) > 0), 0),
    (mask_write, lambda r: (r.normal(size=(4, 5)), r.normal(size=(4, 5)) > 0), 0),
    (mask_write, lambda r: (r.normal(size=(3, 4, 2)), r.normal(size=(3, 4)) > 0), 0),
    (mask_add, lambda r: (r.normal(size=(4, 5)), r.normal(size=(4, 5)) > 0), 0),
    (mask_of_values, lambda r: (r.normal(size=(4, 5)),), 0),
    (positions_2d, lambda r: (r.normal(size=(5, 3)), np.array([[1, 3], [0, 3]])), 0),
    (pairs_2d, lambda r: (r.normal(size=(4, 5, 3)), np.array([[1, 3], [0, 3]]),
                          np.array([[0, 4], [1, 4]])), 0),
]



IDX = np.array([[1, 3], [0, 3]])
JDX = np.array([[0, 2], [1, 2]])


def compiled_masks(x, x3, y):
    """A read, a write and an update through masks over all / the leading axes, and
    through N-d integer arrays, in one loss (one Numba build per compiled check)."""
    return (mask_write(x, x > 0.2) + mask_read(x3, x3[:, :, 0] > 0.0) + positions_2d(y, IDX)
            + pairs_2d(y, IDX, JDX))


def compiled_masks_args(r):
    return r.normal(size=(4, 5)), r.normal(size=(3, 4, 2)), r.normal(size=(5, 3))
