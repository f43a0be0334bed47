"""The GPU benchmarks of the CUDA target, in one command from the repository root:

    python -m benchmarks.gpu.run [--json OUT.json] [--md OUT.md] [--dry-run]

(also ``python benchmarks/cuda_device_check.py``, ``python -m benchmarks
--target cuda`` and ``s2s-ad bench --target cuda``).

1. makes the checkout importable: s2s_ad runs from the source tree (no
   install); what the machine lacks (gast, pytest) is installed from the
   wheels carried in ``wheels/`` (``pip install --no-index``; docs/cuda.md
   says how to fill it);
2. runs the CUDA tests (tests/test_cuda*.py) on the GPU, no simulator;
3. times the issue's workloads, each by s2s_ad (``ad.jit(ad.vmap(...),
   target="cuda")``, inputs already on the device), JAX ``jit(vmap(grad))``
   and ``torch.func`` ``vmap(grad)`` on the same GPU, in the same run, after
   checking that all results agree; TD(0) also by a hand-written numba.cuda
   kernel, the limit:

   * per-sample TD(0) gradients, 10,000,000 transitions, d = 3 and d = 64;
   * per-example gradients of an MLP 64 -> 128 -> 10 (softmax
     cross-entropy), batch 65,536;
   * batched RK4 sensitivities (Lotka-Volterra, 1,000 steps, 100,000
     parameter sets): ``jit(vmap(grad))`` and ``jit(vmap(jacfwd))``.

   Times are medians of ``--repeat`` calls after a first (compiling) call,
   whose time is reported apart.  s2s_ad's kernels are also timed alone
   (the launches of one call run again between two CUDA events): the rest
   of a call is host work (allocations, transfers, Python).  Writes a
   Markdown table (``--md``) and the
   rows as JSON (``--json``), and says which targets were met: s2s_ad at
   least as fast as the fastest of JAX and torch.func, and within 2x of the
   hand-written kernel for TD(0).

``--dry-run``: the same steps under Numba's CUDA simulator with tiny sizes
(JAX and PyTorch on the CPU), to check the script without a GPU: the times
mean nothing then.  Without a GPU or numba's CUDA support (and without
``--dry-run``) it says so and exits 0.
"""
import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WHEELS = ROOT / "wheels"
NEEDED = ["gast", "pytest"]            # pure-Python packages a GPU image may lack
TARGET_VS_HAND = 2.0                   # s2s_ad within 2x of the hand-written TD(0) kernel


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


def gpu_missing():
    """Why kernels cannot run on a GPU here (None when they can)."""
    try:
        from numba import cuda
    except ImportError:
        return "numba's CUDA support is not installed (pip install 's2s_ad[cuda]')"
    if not cuda.is_available():
        return "no usable NVIDIA GPU (numba.cuda.is_available() is False)"
    return None


def run_tests(dry):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    if dry:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    else:
        env.pop("NUMBA_ENABLE_CUDASIM", None)
    files = sorted(str(p) for p in (ROOT / "tests").glob("test_cuda*.py"))
    # -o addopts= : the project's pytest options need pytest-xdist, which is not needed here
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-o", "addopts=", *files], cwd=ROOT, env=env, capture_output=True,
                          text=True)
    tail = proc.stdout.strip().splitlines()[-1:] or [proc.stderr[-500:]]
    print(f"tests/test_cuda*.py ({'simulator' if dry else 'GPU'}): {tail[0]}", flush=True)
    if proc.returncode:
        print(proc.stdout[-6000:], proc.stderr[-2000:])
    return proc.returncode


# -- the workloads ------------------------------------------------------------------
SIZES = {"full": {"td": 10_000_000, "mlp": 65_536, "ode": 100_000, "steps": 1000},
         "dry": {"td": 6, "mlp": 3, "ode": 4, "steps": 5}}


