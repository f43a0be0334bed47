"""The disk cache of builds (s2s_ad/api/buildcache.py): a warm process skips
the pipeline and its first call runs compiled code, with the right numbers;
a changed helper, global constant or custom rule is never served stale.

Each test runs fresh processes (tiered ``ad.jit``, the default) sharing one
empty cache folder, on a user module written to a temporary folder.
"""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

MODULE = """
import numpy as np
import s2s_ad as ad

SCALE = {scale}
W = np.linspace({w0}, 1.0, 6)


def helper(x):
    return np.sum(np.{fn}(x * W) ** 2)


@ad.custom_vjp
def square(x):
    return x * x


def square_fwd(x):
    return x * x, x


def square_bwd(x, g):
    return ({factor} * x * g,)


{rule}


def loss(x):
    return SCALE * helper(x) + np.sum(square(x))


def example_loss(w, x):
    return np.sum(np.tanh(x * w) ** 2)
"""

PROBE = """
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import s2s_ad as ad
import usermod

which = sys.argv[2]
x = np.linspace(-1.0, 1.0, 6)
if which == "grad":
    g = ad.jit(ad.grad(usermod.loss))
    out = g(x)
    restored = type(g._last).__name__ == "Restored"
    note = ad.source(g).splitlines()[0]
else:
    xs = np.linspace(-1.0, 1.0, 24).reshape(4, 6)
    g = ad.jit(ad.vmap(ad.grad(usermod.example_loss), in_axes=(0, None)))
    out = g(xs, x)
    restored = None
    note = ad.source(g, xs, x).splitlines()[0]
threads = [t.name for t in __import__("threading").enumerate()
           if t.name.startswith("s2s_ad compile")]
print(json.dumps({"out": np.asarray(out).tolist(), "restored": restored, "note": note,
                  "threads": threads}))
"""


def _write(folder, scale=2.0, w0=0.1, fn="tanh", factor=2.0, rule=True):
    text = MODULE.format(scale=scale, w0=w0, fn=fn, factor=factor,
                         rule="square.defvjp(square_fwd, square_bwd)" if rule else "")
    (folder / "usermod.py").write_text(text)
    for cached in (folder / "__pycache__").glob("usermod*"):
        cached.unlink()


def _run(folder, cache, which="grad"):
    env = dict(os.environ, S2S_AD_CACHE_DIR=str(cache), S2S_AD_COMPILE="tiered")
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(PROBE), str(folder), which],
                          env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _expected(scale=2.0, w0=0.1, fn="tanh", factor=2.0):
    """The gradient by central finite differences of the function itself
    (and the custom rule's factor for ``square``, which is not its derivative
    when ``factor`` is not 2)."""
    x = np.linspace(-1.0, 1.0, 6)
    w = np.linspace(w0, 1.0, 6)
    f = {"tanh": np.tanh, "sin": np.sin}[fn]

    def helper(v):
        return scale * np.sum(f(v * w) ** 2)
    eps = 1e-6
    fd = np.array([(helper(x + eps * e) - helper(x - eps * e)) / (2 * eps)
                   for e in np.eye(6)])
    return fd + factor * x


@pytest.fixture
def user(tmp_path):
    folder = tmp_path / "user"
    folder.mkdir()
    return folder, tmp_path / "cache"


