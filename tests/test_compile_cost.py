"""The compile-time cuts of docs/compile_time.md ("Where the compile time
goes"): Numba's slice-assignment error without string formatting, the
cached kernels (runtime/_nb_kernels.py) the overloads call instead of typing
np.dot and broadcast products inline, and the generated implementations
kept as cached kernels (runtime/_nb_cached.py).  Results are checked
against NumPy; one compiled function covers every kernel path.
"""
import itertools
import json
import os
import subprocess
import sys
import textwrap

import numba
import numpy as np
import pytest
from s2s_ad.runtime import _nb_cached, _nb_kernels, _nb_patches

from s2s_ad import runtime as rt

RNG = np.random.default_rng(3)


@numba.njit
def _assign_column(a, b):
    a[:, 0] = b
    return a


def test_slice_assignment_mismatch_still_names_both_shapes():
    assert _nb_patches.PATCHED
    np.testing.assert_array_equal(_assign_column(np.zeros((3, 2)), np.ones(3))[:, 0], 1.0)
    with pytest.raises(ValueError) as info:
        _assign_column(np.zeros((3, 2)), np.ones(4))
    assert info.value.args == ("cannot assign slice of shape", (3,), "from input of shape",
                               (4,))


@numba.njit
def _all_paths(g_rows, g_cols, g_full, g_one, p, v, a, b):
    return (rt.times_kept(g_rows, p), rt.times_kept(g_cols, p), rt.times_kept(g_full, p),
            rt.times_kept(g_one, v), rt.times_kept(v, v),
            rt.unbroadcast(g_full, g_cols), rt.unbroadcast(g_full, g_rows),
            rt.unbroadcast(g_full, v[:p.shape[1]]),
            rt.matmul(a, b), rt.matmul(a, np.asfortranarray(b)), rt.matmul(v[:a.shape[0]], a),
            rt.matmul_grad_a(g_full, a, b), rt.matmul_grad_b(g_full, a, b))


def test_kernel_paths_match_numpy():
    p, v = RNG.standard_normal((5, 4)), RNG.standard_normal(6)
    g_rows, g_cols, g_full = RNG.standard_normal((5, 1)), RNG.standard_normal((1, 4)), \
        RNG.standard_normal((5, 4))
    g_one = RNG.standard_normal(1)
    a, b = RNG.standard_normal((5, 3)), RNG.standard_normal((3, 4))
    got = _all_paths(g_rows, g_cols, g_full, g_one, p, v, a, b)
    want = (g_rows * p, g_cols * p, g_full * p, g_one * v, v * v,
            g_full.sum(axis=0, keepdims=True), g_full.sum(axis=1, keepdims=True),
            g_full.sum(axis=0), a @ b, a @ b, v[:5] @ a, g_full @ b.T, a.T @ g_full)
    for x, y in zip(got, want):
        np.testing.assert_allclose(x, y, rtol=1e-13, atol=1e-15)
    # The same helpers as plain NumPy (the tiered first call runs these).
    np.testing.assert_allclose(rt.times_kept(g_rows, p), g_rows * p, rtol=1e-15)
    # Stand-alone functions in Numba's disk cache (compiled in this process,
    # or linked from the cached code of a generated implementation that calls them).
    for kernel in (_nb_kernels.dot, _nb_kernels.times_rows, _nb_kernels.times_broadcast):
        assert kernel._cache._cache_path


@numba.njit
def _times(g, p):
    return rt.times_kept(g, p)


@numba.njit
def _times_in_place(g, p):
    return rt.times_kept(g, p, True)


def test_times_kept_broadcasts_every_pair_of_shapes_as_numpy():
    shapes = [(3, 4), (1, 4), (3, 1), (1, 1), (2, 4)]
    for gs, ps in itertools.product(shapes, shapes):
        for dg, dp in ((np.float64, np.float64), (np.float32, np.float64),
                       (np.float32, np.float32)):
            g, p = RNG.standard_normal(gs).astype(dg), RNG.standard_normal(ps).astype(dp)
            try:
                want = g * p
            except ValueError:
                for fn in (_times, _times_in_place):
                    with pytest.raises(ValueError, match="could not be broadcast"):
                        fn(g, p.copy())
                continue
            for fn in (_times, _times_in_place):
                got = fn(g, p.copy())
                assert got.dtype == want.dtype and got.shape == want.shape
                np.testing.assert_array_equal(got, want)
    for gs, ps in itertools.product([(5,), (1,)], [(5,), (1,)]):
        g, p = RNG.standard_normal(gs), RNG.standard_normal(ps)
        for fn in (_times, _times_in_place):
            np.testing.assert_array_equal(fn(g, p.copy()), g * p)


_PROBE = textwrap.dedent("""
    import json, sys
    import numba
    import numpy as np
    from numba.core import event
    from s2s_ad import runtime as rt

    compiled = []

    class Listener(event.Listener):
        def on_start(self, ev):
            compiled.append(str(ev.data["dispatcher"].py_func.__module__))

        def on_end(self, ev):
            pass

    event.register("numba:compile", Listener())

    def f(g, a):
        return rt.sum_grad(g, a, axis=1, keepdims=True), rt.prod_grad(g, a, axis=1,
                                                                       keepdims=True)

    g, a = np.ones((3, 1)), np.arange(12.0).reshape(3, 4)
    got = numba.njit(fastmath=sys.argv[1] == "fast")(f)(g, a)
    same = all(np.array_equal(x, y) for x, y in zip(got, f(g, a)))   # and as NumPy
    print(json.dumps({"compiled": compiled, "sum": got[0].tolist(), "prod": got[1].tolist(),
                      "as_numpy": same}))
""")


def _probe(tmp_path, mode):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    out = subprocess.run([sys.executable, "-c", _PROBE, mode], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_generated_implementations_are_loaded_by_the_next_process(tmp_path):
    """The reductions' gradients are generated text: the first process compiles
    them as cached kernels, the next one loads them (no compile of any), with
    the same results; fast-math code gets kernels of its own."""
    first, second = _probe(tmp_path, "plain"), _probe(tmp_path, "plain")
    generated = "s2s_ad_runtime_generated."
    assert sum(m.startswith(generated) for m in first["compiled"]) >= 2
    assert not [m for m in second["compiled"] if m.startswith(generated)]
    assert first["as_numpy"] and second["as_numpy"]
    assert first["sum"] == second["sum"] == np.ones((3, 4)).tolist()
    a = np.arange(12.0).reshape(3, 4)
    assert second["prod"] == [[np.prod(np.delete(row, j)) for j in range(4)] for row in a]
    fast = _probe(tmp_path, "fast")
    assert sum(m.startswith(generated) for m in fast["compiled"]) >= 2
    assert fast["as_numpy"] and fast["sum"] == first["sum"] and fast["prod"] == first["prod"]


def test_generated_kernel_files_hold_their_source_and_are_listed():
    _times(np.ones((2, 1)), np.ones((2, 3)))
    files = [f for f in rt.kernel_cache_files() if os.path.basename(f).startswith("rt_")]
    sources = [open(f).read() for f in files if f.endswith(".py")]
    assert any("\ndef impl(g, p, temporary=False):\n" in s and "times_rows(g, p, out)" in s
               for s in sources)
    assert all(os.path.dirname(f) == str(_nb_cached.folder()) for f in files
               if f.endswith(".py"))
