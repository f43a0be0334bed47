"""The nested group: transforms written inside transformed functions.

``python -m benchmarks.nested [--quick]`` times, side by side in one run
(medians of interleaved samples, see :func:`benchmarks.core.measure`'s
convention; every column checked against the first):

* ``maml``: ``grad`` of one MAML inner step (``w - lr * grad(loss)(w)``, then
  the loss) on a 20-example tanh regression with d = 3, 10, 30, 1,000 and
  100,000 parameters, against ``grad(loss)`` itself;
* ``penalty``: a gradient penalty (the squared norm of an inner gradient)
  at d = 30 and 1,000;
* ``unrolled``: an unrolled optimiser of 10 inner gradient steps, d = 100;
* ``newton``: a Newton step with the Hessian of a 100-parameter loss taken
  inside;
* ``hvp``: ``ad.jit`` of a function calling ``ad.hvp`` on the extended
  Rosenbrock loop, n = 10,000, against ``ad.jit(ad.grad(f))``;
* ``update``: JAX's MLP training step (``jit(update)`` with ``grad``
  inside), 784-512-512-10, batch 128, against ``ad.jit(ad.grad(loss))``.

Columns: s2s_ad ``jit`` (inner transforms as reverse code), s2s_ad with
``S2S_AD_NESTED=columns`` (the forward-mode columns they replaced; only
where it finishes in reasonable time), and JAX ``jit`` of the same
composition when JAX is installed.  docs/nested_transforms.md records a run.
"""
import argparse
import contextlib
import statistics
import sys
import time

import numpy as np

import s2s_ad as ad
from s2s_ad import oracle

from . import core

LR = 0.1


def loss(w, X, y):
    return np.sum((np.tanh(X @ w) - y) ** 2)


def maml(w, X, y):
    return loss(w - LR * ad.grad(loss)(w, X, y), X, y)


def penalty(w, X, y):
    return loss(w, X, y) + np.sum(ad.grad(loss)(w, X, y) ** 2)


def unrolled(w, X, y):
    for _ in range(10):
        w = w - LR * ad.grad(loss)(w, X, y)
    return loss(w, X, y)


def newton(w, X, y):
    H = ad.hessian(loss)(w, X, y)
    g = ad.grad(loss)(w, X, y)
    return loss(w - np.linalg.solve(H + 10.0 * np.eye(w.shape[0]), g), X, y)


def rosen(x):
    s = 0.0
    for i in range(x.shape[0] - 1):
        a = x[i + 1] - x[i] * x[i]
        b = 1.0 - x[i]
        s += 100.0 * a * a + b * b
    return s


def rosen_hvp(x, v):
    return ad.hvp(rosen, (x,), (v,))


def relu(x):
    return np.maximum(0.0, x)


def predict(params, image):
    activations = image
    for w, b in params[:-1]:
        activations = relu(np.dot(w, activations) + b)
    final_w, final_b = params[-1]
    logits = np.dot(final_w, activations) + final_b
    return logits - np.log(np.sum(np.exp(logits - np.max(logits)))) - np.max(logits)


batched_predict = ad.vmap(predict, in_axes=(None, 0))


def mlp_loss(params, images, targets):
    return -np.mean(batched_predict(params, images) * targets)


def update(params, x, y):
    grads = ad.grad(mlp_loss)(params, x, y)
    return [(w - 0.01 * dw, b - 0.01 * db) for (w, b), (dw, db) in zip(params, grads)]


