"""ad.precompile, `s2s-ad compile` and `s2s-ad cache info|clear`: the disk
cache filled ahead of time is what a fresh process loads on its first call.

Each subprocess gets its own empty cache folder (S2S_AD_CACHE_DIR), so what
a fresh process compiles or loads is measured, never assumed.
"""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import s2s_ad as ad
from s2s_ad import runtime
from s2s_ad.cli import main, parse_type

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = ROOT / "tests" / "programs"
sys.path.insert(0, str(PROGRAMS))
import compile_time as P  # noqa: E402


def _env(cache):
    return dict(os.environ, S2S_AD_CACHE_DIR=str(cache),
                PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), str(PROGRAMS),
                                                         os.environ.get("PYTHONPATH")])))


def _python(cache, script, *argv):
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(script), *argv],
                          env=_env(cache), capture_output=True, text=True, timeout=600,
                          cwd=ROOT, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


#: A fresh process's first call of jit(grad(loss)), with Numba's cache hits and
#: misses over every compiled function of the build it used.
FIRST_CALL = """
    import json
    import numpy as np
    import compile_time as P
    import s2s_ad as ad
    g = ad.jit(ad.grad(P.loss), compile="eager") if "eager" in ad.jit.__doc__ else \\
        ad.jit(ad.grad(P.loss))
    x = np.linspace(-1.0, 1.0, 40)
    w = np.linspace(0.5, 1.5, 40)
    grad = g(x, w)
    st = g._last
    stats = [getattr(st.compiled, name).stats for name in st.module.defined]
    print(json.dumps({"grad": grad.tolist(),
                      "hits": sum(sum(s.cache_hits.values()) for s in stats),
                      "misses": sum(sum(s.cache_misses.values()) for s in stats)}))
"""


def _loss_grad(x, w):
    return 2 * np.tanh(x * w) * (1 - np.tanh(x * w) ** 2) * w


def _numba_files(cache):
    return {p: p.stat().st_mtime_ns for p in Path(cache).rglob("*")
            if p.suffix in (".nbi", ".nbc")}


def test_cli_compile_then_a_fresh_process_loads_its_first_call(tmp_path):
    out = _python(tmp_path, "import sys; from s2s_ad.cli import main; sys.exit(main(sys.argv[1:]))",
                  "compile", f"{PROGRAMS / 'compile_time.py'}:loss", "--mode", "grad",
                  "--args", "float64[40]", "float64[40]")
    assert "compiled grad of loss for (float64[40], float64[40])" in out
    assert "new compiled entries" in out
    files = _numba_files(tmp_path)
    assert any(p.suffix == ".nbc" for p in files)

    first = json.loads(_python(tmp_path, FIRST_CALL).splitlines()[-1])
    assert first["hits"] >= 1 and first["misses"] == 0      # loaded, not compiled
    assert _numba_files(tmp_path) == files                 # nothing new written
    x, w = np.linspace(-1.0, 1.0, 40), np.linspace(0.5, 1.5, 40)
    np.testing.assert_allclose(first["grad"], _loss_grad(x, w), rtol=1e-12)


PRECOMPILE_VMAP = """
    import numpy as np
    import compile_time as P
    import s2s_ad as ad
    f = ad.jit(ad.vmap(ad.grad(P.td_loss), in_axes=(None, 0)))
    assert ad.precompile(f, ad.ShapeDtypeStruct((3,), np.float64),
                         ad.ShapeDtypeStruct((8, 3), "float64")) is f
"""

CALL_VMAP = """
    import json
    import numpy as np
    import compile_time as P
    import s2s_ad as ad
    f = ad.jit(ad.vmap(ad.grad(P.td_loss), in_axes=(None, 0)))
    theta = np.array([0.2, -0.2, 0.1])
    s = np.arange(15.0).reshape(5, 3) / 7
    print(json.dumps(f(theta, s).tolist()))
"""


