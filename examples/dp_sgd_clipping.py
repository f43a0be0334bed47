"""One differentially private SGD step: per-sample gradients, clipped, noised.

DP-SGD (Abadi et al., 2016) bounds each training example's influence on an
update: it needs every example's own gradient, which ``ad.vmap(ad.grad(loss))``
gives in one call.  The step:

1. per-sample gradients g_i of the loss for a small MLP (the parameters are
   one pytree, a tuple of arrays; the gradients have its structure, each
   leaf with a leading batch axis);
2. the L2 norm of each g_i across all the parameters;
3. clipping: g_i * min(1, C / |g_i|), so no example contributes more than C;
4. the clipped gradients summed, Gaussian noise of standard deviation
   sigma * C added to each parameter (from a seeded generator), divided by
   the batch size;
5. params - learning_rate * that.

The model: z = tanh(x @ W1 + b1) @ w2 + b2, a binary classifier with labels
y in {-1, +1} and the logistic loss log(1 + exp(-y z)).

Run it with ``python examples/dp_sgd_clipping.py``.
"""
import numpy as np

import s2s_ad as ad

N_INPUTS, N_HIDDEN = 4, 5


def logit(params, x):
    W1, b1, w2, b2 = params
    h = np.tanh(x @ W1 + b1)
    return np.dot(h, w2) + b2


def loss(params, x, y):
    """Logistic loss of one example, y in {-1, +1}."""
    return np.log1p(np.exp(-y * logit(params, x)))


def make_problem(batch_size, seed):
    rng = np.random.default_rng(seed)
    params = (rng.standard_normal((N_INPUTS, N_HIDDEN)),
              0.5 * rng.standard_normal(N_HIDDEN),
              rng.standard_normal(N_HIDDEN),
              0.1)
    x = 1.5 * rng.standard_normal((batch_size, N_INPUTS))
    y = np.where(rng.random(batch_size) < 0.5, -1.0, 1.0)
    return params, x, y


def dp_sgd_step(per_sample_grads, params, x, y, clip_norm, noise_multiplier, learning_rate,
                noise_seed):
    """One DP-SGD step with per-sample gradients from ``per_sample_grads``; plain NumPy."""
    grads = per_sample_grads(params, x, y)
    batch_size = x.shape[0]
    flat = [np.reshape(g, (batch_size, -1)) for g in grads]
    norms = np.sqrt(sum(np.sum(f * f, axis=1) for f in flat))
    scale = np.minimum(1.0, clip_norm / norms)
    clipped = tuple(g * np.reshape(scale, (batch_size,) + (1,) * (np.ndim(g) - 1))
                    for g in grads)
    rng = np.random.default_rng(noise_seed)
    noise = tuple(noise_multiplier * clip_norm * rng.standard_normal(np.shape(p))
                  for p in params)
    noisy_mean = tuple((np.sum(c, axis=0) + n) / batch_size for c, n in zip(clipped, noise))
    new_params = tuple(p - learning_rate * u for p, u in zip(params, noisy_mean))
    return {"grads": grads, "norms": norms, "scale": scale, "clipped": clipped,
            "noise": noise, "noisy_mean": noisy_mean, "new_params": new_params}


def main(batch_size=8, clip_norm=1.0, noise_multiplier=1.1, learning_rate=0.5, seed=0,
         noise_seed=42):
    params, x, y = make_problem(batch_size, seed)
    print(f"MLP {N_INPUTS} -> {N_HIDDEN} (tanh) -> 1, batch of {batch_size}; "
          f"C = {clip_norm}, sigma = {noise_multiplier}, lr = {learning_rate}")

    # Per-sample gradients: params shared (None), examples batched (0).
    per_sample_grads = ad.jit(ad.vmap(ad.grad(loss), in_axes=(None, 0, 0)))
    step = dp_sgd_step(per_sample_grads, params, x, y, clip_norm, noise_multiplier,
                       learning_rate, noise_seed)
    print("\nad.jit(ad.vmap(ad.grad(loss), in_axes=(None, 0, 0))): gradient shapes "
          f"{[np.shape(g) for g in step['grads']]}")
    print(f"per-sample gradient norms:  {np.round(step['norms'], 4)}")
    print(f"clipping factors:           {np.round(step['scale'], 4)}")
    clipped_norms = np.sqrt(sum(np.sum(np.reshape(c, (batch_size, -1)) ** 2, axis=1)
                                for c in step["clipped"]))
    print(f"clipped norms:              {np.round(clipped_norms, 4)}   "
          f"({int(np.sum(step['scale'] < 1.0))} of {batch_size} clipped)")

    names = ("W1", "b1", "w2", "b2")
    print("\nnoisy mean of the clipped gradients:")
    for name, u in zip(names, step["noisy_mean"]):
        u = np.ravel(u)
        print(f"  {name}: {np.array2string(u[:5], precision=5)}{' ...' if u.size > 5 else ''}")

    before = np.mean([loss(params, xi, yi) for xi, yi in zip(x, y)])
    after = np.mean([loss(step["new_params"], xi, yi) for xi, yi in zip(x, y)])
    print(f"\nmean loss before the step {before:.4f}, after {after:.4f}")

    step.update(params=params, x=x, y=y, clip_norm=clip_norm,
                noise_multiplier=noise_multiplier, learning_rate=learning_rate,
                noise_seed=noise_seed, clipped_norms=clipped_norms)
    return step


if __name__ == "__main__":
    main()
