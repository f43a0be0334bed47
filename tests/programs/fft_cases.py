"""Programs with np.fft inside real-valued losses (tests/test_coverage_fft.py)."""
import numpy as np

H = np.array([1.0, 0.5, -0.25, 0.125, 2.0, -1.0])


def power(x):
    return np.sum(np.abs(np.fft.rfft(x)) ** 2)


def filtered(x):
    return np.real(np.fft.ifft(np.fft.fft(x) * H[: x.shape[-1]]))
