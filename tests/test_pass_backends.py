"""The compile pass: one generated module, two backends, a disk cache.

``backends.load`` imports the generated source from a file named by its hash
and, for ``cpu``, wraps every function in ``numba.njit``.  The tests load the
same module for ``python`` and ``cpu`` and compare the results (and both
with finite differences), check that Numba compiled everything in nopython
mode, and run a fresh Python process twice over one ``S2S_AD_CACHE_DIR`` to
see the second one load Numba's cache instead of compiling.
"""
import inspect
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numba
import numpy as np
import pytest
from numba.core.registry import CPUDispatcher

import s2s_ad as ad
from s2s_ad import backends

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE / "programs"))
import passes as P

X = np.array([0.3, -0.7, 1.1])
W = np.array([0.5, 0.2, -0.4])


@pytest.fixture(scope="module")
def built():
    """The pipeline state of grad(backend_loss): a loop, a helper, its fwd/bwd pair."""
    g = ad.grad(P.backend_loss, argnums=(0, 1))
    g(X, W)
    return g._last


@pytest.fixture(scope="module")
def modules(built):
    """The one generated module, loaded for each backend."""
    args = (built.source, built.program.consts, built.module.defined, built.entry)
    return {"python": backends.load(*args, "python"),
            "cpu": backends.load(*args, "cpu", {"cache": False})}


def test_module_defines_helper_and_entry(built):
    assert built.module.defined == ["smooth", "fwd_smooth", "bwd_smooth", "grad_backend_loss"]


def test_python_and_cpu_give_equal_results(built, modules):
    value_py, grads_py = getattr(modules["python"], built.entry)(X, W)
    value_cpu, grads_cpu = getattr(modules["cpu"], built.entry)(X, W)
    assert value_py is None and value_cpu is None
    for a, b, arg, i in zip(grads_py, grads_cpu, (X, W), (0, 1)):
        assert a.shape == b.shape == arg.shape and a.dtype == b.dtype == np.float64
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(a, P.fd_grad(P.backend_loss, (X, W), i), rtol=1e-6, atol=1e-8)


def test_python_backend_runs_plain_functions(built, modules):
    for name in built.module.defined:
        fn = getattr(modules["python"], name)
        assert not isinstance(fn, numba.core.dispatcher.Dispatcher), name
        # (called through the wrapper that gives Python floats NumPy's semantics)
        assert inspect.unwrap(fn).__code__.co_filename == modules["python"].__file__


def test_cpu_backend_compiles_every_function_in_nopython_mode(built, modules):
    for name in built.module.defined:
        fn = getattr(modules["cpu"], name)
        assert isinstance(fn, CPUDispatcher), name
        assert fn.targetoptions.get("nopython", True) is True and not fn.targetoptions.get(
            "forceobj", False), name
    entry = getattr(modules["cpu"], built.entry)
    assert entry.nopython_signatures                  # compiled, in nopython mode
    assert len(entry.nopython_signatures) == len(entry.signatures)
    for name in ("fwd_smooth", "bwd_smooth"):         # compiled as callees of the entry
        fn = getattr(modules["cpu"], name)
        assert len(fn.nopython_signatures) == len(fn.signatures) >= 1, name


def test_module_file_holds_the_source(built, modules):
    path = Path(modules["python"].__file__)
    assert path.parent == backends.cache_dir()
    assert path.name.startswith(built.entry + "_") and path.suffix == ".py"
    assert path.read_text() == built.source
    assert Path(modules["cpu"].__file__) == path          # one file for both backends


def test_file_name_is_keyed_on_source_and_constants():
    src = "def f(x):\n    return x * C\n"
    a = backends.write_module(src, {"C": np.ones(2)}, "f")
    assert backends.write_module(src, {"C": np.ones(2)}, "f") == a
    assert backends.write_module(src, {"C": np.zeros(2)}, "f") != a
    assert backends.write_module(src + "\n", {"C": np.ones(2)}, "f") != a
    mod = backends.load(src, {"C": np.full(2, 3.0)}, ["f"], "f", "cpu", {"cache": False})
    np.testing.assert_array_equal(mod.f(np.ones(2)), [3.0, 3.0])


def test_unknown_target_is_an_error():
    with pytest.raises(ValueError, match="target must be one of"):
        backends.load("def f(x):\n    return x\n", {}, ["f"], "f", "gpu")
    with pytest.raises(ValueError, match="target must be one of"):
        ad.jit(P.cached_loss, target="tpu")


# -- Numba's disk cache across processes ---------------------------------------------

SCRIPT = textwrap.dedent("""
    import json, sys, time
    t0 = time.perf_counter()
    sys.path.insert(0, sys.argv[1])
    import numpy as np
    import passes
    import s2s_ad as ad
    g = ad.jit(ad.grad(passes.cached_loss))
    t1 = time.perf_counter()
    grad = g(np.array([0.3, -0.7, 1.1]))
    t2 = time.perf_counter()
    st = g._last
    stats = [getattr(st.compiled, name).stats for name in st.module.defined]
    print(json.dumps({"grad": grad.tolist(), "first_result_s": t2 - t1, "total_s": t2 - t0,
                      "hits": sum(sum(s.cache_hits.values()) for s in stats),
                      "misses": sum(sum(s.cache_misses.values()) for s in stats)}))
""")


def _run(cache):
    env = dict(os.environ, S2S_AD_CACHE_DIR=str(cache),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(HERE / "programs")], env=env,
                          capture_output=True, text=True, timeout=300, cwd=ROOT, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _numba_files(cache):
    return {p: p.stat().st_mtime_ns for p in Path(cache).rglob("*")
            if p.suffix in (".nbi", ".nbc")}


def test_cache_survives_a_new_process(tmp_path, capsys):
    first = _run(tmp_path)
    files = _numba_files(tmp_path)
    assert any(p.suffix == ".nbi" for p in files) and any(p.suffix == ".nbc" for p in files)
    assert first["misses"] >= 1 and first["hits"] == 0          # compiled, then saved

    second = _run(tmp_path)
    assert second["hits"] >= 1 and second["misses"] == 0        # loaded, not compiled
    assert _numba_files(tmp_path) == files                      # nothing new written
    assert second["grad"] == first["grad"]
    x = np.array([0.3, -0.7, 1.1])
    want = (1 - np.tanh(x) ** 2) * np.sin(x) + np.tanh(x) * np.cos(x) + 2 * x
    np.testing.assert_allclose(second["grad"], want, rtol=1e-12)
    with capsys.disabled():      # for the record only: timing is never asserted
        print(f"\n[numba cache] first result: {first['first_result_s']:.2f} s without cache, "
              f"{second['first_result_s']:.2f} s from cache (process {first['total_s']:.2f} s "
              f"vs {second['total_s']:.2f} s)")
