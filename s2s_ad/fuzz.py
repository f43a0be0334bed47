"""Random programs of the shapes users write, run through the differential oracle.

``python -m s2s_ad.fuzz --programs N --seed S [--out DIR] [--witnesses python,numba]``

Program ``i`` of seed ``S`` is a pure function of ``(S, i)``: a module with
module-level constant arrays, a few helper functions (loops, a Horner
recurrence, a scan written into a buffer, a scalar ``while`` loop, a gate
with ``np.where``), and two entry points over the same body -- ``f``
(scalar output, for gradients and Hessians) and ``g`` (a vector output, for
Jacobians).  The body mixes small static-length vectors used whole (``@``,
``np.dot``, ``np.sum``/``np.mean``, slices) and element by element
(``x[0]``, ``x[i]`` in ``for``-range loops, writes into ``np.zeros(n)``),
``np.where``/``maximum``/``minimum``/``clip`` and ``if`` branches,
elementwise maths, and bounded ``while`` loops.  The vector length is drawn
from 1, 2, 3, 16 and 17 (under ``ad.jit`` vectors of length <= 16 are split
into scalars), an optional shared matrix ``K`` is batched or not
(``in_axes`` mixing 0 and None).

Samples are kept away from ties: each program also exists instrumented (every
comparison, ``maximum``, ``minimum`` and ``clip`` records its distance to a
tie), and samples are redrawn until every distance is at least
:data:`MARGIN` at the sample and at every batch example.

Each disagreement is written to ``--out`` as a self-contained reproducer:
the program's source followed by a ``__main__`` block that re-runs the one
failing comparison (``python FILE.py`` exits 1 while it still disagrees).

The programs themselves are made in :mod:`s2s_ad.fuzz_programs` (re-exported
here); this module runs them, shrinks the failures and writes reproducers.
"""
import argparse
import importlib.util
import multiprocessing
import os
import sys
import tempfile
import time

import numpy as np

from . import oracle
from .fuzz_programs import (  # noqa: F401  (re-exported: fuzz.Program, fuzz.INSTRUMENT...)
    BATCH,
    EXTRA_HELPERS,
    EXTRAS_SHARE,
    HELPERS,
    INPLACE_HELPERS,
    INPLACE_SHARE,
    INSTRUMENT,
    LENGTHS,
    MARGIN,
    OUT_LENGTHS,
    Program,
)


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _margin(inst, args):
    inst._MARGINS.clear()
    for fn in (inst.f, inst.g):
        out = fn(*[np.copy(a) if isinstance(a, np.ndarray) else a for a in args])
        if not np.all(np.isfinite(out)) or np.max(np.abs(out)) > 1e4:
            return 0.0
    return min(inst._MARGINS, default=np.inf)


def prepare(program, folder):
    """Write ``program`` and its instrumented twin to ``folder``; return
    (module, sample args, batched args), or None when no sample keeps clear of ties."""
    path = os.path.join(folder, f"{program.name}.py")
    with open(path, "w") as fh:
        fh.write(program.source())
    ipath = os.path.join(folder, f"{program.name}_inst.py")
    with open(ipath, "w") as fh:
        fh.write(program.source(instrument=True))
    inst = _load(ipath, f"{program.name}_inst")
    module = _load(path, program.name)
    for _ in range(20):
        one, batch = program.draw(program.rng)
        examples = oracle._examples(batch, program.in_axes)
        try:
            if all(_margin(inst, a) >= MARGIN for a in [one] + examples):
                return module, one, batch
        except Exception:          # noqa: BLE001 -- a sample outside the domain: redraw
            continue
    return None


def run_program(program, folder, families, only=None):
    """(report, module, args, batched) for one program, or None when it was skipped."""
    got = prepare(program, folder)
    if got is None:
        return None
    module, one, batch = got
    report = oracle.Report()
    for fname in ("f", "g"):
        fn = getattr(module, fname)
        sub = oracle.check_all(fn, one, program.argnums, program.in_axes,
                               name=f"{program.name}.{fname}", batched_args=batch,
                               families=families, seed=program.index)
        for d in sub.disagreements:
            d.args = batch if d.transform.startswith("vmap") else one
        report.extend(sub)
    if only is not None:
        report.disagreements = [d for d in report.disagreements if d.path in only]
    return report, module, one, batch


def _still_fails(program, d, keep, folder, serial):
    """Whether the program cut down to statements ``keep`` still shows ``d``."""
    fname = d.program.split(".")[-1]
    name = f"{program.name}_shrink{serial}"
    path = os.path.join(folder, f"{name}.py")
    with open(path, "w") as fh:
        fh.write(program.source(keep=keep, only=fname))
    try:
        fn = getattr(_load(path, name), fname)
        args = d.args
        if d.transform.startswith("vmap"):
            for example in oracle._examples(args, program.in_axes):
                oracle.call_plain(fn, example)
        else:
            oracle.call_plain(fn, args)
    except Exception:            # noqa: BLE001 -- the cut broke the program itself
        return False
    report = oracle.check(fn, d.args, d.transform, program.argnums, program.in_axes,
                          only={d.path}, seed=program.index)
    return any(e.kind == d.kind and e.path == d.path for e in report.disagreements)


def shrink(program, d, folder):
    """Indices of the fewest body statements (greedy, one at a time) that still show ``d``.

    Statements are only removed when the cut program still runs on the same
    arguments, so a reproducer never fails for a reason of its own.
    """
    keep = list(range(len(program.body.stmts)))
    serial = 0
    k = 0
    while k < len(keep):
        trial = keep[:k] + keep[k + 1:]
        serial += 1
        if _still_fails(program, d, trial, folder, serial):
            keep = trial
        else:
            k += 1
    return keep


