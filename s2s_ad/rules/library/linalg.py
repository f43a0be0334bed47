"""Linear-algebra functions and call forms written over the ruled primitives:
``np.cross`` along other axes, ``np.linalg.eigvalsh`` and ``np.linalg.svdvals``."""
import numpy as np

from .registry import implements


def cross_axes(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """``np.cross`` of vectors along other axes (the rule's form for ``axisa``,
    ``axisb``, ``axisc`` or ``axis``): moved last, crossed, and the result's vector
    axis moved to ``axisc``; ``axis`` sets all three."""
    if axis is not None:
        axisa, axisb, axisc = axis, axis, axis
    c = np.cross(np.moveaxis(a, axisa, -1), np.moveaxis(b, axisb, -1))
    return np.moveaxis(c, -1, axisc)


@implements(np.linalg.eigvalsh, name="np.linalg.eigvalsh")
def eigvalsh(a):
    """The eigenvalues of ``np.linalg.eigh`` (well-separated, as its rule needs)."""
    w, v = np.linalg.eigh(a)
    return w


@implements(np.linalg.svdvals, name="np.linalg.svdvals")
def svdvals(x):
    """``np.linalg.svd(x, compute_uv=False)``."""
    return np.linalg.svd(x, compute_uv=False)
