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
