"""The per-example functions of the GPU benchmarks (benchmarks/gpu/run.py),
written as a GPU thread runs them: scalars and loops over arrays passed in
(the issue's workloads; RK4 is tests/programs/cuda_seeds.py's ``ode_loss``)."""
import numpy as np

import s2s_ad as ad


def td_loss(theta, s_t, r_tp1, s_tp1):
    """MindSpore's TD(0) semi-gradient loss for features of any length d."""
    v_t = 0.0
    v_tp1 = 0.0
    for i in range(theta.shape[0]):
        v_t = v_t + theta[i] * s_t[i]
        v_tp1 = v_tp1 + theta[i] * s_tp1[i]
    target = r_tp1 + v_tp1
    return (ad.stop_gradient(target) - v_t) ** 2


def mlp_loss(W1, b1, W2, b2, x, y):
    """Softmax cross-entropy of a 64 -> 128 (tanh) -> 10 network for one example.

    ``W1`` is (128, 64) flattened row-major, ``W2`` (10, 128) flattened; ``y``
    is the one-hot label (10 floats).  The ten logits are scalars: a hidden
    unit at a time adds its share to each."""
    n_in = x.shape[0]
    n_hidden = b1.shape[0]
    z0 = b2[0]
    z1 = b2[1]
    z2 = b2[2]
    z3 = b2[3]
    z4 = b2[4]
    z5 = b2[5]
    z6 = b2[6]
    z7 = b2[7]
    z8 = b2[8]
    z9 = b2[9]
    for j in range(n_hidden):
        a = b1[j]
        for i in range(n_in):
            a = a + W1[j * n_in + i] * x[i]
        h = np.tanh(a)
        z0 = z0 + W2[j] * h
        z1 = z1 + W2[n_hidden + j] * h
        z2 = z2 + W2[2 * n_hidden + j] * h
        z3 = z3 + W2[3 * n_hidden + j] * h
        z4 = z4 + W2[4 * n_hidden + j] * h
        z5 = z5 + W2[5 * n_hidden + j] * h
        z6 = z6 + W2[6 * n_hidden + j] * h
        z7 = z7 + W2[7 * n_hidden + j] * h
        z8 = z8 + W2[8 * n_hidden + j] * h
        z9 = z9 + W2[9 * n_hidden + j] * h
    m = ad.stop_gradient(max(z0, z1, z2, z3, z4, z5, z6, z7, z8, z9))   # cancels: no gradient
    total = (np.exp(z0 - m) + np.exp(z1 - m) + np.exp(z2 - m) + np.exp(z3 - m)
             + np.exp(z4 - m) + np.exp(z5 - m) + np.exp(z6 - m) + np.exp(z7 - m)
             + np.exp(z8 - m) + np.exp(z9 - m))
    picked = (y[0] * z0 + y[1] * z1 + y[2] * z2 + y[3] * z3 + y[4] * z4 + y[5] * z5
              + y[6] * z6 + y[7] * z7 + y[8] * z8 + y[9] * z9)
    return m + np.log(total) - picked
