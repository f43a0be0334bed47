"""Per-example workloads for the CUDA target (tests/test_cuda.py, benchmarks)."""
import numpy as np

import s2s_ad as ad


def td_loss(theta, s_t, r_tp1, s_tp1):
    """MindSpore's TD(0) semi-gradient loss (API.md's example)."""
    v_t = np.dot(theta, s_t)
    target = r_tp1 + np.dot(theta, s_tp1)
    return (ad.stop_gradient(target) - v_t) ** 2


def mlp_loss(W1, b1, w2, b2, x, y):
    """A 2 -> 3 -> 1 tanh network, its first layer's weights flattened."""
    z = b2
    for j in range(3):
        a = b1[j]
        for i in range(2):
            a = a + W1[2 * j + i] * x[i]
        z = z + w2[j] * np.tanh(a)
    return (z - y) ** 2


def lotka_volterra(x, y, theta):
    return (theta[0] * x - theta[1] * x * y, theta[2] * x * y - theta[3] * y)


def ode_loss(theta, state0, h, n_steps):
    """RK4 on Lotka-Volterra for n_steps."""
    x = state0[0]
    y = state0[1]
    for _ in range(n_steps):
        k1x, k1y = lotka_volterra(x, y, theta)
        k2x, k2y = lotka_volterra(x + 0.5 * h * k1x, y + 0.5 * h * k1y, theta)
        k3x, k3y = lotka_volterra(x + 0.5 * h * k2x, y + 0.5 * h * k2y, theta)
        k4x, k4y = lotka_volterra(x + h * k3x, y + h * k3y, theta)
        x = x + h / 6.0 * (k1x + 2.0 * k2x + 2.0 * k3x + k4x)
        y = y + h / 6.0 * (k1y + 2.0 * k2y + 2.0 * k3y + k4y)
    return x * x + y * y


def softplus_sum(x, w):
    """Scalar math on the device (np.log1p, np.exp -> math)."""
    return np.log1p(np.exp(w * x[0])) + np.sin(x[1]) * w


def sorts(x):
    """Not runnable by a GPU thread: sorts an array of 40 (kept as an array)."""
    return np.sum(np.sort(x) * x)


def ode_adaptive(theta, state0, h, n_steps):
    """RK4 on Lotka-Volterra whose step halves where the slopes change fast:
    a branch inside the loop, taken differently per example and per step."""
    x = state0[0]
    y = state0[1]
    for _ in range(n_steps):
        k1x, k1y = lotka_volterra(x, y, theta)
        k2x, k2y = lotka_volterra(x + 0.5 * h * k1x, y + 0.5 * h * k1y, theta)
        k3x, k3y = lotka_volterra(x + 0.5 * h * k2x, y + 0.5 * h * k2y, theta)
        k4x, k4y = lotka_volterra(x + h * k3x, y + h * k3y, theta)
        if abs(k4x - k1x) + abs(k4y - k1y) > 0.25:
            step = 0.5 * h
        else:
            step = h
        x = x + step / 6.0 * (k1x + 2.0 * k2x + 2.0 * k3x + k4x)
        y = y + step / 6.0 * (k1y + 2.0 * k2y + 2.0 * k3y + k4y)
    return x * x + y * y


def ode_until(theta, state0, h, t_end):
    """Euler steps on Lotka-Volterra until t_end: a while loop whose trip
    count depends on the example (and on the state, through the step)."""
    x = state0[0]
    y = state0[1]
    t = 0.0
    while t < t_end:
        dx, dy = lotka_volterra(x, y, theta)
        x = x + h * dx
        y = y + h * dy
        t = t + h * (0.5 + 0.5 / (1.0 + x * x))
    return x * x + y * y


def ode_directional(theta, state0, dtheta, h, n_steps):
    """The RK4 loss and its derivative along dtheta (ad.jvp inside the
    per-example function: forward mode, scalars only)."""
    return ad.jvp(lambda th: ode_loss(th, state0, h, n_steps), (theta,), (dtheta,))


def ode_hvp(theta, state0, v, h, n_steps):
    """A Hessian-vector product inside the per-example function (its arrays of
    static shape are per-thread arrays on the GPU)."""
    return ad.hvp(lambda th: ode_loss(th, state0, h, n_steps), (theta,), (v,))
