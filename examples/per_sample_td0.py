"""Per-sample gradients of the TD(0) pseudo-loss: ``jit`` + ``vmap`` + ``grad``.

MindSpore's per-sample-gradients tutorial, in s2s_ad.  The value of a state
s is linear, v(s) = theta . s; after the transition s_t -> s_tp1 with reward
r_tp1 the TD(0) update of theta is the gradient of the pseudo-loss

    L(theta) = (stop_gradient(r_tp1 + v(s_tp1)) - v(s_t)) ** 2

with the TD target held constant, i.e. -2 * (r_tp1 + v(s_tp1) - v(s_t)) * s_t.

``ad.vmap(ad.grad(td_loss))`` gives one such gradient per transition of a
batch in one call; first with theta batched too (``in_axes=0`` for every
argument, as the tutorial starts), then with theta shared
(``in_axes=(None, 0, 0, 0)``), then compiled with ``ad.jit``.

The tutorial's ``td_loss`` reads the globals ``r_tp1`` and ``s_tp1`` instead
of its own arguments, which is why it prints ``[-4, -8, 0]``; here the loss
reads its arguments, and the update for the tutorial's transition is
``[-7.2, -3.6, 7.2]``.

Run it with ``python examples/per_sample_td0.py``.
"""
import numpy as np

import s2s_ad as ad


def value_fn(theta, state):
    return np.dot(theta, state)


def td_loss(theta, s_t, r_tp1, s_tp1):
    v_t = value_fn(theta, s_t)
    target = r_tp1 + value_fn(theta, s_tp1)
    return (ad.stop_gradient(target) - v_t) ** 2


def show(title, value):
    text = np.array2string(np.asarray(value), precision=6, suppress_small=True)
    print(f"{title}:\n{text}")


def main(learning_rate=0.05):
    # The tutorial's transition, stacked twice into a batch of two.
    theta = np.array([0.2, -0.2, 0.1])
    s_t = np.array([2.0, 1.0, -2.0])
    r_tp1 = 2.0
    s_tp1 = np.array([1.0, 2.0, 0.0])
    batched_theta = np.stack([theta, theta])
    batched_s_t = np.stack([s_t, s_t])
    batched_r_tp1 = np.array([r_tp1, r_tp1])
    batched_s_tp1 = np.stack([s_tp1, s_tp1])

    td_update = ad.grad(td_loss)
    delta = td_update(theta, s_t, r_tp1, s_tp1)
    show("ad.grad(td_loss), one transition", delta)

    # vmap adds a batch axis to every input and output.
    per_sample_grads = ad.vmap(td_update)
    batched_delta = per_sample_grads(batched_theta, batched_s_t, batched_r_tp1, batched_s_tp1)
    show("\nad.vmap(ad.grad(td_loss)), theta batched too", batched_delta)

    # theta is shared by every transition: in_axes=None for it.
    inefficient_per_sample_grads = ad.vmap(td_update, in_axes=(None, 0, 0, 0))
    shared_delta = inefficient_per_sample_grads(theta, batched_s_t, batched_r_tp1,
                                                batched_s_tp1)
    show("\nad.vmap(ad.grad(td_loss), in_axes=(None, 0, 0, 0))", shared_delta)

    # ... and compiled with Numba.
    efficient_per_sample_grads = ad.jit(inefficient_per_sample_grads)
    jit_delta = efficient_per_sample_grads(theta, batched_s_t, batched_r_tp1, batched_s_tp1)
    show("\nad.jit(ad.vmap(ad.grad(td_loss), in_axes=(None, 0, 0, 0)))", jit_delta)

    # A batch of different transitions: one update each, then their mean applied.
    rng = np.random.default_rng(1)
    states = rng.standard_normal((5, 3))
    rewards = rng.standard_normal(5)
    next_states = rng.standard_normal((5, 3))
    batch_delta = efficient_per_sample_grads(theta, states, rewards, next_states)
    new_theta = theta - learning_rate * np.mean(batch_delta, axis=0)
    show("\nfive different transitions: per-sample updates", batch_delta)
    print(f"theta - lr * mean(updates) = {np.round(new_theta, 6)}   (lr = {learning_rate})")

    return {
        "inputs": (theta, s_t, r_tp1, s_tp1),
        "grad": delta,
        "vmap_batched_theta": batched_delta,
        "vmap_shared_theta": shared_delta,
        "jit_vmap": jit_delta,
        "batch": (states, rewards, next_states),
        "batch_grads": batch_delta,
        "learning_rate": learning_rate,
        "theta": new_theta,
    }


if __name__ == "__main__":
    main()
