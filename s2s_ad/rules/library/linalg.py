"""Linear-algebra functions and call forms written over the ruled primitives:
``np.cross`` along other axes, ``np.linalg.pinv``'s ``hermitian=`` and refused
spellings, ``cholesky(upper=)``, ``eigh(UPLO=)``, ``qr(mode=)``, ``einsum(optimize=)``,
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


@static
def _choice(name, value, allowed):
    if value not in allowed:
        raise ValueError(f"{name}={value!r} is not supported (supported: "
                         f"{', '.join(map(repr, allowed))})")
    return value


def cholesky_upper(a, upper=False):
    """``np.linalg.cholesky(a, upper=True)``: NumPy's upper factor reads the upper
    triangle, so it is the transposed lower factor of ``a.T``."""
    if _flag(upper):
        return np.transpose(np.linalg.cholesky(np.transpose(a)))
    return np.linalg.cholesky(a)


def eigh_uplo(a, UPLO="L"):  # noqa: N803 (NumPy's name)
    """``np.linalg.eigh(a, UPLO)``: ``"U"`` reads the upper triangle, the lower one of
    ``a.T``."""
    if _choice("UPLO", UPLO, ("L", "U")) == "U":
        return np.linalg.eigh(np.transpose(a))
    return np.linalg.eigh(a)


def qr_mode(a, mode="reduced"):
    """``np.linalg.qr(a, mode)``: ``"reduced"`` (Q, R) and ``"r"`` (R alone)."""
    if _choice("mode", mode, ("reduced", "r")) == "r":
        return np.linalg.qr(a)[1]
    return np.linalg.qr(a)


# np.einsum(subscripts, *operands, optimize=...): one form per number of operands (the
# value does not depend on optimize; s2s_ad optimises the order for three or more).
def einsum_1(subscripts, a, optimize=False):
    return np.einsum(subscripts, a)


def einsum_2(subscripts, a, b, optimize=False):
    return np.einsum(subscripts, a, b)


def einsum_3(subscripts, a, b, c, optimize=False):
    return np.einsum(subscripts, a, b, c)


def einsum_4(subscripts, a, b, c, d, optimize=False):
    return np.einsum(subscripts, a, b, c, d)


def einsum_5(subscripts, a, b, c, d, e, optimize=False):
    return np.einsum(subscripts, a, b, c, d, e)


def einsum_6(subscripts, a, b, c, d, e, f, optimize=False):
    return np.einsum(subscripts, a, b, c, d, e, f)


def einsum_many(subscripts, optimize=False):
    """More than six operands with ``optimize=``: refused (write it without)."""
    return np.einsum(subscripts)