def test_python_precompile_of_a_compiled_vmap_fills_the_cache(tmp_path):
    _python(tmp_path, PRECOMPILE_VMAP)
    files = _numba_files(tmp_path)
    assert sum(p.suffix == ".nbi" for p in files) >= 2     # the gradient and the vmap loop
    got = np.array(json.loads(_python(tmp_path, CALL_VMAP).splitlines()[-1]))
    assert _numba_files(tmp_path) == files                 # a new batch size: nothing compiled
    theta = np.array([0.2, -0.2, 0.1])
    s = np.arange(15.0).reshape(5, 3) / 7
    np.testing.assert_allclose(got, (s @ theta)[:, None] * s, rtol=1e-12, atol=1e-15)


# -- the cache commands ---------------------------------------------------------------

def _fill(cache):
    gen = cache / "generated"
    (gen / "__pycache__").mkdir(parents=True)
    (gen / "f_0123456789abcdef0123.py").write_text("def f(x):\n    return x\n")
    (gen / "f_0123456789abcdef0123.py.77.1.tmp").write_text("partial")
    (gen / "__pycache__" / "f_0123456789abcdef0123.f-1.py311.nbi").write_bytes(b"i" * 10)
    (gen / "__pycache__" / "f_0123456789abcdef0123.f-1.py311.1.nbc").write_bytes(b"c" * 100)
    (gen / "__pycache__" / "f_0123456789abcdef0123.f-1.py311.2.nbc").write_bytes(b"c" * 100)
    (gen / "notes.txt").write_text("not the cache's")
    return gen


@pytest.fixture
def kernels(tmp_path, monkeypatch):
    """The runtime kernels' Numba cache (runtime/_nb_kernels.py), played by a
    folder of this test: clearing the real one would make the rest of the
    suite compile the kernels again."""
    folder = tmp_path / "kernels"
    folder.mkdir()
    (folder / "_nb_kernels.dot-34.py311.nbi").write_bytes(b"i" * 10)
    (folder / "_nb_kernels.dot-34.py311.1.nbc").write_bytes(b"c" * 50)
    (folder / "_nb_kernels.dot-34.py311.2.nbc").write_bytes(b"c" * 50)
    monkeypatch.setattr(runtime, "kernel_cache_files",
                        lambda: sorted(str(p) for p in folder.iterdir()))
    return folder


def test_cache_info_counts_modules_functions_and_compiled_entries(tmp_path, monkeypatch,
                                                                  kernels):
    monkeypatch.setenv("S2S_AD_CACHE_DIR", str(tmp_path))
    assert ad.cache_info()["exists"] is False
    gen = _fill(tmp_path)
    info = ad.cache_info()
    assert info == {"path": str(gen), "exists": True, "modules": 1, "functions": 1,
                    "compiled": 2, "builds": 0, "bytes": len("def f(x):\n    return x\n") + 210,
                    "kernels": 2, "kernel_bytes": 110, "kernel_folders": [str(kernels)]}


def test_clear_cache_removes_only_the_caches_files(tmp_path, monkeypatch, kernels):
    monkeypatch.setenv("S2S_AD_CACHE_DIR", str(tmp_path))
    gen = _fill(tmp_path)
    (kernels / "other.nbi").write_bytes(b"not a kernel's")
    monkeypatch.setattr(runtime, "kernel_cache_files",
                        lambda: sorted(str(p) for p in kernels.iterdir()
                                       if p.name.startswith("_nb_kernels.")))
    done = ad.clear_cache()
    assert done["files"] == 5 and done["path"] == str(gen)
    assert done["kernel_files"] == 3 and done["kernel_bytes"] == 110
    assert sorted(p.name for p in gen.rglob("*")) == ["__pycache__", "notes.txt"]
    assert sorted(p.name for p in kernels.iterdir()) == ["other.nbi"]
    assert ad.cache_info()["compiled"] == 0 and ad.cache_info()["kernels"] == 0
    assert ad.clear_cache()["files"] == 0                  # clearing twice is harmless