# -- JAX, the same compositions ------------------------------------------------------
def _jax_fns():
    jax, jnp, _ = core.load_jax()

    def jloss(w, X, y):
        return jnp.sum((jnp.tanh(X @ w) - y) ** 2)

    def jmaml(w, X, y):
        return jloss(w - LR * jax.grad(jloss)(w, X, y), X, y)

    def jpenalty(w, X, y):
        return jloss(w, X, y) + jnp.sum(jax.grad(jloss)(w, X, y) ** 2)

    def junrolled(w, X, y):
        for _ in range(10):
            w = w - LR * jax.grad(jloss)(w, X, y)
        return jloss(w, X, y)

    def jnewton(w, X, y):
        H = jax.hessian(jloss)(w, X, y)
        g = jax.grad(jloss)(w, X, y)
        return jloss(w - jnp.linalg.solve(H + 10.0 * jnp.eye(w.shape[0]), g), X, y)

    def jrosen(x):
        a = x[1:] - x[:-1] * x[:-1]
        b = 1.0 - x[:-1]
        return jnp.sum(100.0 * a * a + b * b)

    def jpredict(params, image):
        a = image
        for w, b in params[:-1]:
            a = jnp.maximum(0.0, jnp.dot(w, a) + b)
        fw, fb = params[-1]
        logits = jnp.dot(fw, a) + fb
        return logits - jax.scipy.special.logsumexp(logits)

    def jmlp_loss(params, x, y):
        return -jnp.mean(jax.vmap(jpredict, in_axes=(None, 0))(params, x) * y)

    def jupdate(params, x, y):
        grads = jax.grad(jmlp_loss)(params, x, y)
        return [(w - 0.01 * dw, b - 0.01 * db) for (w, b), (dw, db) in zip(params, grads)]

    grads = {"loss": jax.grad(jloss), "maml": jax.grad(jmaml), "penalty": jax.grad(jpenalty),
             "unrolled": jax.grad(junrolled), "newton": jax.grad(jnewton)}
    out = {k: jax.jit(v) for k, v in grads.items()}
    out["hvp"] = jax.jit(lambda x, v: jax.jvp(jax.grad(jrosen), (x,), (v,))[1])
    out["rosen_grad"] = jax.jit(jax.grad(jrosen))
    out["update"] = jax.jit(jupdate)
    out["mlp_grad"] = jax.jit(jax.grad(jmlp_loss))
    return jax, jnp, out


# -- timing --------------------------------------------------------------------------
def _median(fn, args, seconds):
    fn(*args)
    number, t = 1, 0.0
    while True:
        t0 = time.perf_counter()
        for _ in range(number):
            fn(*args)
        t = time.perf_counter() - t0
        if t > 0.02 or number > 10_000:
            break
        number *= 4
    samples, end = [], time.perf_counter() + seconds
    while len(samples) < 5 or time.perf_counter() < end:
        t0 = time.perf_counter()
        for _ in range(number):
            fn(*args)
        samples.append((time.perf_counter() - t0) / number)
        if len(samples) >= 31:
            break
    return statistics.median(samples)


def _leaves(out):
    if isinstance(out, (tuple, list)):
        return [x for o in out for x in _leaves(o)]
    return [np.asarray(out)]


def _check(got, want, what):
    for g, w in zip(_leaves(got), _leaves(want)):
        if not np.allclose(g, w, rtol=1e-7, atol=1e-9):
            raise AssertionError(f"{what}: the columns disagree")


def _columns(label, cells, args, seconds, check_against=0):
    """Time each cell (name, fn, args) after checking its result."""
    first = None
    row = []
    for name, fn, a in cells:
        t0 = time.perf_counter()
        got = fn(*a)
        first_call = time.perf_counter() - t0
        if name == "JAX jit" and first is not None:
            got = [np.asarray(x) for x in _leaves(got)]
        if first is None:
            first = got
        else:
            _check(got, first, f"{label} {name}")
        row.append((name, _median(fn, a, seconds), first_call))
    return row


def _built(f, args, columns):
    """``ad.jit(f)`` built (compiled) for ``args``, with the inner transforms as
    reverse code, or as forward-mode columns (``S2S_AD_NESTED=columns``)."""
    with oracle.forward_columns() if columns else contextlib.nullcontext():
        fn = ad.jit(f, compile="eager")
        fn(*args)
    return fn


