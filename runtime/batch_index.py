"""Helpers of vectorized (batched) indexing: index arrays that differ per example.

``ad.vmap``'s vectorized lowering (s2s_ad/transforms/batch.py) writes
``x[idx]`` with a batched ``idx`` as one NumPy gather, ``X[ar, idx]`` with
``ar = np.arange(batch)`` on a new leading axis (or ``x[idx]`` itself when
``x`` is shared), and ``np.add.at`` the same way.  That is right for integer
positions only: a boolean mask selects a different number of elements in
each example, so the batch would be ragged.  :func:`batch_positions` checks
each index array as the batched code runs and raises :class:`RaggedBatch`
(which ``ad.vmap`` reports, or answers by running its per-sample loop).
Like the other batching helpers these run on NumPy only.
"""
import numpy as np


class RaggedBatch(ValueError):
    """A batched index whose result has a different shape in each example."""


def batch_positions(i, batched, where):
    """The index array ``i`` as integer positions for a batched gather.

    A boolean mask that differs per example (``batched``) is refused; a
    shared 1-D mask becomes its positions (``np.nonzero``), which is what
    NumPy does with it next to other index arrays.  ``where`` is the user's
    line, for the message.
    """
    i = np.asarray(i)
    if i.dtype.kind != "b":
        return i
    if batched:
        raise RaggedBatch(
            f"{where}: a boolean mask that differs between examples selects a different "
            f"number of elements in each, so the batched result would be ragged; write "
            f"np.where(mask, x, 0.0) (same shape in every example) instead")
    if i.ndim != 1:
        raise RaggedBatch(f"{where}: a {i.ndim}-D boolean mask next to per-example index "
                          f"arrays has no batched form")
    return np.nonzero(i)[0]


def batch_reshape(a, shape):
    """``np.reshape`` of each example of batched ``a`` to ``shape`` (a per-example
    shape held in a variable, ``np.shape(x)``)."""
    a = np.asarray(a)
    return np.reshape(a, (a.shape[0],) + tuple(shape))


EXPORTS = ("batch_positions", "batch_reshape")
