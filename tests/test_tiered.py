"""Tiered execution (ad.jit's default; the suite compiles eagerly, see
conftest.py, so these tests ask for compile="tiered"): answers from the NumPy
module while Numba compiles in the background, then switches to compiled code.

Every derivative is checked against its closed form.  "During compilation"
is made certain, not left to timing: the test holds Numba's global compiler
lock, so the background compile cannot finish until it is released.
"""
import json
import os
import queue as queue_module
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest
from numba.core.compiler_lock import global_compiler_lock

import s2s_ad as ad
from s2s_ad.api import vmap_tiered
from s2s_ad.backends import tiers

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = ROOT / "tests" / "programs"
sys.path.insert(0, str(PROGRAMS))
import compile_time as P  # noqa: E402

X = np.linspace(-1.0, 1.0, 40)
W = np.linspace(0.5, 1.5, 40)


def loss_grad(x, w):
    return 2 * np.tanh(x * w) * (1 - np.tanh(x * w) ** 2) * w


def td_grad(theta, s):
    return np.dot(theta, s) * s


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("S2S_AD_CACHE_DIR", str(tmp_path))


def _numba(st):
    return getattr(st.compiled, st.entry)


def test_a_call_during_compilation_returns_the_right_answer():
    g = ad.jit(ad.grad(P.td_loss), compile="tiered")
    theta, s = np.array([0.2, -0.2, 0.1]), np.array([1.0, 2.0, -0.5])
    with global_compiler_lock:                     # the background compile waits
        first = g(theta, s)
        st = g._last
        assert st.tier.thread.is_alive()
        assert st.function is not _numba(st)       # the NumPy module's entry point
        during = [g(theta, s * k) for k in range(1, 4)]
    np.testing.assert_allclose(first, td_grad(theta, s), rtol=1e-14)
    for k, got in zip(range(1, 4), during):
        np.testing.assert_allclose(got, td_grad(theta, s * k), rtol=1e-14)
    st.tier.wait()
    assert st.tier.error is None
    after = g(theta, s)
    assert g._last.function is _numba(st)          # switched to compiled code
    np.testing.assert_allclose(after, first, rtol=1e-13)
    assert "while numba.njit compiles in the background" in ad.source(g)


def _forked_child(g, queue):
    # Runs in a process forked while g's compile was under way (see below).
    got = g(X, W)
    st = g._last
    other = ad.jit(ad.grad(P.td_loss), compile="eager")     # needs Numba's compiler lock
    theta, s = np.array([0.2, -0.2, 0.1]), np.array([1.0, 2.0, -0.5])
    queue.put((got.tolist(), st.function is _numba(st), other(theta, s).tolist()))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_fork_during_compilation_waits_for_it():
    import multiprocessing
    g = ad.jit(ad.grad(P.loss), compile="tiered")
    with global_compiler_lock:
        g(X, W)
        assert g._last.tier.thread.is_alive()
    # The compile now runs under Numba's lock: forking at once would hand the
    # child a lock held by a thread it does not have.  The fork waits instead.
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_forked_child, args=(g, queue))
    child.start()
    assert not g._last.tier.thread.is_alive()
    try:
        got, compiled, other = queue.get(timeout=300)
    except queue_module.Empty:
        child.kill()
        pytest.fail("the forked child hung (on Numba's compiler lock) or failed")
    child.join(timeout=60)
    assert child.exitcode == 0 and compiled
    np.testing.assert_allclose(got, loss_grad(X, W), rtol=1e-12)
    np.testing.assert_allclose(other, td_grad(np.array([0.2, -0.2, 0.1]),
                                              np.array([1.0, 2.0, -0.5])), rtol=1e-12)


def test_tiered_results_equal_eager_compilation():
    eager = ad.jit(ad.value_and_grad(P.loss, argnums=(0, 1)), compile="eager")
    want = eager(X, W)
    tiered = ad.jit(ad.value_and_grad(P.loss, argnums=(0, 1)), compile="tiered")
    with global_compiler_lock:
        during = tiered(X, W)
    tiered._last.tier.wait()
    after = [tiered(X, W) for _ in range(2)]      # the first measures Numba against NumPy
    assert tiered._last.execution in ("numba", "numpy")
    for got in [during] + after:
        np.testing.assert_allclose(got[0], want[0], rtol=1e-13)
        for a, b in zip(got[1], want[1]):
            np.testing.assert_allclose(a, b, rtol=1e-13)
    np.testing.assert_allclose(want[1][0], loss_grad(X, W), rtol=1e-12)


