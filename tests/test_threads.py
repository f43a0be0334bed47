"""Transformed functions called from several threads at once.

Each thread's call must use the generated code for its own argument
structure, and a transform first called from many threads at once is built
once.  The references are computed independently (closed forms).
"""
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import s2s_ad as ad


def loss(x, w):
    return np.sum(np.tanh(x * w) ** 2)


def _reference(x, w):
    t = np.tanh(x * w)
    return np.broadcast_to(2 * t * (1 - t ** 2) * w, np.shape(x))


def _run_together(calls):
    barrier = threading.Barrier(len(calls))

    def go(call):
        barrier.wait()
        return call()
    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(go, calls))


def _cases(rng):
    """(argument, w) pairs of several structures: scalars, vectors of several
    lengths (short ones are scalarized under jit), matrices."""
    shapes = [(), (3,), (3,), (20,), (2, 3), (4, 5), (2,), ()]
    return [(rng.normal(size=s) if s else float(rng.normal()), 0.7 + 0.1 * i)
            for i, s in enumerate(shapes)]


def test_grad_from_many_threads_at_once():
    rng = np.random.default_rng(0)
    for transform in (ad.grad(loss), ad.jit(ad.grad(loss))):
        for _ in range(2):                # first calls (building) and later calls
            cases = _cases(rng)
            results = _run_together([lambda x=x, w=w: transform(x, w) for x, w in cases])
            for (x, w), got in zip(cases, results):
                assert np.shape(got) == np.shape(x)
                np.testing.assert_allclose(got, _reference(x, w), rtol=1e-10, atol=1e-12)


def per_row(x, A):
    return np.sum(np.sin(A @ x))


def test_batched_and_jacobians_from_many_threads_at_once():
    rng = np.random.default_rng(1)
    A = rng.normal(size=(4, 3))
    xs = [rng.normal(size=(n, 3)) for n in (2, 5, 3, 7)]
    per_sample = ad.jit(ad.vmap(ad.grad(per_row), in_axes=(0, None)))
    jac = ad.jit(ad.jacrev(lambda_free_model))
    calls = [lambda X=X: per_sample(X, A) for X in xs] + \
            [lambda X=X: jac(X[0], A) for X in xs]
    results = _run_together(calls)
    for X, got in zip(xs, results[:4]):
        want = np.cos(X @ A.T) @ A
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    for X, got in zip(xs, results[4:]):
        want = np.cos(A @ X[0])[:, None] * A
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def lambda_free_model(x, A):
    return np.sin(A @ x)
