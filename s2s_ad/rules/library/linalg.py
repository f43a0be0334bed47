"""Linear-algebra functions and call forms written over the ruled primitives:
``np.cross`` along other axes, ``np.linalg.pinv``'s refused spellings,
``np.linalg.eigvalsh`` and ``np.linalg.svdvals``."""
import numpy as np

from .registry import implements, static


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


@static
def _one_cutoff(rcond, rtol):
    if rcond is not None:
        raise ValueError("`rtol` and `rcond` can't be both set.")
    return rtol


@static
def _flag(hermitian):
    if not isinstance(hermitian, (bool, int)):
        raise TypeError(f"hermitian= must be True or False, got {hermitian!r}")
    return bool(hermitian)


def pinv_hermitian(a, rcond=None, hermitian=False, rtol=1e-15):
    """``np.linalg.pinv(a, hermitian=True)`` (the rule's form): NumPy's eigh reads the
    lower triangle, mirrored, and cuts by its |eigenvalues|, the singular values of
    that symmetric matrix, so this is its pinv; the upper triangle has no influence."""
    if _flag(hermitian):
        a = np.tril(a) + np.transpose(np.tril(a, -1))
    if rcond is None:
        return np.linalg.pinv(a, rtol=rtol)
    return np.linalg.pinv(a, rcond)


def pinv_spellings(a, rcond=None, hermitian=False, rtol=None):
    """``np.linalg.pinv`` with both ``rcond`` and ``rtol`` (the rule's form for that
    call): NumPy's error, at the user's line."""
    return np.linalg.pinv(a, hermitian=hermitian, rtol=_one_cutoff(rcond, rtol))


def pinv_positional(a, rcond=None, hermitian=False):
    """``np.linalg.pinv`` with more than three positional arguments (``rtol`` is
    keyword-only): NumPy's TypeError, at the user's line."""
    return np.linalg.pinv(a, rcond, hermitian)
