"""Benchmark: the gradient of a row-wise logsumexp, jitted against NumPy.

Workload: f(X) = sum over the rows of X of logsumexp(row), for a 1000 x 100
float64 matrix, written the numerically stable way.  Its gradient is the
row-wise softmax of X, which is checked before anything is timed.

Timed in one process, interleaved round by round (so drift in the machine's
state hits every candidate alike), after warm-up (which includes Numba's
compilation):

* ``numpy f``     -- ``f`` itself, plain NumPy;
* ``jit f``       -- ``ad.jit(f)``;
* ``numpy grad``  -- ``ad.grad(f)``, the generated gradient on the python backend;
* ``jit grad``    -- ``ad.jit(ad.grad(f))``, the same source compiled with Numba.

The project's bar: jit grad / jit f <= 2 and jit grad / numpy grad <= 1.
When a ratio misses its target (or with ``--breakdown``) every statement of
the generated gradient is timed on its own, in plain NumPy and under
``numba.njit``, to show where the time goes.

Run: ``python -m benchmarks.logsumexp_rows [--quick] [--breakdown]``.
"""
import argparse
import ast
import gc
import resource
import statistics
import sys
import time

import numpy as np

import s2s_ad as ad

SHAPE = (1000, 100)
TARGETS = {"jit grad / jit f": 2.0, "jit grad / numpy grad": 1.0}


def logsumexp_rows(X):
    m = np.max(X, axis=1, keepdims=True)
    s = np.sum(np.exp(X - m), axis=1)
    return np.sum(np.log(s)) + np.sum(m)