def write_reproducer(out_dir, program, d, count, keep=None):
    """A runnable file: the program's source (cut down to the statements ``keep``),
    then a ``__main__`` block re-running ``d``."""
    os.makedirs(out_dir, exist_ok=True)
    fname = d.program.split(".")[-1]
    args = "(" + "".join(f"{_literal(a)}, " for a in d.args) + ")"
    safe = "".join(ch if ch.isalnum() else "_" for ch in d.path).strip("_")
    path = os.path.join(out_dir, f"{program.name}_{fname}_{d.transform}_{safe}_{count}.py")
    text = program.source(keep=keep, only=fname) + f'''

if __name__ == "__main__":
    # Reproducer written by s2s_ad.fuzz: {d}
    from s2s_ad import oracle

    args = {args}
    report = oracle.check({fname}, args, {d.transform!r}, argnums={program.argnums!r},
                          in_axes={program.in_axes!r}, only={{{d.path!r}}}, seed={program.index})
    for d in report.disagreements:
        print(d)
    print("disagreement reproduced" if report.disagreements else "no disagreement")
    raise SystemExit(1 if report.disagreements else 0)
'''
    with open(path, "w") as fh:
        fh.write(text)
    return path


def _literal(a):
    if isinstance(a, np.ndarray):
        return f"np.array({a.tolist()!r})"
    return repr(float(a))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m s2s_ad.fuzz", description=__doc__.split(
        "\n\n")[0])
    parser.add_argument("--programs", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", type=int, default=0, help="index of the first program")
    parser.add_argument("--out", default="fuzz_failures")
    parser.add_argument("--witnesses", default="python,tier,numba",
                        help="comma-separated witness families (python, tier, numba) or witness "
                             "names, e.g. 'python' for a quick run")
    parser.add_argument("--numba-every", type=int, default=1, metavar="K",
                        help="run the numba witnesses on every K-th program only (they "
                             "compile, about a second each); the others get the python ones")
    parser.add_argument("--no-shrink", action="store_true",
                        help="write each failing program whole instead of cutting it down")
    parser.add_argument("--inplace", action="store_true",
                        help="only programs with in-place statements (writes into arrays an "
                             "earlier adjoint reads: fuzz_programs._InPlace)")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--jobs", type=int, default=1,
                        help="worker processes (programs run in chunks of %d, each in a "
                             "fresh process)" % CHUNK)
    opts = parser.parse_args(argv)
    chosen = [w.strip() for w in opts.witnesses.split(",") if w.strip()]
    families = tuple(w for w in chosen if w in oracle.FAMILIES) or oracle.FAMILIES
    only = {w for w in chosen if w not in oracle.FAMILIES} or None
    # Programs run in chunks, each in a fresh worker process: the generated
    # modules of thousands of programs would otherwise pile up in one process
    # (about 2.4 MB per program, measured).
    stop = opts.start + opts.programs
    chunks = [range(i, min(i + CHUNK, stop)) for i in range(opts.start, stop, CHUNK)]
    work = [(opts, families, only, chunk) for chunk in chunks]
    start = time.perf_counter()
    results = []
    spawn = multiprocessing.get_context("spawn")     # no fork of a process running threads
    with spawn.Pool(max(1, opts.jobs), maxtasksperchild=1) as pool:
        for result in pool.imap_unordered(_run_chunk, work):
            results.append(result)
            if not opts.quiet:
                done = sum(c for _, c, _ in results)
                print(f"... {done} programs, {sum(r.checks for r, _, _ in results)} checks, "
                      f"{sum(len(r.disagreements) for r, _, _ in results)} disagreements "
                      f"({done / (time.perf_counter() - start):.2f} programs/s)", flush=True)
    total = oracle.Report()
    for report, _, _ in results:
        total.extend(report)
    count = sum(c for _, c, _ in results)
    skipped = sum(k for _, _, k in results)
    elapsed = time.perf_counter() - start
    print(f"({skipped} programs skipped: no sample clear of ties; {len(total.refusals)} "
          f"documented refusals; {elapsed:.1f} s, {count / max(elapsed, 1e-9):.2f} programs/s)")
    print(f"{count} programs, {total.checks} checks, {len(total.disagreements)} disagreements")
    return 1 if total.disagreements else 0


#: Programs per worker process (see main).
CHUNK = 100


def _run_chunk(work):
    """Run the programs of one chunk: (report, programs run, programs skipped)."""
    opts, families, only, indices = work
    total = oracle.Report()
    count = skipped = 0
    with tempfile.TemporaryDirectory(prefix="s2s_ad_fuzz_") as folder:
        for index in indices:
            program = Program(opts.seed, index, inplace=True if opts.inplace else None)
            fams = families if index % max(1, opts.numba_every) == 0 \
                else tuple(f for f in families if f != "numba") or families
            try:
                got = run_program(program, folder, fams, only)
            except Exception as exc:        # noqa: BLE001 -- the plain program failed
                print(f"{program.name}: skipped, the plain program raised {exc!r}")
                skipped += 1
                continue
            if got is None:
                skipped += 1
                continue
            report = got[0]
            total.extend(report)
            for d in report.disagreements:
                keep = None if opts.no_shrink else shrink(program, d, folder)
                path = write_reproducer(opts.out, program, d, len(total.disagreements), keep)
                print(f"DISAGREEMENT {d} -> {path}", flush=True)
            count += 1
    return total, count, skipped


if __name__ == "__main__":
    sys.exit(main())
