"""Sums of squares, which compiled code adds up in one loop (rt.sum_squares),
and look-alikes it must not fuse."""
import numpy as np


def centred_norms(x, means, scale):
    """gmm's component loop in small: the sum is the square's only reader."""
    k = means.shape[0]
    out = np.zeros((x.shape[0], k))
    for j in range(k):
        y = (x - means[j]) * scale[j]
        out[:, j] = np.sum(y * y, axis=1)
    return np.sum(np.log(1.0 + out))


def square_read_twice(x):
    """The square is read again after its sum: it stays an array."""
    sq = np.square(x)
    return np.sum(sq) + np.sum(sq[0])


def written_between(x):
    """x changes between its square and the sum: the square is of the old x."""
    y = x * 1.0
    sq = y * y
    y[0] = 10.0
    return np.sum(np.sin(np.sum(sq, axis=0) + y))


def reassigned_between(x):
    """The square's operand name is bound to a new value before the sum: the
    new value is a new name in the lowered code, so the sum still fuses."""
    y = x + 1.0
    sq = np.square(y)
    y = y * 3.0
    return np.sum(np.sin(np.sum(sq, axis=-1, keepdims=True) * y))