def test_threads_calling_during_compilation_all_get_their_answer():
    g = ad.jit(ad.grad(P.loss), compile="tiered")
    results, errors = {}, []

    def worker(k):
        try:
            results[k] = [g(X * k, W) for _ in range(5)]
        except Exception as exc:     # noqa: BLE001  (reported below)
            errors.append(exc)
    with global_compiler_lock:
        threads = [threading.Thread(target=worker, args=(k,)) for k in (1.0, 0.5, -2.0)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        # Every thread answered while the compile could not finish: none waited for it.
        assert not any(t.is_alive() for t in threads)
    assert not errors
    for k, got in results.items():
        for r in got:
            np.testing.assert_allclose(r, loss_grad(X * k, W), rtol=1e-12)
    g._last.tier.wait()
    np.testing.assert_allclose(g(X, W), loss_grad(X, W), rtol=1e-12)


def test_a_long_scalar_loop_waits_for_the_compile():
    n = 200_000              # about 1.2 s in the interpreter by estimate
    g = ad.jit(ad.grad(P.scalar_loop), compile="tiered")
    got = g(0.3, n)
    st = g._last
    assert st.tier.thread is None and st.function is _numba(st)
    k = np.arange(n)
    assert got == pytest.approx(np.sum(np.cos(0.3 + k) * k / n), rel=1e-9)
    text = ad.source(g)
    assert "waited: the NumPy module would run the loop at line 23 200,000 times" in text


def test_a_short_scalar_loop_answers_from_numpy_during_compilation():
    g = ad.jit(ad.grad(P.scalar_loop), compile="tiered")
    k = np.arange(50)
    with global_compiler_lock:
        got = g(0.3, 50)
        st = g._last
        assert st.tier.thread.is_alive() and st.function is not _numba(st)
    assert got == pytest.approx(np.sum(np.cos(0.3 + k) * k / 50), rel=1e-12)
    st.tier.wait()
    assert g(0.3, 50) == pytest.approx(got, rel=1e-12)
    assert g._last.function is _numba(st)
    assert "(estimated for its loops: the loop at line 23 50 times, about" in ad.source(g)


def test_a_scalar_loop_of_unknown_trip_count_waits():
    g = ad.jit(ad.grad(P.value_bound), compile="tiered")
    x = np.array([0.75, 2.0])
    got = g(x)
    np.testing.assert_allclose(got, [0.0, sum(range(7))], rtol=1e-12)
    assert g._last.tier.thread is None
    assert "the scalar loop at line 52 (its trip count is not known here)" in ad.source(g)


def test_the_estimate_tells_scalar_loops_from_array_loops():
    def estimate(fn, *args):
        t = ad.grad(fn)
        t(*args)                                   # the NumPy backend: nothing compiled
        return tiers.scalar_loop(t._last)
    assert estimate(P.loss, X, W) is None                        # no loop
    assert estimate(P.components, X, 3) is None                  # array work per iteration
    assert isinstance(estimate(P.loop_over_array, X), int)       # one element per iteration
    assert isinstance(estimate(P.scalar_loop, 0.3, 5), int)


def _estimate(fn, *args):
    g = ad.jit(ad.grad(fn), compile="tiered")
    st = g.state((None,) * len(args), tuple(np.ndim(a) for a in args), ())
    return tiers.estimate(st, list(args))


def test_trip_counts_come_from_the_arguments():
    # range(x.shape[0]) and range(n): each statement of the body per trip.
    short, what = _estimate(P.loop_over_array, X)
    assert what == "the loop at line 31 40 times"
    long_, what = _estimate(P.loop_over_array, np.ones(4000))
    assert what == "the loop at line 31 4,000 times"
    assert long_ == pytest.approx(short * 100, rel=0.05)
    seconds, what = _estimate(P.scalar_loop, 0.3, 10 ** 6)
    assert what == "the loop at line 23 1,000,000 times"
    assert seconds > tiers.NUMPY_LIMIT
    # A loop over array code with a shape-given bound; a value-given bound.
    assert _estimate(P.components, X, 7)[1] == "the loop at line 39 7 times"
    assert _estimate(P.value_bound, np.array([0.75, 2.0]))[0] is None
    # An inner loop's bound from the outer index: counted at its longest (39).
    pairs, what = _estimate(P.triangle, X)
    assert what == "the loop at line 61 40 times"
    long_, _ = _estimate(P.triangle, np.ones(400))
    assert long_ == pytest.approx(pairs * 100, rel=0.05)          # quadratic in n
    assert pairs < tiers.NUMPY_LIMIT < long_


def test_compile_mode_is_checked():
    with pytest.raises(ValueError, match="compile must be one of"):
        ad.jit(P.loss, compile="lazy")


NEXT_PROCESS = """
    import json, sys
    import numpy as np
    import compile_time as P
    import s2s_ad as ad
    g = ad.jit(ad.grad(P.loss), compile="tiered")
    x, w = np.linspace(-1.0, 1.0, 40), np.linspace(0.5, 1.5, 40)
    grad = g(x, w)
    st = g._last
    note = st.tier.note
    st.tier.wait() if sys.argv[1] == "wait" else None
    d = getattr(st.compiled, st.entry)
    print(json.dumps({"grad": grad.tolist(), "note": note,
                      "hits": sum(d.stats.cache_hits.values()),
                      "misses": sum(d.stats.cache_misses.values())}))
"""


def _run(cache, how):
    env = dict(os.environ, S2S_AD_CACHE_DIR=str(cache),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), str(PROGRAMS),
                                                        os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(NEXT_PROCESS), how], env=env,
                          capture_output=True, text=True, timeout=600, cwd=ROOT, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_next_process_starts_compiled(tmp_path):
    # The first process ends right after its first call: it waits for the
    # background compile at exit (no thread left behind), which saves it.
    first = _run(tmp_path, "exit")
    assert "while numba.njit compiles in the background" in first["note"]
    assert any(p.suffix == ".nbc" for p in Path(tmp_path).rglob("*"))
    second = _run(tmp_path, "wait")
    assert "loaded from the disk cache by the first call" in second["note"]
    assert second["hits"] == 1 and second["misses"] == 0
    for r in (first, second):
        np.testing.assert_allclose(r["grad"], loss_grad(X, W), rtol=1e-12)


