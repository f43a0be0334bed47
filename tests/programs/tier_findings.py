"""Programs the NumPy-tier witnesses of the oracle found bugs in
(tests/test_oracle.py; docs/oracle.md)."""
import numpy as np


def rows_of_arrays_written_in_a_loop(x):
    """A loop that writes into a fresh array each iteration, and a vector
    output: ``ad.jit(ad.jacrev(f))`` computes its rows with one primal sweep
    and one adjoint sweep per row, which restores the overwritten elements."""
    s = 0.0
    for i in range(2):
        buf = np.tanh(x * (i + 1.0))
        buf[1:] = buf[1:] + 0.6 * buf[:-1]
        s = s + np.sum(buf * x)
    return np.tanh(x) * 2.0 + s


def quadratic_form(x, K, a):
    """Per example (``vmap`` with ``K`` batched): a quadratic form in
    ``K``, and a branch that holds for some examples only.
    ``ad.jit(ad.jacrev(ad.vmap(f)))`` adds each example's product adjoint
    into ``bK[b]`` in place, several rows per adjoint sweep."""
    t = np.tanh(np.maximum(x, x[::-1]))
    s = t @ K @ t
    if x[0] > 0.68:
        s = s + 0.1 * np.sum(np.take(x, [1, 0]) * 0.65) * a
    return s