def test_cli_cache_info_and_clear(tmp_path, monkeypatch, capsys, kernels):
    monkeypatch.setenv("S2S_AD_CACHE_DIR", str(tmp_path))
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert "not created yet" in out
    assert f"runtime kernels: 2 compiled entries (110 bytes, in {kernels})" in out
    _fill(tmp_path)
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert f"cache folder: {tmp_path / 'generated'}" in out
    assert "generated modules: 1" in out and "2 compiled entries" in out
    assert main(["cache", "clear"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("removed 5 files")
    assert out.strip().endswith("and 3 files (110 bytes) of the runtime's compiled kernels")
    assert not list((tmp_path / "generated" / "__pycache__").iterdir())
    assert not list(kernels.iterdir())


def test_the_kernel_cache_files_are_numbas_entries_of_the_runtime_kernels():
    from s2s_ad.runtime import _nb_kernels
    g, p = np.ones((2, 3)), np.ones((2, 3))
    _nb_kernels.times_rows(g[:, :1], p, p.copy())  # compiled, or loaded from Numba's cache
    files = runtime.kernel_cache_files()
    folder = _nb_kernels.times_rows._cache._cache_path
    index = _nb_kernels.times_rows._cache._cache_file._index_name
    assert os.path.join(folder, index) in files
    assert any(f.startswith(os.path.join(folder, index[:-len(".nbi")] + ".")) and
               f.endswith(".nbc") for f in files)
    # and the generated implementations' files (runtime/_nb_cached.py), and the
    # records of how to load each kernel overload (runtime/_nb_link.py)
    assert all(os.path.basename(f).startswith(("_nb_kernels.", "rt_"))
               or (os.path.basename(os.path.dirname(f)) == "links" and f.endswith(".pkl"))
               for f in files)
    assert any(f.endswith(".pkl") for f in files)


# -- bad input --------------------------------------------------------------------------

def test_precompile_needs_a_jitted_function():
    with pytest.raises(TypeError, match="precompile needs a function compiled with ad.jit"):
        ad.precompile(ad.grad(P.loss), ad.ShapeDtypeStruct((3,)), ad.ShapeDtypeStruct((3,)))


def test_shape_dtype_struct_checks_its_fields():
    with pytest.raises(TypeError, match="float, int or bool dtype"):
        ad.ShapeDtypeStruct((3,), np.complex128)
    with pytest.raises(ValueError, match="non-negative ints"):
        ad.ShapeDtypeStruct((3, -1))
    assert ad.ShapeDtypeStruct(4).shape == (4,)
    rng = np.random.default_rng(0)
    assert type(ad.ShapeDtypeStruct((), np.float64).example(rng)) is float
    assert type(ad.ShapeDtypeStruct((), np.int64).example(rng)) is int
    x = ad.ShapeDtypeStruct((2, 3), np.float32).example(rng)
    assert x.dtype == np.float32 and x.shape == (2, 3) and (x >= 0.5).all()


def test_cli_argument_types():
    assert parse_type("float64[10, 3]") == ad.ShapeDtypeStruct((10, 3), np.float64)
    assert parse_type("int64") == ad.ShapeDtypeStruct((), np.int64)
    assert parse_type("f4[]") == ad.ShapeDtypeStruct((), np.float32)


@pytest.mark.parametrize("bad", ["floatx[3]", "float64[3", "complex128[2]", "float64[a]"])
def test_cli_compile_rejects_bad_argument_types(bad, capsys):
    status = main(["compile", f"{PROGRAMS / 'compile_time.py'}:loss", "--args", bad])
    out, err = capsys.readouterr()
    assert status == 1 and out == "" and "Traceback" not in err
    assert f"--args: {bad!r} is not an argument type" in err


def test_cli_compile_rejects_argnums_for_jit(capsys):
    status = main(["compile", f"{PROGRAMS / 'compile_time.py'}:loss", "--mode", "jit",
                   "--argnums", "1", "--args", "float64[3]", "float64[3]"])
    assert status == 1
    assert "--argnums and --in-axes do not apply to --mode jit" in capsys.readouterr().err
