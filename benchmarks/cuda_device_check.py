"""One command for a machine with a GPU (under 5 minutes), from the repository root:

    python benchmarks/cuda_device_check.py [--json OUT] [--dry-run]

1. makes the checkout importable: s2s_ad runs from the source tree (no
   install); what the machine lacks (gast, pytest) is installed from the
   wheels carried in ``wheels/`` (``pip install --no-index``; see
   docs/cuda.md for how to fill it);
2. runs tests/test_cuda.py on the GPU (no simulator): equality with the CPU
   path, finite differences, and PTX compilation;
3. times the seed workloads -- TD(0) per-sample gradients, per-example MLP
   gradients, batched RK4 sensitivities (plain, with a branch inside the
   loop, and a while loop), per-example RK4 Jacobians -- on the GPU
   (``target="cuda"``, NumPy in and out, copies included) against the CPU jit
   path (``ad.jit(ad.vmap(...))``) and against JAX ``jit(vmap(grad))`` on
   the GPU where the seed has an easy JAX twin; results are checked equal
   first.  Prints a Markdown table; ``--json`` writes the rows.

``--dry-run``: the same steps under Numba's CUDA simulator with tiny
batches, to check the script itself on a machine without a GPU (the times
mean nothing then).
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WHEELS = ROOT / "wheels"
NEEDED = ["gast", "pytest"]            # pure-Python packages a GPU image may lack


def prepare():
    """Install what is missing from the carried wheels; the checkout on sys.path."""
    missing = [m for m in NEEDED if importlib.util.find_spec(m) is None]
    if missing:
        if not WHEELS.is_dir():
            sys.exit(f"missing {missing} and no {WHEELS} to install them from: see docs/cuda.md")
        subprocess.check_call([sys.executable, "-m", "pip", "install", "--no-index",
                               "--find-links", str(WHEELS), *missing])
    for path in (ROOT, ROOT / "tests"):
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))


def run_tests(dry):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    if dry:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    else:
        env.pop("NUMBA_ENABLE_CUDASIM", None)
    # -o addopts= : the project's pytest options need pytest-xdist, which is not needed here
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-o", "addopts=", str(ROOT / "tests" / "test_cuda.py")],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    tail = proc.stdout.strip().splitlines()[-1:] or [proc.stderr[-500:]]
    print(f"tests/test_cuda.py ({'simulator' if dry else 'GPU'}): {tail[0]}")
    if proc.returncode:
        print(proc.stdout[-6000:], proc.stderr[-2000:])
    return proc.returncode


def _best(f, args, sync, repeat):
    f(*args)
    sync()
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        f(*args)
        sync()
        best = min(best, time.perf_counter() - t)
    return best


def _flat(x):
    import numpy as np

    import s2s_ad as ad
    return [np.asarray(v, dtype=np.float64) for v in ad.pytree.flatten(x)[0]]


def _check(a, b, tol=1e-9):
    import numpy as np
    for x, y in zip(_flat(a), _flat(b)):
        np.testing.assert_allclose(x, y, rtol=tol, atol=tol)


def cases(dry):
    """(name, s2s_ad transform, in_axes, args, JAX twin or None)."""
    import numpy as np
    from programs.cuda_seeds import (
        mlp_loss,
        ode_adaptive,
        ode_loss,
        ode_until,
        td_loss,
    )

    import s2s_ad as ad
    rng = np.random.default_rng(0)
    big, small, steps = (8, 4, 5) if dry else (1_000_000, 10_000, 1000)
    td = (rng.standard_normal(3), rng.standard_normal((big, 3)), rng.standard_normal(big),
          rng.standard_normal((big, 3)))
    mlp = (rng.standard_normal(6), rng.standard_normal(3), rng.standard_normal(3), 0.3,
           rng.standard_normal((big, 2)), rng.standard_normal(big))
    ode = (1 + 0.1 * rng.random((small, 4)), 0.3 + 2 * rng.random((small, 2)), 0.01, steps)
    until = (1 + 0.1 * rng.random((small, 4)), 0.5 + rng.random((small, 2)), 0.01,
             0.5 * steps * 0.01 * (1 + rng.random(small)))
    jx = _jax_twins()
    return [
        (f"TD(0) grad, d=3, B={big:,}", ad.grad(td_loss), (None, 0, 0, 0), td,
         jx and jx["td"]),
        (f"MLP 2-3-1 grads, B={big:,}", ad.grad(mlp_loss, argnums=(0, 1, 2, 3)),
         (None,) * 4 + (0, 0), mlp, jx and jx["mlp"]),
        (f"RK4 LV grad, {steps} steps, B={small:,}", ad.grad(ode_loss, argnums=(0, 1)),
         (0, 0, None, None), ode, jx and jx["ode"]),
        (f"RK4 + branch grad, {steps} steps, B={small:,}",
         ad.grad(ode_adaptive, argnums=(0, 1)), (0, 0, None, None), ode,
         jx and jx["adaptive"]),
        (f"while-loop Euler grad, ~{steps} steps, B={small:,}",
         ad.grad(ode_until, argnums=(0, 1)), (0, 0, None, 0), until, None),
        (f"RK4 jacfwd, {steps} steps, B={small:,}", ad.jacfwd(ode_loss), (0, 0, None, None),
         ode, None),
    ]


def _jax_twins():
    """JAX versions of the seeds (jit(vmap(grad)) on JAX's default device), or None."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)

    def td(theta, s_t, r, s_tp1):
        return (jax.lax.stop_gradient(r + s_tp1 @ theta) - s_t @ theta) ** 2

    def mlp(W1, b1, w2, b2, x, y):
        a = W1.reshape(3, 2) @ x + b1
        return (b2 + w2 @ jnp.tanh(a) - y) ** 2

    def lv(x, y, th):
        return th[0] * x - th[1] * x * y, th[2] * x * y - th[3] * y

    def rk4(adaptive):
        def loss(theta, state0, h, n):
            def step(_, s):
                x, y = s
                k1x, k1y = lv(x, y, theta)
                k2x, k2y = lv(x + 0.5 * h * k1x, y + 0.5 * h * k1y, theta)
                k3x, k3y = lv(x + 0.5 * h * k2x, y + 0.5 * h * k2y, theta)
                k4x, k4y = lv(x + h * k3x, y + h * k3y, theta)
                dt = h
                if adaptive:
                    dt = jnp.where(jnp.abs(k4x - k1x) + jnp.abs(k4y - k1y) > 0.25, 0.5 * h, h)
                return (x + dt / 6.0 * (k1x + 2.0 * k2x + 2.0 * k3x + k4x),
                        y + dt / 6.0 * (k1y + 2.0 * k2y + 2.0 * k3y + k4y))
            x, y = jax.lax.fori_loop(0, n, step, (state0[0], state0[1]))
            return x * x + y * y
        return loss

    def batched(f, argnums, axes, static=()):
        g = jax.jit(jax.vmap(jax.grad(f, argnums=argnums), in_axes=axes),
                    static_argnums=static)

        def run(*args):
            out = g(*[jnp.asarray(a) if hasattr(a, "shape") else a for a in args])
            jax.block_until_ready(out)
            return out
        return run
    return {"td": batched(td, 0, (None, 0, 0, 0)),
            "mlp": batched(mlp, (0, 1, 2, 3), (None,) * 4 + (0, 0)),
            "ode": batched(rk4(False), (0, 1), (0, 0, None, None), static=(3,)),
            "adaptive": batched(rk4(True), (0, 1), (0, 0, None, None), static=(3,))}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true",
                        help="Numba's CUDA simulator and tiny batches (no GPU needed)")
    parser.add_argument("--json", metavar="OUT", help="write the rows as JSON")
    parser.add_argument("--skip-tests", action="store_true")
    opts = parser.parse_args(argv)
    if opts.dry_run:
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"      # before numba is imported
    prepare()
    rc = 0 if opts.skip_tests else run_tests(opts.dry_run)
    from numba import cuda

    import s2s_ad as ad
    if not opts.dry_run and not cuda.is_available():
        print("no GPU: skipping the timings (--dry-run runs them in the simulator)")
        return rc
    repeat = 1 if opts.dry_run else 3
    rows = []
    for name, fun, axes, args, twin in cases(opts.dry_run):
        gpu = ad.jit(ad.vmap(fun, in_axes=axes), target="cuda")
        cpu = ad.jit(ad.vmap(fun, in_axes=axes))
        _check(gpu(*args), cpu(*args))
        row = {"workload": name,
               "gpu_s": _best(gpu, args, cuda.synchronize, repeat),
               "cpu_s": _best(cpu, args, lambda: None, 1)}
        if twin is not None:
            _check(twin(*args), cpu(*args), 1e-8)
            row["jax_s"] = _best(twin, args, lambda: None, repeat)
        rows.append(row)
        print(f"  {name}: done", flush=True)
    print("\n| workload | CPU jit (s) | s2s_ad GPU (s) | JAX jit(vmap(grad)) (s) | GPU vs CPU "
          "| GPU vs JAX |\n|---|---|---|---|---|---|")
    for r in rows:
        jax_s, gpu_s = r.get("jax_s"), r["gpu_s"]
        jax_t = "n/a" if jax_s is None else f"{jax_s:.4f}"
        ratio = "n/a" if jax_s is None else f"{jax_s / gpu_s:.2f}x"
        print(f"| {r['workload']} | {r['cpu_s']:.4f} | {gpu_s:.4f} | {jax_t} | "
              f"{r['cpu_s'] / gpu_s:.1f}x | {ratio} |")
    if opts.dry_run:
        print("(dry run: Numba's CUDA simulator, tiny batches; the times mean nothing)")
    if opts.json:
        Path(opts.json).write_text(json.dumps({"dry_run": opts.dry_run, "rows": rows,
                                               "tests_rc": rc}, indent=1))
    return rc


if __name__ == "__main__":
    sys.exit(main())
