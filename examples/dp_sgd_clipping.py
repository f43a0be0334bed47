"""One differentially private SGD step: per-sample gradients, clipped, noised.

DP-SGD (Abadi et al., 2016) bounds each training example's influence on an
update: it needs every example's own gradient, which ``ad.vmap(ad.grad(loss))``
gives in one call.  The step:

1. per-sample gradients g_i of the loss for a small MLP (the parameters are
   one pytree, a dict of arrays as a JAX user keeps them; the gradients are
   a dict with the same keys, each leaf with a leading batch axis);
2. the L2 norm of each g_i across all the parameters;
3. clipping: g_i * min(1, C / |g_i|), so no example contributes more than C;
4. the clipped gradients summed, Gaussian noise of standard deviation
   sigma * C added to each parameter (from a seeded generator), divided by
   the batch size;
5. params - learning_rate * that.

For comparison it also computes the ordinary, non-private gradient of the
mean loss, written as JAX users write it: ``ad.grad`` of a lambda that
closes over the batch and maps the loss over it with ``ad.vmap``.

The model: z = tanh(x @ W1 + b1) @ w2 + b2, a binary classifier with labels
y in {-1, +1} and the logistic loss log(1 + exp(-y z)).

Run it with ``python examples/dp_sgd_clipping.py``.
"""
import numpy as np

import s2s_ad as ad

N_INPUTS, N_HIDDEN = 4, 5
NAMES = ("W1", "b1", "w2", "b2")


def logit(params, x):
    h = np.tanh(x @ params["W1"] + params["b1"])
    return np.dot(h, params["w2"]) + params["b2"]


def loss(params, x, y):
    """Logistic loss of one example, y in {-1, +1}."""
    return np.log1p(np.exp(-y * logit(params, x)))


def make_problem(batch_size, seed):
    rng = np.random.default_rng(seed)
    params = {"W1": rng.standard_normal((N_INPUTS, N_HIDDEN)),
              "b1": 0.5 * rng.standard_normal(N_HIDDEN),
              "w2": rng.standard_normal(N_HIDDEN),
              "b2": 0.1}
    x = 1.5 * rng.standard_normal((batch_size, N_INPUTS))
    y = np.where(rng.random(batch_size) < 0.5, -1.0, 1.0)
    return params, x, y


def dp_sgd_step(per_sample_grads, params, x, y, clip_norm, noise_multiplier, learning_rate,
                noise_seed):
    """One DP-SGD step with per-sample gradients from ``per_sample_grads``; plain NumPy."""
    grads = per_sample_grads(params, x, y)        # {name: (batch, *shape of params[name])}
    batch_size = x.shape[0]
    flat = [np.reshape(grads[k], (batch_size, -1)) for k in params]
    norms = np.sqrt(sum(np.sum(f * f, axis=1) for f in flat))
    scale = np.minimum(1.0, clip_norm / norms)
    clipped = {k: g * np.reshape(scale, (batch_size,) + (1,) * (np.ndim(g) - 1))
               for k, g in grads.items()}
    rng = np.random.default_rng(noise_seed)       # one draw per parameter, in params' order
    noise = {k: noise_multiplier * clip_norm * rng.standard_normal(np.shape(p))
             for k, p in params.items()}
    noisy_mean = {k: (np.sum(clipped[k], axis=0) + noise[k]) / batch_size for k in params}
    new_params = {k: p - learning_rate * noisy_mean[k] for k, p in params.items()}
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
          f"{ {k: np.shape(g) for k, g in step['grads'].items()} }")
    print(f"per-sample gradient norms:  {np.round(step['norms'], 4)}")
    print(f"clipping factors:           {np.round(step['scale'], 4)}")
    clipped_norms = np.sqrt(sum(np.sum(np.reshape(c, (batch_size, -1)) ** 2, axis=1)
                                for c in step["clipped"].values()))
    print(f"clipped norms:              {np.round(clipped_norms, 4)}   "
          f"({int(np.sum(step['scale'] < 1.0))} of {batch_size} clipped)")

    print("\nnoisy mean of the clipped gradients:")
    for name in NAMES:
        u = np.ravel(step["noisy_mean"][name])
        print(f"  {name}: {np.array2string(u[:5], precision=5)}{' ...' if u.size > 5 else ''}")

    before = np.mean([loss(params, xi, yi) for xi, yi in zip(x, y)])
    after = np.mean([loss(step["new_params"], xi, yi) for xi, yi in zip(x, y)])
    print(f"\nmean loss before the step {before:.4f}, after {after:.4f}")

    # The non-private gradient of the mean loss, for comparison: a lambda
    # closing over the batch, the loss mapped over it inside.
    mean_grad = ad.jit(ad.grad(lambda p: np.mean(ad.vmap(loss, in_axes=(None, 0, 0))(p, x, y))))
    step["mean_grad"] = mean_grad(params)
    size = np.sqrt(sum(np.sum(g ** 2) for g in step["mean_grad"].values()))
    change = np.sqrt(sum(np.sum((step["mean_grad"][k] - step["noisy_mean"][k]) ** 2)
                         for k in NAMES))
    print(f"non-private mean gradient (ad.grad of a lambda): norm {size:.4f}; the private "
          f"update differs from it by {change:.4f}")

    step.update(params=params, x=x, y=y, clip_norm=clip_norm,
                noise_multiplier=noise_multiplier, learning_rate=learning_rate,
                noise_seed=noise_seed, clipped_norms=clipped_norms)
    return step


if __name__ == "__main__":
    main()