def workloads(dry, dtype):
    """Each workload: name, s2s_ad function and in_axes, NumPy arguments, and the
    peers (name -> callable on NumPy arguments returning NumPy results)."""
    import numpy as np
    from programs.cuda_seeds import ode_loss

    import s2s_ad as ad
    from benchmarks.gpu import peers
    from benchmarks.gpu.programs import mlp_loss, td_loss
    size = SIZES["dry" if dry else "full"]
    rng = np.random.default_rng(0)

    def normal(*shape):
        return rng.standard_normal(shape, dtype=dtype)

    def cast(*xs):
        return tuple(x.astype(dtype, copy=False) if isinstance(x, np.ndarray) else
                     dtype(x) if isinstance(x, float) else x for x in xs)
    out = []
    for d in (3, 64):
        n = size["td"]
        args = cast(normal(d) / np.sqrt(d), normal(n, d), normal(n), normal(n, d))
        out.append({"name": f"TD(0) per-sample grad, d={d}, {n:,} transitions",
                    "key": f"td0_d{d}", "fun": ad.grad(td_loss), "in_axes": (None, 0, 0, 0),
                    "args": args, "peers": peers.td0(dry)})
    n = size["mlp"]
    labels = rng.integers(0, 10, n)
    args = cast(normal(128 * 64) / 8, normal(128) / 8, normal(10 * 128) / 11, normal(10) / 10,
                normal(n, 64), np.eye(10, dtype=dtype)[labels])
    out.append({"name": f"MLP 64-128-10 per-example grads, batch {n:,}", "key": "mlp",
                "fun": ad.grad(mlp_loss, argnums=(0, 1, 2, 3)), "in_axes": (None,) * 4 + (0, 0),
                "args": args, "peers": peers.mlp(dry)})
    n, steps = size["ode"], size["steps"]
    args = cast(1 + 0.1 * rng.random((n, 4)), 0.5 + rng.random((n, 2)), 0.01) + (steps,)
    for mode in ("grad", "jacfwd"):
        fun = ad.grad(ode_loss) if mode == "grad" else ad.jacfwd(ode_loss)
        out.append({"name": f"RK4 Lotka-Volterra jit(vmap({mode})), {steps:,} steps, "
                            f"{n:,} parameter sets",
                    "key": f"rk4_{mode}", "fun": fun, "in_axes": (0, 0, None, None),
                    "args": args, "peers": peers.rk4(mode, dry)})
    return out


def _blocks(fun):
    """The threads per block the kernels of ``fun`` were launched with."""
    inner = getattr(fun, "_last", None) or fun        # a Jacobian's per-column kernel
    return [k.block for k in getattr(inner, "_kernels", {}).values() if hasattr(k, "block")]


class _Launches:
    """The kernel launches made while it is active (dispatcher, grid, block,
    stream, arguments), to time the kernels alone: numba-cuda's launch
    configuration is wrapped; under the simulator, or a numba-cuda without
    that class, nothing is recorded."""

    def __enter__(self):
        self.recorded = []
        try:
            from numba.cuda.dispatcher import _LaunchConfiguration as config
        except ImportError:
            self.config = None
            return self
        self.config, self.original = config, config.__call__
        recorded, original = self.recorded, self.original

        def call(launch, *args):
            recorded.append((launch.dispatcher, launch.griddim, launch.blockdim,
                             launch.stream, args))
            return original(launch, *args)
        config.__call__ = call
        return self

    def __exit__(self, *exc):
        if self.config is not None:
            self.config.__call__ = self.original

    def kernel_time(self, repeat):
        """Median seconds of the recorded launches run again back to back,
        between two CUDA events (None when nothing was recorded)."""
        from numba import cuda
        if not self.recorded:
            return None
        times = []
        for _ in range(repeat):
            start, end = cuda.event(), cuda.event()
            start.record()
            for dispatcher, grid, block, stream, args in self.recorded:
                dispatcher[grid, block, stream](*args)
            end.record()
            end.synchronize()
            times.append(cuda.event_elapsed_time(start, end) / 1e3)
        return statistics.median(times)


def _median_time(call, sync, repeat):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _agree(got, want, dtype):
    """(whether ``got`` equals ``want`` to the precision of ``dtype``, the largest
    error relative to the largest magnitude of ``want``)."""
    import numpy as np
    worst = 0.0
    for a, b in zip(got, want):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        if a.shape != b.shape:
            return False, float("inf")
        scale = max(float(np.max(np.abs(b))), 1e-30)
        worst = max(worst, float(np.max(np.abs(a - b))) / scale)
    return worst <= (2e-3 if dtype == np.float32 else 1e-9), worst


def measure(wl, dry, dtype, repeat):
    """One workload's row: times (s) and agreement of each implementation."""
    import numpy as np
    from numba import cuda

    import s2s_ad as ad
    row = {"workload": wl["name"], "key": wl["key"], "impls": {}}
    fun = ad.jit(ad.vmap(wl["fun"], in_axes=wl["in_axes"]), target="cuda")
    device = [cuda.to_device(x) if isinstance(x, np.ndarray) else x for x in wl["args"]]
    start = time.perf_counter()
    result = fun(*device)
    cuda.synchronize()
    first = time.perf_counter() - start
    leaves = ad.pytree.flatten(result)[0]
    reference = [x.copy_to_host() if hasattr(x, "copy_to_host") else np.asarray(x)
                 for x in leaves]
    row["impls"]["s2s_ad"] = {"first_s": first, "median_s": _median_time(
        lambda: fun(*device), cuda.synchronize, repeat), "agrees": True, "max_rel_err": 0.0,
        "threads_per_block": _blocks(fun)}
    if not dry:                 # the kernels alone: the rest of a call is host work
        with _Launches() as launches:
            fun(*device)
            cuda.synchronize()
        row["impls"]["s2s_ad"]["kernels_s"] = launches.kernel_time(repeat)
        row["impls"]["s2s_ad"]["launches"] = len(launches.recorded)
    for name, peer in wl["peers"].items():
        if peer is None:
            row["impls"][name] = {"skipped": "not installed"}
            continue
        try:
            run, sync, to_numpy = peer(*wl["args"])
            start = time.perf_counter()
            got = run()
            sync()
            first = time.perf_counter() - start
            ok, err = _agree(to_numpy(got), reference, dtype)
            entry = {"first_s": first, "agrees": ok, "max_rel_err": err}
            if ok:                  # times only for results checked equal first
                entry["median_s"] = _median_time(run, sync, repeat)
            row["impls"][name] = entry
        except Exception as error:              # noqa: BLE001  (a peer failing is data)
            row["impls"][name] = {"error": f"{type(error).__name__}: {str(error)[:300]}"}
    return row