DEFAULT_MODE = """
    import json
    import numpy as np
    import compile_time as P
    import s2s_ad as ad
    g = ad.jit(ad.grad(P.loss))
    x, w = np.linspace(-1.0, 1.0, 40), np.linspace(0.5, 1.5, 40)
    grad = g(x, w)
    st = g._last
    print(json.dumps({"compile": g.options["compile"], "grad": grad.tolist(),
                      "background": st.tier is not None and st.tier.thread is not None,
                      "note": st.tier.note if st.tier is not None else None}))
"""


@pytest.mark.parametrize("setting", [None, "eager", "tiered"])
def test_the_default_is_tiered_and_the_variable_switches_it(tmp_path, setting):
    # A process of its own: the test suite sets S2S_AD_COMPILE=eager (conftest).
    env = {k: v for k, v in os.environ.items() if k != "S2S_AD_COMPILE"}
    if setting is not None:
        env["S2S_AD_COMPILE"] = setting
    env["S2S_AD_CACHE_DIR"] = str(tmp_path)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), str(PROGRAMS),
                                                      os.environ.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(DEFAULT_MODE)], env=env,
                          capture_output=True, text=True, timeout=600, cwd=ROOT, check=False)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    want = setting or "tiered"
    assert got["compile"] == want
    assert got["background"] == (want == "tiered")
    if want == "tiered":
        assert "while numba.njit compiles in the background" in got["note"]
    else:
        assert got["note"] is None
    np.testing.assert_allclose(got["grad"], loss_grad(X, W), rtol=1e-12)


def test_a_bad_compile_variable_is_an_error(monkeypatch):
    monkeypatch.setenv("S2S_AD_COMPILE", "lazy")
    with pytest.raises(ValueError, match="S2S_AD_COMPILE must be one of"):
        ad.jit(P.loss)


def test_precompile_waits_for_compiled_code_under_tiered_jit():
    g = ad.jit(ad.grad(P.loss), compile="tiered")
    spec = ad.ShapeDtypeStruct((40,), np.float64)
    assert ad.precompile(g, spec, spec) is g
    st = g._last
    assert st.tier.thread is None and st.function is _numba(st)
    assert "waited: ad.precompile" in st.tier.note
    np.testing.assert_allclose(g(X, W), loss_grad(X, W), rtol=1e-12)


