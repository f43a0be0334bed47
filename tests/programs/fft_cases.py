"""Programs with np.fft inside real-valued functions of real inputs
(tests/test_coverage_fft.py): complex intermediates, real results."""
import numpy as np

PHASE = np.exp(1j * np.linspace(0.3, 2.0, 6))


def power(x):
    return np.abs(np.fft.rfft(x)) ** 2


def filtered(x):
    h = 1.0 / (1.0 + np.arange(x.shape[-1]))
    return np.real(np.fft.ifft(np.fft.fft(x) * h))


def round_trip(x):
    return np.fft.irfft(np.fft.rfft(x, n=8) * np.fft.rfft(x * x, n=8), n=7)


def ortho_2d(x):
    return np.abs(np.fft.fft2(x, norm="ortho")) + np.fft.fftn(x, axes=(0,)).imag


def magnitude_with_phase(x):
    """|fft(x)| times a fixed complex phase, back to real: the real |.| meets a
    complex factor in a product of equal shapes."""
    return np.real(np.fft.ifft(np.abs(np.fft.fft(x, n=6)) * PHASE))


def conj_product(x):
    z = np.fft.fft(np.sin(x))
    return np.real(z * np.conj(z)) + np.imag(z.conj() * np.fft.fft(x))


def shifted(x):
    return np.fft.fftshift(np.abs(np.fft.fft(x))) * np.fft.ifftshift(x)


def spectra_2d(x):
    return np.fft.irfft2(np.fft.rfft2(x) * np.abs(np.fft.rfft2(x)), s=x.shape)


def hermitian(x):
    """np.fft.hfft of a real half spectrum and of a complex one, each norm."""
    return (np.fft.hfft(x) * np.arange(10.0) + np.fft.hfft(x, n=7, norm="ortho") ** 2 @
            np.ones((7, 10)) + np.fft.hfft(np.fft.fft(x) * x, norm="forward"))


def half_spectrum(x):
    """np.fft.ihfft (complex results, real losses) and a round trip through hfft."""
    z = np.fft.ihfft(x * x, norm="forward")
    return (np.abs(np.fft.ihfft(x)) ** 2 + np.fft.ihfft(x, n=6, norm="ortho").imag
            + np.real(z * np.arange(4.0)) + np.fft.hfft(np.fft.ihfft(np.sin(x)), n=6)[:4])


def learned_filter(x, h):
    """A real filter, differentiated too, times a complex spectrum."""
    return np.real(np.fft.ifft(np.fft.fft(x) * h))


def loss(x):
    return (np.sum(power(x)) + np.sum(filtered(x) ** 2) + np.sum(round_trip(x))
            + np.sum(magnitude_with_phase(x)) + np.sum(conj_product(x)) + np.sum(shifted(x))
            + np.sum(hermitian(x) ** 2) * 1e-3 + np.sum(half_spectrum(x) ** 2))


def loss_2d(x):
    return np.sum(ortho_2d(x)) + np.sum(spectra_2d(x) ** 2)
