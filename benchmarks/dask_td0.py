"""Benchmark: per-sample TD(0) gradients of N transitions on Dask (docs/dask.md).

    python -m benchmarks.dask_td0                    # N = 20,000,000, d = 64
    python -m benchmarks.dask_td0 --quick            # N = 2,000,000
    python -m benchmarks.dask_td0 --n 6000000 --chunk 100000 --workers 2 --json out.json

The transitions ``(s_t, r_tp1, s_tp1)`` are generated chunk by chunk with
``dask.array.random`` (20,000,000 of them are 20.6 GB of inputs and 10.2 GB of
per-sample gradients if materialised); the per-sample gradients are API.md's
``ad.jit(ad.vmap(ad.grad(td_loss), in_axes=(None, 0, 0, 0)))`` applied to the
dask arrays, and each chunk is reduced by Dask's own ``mean(axis=0)``, so no
chunk of inputs or gradients outlives its task.  It runs on a
``LocalCluster`` of one single-threaded worker process per core.

Compared with the same jitted ``vmap`` in this process on an in-memory slice
of one chunk (its default threading), timed two ways:

- ``compute``: the per-sample gradients and their mean of a slice already in
  memory -- the issue's baseline;
- ``generate+compute``: the same after generating the slice with NumPy's
  ``default_rng`` -- the same work per chunk as each Dask task does.

Scale-out overhead is the single-process throughput over the cluster's,
minus one (target: at most 0.3 against ``generate+compute``, the like-for-like
baseline; both are reported).  Also reported: chunks/s, the first compute's
time (each worker's first task: rebuild of the transform, Numba cache load),
and each worker process's peak resident memory (``ru_maxrss``).  The mean
gradient of the first chunks is checked against the closed form before
anything is timed.  Without dask and distributed it prints why and exits 0.
"""
import argparse
import json
import os
import resource
import sys
import time

import numpy as np

import s2s_ad as ad

from .per_sample_td0 import analytic_grads, td_loss