# -- repeat calls: the kept per-call plans of vmap and jacfwd --------------------------

def test_repeat_calls_of_a_compiled_vmap_follow_new_values_and_shapes():
    f = ad.jit(ad.vmap(ad.grad(P.td_loss), in_axes=(None, 0)))
    theta = np.array([0.2, -0.2, 0.1])
    rng = np.random.default_rng(1)
    for n in (4, 4, 7, 4):                        # the plan, another batch size, the plan
        s = rng.normal(size=(n, 3))
        np.testing.assert_allclose(f(theta, s), (s @ theta)[:, None] * s, rtol=1e-13)
    assert f._plans                                # kept, so later calls take the plan
    with pytest.raises(ValueError, match="in_axes"):
        f(theta, s, s)                             # the checked path still checks
    moved = ad.jit(ad.vmap(ad.grad(P.td_loss), in_axes=(None, 1), out_axes=1))
    for _ in range(2):
        s = rng.normal(size=(3, 5))
        want = ((s.T @ theta)[:, None] * s.T).T
        np.testing.assert_allclose(moved(theta, s), want, rtol=1e-13)
    assert "vmap_loop" in ad.source(f)


def test_repeat_calls_of_a_compiled_jacfwd_follow_new_values():
    jac = ad.jit(ad.jacfwd(P.tanh_vec))
    for k in range(3):
        x = np.linspace(-1.0, 1.0, 20) * (k + 1)
        got = jac(x)
        assert got.flags.c_contiguous
        np.testing.assert_allclose(got, np.diag(1 - np.tanh(x) ** 2), rtol=1e-13, atol=1e-15)


def _compile_threads_started(monkeypatch):
    """The names of the threads started from now on."""
    names = []
    start = threading.Thread.start

    def recording(thread):
        names.append(thread.name)
        return start(thread)
    monkeypatch.setattr(threading.Thread, "start", recording)
    return names