def softmax_rows(X):
    """The analytic gradient of logsumexp_rows: softmax of each row."""
    e = np.exp(X - X.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def candidates():
    return {
        "numpy f": logsumexp_rows,
        "jit f": ad.jit(logsumexp_rows),
        "numpy grad": ad.grad(logsumexp_rows),
        "jit grad": ad.jit(ad.grad(logsumexp_rows)),
    }


def check(cands, X):
    """Values against NumPy, gradients against the analytic softmax."""
    want_value = logsumexp_rows(X)
    want_grad = softmax_rows(X)
    got_value = cands["jit f"](X)
    if not np.isclose(got_value, want_value, rtol=1e-12):
        raise AssertionError(f"jit f = {got_value!r}, NumPy gives {want_value!r}")
    for name in ("numpy grad", "jit grad"):
        got = cands[name](X)
        if got.shape != X.shape or not np.allclose(got, want_grad, rtol=1e-10, atol=1e-14):
            err = np.max(np.abs(got - want_grad))
            raise AssertionError(f"{name} differs from the softmax by up to {err:.3g}")
    print("checked: gradients match the analytic softmax, jit f matches NumPy")


def measure(cands, X, rounds, number, warmup):
    """Seconds per call for each candidate (one sample per round), and
    minor page faults per call.

    Each round times ``number`` back-to-back calls of every candidate, in
    an order rotated from round to round; the garbage collector is off
    while timing, as in ``timeit``.  Page faults show fresh memory being
    mapped for temporaries, which the per-statement breakdown cannot see.
    """
    names = list(cands)
    for name in names:
        for _ in range(warmup):
            cands[name](X)
    samples = {name: [] for name in names}
    faults = dict.fromkeys(names, 0)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for r in range(rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                fn = cands[name]
                faults_before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                start = time.perf_counter()
                for _ in range(number):
                    fn(X)
                samples[name].append((time.perf_counter() - start) / number)
                faults[name] += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_before
    finally:
        if gc_was_enabled:
            gc.enable()
    return samples, {name: f / (rounds * number) for name, f in faults.items()}


def summary(times):
    q1, median, q3 = statistics.quantiles(times, n=4, method="inclusive")
    return {"median": median, "q1": q1, "q3": q3, "min": min(times), "max": max(times)}


def report(samples, faults):
    stats = {name: summary(t) for name, t in samples.items()}
    n = len(next(iter(samples.values())))
    print(f"\n{'':12} {'median':>10} {'q1':>10} {'q3':>10} {'min':>10} {'faults':>8}   "
          f"(microseconds per call, {n} rounds; minor page faults per call)")
    for name, s in stats.items():
        print(f"{name:12} {s['median'] * 1e6:10.1f} {s['q1'] * 1e6:10.1f} "
              f"{s['q3'] * 1e6:10.1f} {s['min'] * 1e6:10.1f} {faults[name]:8.0f}")
    ratios = {
        "jit grad / jit f": stats["jit grad"]["median"] / stats["jit f"]["median"],
        "jit grad / numpy grad": stats["jit grad"]["median"] / stats["numpy grad"]["median"],
        "numpy grad / numpy f": stats["numpy grad"]["median"] / stats["numpy f"]["median"],
        "jit f / numpy f": stats["jit f"]["median"] / stats["numpy f"]["median"],
    }
    print()
    missed = []
    for name, value in ratios.items():
        target = TARGETS.get(name)
        verdict = ""
        if target is not None:
            verdict = f"target <= {target:g}: " + ("met" if value <= target else "MISSED")
            if value > target:
                missed.append(name)
        print(f"{name:22} {value:6.2f}x   {verdict}")
    return stats, ratios, missed


# -- where the time goes ------------------------------------------------------

def _entry_body(source):
    """The statements of the entry function of a generated module."""
    tree = ast.parse(source)
    return tree, [node for node in tree.body if isinstance(node, ast.FunctionDef)][-1]


def _loaded_names(node):
    return sorted({n.id for n in ast.walk(node)
                   if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)})


def _statement_function(stmt, env):
    """``def one(<inputs>): <stmt>; return <outputs>`` for one statement."""
    inputs = [name for name in _loaded_names(stmt) if name in env]
    if isinstance(stmt, ast.Return):
        body = [ast.Return(stmt.value)]
    else:
        outputs = [t.id for t in stmt.targets[0].elts] if isinstance(
            stmt.targets[0], ast.Tuple) else [stmt.targets[0].id]
        body = [stmt, ast.Return(ast.Tuple([ast.Name(o, ast.Load()) for o in outputs],
                                           ast.Load()))]
    fn = ast.FunctionDef(name="one", args=ast.arguments(
        posonlyargs=[], args=[ast.arg(i) for i in inputs], kwonlyargs=[], kw_defaults=[],
        defaults=[]), body=body, decorator_list=[], returns=None, type_params=[])
    return ast.unparse(ast.fix_missing_locations(fn)), inputs


def _best_of(fn, args, number, repeat):
    fn(*args)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn(*args)
        best = min(best, (time.perf_counter() - start) / number)
    return best


def breakdown(X, number=20, repeat=15):
    """Time each statement of the generated gradient, in NumPy and in Numba.

    The gradient's source (``ad.source``) is run statement by statement to
    record every intermediate value; each statement is then wrapped in a
    function of its inputs and timed as plain Python/NumPy and compiled with
    ``numba.njit``.  Per-call overhead of a wrapper (a few hundred ns in
    Numba for boxing arrays) is included in each row.
    """
    import numba

    source = ad.source(ad.grad(logsumexp_rows), X)
    tree, entry = _entry_body(source)
    # Run the module's imports, then build each statement's function: the
    # point is to time the generated text itself.
    scope = {}
    imports = ast.Module([n for n in tree.body if not isinstance(n, ast.FunctionDef)], [])
    exec(compile(imports, "<generated>", "exec"), scope)  # noqa: S102
    env = {entry.args.args[0].arg: X}
    rows = []
    for stmt in entry.body:
        text, inputs = _statement_function(stmt, env)
        namespace = dict(scope)
        exec(text, namespace)  # noqa: S102
        plain = namespace["one"]
        args = [env[i] for i in inputs]
        result = plain(*args)
        if not isinstance(stmt, ast.Return):
            targets = stmt.targets[0]
            names = [t.id for t in targets.elts] if isinstance(targets, ast.Tuple) else [
                targets.id]
            env.update(zip(names, result))
        jitted = numba.njit(plain)
        rows.append((ast.unparse(stmt), _best_of(plain, args, number, repeat),
                     _best_of(jitted, args, number, repeat)))
    print(f"\nwhere the time goes: each statement of grad_{logsumexp_rows.__name__} on its own "
          f"(best of {repeat} x {number}, microseconds)")
    print(f"{'numpy':>8} {'numba':>8} {'numba/numpy':>11}  statement")
    for text, t_np, t_nb in rows:
        print(f"{t_np * 1e6:8.1f} {t_nb * 1e6:8.1f} {t_nb / t_np:11.2f}  {text}")
    total_np = sum(r[1] for r in rows)
    total_nb = sum(r[2] for r in rows)
    print(f"{total_np * 1e6:8.1f} {total_nb * 1e6:8.1f} {total_nb / total_np:11.2f}  total")
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.logsumexp_rows",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run)")
    parser.add_argument("--breakdown", action="store_true",
                        help="time each generated statement even when the targets are met")
    args = parser.parse_args(argv)
    rounds, number, warmup = (15, 3, 2) if args.quick else (200, 5, 5)

    X = np.random.default_rng(0).standard_normal(SHAPE)
    print(f"logsumexp_rows on a {SHAPE[0]}x{SHAPE[1]} float64 matrix; numpy {np.__version__}, "
          f"python {sys.version.split()[0]}")
    cands = candidates()
    start = time.perf_counter()
    check(cands, X)
    print(f"(generation, Numba compilation and the check took {time.perf_counter() - start:.1f} s)")
    samples, faults = measure(cands, X, rounds, number, warmup)
    stats, ratios, missed = report(samples, faults)
    if missed or args.breakdown:
        breakdown(X, *((5, 5) if args.quick else (20, 15)))
    return {"stats": stats, "ratios": ratios, "missed": missed}


if __name__ == "__main__":
    main()
