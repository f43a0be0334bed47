"""One TD(0) update of a linear value function, with s2s_ad.

The value of a state s is v(s) = theta . s.  After the transition
s_t -> s_tp1 with reward r_tp1, TD(0) moves theta along the gradient of the
pseudo-loss

    L(theta) = (stop_gradient(r_tp1 + v(s_tp1)) - v(s_t)) ** 2

where the TD target is held constant (``ad.stop_gradient``), so
grad L = -2 * (r_tp1 + v(s_tp1) - v(s_t)) * s_t.  This is the example of
MindSpore's per-sample-gradients tutorial, with the loss reading its own
arguments (the tutorial's version reads globals).

Run it with ``python examples/td0_update.py``.
"""
import numpy as np

import s2s_ad as ad


def td_loss(theta, s_t, r_tp1, s_tp1):
    v_t = np.dot(theta, s_t)
    target = r_tp1 + np.dot(theta, s_tp1)
    return (ad.stop_gradient(target) - v_t) ** 2


def main(learning_rate=0.05):
    theta = np.array([0.2, -0.2, 0.1])
    s_t = np.array([2.0, 1.0, -2.0])
    r_tp1 = 2.0
    s_tp1 = np.array([1.0, 2.0, 0.0])
    print(f"theta = {theta}, loss = {td_loss(theta, s_t, r_tp1, s_tp1):.4f}")

    td_grad = ad.grad(td_loss)
    delta = td_grad(theta, s_t, r_tp1, s_tp1)
    new_theta = theta - learning_rate * delta
    print(f"ad.grad(td_loss)          -> {delta}")
    print(f"theta - lr * grad         -> {new_theta}   (lr = {learning_rate})")

    jit_delta = ad.jit(ad.grad(td_loss))(theta, s_t, r_tp1, s_tp1)
    jit_new_theta = theta - learning_rate * jit_delta
    print(f"ad.jit(ad.grad(td_loss))  -> {jit_delta}")
    print(f"theta - lr * grad         -> {jit_new_theta}")
    print(f"loss after the update = {td_loss(new_theta, s_t, r_tp1, s_tp1):.4f}")

    return {
        "inputs": (theta, s_t, r_tp1, s_tp1),
        "learning_rate": learning_rate,
        "grad": delta,
        "theta": new_theta,
        "jit_grad": jit_delta,
        "jit_theta": jit_new_theta,
    }


if __name__ == "__main__":
    main()