def test_a_jacobians_first_call_compiles_only_its_own_function(monkeypatch):
    """jacrev's rows and the Hessian's columns need the output's shape from
    the primal, run by NumPy: no compile of a primal nothing runs compiled
    (it would share the CPU and the interpreter lock with the first call)."""
    names = _compile_threads_started(monkeypatch)
    x = np.linspace(-1.0, 1.0, 7)
    jac = ad.jit(ad.jacrev(P.tanh_vec), compile="tiered")
    np.testing.assert_allclose(jac(x), np.diag(1 - np.tanh(x) ** 2), rtol=1e-13, atol=1e-15)
    assert names == ["s2s_ad compile vjp_rows_tanh_vec"]
    for name in names:
        next(t for t in threading.enumerate() if t.name == name).join()
    np.testing.assert_allclose(jac(2 * x), np.diag(1 - np.tanh(2 * x) ** 2), rtol=1e-13,
                               atol=1e-15)
    names.clear()
    w = np.linspace(0.5, 1.5, 7)
    hess = ad.jit(ad.hessian(P.loss), compile="tiered")
    h = hess(x, w)
    assert not any(name == "s2s_ad compile loss" for name in names), names
    t = np.tanh(x * w)
    want = np.diag(2 * w ** 2 * (1 - t ** 2) * (1 - 3 * t ** 2))   # d2/dx2 sum(tanh(xw)^2)
    np.testing.assert_allclose(h, ad.jit(ad.hessian(P.loss), compile="eager")(x, w),
                               rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(h, want, rtol=1e-10, atol=1e-12)


# -- ad.jit(ad.vmap(...)): NumPy while the per-sample loop compiles --------------------

def _td_grads(theta, s):
    return (s @ theta)[:, None] * s


def test_a_vmap_call_during_compilation_returns_the_right_answer():
    f = ad.jit(ad.vmap(ad.grad(P.td_loss), in_axes=(None, 0)), compile="tiered")
    theta = np.array([0.2, -0.2, 0.1])
    s = np.random.default_rng(2).normal(size=(6, 3))
    with global_compiler_lock:                     # the background compile waits
        first = f(theta, s)
        (job,) = f._tiered.values()
        assert job.thread.is_alive() and job.thread in tiers._RUNNING   # a fork waits
        during = f(theta, 2.0 * s)
        assert not f._plans                        # no compiled loop ran
    np.testing.assert_allclose(first, _td_grads(theta, s), rtol=1e-13)
    np.testing.assert_allclose(during, _td_grads(theta, 2.0 * s), rtol=1e-13)
    job.wait()
    assert job.error is None and not job.thread.is_alive()
    after = f(theta, s)
    assert f._plans                                # the compiled loop ran
    eager = ad.jit(ad.vmap(ad.grad(P.td_loss), in_axes=(None, 0)), compile="eager")
    np.testing.assert_allclose(after, eager(theta, s), rtol=1e-13)
    np.testing.assert_allclose(after, first, rtol=1e-13)
    assert "while numba.njit compiles the per-example function and this loop" in ad.source(f)


def _td_loss_here(theta, s):
    v = np.dot(theta, s)
    return 0.5 * v * v


def test_a_vmap_first_call_starts_its_compile_once_it_has_the_numpy_answer(monkeypatch):
    """The compile's typing would share the interpreter lock with the NumPy
    answer: it starts after the answer (hessian_dense's first result 129 ->
    75 ms, docs/compile_time.md §2)."""
    twin = vmap_tiered._twin
    seen = []

    def answering(batched):
        run = twin(batched)

        def call(*args):
            seen.append([job.thread.ident for job in batched._tiered.values()])
            return run(*args)
        return call
    monkeypatch.setattr(vmap_tiered, "_twin", answering)
    # (its own function: nothing compiled for it by another test of this process)
    f = ad.jit(ad.vmap(ad.grad(_td_loss_here), in_axes=(None, 0)), compile="tiered")
    theta = np.array([0.2, -0.2, 0.1])
    s = np.random.default_rng(5).normal(size=(4, 3))
    np.testing.assert_allclose(f(theta, s), _td_grads(theta, s), rtol=1e-13)
    assert seen == [[None]]                         # not started while NumPy answered
    (job,) = f._tiered.values()
    job.wait()
    assert job.error is None and job.done
    np.testing.assert_allclose(f(theta, s), _td_grads(theta, s), rtol=1e-13)
    assert f._plans                                 # the compiled loop ran


def test_a_failed_vmap_compile_raises_from_the_next_call(monkeypatch):
    from s2s_ad.api import vmap_loop

    def fail(t, args):
        if getattr(tiers._LOCAL, "disk_only", False):     # the first call's look at the disk
            raise tiers.NotOnDisk("nothing compiled")
        raise RuntimeError("the per-example compile failed")
    monkeypatch.setattr(vmap_loop, "_compiled_entry", fail)
    f = ad.jit(ad.vmap(ad.grad(P.td_loss), in_axes=(None, 0)), compile="tiered")
    theta, s = np.array([0.2, -0.2, 0.1]), np.ones((4, 3))
    np.testing.assert_allclose(f(theta, s), _td_grads(theta, s), rtol=1e-13)
    (job,) = f._tiered.values()
    job.wait()
    with pytest.raises(RuntimeError, match="the per-example compile failed"):
        f(theta, s)


VMAP_NEXT_PROCESS = """
    import json, sys
    import numpy as np
    import compile_time as P
    import s2s_ad as ad
    f = ad.jit(ad.vmap(ad.grad(P.td_loss), in_axes=(None, 0)), compile="tiered")
    theta, s = np.array([0.2, -0.2, 0.1]), np.linspace(-1.0, 1.0, 12).reshape(4, 3)
    first = f(theta, s)
    out = {"first": first.tolist()}
    if sys.argv[1] == "wait":
        # The next process: its first call loaded both from the disk cache and
        # ran the compiled loop (no background compile).
        out["loaded"] = list(f._tiered.values()) == ["waited"] and bool(f._plans)
        out["after"] = f(theta, s).tolist()
        loop = next(iter(f._loops.values())).function
        st = f._per_example._last
        entry = getattr(st.compiled, st.entry)
        out["hits"] = [sum(d.stats.cache_hits.values()) for d in (loop, entry)]
        out["misses"] = [sum(d.stats.cache_misses.values()) for d in (loop, entry)]
    print(json.dumps(out))
"""


def test_the_next_process_starts_with_the_vmap_loop_compiled(tmp_path):
    env = dict(os.environ, S2S_AD_CACHE_DIR=str(tmp_path),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), str(PROGRAMS),
                                                        os.environ.get("PYTHONPATH")])))
    runs = []
    for how in ("exit", "wait"):      # the first ends at once: its exit waits for the compile
        proc = subprocess.run([sys.executable, "-c", textwrap.dedent(VMAP_NEXT_PROCESS), how],
                              env=env, capture_output=True, text=True, timeout=600, cwd=ROOT,
                              check=False)
        assert proc.returncode == 0, proc.stderr
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    second = runs[1]
    assert second["loaded"]
    assert second["hits"] == [1, 1] and second["misses"] == [0, 0]
    theta, s = np.array([0.2, -0.2, 0.1]), np.linspace(-1.0, 1.0, 12).reshape(4, 3)
    for got in (runs[0]["first"], second["first"], second["after"]):
        np.testing.assert_allclose(got, _td_grads(theta, s), rtol=1e-13)