def _problem(d, rng):
    X = rng.standard_normal((20, d)) / np.sqrt(d)
    return rng.standard_normal(d) * 0.5, X, rng.standard_normal(20)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.nested")
    parser.add_argument("--quick", action="store_true", help="small sizes, short samples")
    opts = parser.parse_args(argv)
    seconds = 0.3 if opts.quick else 2.0
    rng = np.random.default_rng(0)
    try:
        jax, jnp, jfns = _jax_fns()
    except core.Unavailable:
        jax, jfns = None, {}
    rows = []

    def run(label, f, base, args, jkey=None, jbase=None, columns=True, jargs=None):
        t0 = time.perf_counter()
        cells = [("s2s_ad jit", _built(f, args, False), args)]
        build = time.perf_counter() - t0
        if columns:
            cells.append(("s2s_ad jit, forward columns", _built(f, args, True), args))
        ja = None
        if jax is not None and (jkey or jbase):
            ja = jargs if jargs is not None else tuple(jnp.asarray(a) for a in args)
        if jkey and ja is not None:
            cells.append(("JAX jit", lambda *a: jax.block_until_ready(jfns[jkey](*a)), ja))
        row = _columns(label, cells, args, seconds)
        row[0] = (row[0][0], row[0][1], build)
        base_t = _columns(label, [("base", base, args)], args, seconds)[0][1]
        jbase_t = None
        if jbase and ja is not None:
            jbase_t = _columns(label, [("jbase", lambda *a: jax.block_until_ready(
                jfns[jbase](*a)), ja)], ja, seconds)[0][1]
        rows.append((label, row, base_t, jbase_t))
        _print_row(rows[-1])

    sizes = (3, 30, 1000) if opts.quick else (3, 10, 30, 1000, 100_000)
    grad_loss = ad.jit(ad.grad(loss), compile="eager")
    for d in sizes:
        args = _problem(d, rng)
        grad_loss(*args)
        run(f"maml d={d}", ad.grad(maml), grad_loss, args, "maml", "loss", columns=d <= 30)
    for d in (30,) if opts.quick else (30, 1000):
        args = _problem(d, rng)
        grad_loss(*args)
        run(f"penalty d={d}", ad.grad(penalty), grad_loss, args, "penalty",
            "loss", columns=d <= 30)
    args = _problem(100, rng)
    grad_loss(*args)
    run("unrolled 10 steps d=100", ad.grad(unrolled), grad_loss, args, "unrolled", "loss",
        columns=False)
    run("newton (hessian inside) d=100", ad.grad(newton), grad_loss, args, "newton", "loss",
        columns=False)
    n = 1000 if opts.quick else 10_000
    x, v = rng.uniform(-2, 2, n), rng.standard_normal(n)
    rosen_grad = ad.jit(ad.grad(rosen), compile="eager")
    rosen_grad(x)
    run(f"jit(hvp) rosenbrock n={n}", rosen_hvp, lambda x, v: rosen_grad(x), (x, v), "hvp",
        None, columns=False)
    sizes = [784, 64, 64, 10] if opts.quick else [784, 512, 512, 10]
    params = [(rng.standard_normal((m, k)) * 0.05, rng.standard_normal(m) * 0.05)
              for k, m in zip(sizes[:-1], sizes[1:])]
    xb = rng.standard_normal((128, sizes[0]))
    yb = np.eye(sizes[-1])[rng.integers(0, sizes[-1], 128)]
    mlp_grad = ad.jit(ad.grad(mlp_loss), compile="eager")
    jparams = None
    if jax is not None:
        jparams = ([(jnp.asarray(w), jnp.asarray(b)) for w, b in params], jnp.asarray(xb),
                   jnp.asarray(yb))
    mlp_grad(params, xb, yb)
    run(f"jit(update) MLP {'-'.join(map(str, sizes))}", update, mlp_grad, (params, xb, yb),
        "update", "mlp_grad", columns=False, jargs=jparams)
    return 0


def _fmt(t):
    return f"{t * 1e6:,.1f} us" if t < 1e-3 else f"{t * 1e3:,.2f} ms"


def _print_row(row):
    label, cells, base, jbase = row
    parts = [f"{name}: {_fmt(t)} (first call {first:.1f} s)" for name, t, first in cells]
    ours = cells[0][1]
    ratio = f"s2s_ad / its base = {ours / base:.2f}"
    if jbase:
        jt = next((t for name, t, _ in cells if name == "JAX jit"), None)
        ratio += f"; JAX / its base = {jt / jbase:.2f}" if jt else ""
    jt = next((t for name, t, _ in cells if name == "JAX jit"), None)
    if jt:
        ratio += f"; s2s_ad / JAX = {ours / jt:.2f}"
    print(f"{label}: " + "; ".join(parts) + f" | base {_fmt(base)} | {ratio}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
