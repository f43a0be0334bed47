"""Per-instance policy gradients in one batched call: ``ad.vmap(ad.grad(loss))``.

The use case of the TensorFlow question "how do I get per-instance gradients
in a batch?": a policy network picks an action per observation; the
gradient of each instance's cross-entropy (the negative log-probability of
the action it took) is weighted by that instance's return, and the weighted
gradients are averaged into one update (REINFORCE).  TensorFlow sums the
gradients over the batch, and unstacking the batch into per-instance
gradient ops gave the asker only 2x; here one call of
``ad.vmap(ad.grad(...), in_axes=(None, None, None, None, 0, 0))`` gives all
of them, the weights shared and the observations and actions batched.

The policy: h = tanh(obs @ W1 + b1), logits = h @ W2 + b2, pi = softmax(logits).

Run it with ``python examples/per_example_policy_gradients.py``.
"""
import numpy as np

import s2s_ad as ad

N_INPUTS, N_HIDDEN, N_ACTIONS = 4, 8, 3


def policy_logits(W1, b1, W2, b2, obs):
    h = np.tanh(obs @ W1 + b1)
    return h @ W2 + b2


def log_softmax(z):
    """log(softmax(z)), shifted by max(z) so that exp never overflows.

    The shift changes nothing mathematically, so no derivative needs to flow
    through it: ``ad.stop_gradient``.
    """
    zs = z - ad.stop_gradient(np.max(z))
    return zs - np.log(np.sum(np.exp(zs)))


def neg_log_prob(W1, b1, W2, b2, obs, action):
    """The cross-entropy of one instance: -log pi(action | obs)."""
    logp = log_softmax(policy_logits(W1, b1, W2, b2, obs))
    return -logp[action]


def reinforce_loss(W1, b1, W2, b2, obs, actions, returns):
    """The whole batch's REINFORCE loss, mean_i returns[i] * -log pi(actions[i] | obs[i])."""
    total = 0.0
    for i in range(obs.shape[0]):
        total = total + returns[i] * neg_log_prob(W1, b1, W2, b2, obs[i], actions[i])
    return total / obs.shape[0]


def init_params(rng):
    W1 = rng.standard_normal((N_INPUTS, N_HIDDEN)) / np.sqrt(N_INPUTS)
    b1 = 0.1 * rng.standard_normal(N_HIDDEN)
    W2 = rng.standard_normal((N_HIDDEN, N_ACTIONS)) / np.sqrt(N_HIDDEN)
    b2 = np.zeros(N_ACTIONS)
    return W1, b1, W2, b2


def action_probabilities(params, obs):
    """softmax(logits) for a batch of observations, plain NumPy (for sampling)."""
    W1, b1, W2, b2 = params
    z = np.tanh(obs @ W1 + b1) @ W2 + b2
    e = np.exp(z - np.max(z, axis=1, keepdims=True))
    return e / np.sum(e, axis=1, keepdims=True)


def main(batch_size=6, learning_rate=0.1, seed=2):
    rng = np.random.default_rng(seed)
    params = init_params(rng)
    obs = rng.standard_normal((batch_size, N_INPUTS))
    probs = action_probabilities(params, obs)
    actions = np.array([rng.choice(N_ACTIONS, p=p) for p in probs])
    returns = rng.standard_normal(batch_size) + 0.5
    print(f"batch of {batch_size} observations; actions taken {actions}; "
          f"returns {np.round(returns, 3)}")

    # One call: a gradient per instance, for each weight (argnums 0-3).
    per_instance = ad.vmap(ad.grad(neg_log_prob, argnums=(0, 1, 2, 3)),
                           in_axes=(None, None, None, None, 0, 0))
    grads = per_instance(*params, obs, actions)
    names = ("W1", "b1", "W2", "b2")
    print("\nad.vmap(ad.grad(neg_log_prob, argnums=(0, 1, 2, 3)), "
          "in_axes=(None, None, None, None, 0, 0))")
    for name, p, g in zip(names, params, grads):
        print(f"  d(-log pi)/d{name}: {g.shape}  (batch of {p.shape})")
    norms = np.sqrt(sum(np.sum(g.reshape(batch_size, -1) ** 2, axis=1) for g in grads))
    print(f"  per-instance gradient norms: {np.round(norms, 4)}")

    # The same, compiled.
    jit_grads = ad.jit(per_instance)(*params, obs, actions)
    same = all(np.allclose(a, b, rtol=1e-12, atol=1e-14) for a, b in zip(jit_grads, grads))
    print(f"  ad.jit of it gives the same gradients: {same}")

    # Weight each instance's gradient by its return and average: one update.
    update = tuple(np.tensordot(returns, g, axes=1) / batch_size for g in grads)
    new_params = tuple(p - learning_rate * u for p, u in zip(params, update))
    print("\nmean of returns[i] * per-instance gradient[i]:")
    for name, u in zip(names, update):
        print(f"  {name}: {np.array2string(u.ravel()[:4], precision=5)}"
              f"{' ...' if u.size > 4 else ''}")

    # The averaged update is the gradient of the batch's REINFORCE loss.
    batch_grad = ad.grad(reinforce_loss, argnums=(0, 1, 2, 3))(*params, obs, actions, returns)
    same = all(np.allclose(a, b, rtol=1e-12, atol=1e-14) for a, b in zip(batch_grad, update))
    print(f"equal to ad.grad of the batch REINFORCE loss: {same}")

    return {
        "params": params,
        "obs": obs,
        "actions": actions,
        "returns": returns,
        "grads": grads,
        "jit_grads": jit_grads,
        "update": update,
        "batch_grad": batch_grad,
        "learning_rate": learning_rate,
        "new_params": new_params,
    }


if __name__ == "__main__":
    main()
