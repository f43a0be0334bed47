"""The benchmark suite's runner: ``python -m benchmarks [--quick] [--only NAME]
[--json OUT] [--plot OUT.png]``.

For each workload: build every implementation (a peer that is not installed
is a skipped column), call each once (its first-call time, compilation
included) and check every gradient against the hand-written one, then time
them round-robin (see :func:`benchmarks.core.measure`) and print medians,
spread and the ratios the project's targets are stated in.  Unless
``--quick`` (or with ``--latency``), s2s_ad's compile latency is measured in
two fresh processes: one with an empty disk cache, one with the cache the
first left behind.
"""
import argparse
import importlib
import importlib.metadata
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from . import core

WORKLOADS = ("rosen_loop", "ode_rk4", "newton_sqrt", "logsumexp_rows", "mlp_loss",
             "gmm_objective", "hvp_rosen", "hessian_dense", "jac_tall", "jac_wide",
             "ba_objective", "per_sample_td0", "per_sample_mlp", "gp_nll", "attention",
             "array_loops")
ROOT = Path(__file__).resolve().parents[1]

#: (rounds, seconds per sample, seconds of samples per implementation)
CONFIGS = {"quick": (11, 0.02, 1.0), "full": (31, 0.05, 12.0)}

#: Environment for quiet thread pools on small machines (see DESIGN.md).
THREAD_ENV = {"OMP_WAIT_POLICY": "PASSIVE", "OMP_NUM_THREADS": "1",
              "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


# -- progress -----------------------------------------------------------------

class Progress:
    """One status line on stderr: rewritten in place on a terminal, else
    printed once per step (round counters are left out of logs)."""

    def __init__(self, stream=None, enabled=True):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.enabled = enabled
        self.prefix = ""
        self.width = 0

    def step(self, text):
        self._show(f"{self.prefix}{text}", transient=False)

    def detail(self, text):
        if self.tty:
            self._show(f"{self.prefix}{text}", transient=True)

    def _show(self, line, transient):
        if not self.enabled:
            return
        if self.tty:
            pad = max(0, self.width - len(line))
            self.stream.write("\r" + line + " " * pad)
            self.width = len(line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def done(self):
        if self.enabled and self.tty and self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0


# -- one workload ---------------------------------------------------------------

def _error_text(exc):
    lines = str(exc).strip().splitlines()
    head = lines[0] if lines else ""
    return f"{type(exc).__name__}: {head}"[:300]


def candidates(wl):
    """(key, kind, factory) for every column, in display order."""
    import s2s_ad as ad
    pargs = wl.args if wl.primal_args is None else wl.primal_args
    yield "numpy", "primal", lambda: core.Impl("numpy", wl.primal, pargs, kind="primal")
    yield "numba", "primal", lambda: core.Impl("numba", wl.numba_primal, pargs,
                                               kind="primal", note=wl.numba_note)
    yield "hand", wl.kind, lambda: core.Impl("hand", wl.hand_grad, wl.args)
    yield "s2s_ad", wl.kind, lambda: core.Impl("s2s_ad", wl.derivative(ad, jit=True), wl.args)
    yield "s2s_ad_py", wl.kind, lambda: core.Impl("s2s_ad_py", wl.derivative(ad, jit=False),
                                                  wl.args)
    for key, make in wl.extra.items():
        yield key, wl.kind, make
    for key in core.PEERS:
        if key in wl.peers:
            yield key, wl.kind, (lambda make=wl.peers[key]: make(wl.args))


def _leave_out(reason):
    def make():
        raise core.Unavailable(reason)
    return make


def columns(wl, quick=False, peers=core.PEERS):
    """candidates(), less the peers not asked for and, when quick, the
    workload's slow peers."""
    for key, kind, make in candidates(wl):
        if key in core.PEERS and key not in peers:
            make = _leave_out("not selected (--peers)")
        elif quick and key in wl.slow_peers:
            make = _leave_out("left out of --quick runs: seconds per call at this size "
                              "(run the full suite)")
        yield key, kind, make


def build_and_check(wl, progress, quick=False, peers=core.PEERS):
    """Build every column, call it once, check it; returns (impls, cells)."""
    impls, cells = {}, {}
    reference = value = None
    for key, kind, make in columns(wl, quick, peers):
        label = wl.label(key)
        progress.step(f"{label}: build, first call, check")
        try:
            impl = make()
        except core.Unavailable as exc:
            cells[key] = core.Cell(key, kind, "skipped", reason=str(exc), label=label)
            continue
        except Exception as exc:  # noqa: BLE001  (a failing column is reported, not fatal)
            cells[key] = core.Cell(key, kind, "error", reason=_error_text(exc), label=label)
            continue
        cell = cells[key] = core.Cell(key, impl.kind or kind, "ok", note=impl.note, label=label)
        try:
            start = time.perf_counter()
            out = impl.fn(*impl.args)
            cell.first_call_s = time.perf_counter() - start
        except Exception as exc:  # noqa: BLE001
            cell.status, cell.reason = "error", _error_text(exc)
            continue
        impls[key] = impl
        if impl.kind == "primal":
            if value is None:
                value = core.as_tuple(out)
            err = core.compare(out, value)      # a scalar, or per-sample values / a map's output
            cell.max_rel_err = err
            if not err <= core.RTOL:
                cell.status, cell.reason = "WRONG", f"value differs from NumPy's by {err:.2e}"
        elif key == "hand":
            reference = core.as_tuple(out)
            err = wl.oracle(wl.args, reference)
            cell.max_rel_err = err
            if not err <= wl.oracle_tol:
                cell.status = "WRONG"
                cell.reason = (f"the REFERENCE itself disagrees with the {wl.oracle_name} "
                               f"(relative error {err:.2e} > {wl.oracle_tol:g})")
        elif reference is None:
            cell.reason = "unchecked: no reference gradient"
        else:
            want, whose = reference, "the hand-written one"
            if impl.reference is not None:
                want = impl.reference
                if callable(want):
                    want = want(reference)
                whose = "its reference (from the hand-written result)"
            err = core.compare(out, want)
            cell.max_rel_err = err
            if not err <= core.RTOL:
                cell.status = "WRONG"
                what = "gradient" if cell.kind == "grad" else cell.kind
                cell.reason = (f"{what} differs from {whose} by {err:.2e} "
                               f"(relative, tolerance {core.RTOL:g})")
    return impls, cells


def ratios(cells):
    """Median-time ratios: each column against the Numba primal, the
    hand-written gradient and s2s_ad."""
    med = {k: c.stats()["median"] for k, c in cells.items() if c.samples}
    out = {}
    for base, name in (("numba", "vs_numba_primal"), ("hand", "vs_hand"), ("s2s_ad", "vs_s2s_ad")):
        if base in med:
            out[name] = {k: m / med[base] for k, m in med.items()}
    return out


def judge(targets, cells, size="full"):
    """Each target's value and verdict; a WRONG or missing column misses.
    At the tiny size the ratios say nothing, and nothing is judged."""
    out = []
    for t in targets:
        num, den = cells.get(t.num), cells.get(t.den)
        entry = {"name": t.name, "limit": t.limit, "value": None, "met": False}
        if num is None or den is None or not num.samples or not den.samples:
            entry["why"] = "not measured"
        else:
            entry["value"] = num.stats()["median"] / (t.scale * den.stats()["median"])
            bad = [c.key for c in (num, den) if c.status != "ok"]
            if bad:
                entry["why"] = f"{', '.join(bad)} is {' / '.join(cells[b].status for b in bad)}"
            elif size != "full":
                entry["met"], entry["why"] = None, f"not judged at the {size} size"
            else:
                entry["met"] = entry["value"] <= t.limit
        out.append(entry)
    return out


def build_workloads(name, size):
    """The workloads module ``benchmarks.NAME`` builds at ``size`` (a list)."""
    return core.workloads(importlib.import_module(f"benchmarks.{name}").build(size))


def run_workload(wl, size, config, progress, latency, quick=False, peers=core.PEERS,
                 probe=None):
    """Check and time one built workload; ``probe`` names it for the
    compile-latency processes (see :func:`latency_probe`)."""
    impls, cells = build_and_check(wl, progress, quick, peers)
    rounds, sample_s, budget_s = config
    progress.step("timing")
    core.measure(cells, impls, rounds=rounds, sample_s=sample_s, budget_s=budget_s,
                 progress=progress.detail)
    result = {
        "title": wl.title, "size": wl.size, "kind": wl.kind, "argnums": wl.argnums,
        "reference_check": {"oracle": wl.oracle_name, "tolerance": wl.oracle_tol},
        "implementations": {k: c.to_json() for k, c in cells.items()},
        "ratios": ratios(cells),
        "targets": judge(wl.targets, cells, size),
    }
    if latency:
        progress.step("compile latency: four fresh processes (cold, tiered, warm, JAX)")
        result["latency"] = measure_latency(probe or wl.name)
    return result


# -- compile latency in fresh processes ---------------------------------------------

def latency_probe(name):
    """In a fresh process: time the first call of s2s_ad's jitted gradient
    (transformation + Numba compilation, or loading from the disk cache),
    then the first call of the plain-NumPy gradient (transformation only).
    ``name`` is a module, or ``module#i`` for the i-th workload it builds.

    Numba's own start-up (registries, its BLAS check importing SciPy: about
    a second, paid by the first jitted function of any process) is taken
    first, on a trivial function, and reported apart.

    ``ad.jit`` runs in the mode ``$S2S_AD_COMPILE`` says (``mode`` in the
    result).  Tiered, ``first_call_s`` is the time to the first result (the
    NumPy module's, while Numba compiles in the background) and
    ``compiled_s`` the time from the first call until a call has run
    compiled code: the caller waits for the compile threads, calls again
    (the switch to compiled code, which for loop-free code first measures
    Numba against NumPy), and repeats while that call started another
    compile.  Eager, ``compiled_s`` adds one call of compiled code.
    """
    start = time.perf_counter()
    import numba

    import s2s_ad as ad
    out = {"import_s": time.perf_counter() - start,
           "mode": os.environ.get("S2S_AD_COMPILE") or "tiered"}
    start = time.perf_counter()
    numba.njit(lambda v: v + 1.0)(1.0)
    out["numba_startup_s"] = time.perf_counter() - start
    module, _, index = name.partition("#")
    wl = build_workloads(module, "tiny")[int(index or 0)]
    for key, jit in (("first_call_s", True), ("transform_only_s", False)):
        try:
            fn = wl.derivative(ad, jit)
            start = time.perf_counter()
            fn(*wl.args)
            out[key] = time.perf_counter() - start
            if jit:
                _until_compiled(fn, wl.args)
                out["compiled_s"] = time.perf_counter() - start
        except Exception as exc:  # noqa: BLE001
            out[key] = None
            out.setdefault("error", _error_text(exc))
    return out


def jax_probe(name):
    """In a fresh process: the first call of the workload's JAX column
    (``jax.jit(jax.grad(f))`` as the workload writes it, or its ``lax``
    loops version where that one cannot run it): tracing and XLA's compile.
    JAX's own start-up (its import, and its first array, which starts the
    CPU backend) is taken first and reported apart, as Numba's is in
    :func:`latency_probe`."""
    start = time.perf_counter()
    try:
        jax, jnp, _ = core.load_jax()
    except core.Unavailable as exc:
        return {"error": str(exc)}
    out = {"import_s": time.perf_counter() - start}
    start = time.perf_counter()
    jax.block_until_ready(jnp.zeros(1) + 1.0)
    out["jax_startup_s"] = time.perf_counter() - start
    module, _, index = name.partition("#")
    wl = build_workloads(module, "tiny")[int(index or 0)]
    out["first_call_s"], out["error"] = None, "no JAX column"
    for key in ("jax", "jax_lax"):          # the lax column where jax.jit cannot run it
        if key not in wl.peers:
            continue
        try:
            impl = wl.peers[key](wl.args)
            start = time.perf_counter()
            impl.fn(*impl.args)
            out["first_call_s"] = time.perf_counter() - start
        except Exception as exc:  # noqa: BLE001  (Unavailable included: a skipped column)
            out["error"] = _error_text(exc)
            continue
        out["column"] = key
        del out["error"]
        break
    return out


def _compile_threads():
    return [t for t in threading.enumerate() if t.name.startswith("s2s_ad compile")]


def _until_compiled(fn, args, calls=20):
    """Wait for s2s_ad's background compiles and call ``fn`` again, until a
    call leaves none running (see :func:`latency_probe`)."""
    for _ in range(calls):
        for thread in _compile_threads():
            thread.join()
        fn(*args)
        if not _compile_threads():
            return


def measure_latency(name, timeout=600):
    """Run :func:`latency_probe` in three fresh processes: ``cold``, eager
    compilation with an empty S2S_AD_CACHE_DIR (the compile time);
    ``tiered``, ``ad.jit``'s default mode with another empty cache (time to
    the first result, and until compiled code runs); ``warm``, tiered again
    with the cache the tiered process left behind; then :func:`jax_probe` in
    a fourth (``jax``: JAX's first call)."""
    with tempfile.TemporaryDirectory(prefix="s2s_ad_bench_cache_") as root:
        runs = {}
        for key, mode, cache in (("cold", "eager", "eager"), ("tiered", "tiered", "tiered"),
                                 ("warm", "tiered", "tiered"), ("jax", "eager", "jax")):
            env = dict(os.environ, S2S_AD_CACHE_DIR=os.path.join(root, cache),
                       S2S_AD_COMPILE=mode, **THREAD_ENV)
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
            probe = "--latency-probe-jax" if key == "jax" else "--latency-probe"
            proc = subprocess.run([sys.executable, "-m", "benchmarks.runner", probe,
                                   name], cwd=ROOT, env=env, capture_output=True, text=True,
                                  timeout=timeout, check=False)
            lines = proc.stdout.strip().splitlines()
            if proc.returncode != 0 or not lines:
                tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
                runs[key] = {"error": f"probe exited {proc.returncode}: {tail}"}
            else:
                runs[key] = json.loads(lines[-1])
    return runs


# -- output ---------------------------------------------------------------------

def fmt_time(s):
    if s is None or not math.isfinite(s):
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def fmt_ratio(x):
    return "-" if x is None else (f"{x:.2f}" if x < 100 else f"{x:.3g}")


def fmt_target(x):
    return "-" if x is None else f"{x:.3f}"


def render(name, res):
    """The terminal table for one workload."""
    lines = [f"{name}: {res['title']} ({res['size']})"]
    lw = max([26] + [len(c["label"]) for c in res["implementations"].values()])
    head = (f"  {'implementation':{lw}} {'median':>9} {'IQR':>6} {'min':>9} {'first call':>10} "
            f"{'/primal':>8} {'/hand':>7} {'/s2s_ad':>8}  check")
    lines.append(head)
    rt = res["ratios"]
    for key, c in res["implementations"].items():
        label = c["label"]
        if c["status"] in ("skipped", "error") and "median_s" not in c:
            tag = "skipped" if c["status"] == "skipped" else "ERROR"
            lines.append(f"  {label:{lw}} {tag}: {c.get('reason', '')}")
            continue
        iqr = (c["q3_s"] - c["q1_s"]) / c["median_s"] * 100 if c.get("median_s") else None
        cols = [fmt_time(c.get("median_s")), "-" if iqr is None else f"{iqr:.0f}%",
                fmt_time(c.get("min_s")), fmt_time(c.get("first_call_s"))]
        rel = [rt.get(r, {}).get(key) for r in ("vs_numba_primal", "vs_hand", "vs_s2s_ad")]
        if c["kind"] == "primal":
            rel[1:] = [None, None]
        if c["status"] == "ok":
            err = c.get("max_rel_err")
            check = "ok" if err is None else f"ok ({err:.0e})"
        else:
            check = f"{c['status']}: {c.get('reason', '')}"
            if c["status"] == "WRONG":
                check = "*** " + check + " ***"
        lines.append(f"  {label:{lw}} {cols[0]:>9} {cols[1]:>6} {cols[2]:>9} {cols[3]:>10} "
                     f"{fmt_ratio(rel[0]):>8} {fmt_ratio(rel[1]):>7} {fmt_ratio(rel[2]):>8}  "
                     f"{check}")
    notes = [f"{c['label']}: {c['note']}" for c in res["implementations"].values()
             if c.get("note")]
    lines += [f"  note - {n}" for n in notes]
    for t in res["targets"]:
        verdict = _verdict(t)
        lines.append(f"  target {t['name']} <= {t['limit']:g}: {fmt_target(t['value'])}  "
                     f"{verdict}")
    lat = res.get("latency")
    if lat:
        what = res["implementations"].get("s2s_ad", {}).get("label", "s2s_ad jit(grad)")
        lines += [f"  first call of {what} (fresh processes, tiny size): {line}"
                  for line in latency_lines(lat)]
    return "\n".join(lines)


def _run_time(run, key="first_call_s"):
    if run is None:
        return "-"
    if run.get(key) is None:
        return f"error ({run.get('error', '?')})"
    return fmt_time(run[key])


def latency_lines(lat):
    """The compile-latency lines of one workload (see :func:`measure_latency`)."""
    cold, tiered, warm = lat.get("cold", {}), lat.get("tiered"), lat.get("warm")
    lines = []
    if tiered is not None:
        lines.append(f"first result {_run_time(tiered)}, compiled code after "
                     f"{_run_time(tiered, 'compiled_s')} (tiered, empty cache); warm disk cache: "
                     f"first result {_run_time(warm)}, compiled after "
                     f"{_run_time(warm, 'compiled_s')}")
    jax = lat.get("jax") or {}
    if jax.get("first_call_s") is not None:
        lines.append(f"JAX's first call (fresh process) {fmt_time(jax['first_call_s'])} plus "
                     f"its start-up {fmt_time(jax.get('jax_startup_s'))}")
    extra = ""
    if cold.get("numba_startup_s") is not None:
        extra = f" plus Numba's start-up {fmt_time(cold['numba_startup_s'])}"
    if cold.get("transform_only_s") is not None:
        extra += f"; transformation alone {fmt_time(cold['transform_only_s'])}"
    lines.append(f"cold compile (eager, empty cache) {_run_time(cold)}{extra}")
    return lines


#: The first-call targets of issue 20, in the order of the latency table's
#: marks: time to the first result (tiered, empty cache) at most JAX's first
#: call; with a warm disk cache at most 0.1 s; the cold compile (eager, empty
#: cache, Numba's start-up apart) at most 1.5 s.
LATENCY_TARGETS = ("first result <= JAX's first call", "warm first result <= 0.1 s",
                   "cold compile <= 1.5 s beyond Numba's start-up")


def latency_marks(lat):
    """``met``/``MISSED``/``-`` for each of :data:`LATENCY_TARGETS`."""
    tiered, warm, cold, jax = (lat.get(k) or {} for k in ("tiered", "warm", "cold", "jax"))
    pairs = ((tiered.get("first_call_s"), jax.get("first_call_s")),
             (warm.get("first_call_s"), 0.1), (cold.get("first_call_s"), 1.5))
    return ["-" if v is None or limit is None else "met" if v <= limit else "MISSED"
            for v, limit in pairs]


def latency_table(result):
    """One row per workload measured in fresh processes: the first-call
    columns, JAX's first call, the steady-state median of s2s_ad's column,
    and a mark per target (:data:`LATENCY_TARGETS`)."""
    rows = [(name, res["latency"], res["implementations"].get("s2s_ad", {}))
            for name, res in result["workloads"].items() if res.get("latency")]
    if not rows:
        return []
    width = max([8] + [len(r[0]) for r in rows])
    head = (f"  {'workload':{width}} {'first result':>12} {'compiled':>9} {'warm first':>10} "
            f"{'warm compiled':>13} {'cold compile':>12} {'numba start':>11} {'JAX first':>9} "
            f"{'steady':>9}  targets: first/JAX, warm, cold")
    lines = ["first calls (fresh processes, tiny size; steady: median at the run's size):", head]
    for name, lat, cell in rows:
        tiered, warm, cold = lat.get("tiered") or {}, lat.get("warm") or {}, lat.get("cold") or {}
        cols = [fmt_time(tiered.get("first_call_s")), fmt_time(tiered.get("compiled_s")),
                fmt_time(warm.get("first_call_s")), fmt_time(warm.get("compiled_s")),
                fmt_time(cold.get("first_call_s")), fmt_time(cold.get("numba_startup_s")),
                fmt_time((lat.get("jax") or {}).get("first_call_s")),
                fmt_time(cell.get("median_s"))]
        lines.append(f"  {name:{width}} {cols[0]:>12} {cols[1]:>9} {cols[2]:>10} {cols[3]:>13} "
                     f"{cols[4]:>12} {cols[5]:>11} {cols[6]:>9} {cols[7]:>9}  "
                     + " ".join(latency_marks(lat)))
    return lines


def _verdict(t):
    if t["met"] is None:
        return t["why"]
    return "met" if t["met"] else "MISSED" + (f" ({t['why']})" if t.get("why") else "")


def summary_lines(result):
    lines = ["targets:"]
    width = max([15] + [len(n) for n in result["workloads"]])
    tw = max([22] + [len(t["name"]) for res in result["workloads"].values()
                     for t in res["targets"]])
    for name, res in result["workloads"].items():
        for t in res["targets"]:
            verdict = _verdict(t)
            lines.append(f"  {name:{width}} {t['name']:{tw}} {fmt_target(t['value']):>7} "
                         f"<= {t['limit']:<4g} {verdict}")
    return lines


def plot(result, path):
    """A bar chart of median times, one panel per workload; False if no matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    names = list(result["workloads"])
    fig, axes = plt.subplots(len(names), 1, figsize=(8, 2.2 + 1.6 * len(names)), squeeze=False)
    for ax, name in zip(axes[:, 0], names):
        impls = result["workloads"][name]["implementations"]
        rows = [(c["label"], c["median_s"], c["status"], key) for key, c in impls.items()
                if c.get("median_s")]
        labels = [r[0] + ("  (WRONG)" if r[2] == "WRONG" else "") for r in rows]
        colors = ["tab:red" if r[2] == "WRONG" else "tab:orange" if r[3] == "s2s_ad"
                  else "tab:gray" if r[3] in ("numpy", "numba") else "tab:blue" for r in rows]
        ax.barh(range(len(rows)), [r[1] for r in rows], color=colors)
        ax.set_yticks(range(len(rows)), labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_title(f"{name} ({result['workloads'][name]['size']})", fontsize=9)
        ax.set_xlabel("median seconds per call (log scale)", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# -- command line -------------------------------------------------------------------

def build_parser(prog="python -m benchmarks"):
    parser = argparse.ArgumentParser(
        prog=prog,
        description="s2s_ad's benchmark suite: gradients of loop and array workloads against "
                    "a hand-written Numba gradient and the peers that are installed (JAX, "
                    "PyTorch, autograd).")
    parser.add_argument("--quick", action="store_true",
                        help="few rounds and no compile-latency processes (about a minute)")
    parser.add_argument("--only", action="append", metavar="NAME", choices=WORKLOADS,
                        help=f"run only this workload (repeatable): {', '.join(WORKLOADS)}")
    parser.add_argument("--json", metavar="OUT", help="write the results as JSON to OUT")
    parser.add_argument("--plot", metavar="OUT.png", help="write a bar chart (needs matplotlib)")
    parser.add_argument("--latency", action=argparse.BooleanOptionalAction, default=None,
                        help="measure compile latency in fresh processes (default: on, "
                             "off with --quick)")
    parser.add_argument("--peers", metavar="LIST", default="all",
                        help=f"comma-separated peers to run, 'all' (default: those installed) "
                             f"or 'none': {', '.join(core.PEERS)}")
    parser.add_argument("--size", choices=("full", "tiny"), default="full",
                        help="problem sizes (tiny: a smoke test, ratios meaningless)")
    parser.add_argument("--fresh-cache", action="store_true",
                        help="compile into a new, empty S2S_AD_CACHE_DIR for this run "
                             "(measures compile latency from scratch)")
    parser.add_argument("--strict", action="store_true",
                        help="exit with status 1 when a target is missed, too")
    parser.add_argument("--target", choices=("cpu", "cuda"), default="cpu",
                        help="cuda: the GPU workloads of benchmarks/gpu/run.py instead (skipped, "
                             "with a message, without a GPU or numba's CUDA support)")
    parser.add_argument("--latency-probe", metavar="NAME", help=argparse.SUPPRESS)
    parser.add_argument("--latency-probe-jax", metavar="NAME", help=argparse.SUPPRESS)
    return parser


def parse_peers(text, prog="python -m benchmarks"):
    if text == "all":
        return core.PEERS
    if text == "none":
        return ()
    names = tuple(p.strip() for p in text.split(",") if p.strip())
    bad = [p for p in names if p not in core.PEERS]
    if bad:
        build_parser(prog).error(f"--peers: unknown peer {', '.join(bad)} "
                             f"(choose from {', '.join(core.PEERS)}, all, none)")
    return names


def machine():
    import numba
    info = {"python": platform.python_version(), "numpy": np.__version__,
            "numba": numba.__version__, "cpus": os.cpu_count(), "platform": platform.platform()}
    for mod in ("jax", "torch", "autograd"):
        try:
            info[mod] = importlib.metadata.version(mod)
        except importlib.metadata.PackageNotFoundError:
            info[mod] = None
    return info


def run_suite(argv=None, progress=None, prog="python -m benchmarks"):
    """Run the suite for a command line; returns the result dict (what --json writes)."""
    args = build_parser(prog).parse_args(argv)
    for k, v in THREAD_ENV.items():
        os.environ.setdefault(k, v)
    # The suite times compiled code, and "first call" is the compile: under
    # ad.jit's default tiered execution the first calls would run (and be
    # timed as) the NumPy module while Numba compiles in the background.
    os.environ.setdefault("S2S_AD_COMPILE", "eager")
    progress = progress or Progress()
    if args.fresh_cache:
        fresh = tempfile.TemporaryDirectory(prefix="s2s_ad_bench_cache_")
        old = os.environ.get("S2S_AD_CACHE_DIR")
        os.environ["S2S_AD_CACHE_DIR"] = fresh.name
        try:
            return _run(args, progress, prog)
        finally:
            if old is None:
                os.environ.pop("S2S_AD_CACHE_DIR", None)
            else:
                os.environ["S2S_AD_CACHE_DIR"] = old
            fresh.cleanup()
    return _run(args, progress, prog)


def _run(args, progress, prog):
    mode = "quick" if args.quick else "full"
    latency = (not args.quick) if args.latency is None else args.latency
    names = args.only or list(WORKLOADS)
    peers = parse_peers(args.peers, prog)
    result = {"schema": 1, "mode": mode, "size": args.size, "rtol": core.RTOL,
              "config": dict(zip(("rounds", "sample_s", "budget_s"), CONFIGS[mode])),
              "machine": machine(), "workloads": {}}
    start = time.perf_counter()
    for i, name in enumerate(names, 1):
        built = build_workloads(name, args.size)
        for j, wl in enumerate(built):
            key = wl.name if len(built) > 1 else name
            progress.prefix = f"[{i}/{len(names)} {key}] "
            res = run_workload(wl, args.size, CONFIGS[mode], progress, latency, args.quick,
                               peers, probe=f"{name}#{j}")
            progress.done()
            result["workloads"][key] = res
            print(render(key, res) + "\n", flush=True)
    result["elapsed_s"] = time.perf_counter() - start
    print("\n".join(summary_lines(result)))
    table = latency_table(result)
    if table:
        print("\n".join(table))
    print(f"({mode} run, {result['elapsed_s']:.0f} s; times are medians per call; /primal, "
          f"/hand and /s2s_ad divide a column's median by that column's)")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1, default=str))
        print(f"wrote {args.json}")
    if args.plot:
        if plot(result, args.plot):
            print(f"wrote {args.plot}")
        else:
            print(f"--plot: matplotlib is not installed, no chart written "
                  f"(pip install matplotlib); {args.plot} not created")
    return result


def main(argv=None, prog="python -m benchmarks"):
    """Entry point of ``python -m benchmarks`` (and ``s2s-ad bench``); returns the
    exit status: 1 when a gradient is WRONG or s2s_ad fails on a workload (or,
    with --strict, when a target is missed), else 0."""
    args = build_parser(prog).parse_args(argv)
    if args.latency_probe:
        print(json.dumps(latency_probe(args.latency_probe)))
        return 0
    if args.latency_probe_jax:
        print(json.dumps(jax_probe(args.latency_probe_jax)))
        return 0
    if args.target == "cuda":
        from .gpu.run import main as gpu
        return gpu((["--json", args.json] if args.json else [])
                   + (["--dry-run"] if args.size == "tiny" else []))
    result = run_suite(argv, prog=prog)
    bad = [f"{name}: {c['label']} {c['status']}"
           for name, res in result["workloads"].items()
           for key, c in res["implementations"].items()
           if c["status"] == "WRONG" or (key.startswith("s2s_ad") and c["status"] == "error")]
    missed = [t for res in result["workloads"].values() for t in res["targets"]
              if t["met"] is False]
    if bad:
        print("FAILED: " + "; ".join(bad), file=sys.stderr)
        return 1
    return 1 if args.strict and missed else 0


if __name__ == "__main__":
    sys.exit(main())