def test_the_background_compile_builds_the_code_the_next_call_runs():
    # A strided shared argument and a Fortran-ordered batch: the one-example
    # batch compiled in the background has the same array types.
    f = ad.jit(ad.vmap(ad.grad(P.td_loss), in_axes=(None, 0)), compile="tiered")
    theta = np.linspace(0.1, 0.6, 6)[::2]
    s = np.asfortranarray(np.linspace(-1.0, 1.0, 15).reshape(5, 3))
    np.testing.assert_allclose(f(theta, s), _td_grads(theta, s), rtol=1e-13)
    next(iter(f._tiered.values())).wait()
    entry = _numba(f._per_example._last)
    loop = next(iter(f._loops.values())).function    # (shared by the tests' builds)
    compiled = [list(entry.signatures), list(loop.signatures)]
    np.testing.assert_allclose(f(theta, s), _td_grads(theta, s), rtol=1e-13)
    assert [entry.signatures, loop.signatures] == compiled         # nothing new compiled


def test_a_long_per_example_loop_makes_a_vmap_call_wait_for_the_compile():
    # vmap(grad) of a loop over each example's 40 elements: 6,000 examples
    # are about a second of NumPy by estimate (the first call waits), four
    # are not (answered from NumPy while the loop for that layout compiles).
    f = ad.jit(ad.vmap(ad.grad(P.loop_over_array)), compile="tiered")
    xs = np.linspace(-1.0, 1.0, 6000 * 40).reshape(6000, 40)
    np.testing.assert_allclose(f(xs), 3 * xs ** 2, rtol=1e-13)
    assert list(f._tiered.values()) == [vmap_tiered.WAITED] and f._plans
    text = ad.source(f)
    assert ("compiled on the first call (waited: the NumPy answer would run 6,000 examples, "
            "each the loop at line 31 40 times in the interpreter, about") in text
    small = xs[:4]
    with global_compiler_lock:                     # the serial loop's compile waits
        np.testing.assert_allclose(f(small), 3 * small ** 2, rtol=1e-13)
        assert len(f._tiered) == 2 and len(f._plans) == 1
    assert ("plain NumPy (vmap of the same transform on the NumPy backend) while numba.njit "
            "compiles the per-example function and this loop in the background, then the "
            "compiled loop (estimated for its loops: 4 examples, each the loop at line 31 40 "
            "times, about") in ad.source(f)


def test_a_fortran_ordered_batch_compiles_the_per_example_function_once():
    # 20 features: each example stays an array (not split into scalars), so
    # its layout is part of the compiled type.
    f = ad.jit(ad.vmap(ad.grad(P.td_loss), in_axes=(None, 0)), compile="eager")
    theta = np.linspace(0.1, 0.6, 20)
    s = np.asfortranarray(np.linspace(-1.0, 1.0, 100).reshape(5, 20))
    np.testing.assert_allclose(f(theta, s), _td_grads(theta, s), rtol=1e-13)
    entry = _numba(f._per_example._last)
    loop = next(iter(f._loops.values())).function
    assert len(entry.signatures) == 1 and len(loop.signatures) == 1
    c = np.ascontiguousarray(s[::-1])              # the C-ordered batch: nothing new
    np.testing.assert_allclose(f(theta, c), _td_grads(theta, c), rtol=1e-13)
    assert len(entry.signatures) == 1 and len(loop.signatures) == 1
