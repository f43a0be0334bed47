"""One DP-SGD step over a dataset larger than one chunk, on Dask.

The examples are a dask array (generated chunk by chunk here; read from
disk with ``da.from_zarr``/``da.from_npy_stack`` in practice).  The same
``ad.jit(ad.vmap(ad.grad(loss)))`` call as on NumPy returns the per-sample
gradients as a lazy dask array, chunked like the examples; clipping, the sum
and the mean are Dask's own reductions, so no chunk of gradients outlives its
task and only the summed update reaches this process.

Run it with ``python examples/dask_dpsgd.py`` (the threaded scheduler), or
``python examples/dask_dpsgd.py --cluster`` for a LocalCluster of worker
processes (the loss below is shipped by value to them).  See docs/dask.md.
"""
import sys

import dask
import dask.array as da
import numpy as np

import s2s_ad as ad


def loss(theta, x, y):
    """Logistic loss of one example, y in {-1, +1}."""
    return np.log1p(np.exp(-y * np.dot(theta, x)))


def dp_sgd_step(theta, x, y, clip_norm=1.0, noise_multiplier=1.1, learning_rate=0.5, seed=0):
    grads = ad.jit(ad.vmap(ad.grad(loss), in_axes=(None, 0, 0)))(theta, x, y)   # lazy
    norms = da.sqrt(da.sum(grads ** 2, axis=1))
    clipped_sum = da.sum(grads * da.minimum(1.0, clip_norm / norms)[:, None], axis=0)
    noise = noise_multiplier * clip_norm * np.random.default_rng(seed).standard_normal(
        theta.shape)
    return theta - learning_rate * (clipped_sum.compute() + noise) / x.shape[0]


def main(n=200_000, d=16, chunk=20_000, seed=0):
    rng = da.random.default_rng(seed)
    x = rng.standard_normal((n, d), chunks=(chunk, d))
    y = da.where(rng.random(n, chunks=chunk) < 0.5, -1.0, 1.0)
    theta = np.full(d, 0.1)
    new_theta = dp_sgd_step(theta, x, y)
    mean_loss = ad.vmap(loss, in_axes=(None, 0, 0))
    before, after = da.mean(mean_loss(theta, x, y)), da.mean(mean_loss(new_theta, x, y))
    before, after = dask.compute(before, after)
    print(f"{n} examples in {x.numblocks[0]} chunks; mean loss {before:.5f} -> {after:.5f}")
    return theta, new_theta, before, after


if __name__ == "__main__":
    if "--cluster" in sys.argv:
        from distributed import Client, LocalCluster
        with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as c, \
                Client(c):
            main()
    else:
        main()
