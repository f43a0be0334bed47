"""Per-example functions that use one small vector both whole and element by element.

Under ``ad.jit`` a per-example vector of length at most 16 is split into
scalars (``scalarize``) while its whole-array uses (``@``, ``np.dot``,
``np.outer``, slices, calls) still read the array; the batched gradients
must count both.  Every function takes ``(x, K)``: ``x`` of length n >= 1,
``K`` of shape (n, n).
"""
import numpy as np


def energy(x, K):
    return x @ K @ x + np.dot(x, x) + np.sum(K) * np.sum(x)


def first_and_whole(x, K):
    return x[0] * np.sum(x ** 2) + np.dot(x, K[0]) + x[-1] * K[0, 0]


def loop_elements(x, K):
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i] * K[i, i] * x[0]
    return s + np.sum(np.outer(x, K[:, 0]) * K)


def slices(x, K):
    head = x[:1]
    return np.sum(x[1:] * x[:-1]) + x[-1] ** 2 + np.sum(head * K[0, :1]) + np.sum(x[::2])


def _affine(v):
    return v * 2.0 + 1.0


def helper_vector(x, K):
    y = _affine(x)
    return np.dot(y, K @ x) + x[0] * y[-1]


def outer_max(x, K):
    return np.sum(np.outer(x, x) * K) + np.max(x) * x[0]


def filled_in_place(x, K):
    y = np.zeros(x.shape[0])
    for i in range(x.shape[0]):
        y[i] = x[i] ** 2 + K[i, 0]
    return np.sum(y * x) + y @ K @ x


def _logsumexp(v):
    m = np.max(v)
    return np.log(np.sum(np.exp(v - m))) + m


def lse_mixed(x, K):
    return _logsumexp(K @ x) + _logsumexp(x) * x[0] + np.tanh(x[x.shape[0] - 1])


def gmm_point(alphas, means, icf, x):
    """One data point's GMM log-likelihood: ``Q_j`` lower triangular, filled in
    place from ``icf[j]`` (exp on the diagonal), and a log-sum-exp over components."""
    k = alphas.shape[0]
    d = x.shape[0]
    main = np.zeros(k)
    for j in range(k):
        Q = np.zeros((d, d))
        idx = d
        for c in range(d):
            Q[c, c] = np.exp(icf[j, c])
            for r in range(c + 1, d):
                Q[r, c] = icf[j, idx]
                idx += 1
        xc = x - means[j]
        Qx = Q @ xc
        main[j] = alphas[j] + np.sum(icf[j, :d]) - 0.5 * np.dot(Qx, Qx)
    return _logsumexp(main) - _logsumexp(alphas)


MIXED = [energy, first_and_whole, loop_elements, slices, helper_vector, outer_max,
         filled_in_place, lse_mixed]