#: Thread pools held to one thread, as in the suite (set before workers start).
THREAD_ENV = {"OMP_WAIT_POLICY": "PASSIVE", "OMP_NUM_THREADS": "1",
              "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
TARGET = 1.3


def per_sample_grads():
    return ad.jit(ad.vmap(ad.grad(td_loss), in_axes=(None, 0, 0, 0)))


def transitions(n, d, chunk, seed):
    """Lazy ``(s_t, r_tp1, s_tp1)``: ``n`` transitions, ``chunk`` per block."""
    import dask.array as da
    # One table of transitions, a row (s_t, r_tp1, s_tp1) each, as they would
    # be stored: one task makes a chunk of all three, so the task that takes
    # their gradients runs where they are (three arrays generated apart would
    # be made by tasks on different workers, and moved between them).
    table = da.random.default_rng(seed).uniform(-1.0, 1.0, (n, 2 * d + 1),
                                                chunks=(chunk, 2 * d + 1))
    return table[:, :d], table[:, d], table[:, d + 1:]


def mean_gradient(grads_fn, theta, n, d, chunk, seed):
    """The lazy mean per-sample gradient of ``n`` generated transitions."""
    return grads_fn(theta, *transitions(n, d, chunk, seed)).mean(axis=0)


def _peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0   # kB on Linux


def _cpu_s():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def single_process(grads_fn, theta, d, chunk, rounds, seed=1):
    """Per chunk in this process, medians of ``rounds``: wall and CPU seconds
    of the compute on an in-memory slice (contiguous arrays), and of
    generating the slice with NumPy (views of one table) then computing."""
    gen = np.random.default_rng(seed)

    def generate():
        table = gen.uniform(-1.0, 1.0, (chunk, 2 * d + 1))
        return table[:, :d], table[:, d], table[:, d + 1:]
    data = [np.ascontiguousarray(x) for x in generate()]
    grads_fn(theta, *data).mean(axis=0)                   # compile (or load the cache)
    grads_fn(theta, *generate()).mean(axis=0)
    times = {"compute": [], "generate_compute": []}
    for _ in range(rounds):
        for key in times:
            w0, c0 = time.perf_counter(), _cpu_s()
            grads_fn(theta, *(data if key == "compute" else generate())).mean(axis=0)
            times[key].append((time.perf_counter() - w0, _cpu_s() - c0))
    return {key: tuple(float(v) for v in np.median(np.array(t), axis=0))
            for key, t in times.items()}


def reference(n, d, chunk, seed):
    """The same Dask graph without the gradients: generate, slice, reduce."""
    s_t, r_tp1, s_tp1 = transitions(n, d, chunk, seed)
    return s_t.mean(axis=0) + r_tp1.mean() + s_tp1.mean(axis=0)


def _timed(client, lazy):
    """Wall seconds of computing ``lazy`` on the cluster, and the CPU seconds
    of its workers and of this process (client and scheduler)."""
    cpu0, here0 = client.run(_cpu_s), _cpu_s()
    t0 = time.perf_counter()
    client.compute(lazy, sync=True)
    wall = time.perf_counter() - t0
    cpu1, here1 = client.run(_cpu_s), _cpu_s()
    return wall, sum(cpu1[w] - cpu0[w] for w in cpu1 if w in cpu0) + (here1 - here0)


def run(client, n, d=64, chunk=100_000, seed=0, rounds=5, reference_chunks=40, log=print):
    """Measure on ``client``'s cluster; returns a dict of figures."""
    import dask
    grads_fn = per_sample_grads()
    theta = np.linspace(-0.5, 0.5, d)
    # Check: the first two chunks' mean gradient against the closed form.
    check_n = min(n, 2 * chunk)
    t0 = time.perf_counter()
    got = client.compute(mean_gradient(grads_fn, theta, check_n, d, chunk, seed), sync=True)
    first_s = time.perf_counter() - t0
    data = dask.compute(*transitions(check_n, d, chunk, seed), scheduler="threads")
    want = analytic_grads(theta, *data).mean(axis=0)
    err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
    if not err <= 1e-10:
        raise AssertionError(f"mean gradient of the first chunks is WRONG: rel. error {err:.2e}")
    del data
    log(f"checked the first {check_n:,} transitions (rel. error {err:.1e}); "
        f"first compute {first_s:.2f} s")
    before = client.run(_peak_rss_mb)
    chunks = -(-n // chunk)
    wall, cluster_cpu = _timed(client, mean_gradient(grads_fn, theta, n, d, chunk, seed))
    load = os.getloadavg()[0]
    peaks = client.run(_peak_rss_mb)
    log(f"{n:,} transitions in {wall:.1f} s; timing the reference graph and one process")
    ref_chunks = min(chunks, reference_chunks)
    ref_wall, ref_cpu = _timed(client, reference(ref_chunks * chunk, d, chunk, seed + 1))
    single = single_process(grads_fn, theta, d, chunk, rounds)
    (compute_s, compute_cpu), (full_s, full_cpu) = single["compute"], single["generate_compute"]
    cluster_tps = n / wall
    kernel_cpu = cluster_cpu / chunks - ref_cpu / ref_chunks
    return {"n": n, "d": d, "chunk": chunk, "chunks": chunks, "workers": len(peaks),
            "wall_s": wall, "chunks_per_s": chunks / wall, "transitions_per_s": cluster_tps,
            "load_average_1min": load, "first_compute_s": first_s, "check_rel_error": err,
            "cluster_cpu_s_per_chunk": cluster_cpu / chunks,
            "reference_chunks": ref_chunks, "reference_wall_s_per_chunk": ref_wall / ref_chunks,
            "reference_cpu_s_per_chunk": ref_cpu / ref_chunks,
            "kernel_cpu_s_per_chunk": kernel_cpu,
            "single_compute_s_per_chunk": compute_s,
            "single_compute_cpu_s_per_chunk": compute_cpu,
            "single_generate_compute_s_per_chunk": full_s,
            "single_generate_compute_cpu_s_per_chunk": full_cpu,
            "single_compute_transitions_per_s": chunk / compute_s,
            "single_generate_compute_transitions_per_s": chunk / full_s,
            "ratio_vs_compute": (chunk / compute_s) / cluster_tps,
            "ratio_vs_generate_compute": (chunk / full_s) / cluster_tps,
            "cpu_ratio": cluster_cpu / chunks / full_cpu,
            "kernel_cpu_ratio": kernel_cpu / compute_cpu,
            "worker_peak_rss_mb_before": sorted(before.values()),
            "worker_peak_rss_mb": sorted(peaks.values()),
            "this_process_peak_rss_mb": _peak_rss_mb(),
            "inputs_gb": n * (2 * d + 1) * 8 / 1e9, "gradients_gb": n * d * 8 / 1e9}


def _verdict(ratio):
    return f"{ratio:.2f}x, target <= {TARGET}x {'met' if ratio <= TARGET else 'MISSED'}"


def report(res):
    ms = {k: v * 1e3 for k, v in res.items() if k.endswith("_per_chunk")}
    return "\n".join([
        f"per-sample TD(0) gradients, d = {res['d']}: {res['n']:,} transitions "
        f"({res['inputs_gb']:.1f} GB of inputs, {res['gradients_gb']:.1f} GB of gradients "
        f"if materialised) in {res['chunks']} chunks of {res['chunk']:,}",
        f"LocalCluster, {res['workers']} worker processes x 1 thread: {res['wall_s']:.1f} s, "
        f"{res['chunks_per_s']:.2f} chunks/s, {res['transitions_per_s'] / 1e6:.2f} M "
        f"transitions/s (1-min load average {res['load_average_1min']:.1f} on "
        f"{os.cpu_count()} cores)",
        f"one process, jitted vmap: compute on an in-memory slice "
        f"{ms['single_compute_s_per_chunk']:.1f} ms/chunk "
        f"({res['single_compute_transitions_per_s'] / 1e6:.2f} M/s), generate+compute "
        f"{ms['single_generate_compute_s_per_chunk']:.1f} ms/chunk "
        f"({res['single_generate_compute_transitions_per_s'] / 1e6:.2f} M/s)",
        f"throughput, one process / cluster: vs compute "
        f"{_verdict(res['ratio_vs_compute'])}; vs generate+compute "
        f"{_verdict(res['ratio_vs_generate_compute'])}",
        f"CPU per chunk: cluster {ms['cluster_cpu_s_per_chunk']:.1f} ms (workers, client, "
        f"scheduler) = Dask's generate+slice+reduce {ms['reference_cpu_s_per_chunk']:.1f} ms "
        f"(the graph without gradients, {res['reference_chunks']} chunks) + s2s_ad's chunk "
        f"kernel {ms['kernel_cpu_s_per_chunk']:.1f} ms; one process: compute "
        f"{ms['single_compute_cpu_s_per_chunk']:.1f} ms, generate+compute "
        f"{ms['single_generate_compute_cpu_s_per_chunk']:.1f} ms",
        f"CPU, cluster / one process: kernel vs compute {_verdict(res['kernel_cpu_ratio'])}; "
        f"whole chunk vs generate+compute {_verdict(res['cpu_ratio'])}",
        f"peak worker memory (ru_maxrss): "
        f"{', '.join(f'{m:.0f}' for m in res['worker_peak_rss_mb'])} MB "
        f"(after the first chunks: "
        f"{', '.join(f'{m:.0f}' for m in res['worker_peak_rss_mb_before'])} MB); "
        f"first compute (each worker's first task) {res['first_compute_s']:.2f} s",
    ])


def build_parser():
    parser = argparse.ArgumentParser(prog="python -m benchmarks.dask_td0", description=(
        "Per-sample TD(0) gradients of N generated transitions on a Dask LocalCluster."))
    parser.add_argument("--n", type=int, default=None,
                        help="transitions (default 20,000,000; 2,000,000 with --quick)")
    parser.add_argument("--d", type=int, default=64, help="dimension of theta (default 64)")
    parser.add_argument("--chunk", type=int, default=100_000,
                        help="transitions per chunk (default 100,000)")
    parser.add_argument("--workers", type=int, default=os.cpu_count(),
                        help="worker processes, one thread each (default: the cores)")
    parser.add_argument("--quick", action="store_true", help="N = 2,000,000 unless --n")
    parser.add_argument("--json", metavar="OUT", help="write the figures as JSON to OUT")
    parser.add_argument("--strict", action="store_true",
                        help="exit with status 1 when the 1.3x target is missed")
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    n = args.n or (2_000_000 if args.quick else 20_000_000)
    try:
        import dask.array  # noqa: F401
        import distributed
    except ImportError as error:
        print(f"dask_td0 skipped: {error} (pip install \".[dask]\")")
        return 0
    os.environ.update(THREAD_ENV)
    with distributed.LocalCluster(n_workers=args.workers, threads_per_worker=1,
                                  processes=True, dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as client:
        res = run(client, n, args.d, args.chunk, log=lambda s: print(s, flush=True))
    print(report(res))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
        print(f"wrote {args.json}")
    return 1 if args.strict and res["ratio_vs_generate_compute"] > TARGET else 0


if __name__ == "__main__":
    sys.exit(main())