def test_a_warm_process_restores_the_build_and_answers_compiled(user):
    folder, cache = user
    _write(folder)
    cold = _run(folder, cache)
    assert cold["restored"] is False and "plain NumPy" in cold["note"]
    warm = _run(folder, cache)
    assert warm["restored"] is True
    assert "loaded from the disk cache by the first call" in warm["note"]
    assert warm["threads"] == []                     # nothing compiles in the background
    np.testing.assert_allclose(warm["out"], cold["out"], rtol=1e-12)
    np.testing.assert_allclose(warm["out"], _expected(), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("change", [
    {"fn": "sin"},                 # the helper's source
    {"scale": 3.0},                # a global scalar constant
    {"w0": 0.2},                   # a global array constant
    {"factor": 5.0},               # the custom rule's backward function
    {"rule": False},               # the rule not registered (defvjp)
])
def test_a_change_is_never_served_stale(user, change):
    folder, cache = user
    _write(folder)
    _run(folder, cache)
    assert _run(folder, cache)["restored"] is True
    _write(folder, **change)
    changed = _run(folder, cache)
    assert changed["restored"] is False              # the pipeline ran again
    settings = {k: v for k, v in change.items() if k != "rule"}
    if change.get("rule") is False:
        settings["factor"] = 2.0                     # the body's own derivative
    np.testing.assert_allclose(changed["out"], _expected(**settings), rtol=1e-6, atol=1e-8)
    again = _run(folder, cache)                      # and the new build is kept
    assert again["restored"] is True
    np.testing.assert_allclose(again["out"], changed["out"], rtol=1e-12)


def test_a_warm_batched_call_runs_the_compiled_loop(user):
    folder, cache = user
    _write(folder)
    cold = _run(folder, cache, "vmap")
    assert "plain NumPy" in cold["note"]
    warm = _run(folder, cache, "vmap")
    assert "loaded from the disk cache" in warm["note"] and warm["threads"] == []
    np.testing.assert_allclose(warm["out"], cold["out"], rtol=1e-12)
    x = np.linspace(-1.0, 1.0, 6)
    xs = np.linspace(-1.0, 1.0, 24).reshape(4, 6)
    fd = [[(np.sum(np.tanh(x * (w + 1e-6 * e)) ** 2) - np.sum(np.tanh(x * (w - 1e-6 * e)) ** 2))
           / 2e-6 for e in np.eye(6)] for w in xs]
    np.testing.assert_allclose(warm["out"], fd, rtol=1e-6, atol=1e-8)


def test_the_source_of_a_restored_build(tmp_path, monkeypatch):
    """In one process: a second transform of the same function restores the
    build; ``ad.source`` shows the same module, and the IR is rebuilt on
    demand (the loop estimate, ``_last.fn``)."""
    import s2s_ad as ad
    from s2s_ad.api.buildcache import Restored
    monkeypatch.setenv("S2S_AD_CACHE_DIR", str(tmp_path))
    folder = tmp_path / "user"
    folder.mkdir()
    _write(folder)
    monkeypatch.syspath_prepend(str(folder))
    import usermod
    x = np.linspace(-1.0, 1.0, 6)
    first = ad.jit(ad.grad(usermod.loss), compile="eager")
    first(x)
    second = ad.jit(ad.grad(usermod.loss), compile="eager")
    np.testing.assert_allclose(second(x), first(x), rtol=1e-12)
    assert isinstance(second._last, Restored)
    assert ad.source(second).split("\n", 1)[1] == ad.source(first).split("\n", 1)[1]
    assert second._last.fn.name == first._last.fn.name
    sys.modules.pop("usermod", None)


def test_clear_cache_removes_kept_builds(user, monkeypatch):
    import s2s_ad as ad
    folder, cache = user
    _write(folder)
    _run(folder, cache)
    monkeypatch.setenv("S2S_AD_CACHE_DIR", str(cache))
    # the runtime's kernels in Numba's cache are the machine's, shared with the
    # suite's other processes: this test clears only its own folder
    monkeypatch.setattr(ad.runtime, "kernel_cache_files", lambda: [])
    assert ad.cache_info()["builds"] == 1
    ad.clear_cache()
    assert ad.cache_info()["builds"] == 0
    assert _run(folder, cache)["restored"] is False


OTHER = """
import numpy as np


class Config:
    scale = 3.0


CFG = Config()


def scaled(x):
    return CFG.scale * np.sum(x ** 2)


square, cube = (lambda x: np.sum(x ** 2)), (lambda x: np.sum(x ** 3))
"""


def test_what_no_fingerprint_describes_is_not_kept_and_lambdas_do_not_mix(tmp_path,
                                                                         monkeypatch):
    import s2s_ad as ad
    from s2s_ad.api.buildcache import Restored
    monkeypatch.setenv("S2S_AD_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "othermod.py").write_text(OTHER)
    monkeypatch.syspath_prepend(str(tmp_path))
    import othermod
    x = np.linspace(0.5, 1.5, 5)
    g = ad.jit(ad.grad(othermod.scaled), compile="eager")
    np.testing.assert_allclose(g(x), 6.0 * x, rtol=1e-12)
    assert ad.cache_info()["builds"] == 0          # an instance of a user class was read
    for fn, expected in ((othermod.square, 2 * x), (othermod.cube, 3 * x ** 2)):
        for again in (False, True):                # the second one restores its own build
            h = ad.jit(ad.grad(fn), compile="eager")
            np.testing.assert_allclose(h(x), expected, rtol=1e-12)
            assert isinstance(h._last, Restored) is again
    assert ad.cache_info()["builds"] == 2
    sys.modules.pop("othermod", None)


def test_the_settings_the_passes_read(tmp_path, monkeypatch):
    from s2s_ad import pipeline
    from s2s_ad.api import buildcache
    monkeypatch.setenv("S2S_AD_CACHE_DIR", str(tmp_path))
    req = pipeline.Request(_expected, "grad", (None,), (0,), target="cpu")
    monkeypatch.delenv("S2S_AD_FUSE_SLICES", raising=False)
    monkeypatch.delenv("S2S_AD_DUMP_AFTER", raising=False)
    key = buildcache._key(req)
    assert buildcache._eligible(req)
    monkeypatch.setenv("S2S_AD_FUSE_SLICES", "0")
    assert buildcache._key(req) != key           # another module: another entry
    monkeypatch.setenv("S2S_AD_DUMP_AFTER", "reverse")
    assert not buildcache._eligible(req)          # the passes run, and print


def test_a_new_generated_kernel_leaves_kept_builds_valid():
    """The runtime's generated kernels are written under ``__pycache__`` as
    programs compile; the key of a kept build counts s2s_ad's source files,
    not them (a new kernel made every kept build of the machine stale)."""
    from s2s_ad.runtime import _nb_cached

    from s2s_ad.api import buildcache
    folder = _nb_cached.folder()
    if folder is None:
        pytest.skip("Numba keeps no cache of the runtime's kernels here")
    folder.mkdir(parents=True, exist_ok=True)
    buildcache._PACKAGE.clear()
    before = buildcache._package_hash()
    extra = folder / f"rt_test_only_{os.getpid()}.py"
    extra.write_text("def impl():\n    return 0\n")
    try:
        buildcache._PACKAGE.clear()
        assert buildcache._package_hash() == before
    finally:
        extra.unlink()
        buildcache._PACKAGE.clear()


LIBRARY_PROBE = """
import json, sys, threading
import numpy as np
sys.path.insert(0, sys.argv[1])
import s2s_ad as ad
from s2s_ad.backends import tiers
import libmod

if sys.argv[2] == "slow-load":
    tiers.LOAD_SECONDS_PER_BYTE = 1.0         # every entry counts as slow to load
elif sys.argv[2] == "slow-kernels":           # only the kernels an entry calls count
    tiers.LOAD_SECONDS_PER_BYTE, tiers.LOAD_SECONDS_PER_KERNEL = 0.0, 1.0
elif sys.argv[2] == "fast-load":
    tiers.LOAD_SECONDS_PER_BYTE, tiers.LOAD_SECONDS_PER_KERNEL = 0.0, 0.0
x = np.linspace(-1.0, 1.0, 6)
g = ad.jit(ad.grad(libmod.spread))
first = g(x)
note = ad.source(g).splitlines()[0]
g._last.tier.wait()
second = g(x)
print(json.dumps({"first": first.tolist(), "second": second.tolist(), "note": note,
                  "restored": type(g._last).__name__ == "Restored",
                  "compiled": g._last.function is getattr(g._last.compiled, g._last.entry)}))
"""


def _library_run(folder, cache, how):
    env = dict(os.environ, S2S_AD_CACHE_DIR=str(cache), S2S_AD_COMPILE="tiered")
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(LIBRARY_PROBE), str(folder),
                           how], env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_library_functions_are_kept_and_a_slow_load_answers_from_numpy(user):
    """A build lowering a NumPy function's implementation in place (np.var:
    s2s_ad's own source) is kept too; a warm first call whose compiled code
    would take long to load answers from the NumPy module while a thread
    loads it, and the next call after it runs compiled code."""
    folder, cache = user
    (folder / "libmod.py").write_text(
        "import numpy as np\n\n\ndef spread(x):\n    return np.var(np.sin(x)) * 3.0\n")
    x = np.linspace(-1.0, 1.0, 6)
    s = np.sin(x)
    want = 3.0 * 2.0 * (s - s.mean()) * np.cos(x) / x.size
    _library_run(folder, cache, "fill")
    warm = _library_run(folder, cache, "slow-load")
    assert warm["restored"] is True
    assert "loads from the disk cache in the background" in warm["note"]
    assert warm["compiled"] is True
    np.testing.assert_allclose(warm["first"], want, rtol=1e-12)
    np.testing.assert_allclose(warm["second"], want, rtol=1e-12)


def test_an_entry_calling_kernels_counts_their_loading(user):
    """The cache entry of a gradient names how many runtime kernels it calls
    by symbol (each loaded as an entry of its own): counted at 1 s each, the
    warm first call answers from NumPy while they load; counted at nothing,
    it loads them and runs compiled code."""
    folder, cache = user
    (folder / "libmod.py").write_text(
        "import numpy as np\n\n\ndef spread(x):\n    return np.sum(np.exp(x) * x) * 3.0\n")
    x = np.linspace(-1.0, 1.0, 6)
    want = 3.0 * np.exp(x) * (1.0 + x)
    _library_run(folder, cache, "fill")
    slow = _library_run(folder, cache, "slow-kernels")
    assert "runtime kernels it calls) loads from the disk cache in the background" \
        in slow["note"]
    fast = _library_run(folder, cache, "fast-load")
    assert "loaded from the disk cache by the first call" in fast["note"]
    for run in (slow, fast):
        assert run["restored"] is True and run["compiled"] is True
        np.testing.assert_allclose(run["first"], want, rtol=1e-12)
        np.testing.assert_allclose(run["second"], want, rtol=1e-12)
