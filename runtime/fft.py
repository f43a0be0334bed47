"""np.fft and complex plumbing: the transforms, their adjoints, and the
cotangents of ``np.real``/``np.imag``/``np.conj``.

Cotangents of complex values follow JAX's convention: the cotangent of
``z = x + iy`` is ``dL/dx - i dL/dy``, so a C-linear map's adjoint is its
plain transpose (no conjugation) and a holomorphic function's VJP is
``g * f'(z)``, as the real rules already write it.  A real operand's
cotangent is the real part of what its complex use sends back: every
adjoint here returns the operand's own (real or complex) float dtype.

Each transform takes NumPy's arguments (``n``/``s``, ``axis``/``axes``,
``norm``).  The DFT matrix is symmetric, so ``fft``'s transpose is ``fft``
of the cotangent (then cropped or zero-padded back to the operand's
length, the transpose of NumPy's pad/crop to ``n``); ``rfft``'s is the real
part of ``fft`` of the cotangent zero-padded to ``n``; ``irfft``'s is
``w * scale * conj(rfft(g))`` with ``w`` 1 at frequency 0 and Nyquist and 2
elsewhere (the Hermitian extension counts each other frequency twice).

Under Numba (_nb_fft.py) each helper runs in object mode: Numba has no
np.fft, so compiled code calls NumPy's pocketfft for the transform itself.
"""

import numpy as np

from ._common import grad_dtype

_NORMS = (None, "backward", "ortho", "forward")


def _check_norm(norm):
    if norm not in _NORMS:
        raise ValueError(f'norm={norm!r}: NumPy accepts "backward", "ortho" or "forward"')


def _scale(norm, n, inverse):
    """The factor NumPy applies to the unnormalised transform of length ``n``."""
    _check_norm(norm)
    if norm == "ortho":
        return 1.0 / np.sqrt(n)
    if (norm == "forward") != inverse:     # forward-scaled forward transform, or inverse
        return 1.0 / n
    return 1.0


def _fit(x, length, axis):
    """``x`` cropped or zero-padded to ``length`` along ``axis`` (NumPy's ``n``)."""
    have = x.shape[axis]
    if have == length:
        return x
    if have > length:
        index = [slice(None)] * x.ndim
        index[axis] = slice(0, length)
        return x[tuple(index)]
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, length - have)
    return np.pad(x, widths)


def _fit_all(x, shape, axes):
    for ax in axes:
        x = _fit(x, shape[ax], ax)
    return x


def _as_operand(r, a):
    """A cotangent for operand ``a``: real part for a real ``a``, in a's float dtype."""
    a = np.asarray(a)
    if not np.iscomplexobj(a):
        r = np.real(r)
    return np.ascontiguousarray(r, dtype=np.result_type(grad_dtype(a), r.dtype)
                                if np.iscomplexobj(a) else grad_dtype(a))


def _axes_of(a, s, axes):
    """NumPy's (s, axes) for an n-dimensional transform, normalised."""
    nd = np.ndim(a)
    if axes is None:
        axes = tuple(range(nd)) if s is None else tuple(range(nd - len(s), nd))
    axes = tuple(ax % nd for ax in axes)
    return axes


# -- the transforms (the primal, as NumPy computes it) --------------------------------

def fft(a, n=None, axis=-1, norm=None):
    """np.fft.fft."""
    return np.fft.fft(a, n, axis, norm)


def ifft(a, n=None, axis=-1, norm=None):
    """np.fft.ifft."""
    return np.fft.ifft(a, n, axis, norm)


def rfft(a, n=None, axis=-1, norm=None):
    """np.fft.rfft."""
    return np.fft.rfft(a, n, axis, norm)


def irfft(a, n=None, axis=-1, norm=None):
    """np.fft.irfft."""
    return np.fft.irfft(a, n, axis, norm)


def hfft(a, n=None, axis=-1, norm=None):
    """np.fft.hfft: the real signal of a Hermitian half spectrum."""
    return np.fft.hfft(a, n, axis, norm)


def ihfft(a, n=None, axis=-1, norm=None):
    """np.fft.ihfft: the half spectrum of a real signal (inverse of hfft)."""
    return np.fft.ihfft(a, n, axis, norm)


def fftn(a, s=None, axes=None, norm=None):
    """np.fft.fftn."""
    return np.fft.fftn(a, s, axes, norm)


def ifftn(a, s=None, axes=None, norm=None):
    """np.fft.ifftn."""
    return np.fft.ifftn(a, s, axes, norm)


def rfftn(a, s=None, axes=None, norm=None):
    """np.fft.rfftn."""
    return np.fft.rfftn(a, s, axes, norm)


def irfftn(a, s=None, axes=None, norm=None):
    """np.fft.irfftn."""
    return np.fft.irfftn(a, s, axes, norm)


