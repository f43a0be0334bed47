"""Compiled code runs NumPy's SIMD kernels for transcendental functions of large arrays.

Generated code for the cpu target calls ``rt.exp``, ``rt.tanh``, ... in place
of ``np.exp``, ...: on a float array of ``SIMD_MIN`` elements or more the
compiled version calls NumPy from object mode; otherwise (small arrays,
scalars, integers) it is Numba's own.  Either way the value is NumPy's.
"""
import os
import subprocess
import sys

import numba
import numpy as np
import pytest
from s2s_ad.runtime.elementwise import SIMD_MIN, TRANSCENDENTAL

import s2s_ad as ad
from s2s_ad import pipeline
from s2s_ad import runtime as rt
from s2s_ad.codegen import printer


def _domain(shape, dtype):
    return np.random.default_rng(0).uniform(0.1, 0.9, shape).astype(dtype)


@numba.njit
def _call_all(x, y):
    """Every function on ``x`` (arccosh on ``y`` = x + 1, inside its domain)."""
    return (rt.exp(x), rt.expm1(x), rt.exp2(x), rt.log(x), rt.log1p(x), rt.log2(x), rt.log10(x),
            rt.sin(x), rt.cos(x), rt.tan(x), rt.arcsin(x), rt.arccos(x), rt.arctan(x),
            rt.sinh(x), rt.cosh(x), rt.tanh(x), rt.arcsinh(x), rt.arccosh(y),
            rt.arctanh(x))


@pytest.mark.parametrize("shape", [(), (7,), (SIMD_MIN,), (40, 30), (3, 20, 10)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_compiled_values_are_numpys(shape, dtype):
    x = _domain(shape, dtype)
    y = (x + 1).astype(dtype)
    got = _call_all(x, y) if shape else _call_all(dtype(x), dtype(y))
    for name, g in zip(TRANSCENDENTAL, got):
        arg = x + 1.0 if name == "arccosh" else x
        want = getattr(np, name)(arg)
        assert np.shape(g) == np.shape(want), name
        rtol = 1e-6 if dtype == np.float32 else 1e-15
        np.testing.assert_allclose(g, want, rtol=rtol, err_msg=name)
        if shape:
            assert g.dtype == want.dtype, name


def test_strided_and_integer_arrays():
    x = np.random.default_rng(1).uniform(0.1, 0.9, (60, 40))[:, ::2]
    np.testing.assert_allclose(_call_all(x, x + 1.0)[0], np.exp(x), rtol=1e-15)
    k = np.arange(SIMD_MIN + 3)

    @numba.njit
    def exp_int(k):
        return rt.exp(k)
    np.testing.assert_allclose(exp_int(k), np.exp(k), rtol=1e-15)


def softplus_sum(x):
    return np.sum(np.log1p(np.exp(x)) * np.tanh(x))


def test_generated_source_calls_the_runtime_and_keeps_the_users_line():
    f = ad.jit(ad.grad(softplus_sum))
    x = np.linspace(-2.0, 2.0, 1000)
    sig = 1.0 / (1.0 + np.exp(-x))
    want = sig * np.tanh(x) + np.log1p(np.exp(x)) * (1.0 - np.tanh(x) ** 2)
    np.testing.assert_allclose(f(x), want, rtol=1e-12)
    src = ad.source(f)
    code = [line for line in src.splitlines() if not line.lstrip().startswith("#")]
    assert any("rt.exp(" in line for line in code) and any("rt.tanh(" in line for line in code)
    assert not any("np.exp(" in line or "np.tanh(" in line for line in code)
    assert "# return np.sum(np.log1p(np.exp(x)) * np.tanh(x))" in src


def test_numpy_target_keeps_numpy_calls():
    src = ad.source(ad.grad(softplus_sum), np.ones(3))
    assert "np.exp(" in src and "rt.exp(" not in src


def test_rewrite_leaves_comments_and_other_names_alone():
    tree = printer.parse(["# y = np.exp(x)  [line 3]",
                          "y = np.exp(x) + np.sqrt(x) + np.expm1(x) + sp.exp(x)"])
    assert printer.unparse(pipeline.simd_calls(tree)) == (
        "# y = np.exp(x)  [line 3]\ny = rt.exp(x) + np.sqrt(x) + rt.expm1(x) + sp.exp(x)")
    assert printer.unparse(tree).startswith("# y = np.exp(x)  [line 3]\ny = np.exp(x) +")
    untouched = printer.parse(["y = np.sqrt(x)"])
    assert pipeline.simd_calls(untouched) is untouched


def row_energy(x):
    return np.sum(np.exp(-x * x))


def test_per_sample_loop_with_large_rows():
    """Object mode inside the compiled per-sample loop (prange) works."""
    xs = np.random.default_rng(2).normal(size=(6, SIMD_MIN + 100))
    got = ad.jit(ad.vmap(ad.grad(row_energy)))(xs)
    np.testing.assert_allclose(got, -2.0 * xs * np.exp(-xs * xs), rtol=1e-13)


_SCRIPT = """
import numpy as np, s2s_ad as ad
def f(x):
    return np.sum(np.tanh(x) * np.exp(-x))
x = np.linspace(-1.0, 1.0, 2000)
g = ad.jit(ad.grad(f))(x)
want = (1.0 - np.tanh(x) ** 2) * np.exp(-x) - np.tanh(x) * np.exp(-x)
assert np.allclose(g, want, rtol=1e-13, atol=0), "wrong gradient"
print("ok")
"""


def test_compiled_object_mode_calls_load_from_the_disk_cache(tmp_path):
    """A second process loads the compiled gradient (with its object-mode
    blocks) from Numba's disk cache and runs it."""
    script = tmp_path / "simd_cache.py"
    script.write_text(_SCRIPT)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, S2S_AD_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=path)
    for _ in range(2):
        run = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                             text=True, timeout=300)
        assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-2000:]