def targets(row, dry=False):
    """The targets of a row: (text, met or None when not measurable: a dry run's
    times mean nothing)."""
    impls = row["impls"]
    ours = impls["s2s_ad"]["median_s"]
    peers_s = [impls[p]["median_s"] for p in ("jax", "torch") if "median_s" in impls.get(p, {})]
    out = [("as fast as the fastest of JAX and torch.func",
            None if dry or not peers_s else ours <= min(peers_s))]
    if "hand" in impls:
        hand = impls["hand"].get("median_s")
        out.append((f"within {TARGET_VS_HAND:g}x of the hand-written kernel",
                    None if dry or hand is None else ours <= TARGET_VS_HAND * hand))
    return out


def table(rows, dry):
    def cell(entry):
        if "median_s" in entry:
            return f"{1e3 * entry['median_s']:.2f}"
        if "error" in entry:
            return "error"
        if entry.get("agrees") is False:
            return f"DIFFERS ({entry['max_rel_err']:.1e})"
        return "n/a"
    lines = ["| workload | s2s_ad (ms) | s2s_ad kernels alone (ms) | JAX jit(vmap) (ms) | "
             "torch.func vmap (ms) | hand numba.cuda (ms) | s2s_ad first call (s) | targets |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        impls = r["impls"]
        met = "; ".join(f"{text}: {'met' if ok else 'missed' if ok is False else 'n/a'}"
                        for text, ok in targets(r, dry))
        kernels = impls["s2s_ad"].get("kernels_s")
        lines.append(f"| {r['workload']} | {cell(impls['s2s_ad'])} | "
                     f"{'n/a' if kernels is None else f'{1e3 * kernels:.2f}'} | "
                     f"{cell(impls.get('jax', {}))} | {cell(impls.get('torch', {}))} | "
                     f"{cell(impls.get('hand', {})) if 'hand' in impls else '-'} | "
                     f"{impls['s2s_ad']['first_s']:.2f} | {met} |")
    if dry:
        lines.append("\n(dry run: Numba's CUDA simulator and tiny sizes, JAX and PyTorch on the "
                     "CPU: the times mean nothing)")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu.run",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true",
                        help="Numba's CUDA simulator and tiny sizes (no GPU needed)")
    parser.add_argument("--json", metavar="OUT", help="write the rows as JSON")
    parser.add_argument("--md", metavar="OUT", help="write the Markdown table")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    parser.add_argument("--repeat", type=int, default=None,
                        help="timed calls per implementation (default 5, dry run 1)")
    parser.add_argument("--only", action="append", metavar="KEY",
                        help="td0_d3, td0_d64, mlp, rk4_grad, rk4_jacfwd (repeatable)")
    parser.add_argument("--skip-tests", action="store_true")
    opts = parser.parse_args(argv)
    if opts.dry_run:
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"      # before numba is imported
    else:
        why = gpu_missing()
        if why:
            print(f"GPU benchmarks skipped: {why}. (--dry-run runs them in Numba's CUDA "
                  f"simulator with tiny sizes.)")
            return 0
    prepare()
    rc = 0 if opts.skip_tests else run_tests(opts.dry_run)
    import numpy as np
    dtype = np.dtype(opts.dtype).type
    repeat = opts.repeat or (1 if opts.dry_run else 5)
    rows = []
    for wl in workloads(opts.dry_run, dtype):
        if opts.only and wl["key"] not in opts.only:
            continue
        rows.append(measure(wl, opts.dry_run, dtype, repeat))
        print(f"  {wl['name']}: done", flush=True)
    text = table(rows, opts.dry_run)
    print("\n" + text)
    differs = [f"{r['key']}: {p}" for r in rows for p, e in r["impls"].items()
               if e.get("agrees") is False]
    if differs:
        print("results differ: " + ", ".join(differs))
    if opts.md:
        Path(opts.md).write_text(text + "\n")
    if opts.json:
        Path(opts.json).write_text(json.dumps(
            {"dry_run": opts.dry_run, "dtype": opts.dtype, "repeat": repeat, "tests_rc": rc,
             "rows": [dict(r, targets=[{"target": t, "met": m}
                                       for t, m in targets(r, opts.dry_run)])
                      for r in rows]}, indent=1))
    return 1 if rc or differs else 0


if __name__ == "__main__":
    sys.exit(main())