def fft2(a, s=None, axes=(-2, -1), norm=None):
    """np.fft.fft2."""
    return np.fft.fftn(a, s, axes, norm)


def ifft2(a, s=None, axes=(-2, -1), norm=None):
    """np.fft.ifft2."""
    return np.fft.ifftn(a, s, axes, norm)


def rfft2(a, s=None, axes=(-2, -1), norm=None):
    """np.fft.rfft2."""
    return np.fft.rfftn(a, s, axes, norm)


def irfft2(a, s=None, axes=(-2, -1), norm=None):
    """np.fft.irfft2."""
    return np.fft.irfftn(a, s, axes, norm)


def fftshift(x, axes=None):
    """np.fft.fftshift."""
    return np.fft.fftshift(x, axes)


def ifftshift(x, axes=None):
    """np.fft.ifftshift."""
    return np.fft.ifftshift(x, axes)


# -- adjoints ---------------------------------------------------------------------------

def fft_grad(g, a, n=None, axis=-1, norm=None):
    """Cotangent of ``a`` in ``np.fft.fft(a, n, axis, norm)``: fft of g, fitted to a."""
    a = np.asarray(a)
    return _as_operand(_fit(np.fft.fft(g, None, axis, norm), a.shape[axis], axis), a)


def ifft_grad(g, a, n=None, axis=-1, norm=None):
    """Cotangent of ``a`` in ``np.fft.ifft``: ifft of g, fitted to a."""
    a = np.asarray(a)
    return _as_operand(_fit(np.fft.ifft(g, None, axis, norm), a.shape[axis], axis), a)


def rfft_grad(g, a, n=None, axis=-1, norm=None):
    """Cotangent of ``a`` in ``np.fft.rfft``: real part of fft of g zero-padded to n."""
    a = np.asarray(a)
    length = a.shape[axis] if n is None else n
    return _as_operand(_fit(np.fft.fft(g, length, axis, norm), a.shape[axis], axis), a)


def _hermitian_weights(m, n, axis, ndim):
    """1 at frequency 0 (and n/2 for even n), 2 at the others: shape broadcastable
    along ``axis``."""
    w = np.full(m, 2.0)
    w[0] = 1.0
    if n % 2 == 0 and n // 2 < m:
        w[n // 2] = 1.0
    shape = [1] * ndim
    shape[axis] = m
    return w.reshape(shape)


def irfft_grad(g, a, n=None, axis=-1, norm=None):
    """Cotangent of ``a`` in ``np.fft.irfft``: ``w * scale * conj(rfft(g))``, fitted to a."""
    a = np.asarray(a)
    g = np.real(g)
    axis = axis % a.ndim
    length = 2 * (a.shape[axis] - 1) if n is None else n
    r = np.conj(np.fft.rfft(g, length, axis))
    r = r * (_hermitian_weights(r.shape[axis], length, axis, r.ndim)
             * _scale(norm, length, inverse=True))
    return _as_operand(_fit(r, a.shape[axis], axis), a)


def _swapped(norm):
    """The norm of the opposite direction (NumPy writes hfft as irfft of conj(a))."""
    _check_norm(norm)
    return {None: "forward", "backward": "forward", "ortho": "ortho",
            "forward": "backward"}[norm]


def hfft_grad(g, a, n=None, axis=-1, norm=None):
    """Cotangent of ``a`` in ``np.fft.hfft``, which is ``irfft(conj(a), n, axis)``
    with the norm of the other direction: conj of irfft's cotangent."""
    a = np.asarray(a)
    return _as_operand(np.conj(irfft_grad(g, np.conj(a), n, axis, _swapped(norm))), a)


def ihfft_grad(g, a, n=None, axis=-1, norm=None):
    """Cotangent of ``a`` in ``np.fft.ihfft``, which is ``conj(rfft(a, n, axis))``
    with the norm of the other direction: rfft's cotangent of conj(g)."""
    return rfft_grad(np.conj(g), a, n, axis, _swapped(norm))


def fftn_grad(g, a, s=None, axes=None, norm=None):
    """Cotangent of ``a`` in ``np.fft.fftn``: fftn of g over the same axes, fitted to a."""
    a = np.asarray(a)
    axes = _axes_of(a, s, axes)
    return _as_operand(_fit_all(np.fft.fftn(g, None, axes, norm), a.shape, axes), a)


def ifftn_grad(g, a, s=None, axes=None, norm=None):
    """Cotangent of ``a`` in ``np.fft.ifftn``: ifftn of g, fitted to a."""
    a = np.asarray(a)
    axes = _axes_of(a, s, axes)
    return _as_operand(_fit_all(np.fft.ifftn(g, None, axes, norm), a.shape, axes), a)


def _lengths(a, s, axes, last_from_half=False):
    if s is not None:
        return tuple(s)
    shape = [a.shape[ax] for ax in axes]
    if last_from_half:
        shape[-1] = 2 * (shape[-1] - 1)
    return tuple(shape)


def rfftn_grad(g, a, s=None, axes=None, norm=None):
    """Cotangent of ``a`` in ``np.fft.rfftn``: real part of fftn of g zero-padded
    to s, fitted to a."""
    a = np.asarray(a)
    axes = _axes_of(a, s, axes)
    r = np.fft.fftn(g, _lengths(a, s, axes), axes, norm)
    return _as_operand(_fit_all(r, a.shape, axes), a)


def irfftn_grad(g, a, s=None, axes=None, norm=None):
    """Cotangent of ``a`` in ``np.fft.irfftn``: ``w * scale * conj(rfftn(g))``
    (w along the last axis), fitted to a."""
    a = np.asarray(a)
    axes = _axes_of(a, s, axes)
    lengths = _lengths(a, s, axes, last_from_half=True)
    r = np.conj(np.fft.rfftn(np.real(g), lengths, axes))
    last = axes[-1]
    r = r * (_hermitian_weights(r.shape[last], lengths[-1], last, r.ndim)
             * _scale(norm, int(np.prod(lengths)), inverse=True))
    return _as_operand(_fit_all(r, a.shape, axes), a)


def fftshift_grad(g, x, axes=None):
    """Cotangent of ``x`` in ``np.fft.fftshift``: ifftshift of g."""
    return _as_operand(np.fft.ifftshift(g, axes), x)


def ifftshift_grad(g, x, axes=None):
    """Cotangent of ``x`` in ``np.fft.ifftshift``: fftshift of g."""
    return _as_operand(np.fft.fftshift(g, axes), x)


# -- complex plumbing ---------------------------------------------------------------------

def real_grad(g, val):
    """Cotangent of ``val`` in ``np.real(val)``: Re(g) (as a complex value for complex val).

    The cotangent of a real value can carry an imaginary part where it met a
    complex one in a product whose shapes matched at compile time (no
    :func:`unbroadcast` in between); its real part is the cotangent, so
    every rule taking a real result back to a complex operand reads Re(g).
    """
    if np.iscomplexobj(val):
        return np.real(g) + 0j if np.ndim(val) else complex(np.real(g))
    return np.real(g)


def imag_grad(g, val):
    """Cotangent of ``val`` in ``np.imag(val)``: ``-1j * g``; zero for a real val."""
    if np.iscomplexobj(val):
        return -1j * np.real(g)
    return np.zeros_like(val, dtype=grad_dtype(val)) if np.ndim(val) else 0.0


def conj_grad(g, x):
    """Cotangent of ``x`` in ``np.conj(x)``: conj(g) (g itself for a real x)."""
    if np.iscomplexobj(x):
        return np.conj(g)
    return np.real(g)


def abs_jvp(t, x):
    """Tangent of ``np.abs(x)`` for tangent ``t`` of x: sign(x) t, and
    Re(conj(x) t) / |x| for complex x."""
    if np.iscomplexobj(x):
        m = np.abs(x)
        return np.real(np.conj(x) * t) / (m + (m == 0))
    return np.sign(x) * t


def abs_vjp(c, x):
    """Cotangent of ``x`` in ``np.abs(x)`` for the result's cotangent ``c``: sign(x) c,
    and Re(c) conj(x) / |x| for complex x (JAX's convention; 0 at 0)."""
    if np.iscomplexobj(x):
        m = np.abs(x)
        return np.real(c) * np.conj(x) / (m + (m == 0))
    return np.sign(x) * c


def abs_curv(a, b, x):
    """The second-order term of |x| for complex x: ``Re(a) (conj(b) - conj(x)
    Re(conj(x) b) / |x|^2) / |x|`` -- both the derivative in x of
    ``abs_vjp(a, x)`` in direction b and its transpose applied to b (and, times
    t, of ``abs_jvp(t, x)``).  Zero for real x (sign(x) is locally constant)."""
    if not np.iscomplexobj(x):
        return np.zeros(np.shape(x), dtype=grad_dtype(x)) if np.ndim(x) else 0.0
    m = np.abs(x)
    m = m + (m == 0)
    return np.real(a) * (np.conj(b) - np.conj(x) * np.real(np.conj(x) * b) / (m * m)) / m


EXPORTS = ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "hfft_grad", "ihfft_grad",
           "fftn", "ifftn", "rfftn", "irfftn", "fft2", "ifft2",
           "rfft2", "irfft2", "fftshift",
           "ifftshift", "fft_grad", "ifft_grad", "rfft_grad", "irfft_grad", "fftn_grad",
           "ifftn_grad", "rfftn_grad", "irfftn_grad", "fftshift_grad", "ifftshift_grad",
           "real_grad", "imag_grad", "conj_grad", "abs_jvp", "abs_vjp", "abs_curv")
