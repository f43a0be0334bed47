"""The disk cache of generated modules: only what would be generated runs.

A cache file is used only when its text is exactly the generated source (a
truncated, edited or foreign file is rewritten, and what runs is compiled
from memory in any case); the folder is private to the user; processes
compiling the same function at once leave one whole file and all get right
answers; an unusable folder (not a directory, someone else's, full) makes
s2s_ad compile in memory with one warning.  Processes that break the cache
on purpose run as subprocesses, since falling back to memory lasts for the
rest of a process.
"""
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

from s2s_ad import backends

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SRC = "def f(x):\n    return x * C\n"


def _python(script, cache, *args):
    env = dict(os.environ, S2S_AD_CACHE_DIR=str(cache),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), str(HERE / "programs"),
                                                        os.environ.get("PYTHONPATH")])))
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(script), *map(str, args)],
                            env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _finish(proc):
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return out.strip().splitlines(), err


def test_a_changed_cache_file_is_rewritten_not_run():
    consts = {"C": np.full(2, 3.0)}
    path = backends.write_module(SRC, consts, "f")
    for damage in ("", SRC[:10], "raise SystemExit('foreign code ran')\n", SRC + "C = 0\n"):
        path.write_text(damage)
        for target in ("python", "cpu"):
            mod = backends.load(SRC, consts, ["f"], "f", target, {"cache": False})
            np.testing.assert_array_equal(mod.f(np.ones(2)), [3.0, 3.0])
        assert path.read_text() == SRC
    assert not list(path.parent.glob("*.tmp"))


def test_what_runs_is_the_generated_text_even_if_the_file_changes_after_writing(monkeypatch):
    consts = {"C": np.full(2, 2.0)}
    real = backends.write_module

    def write_then_tamper(source, consts, stem):
        path = real(source, consts, stem)
        path.write_text("raise SystemExit('foreign code ran')\n")
        return path
    monkeypatch.setattr(backends, "write_module", write_then_tamper)
    mod = backends.load(SRC, consts, ["f"], "f", "python")
    np.testing.assert_array_equal(mod.f(np.ones(2)), [2.0, 2.0])


def test_the_cache_folder_is_private(tmp_path, monkeypatch):
    root = tmp_path / "fresh" / "s2s_ad"
    monkeypatch.setenv("S2S_AD_CACHE_DIR", str(root))
    folder = backends.cache_dir()
    assert folder == root / "generated"
    for made in (root, folder):
        assert stat.S_IMODE(made.stat().st_mode) == 0o700, made
    folder.chmod(0o777)                           # an existing folder is made private
    assert stat.S_IMODE(backends.cache_dir().stat().st_mode) == 0o700


CONCURRENT = """
    import sys
    import numpy as np
    import passes
    import s2s_ad as ad
    x = np.array([0.3, -0.7, 1.1])
    print(repr(ad.jit(ad.grad(passes.cached_loss))(x).tolist()))
"""


def test_four_processes_compiling_at_once_leave_one_good_entry(tmp_path):
    procs = [_python(CONCURRENT, tmp_path) for _ in range(4)]
    results = [_finish(p)[0][-1] for p in procs]
    x = np.array([0.3, -0.7, 1.1])
    want = (1 - np.tanh(x) ** 2) * np.sin(x) + np.tanh(x) * np.cos(x) + 2 * x
    for r in results:
        np.testing.assert_allclose(eval(r), want, rtol=1e-12)
    folder = tmp_path / "generated"
    modules = sorted(p.name for p in folder.glob("*.py"))
    assert len(modules) == len(set(modules)) >= 1
    assert not list(folder.glob("*.tmp"))
    # and a fifth process finds them whole: it runs from the cache, right
    again, _ = _finish(_python(CONCURRENT, tmp_path))
    np.testing.assert_allclose(eval(again[-1]), want, rtol=1e-12)
    assert sorted(p.name for p in folder.glob("*.py")) == modules


UNUSABLE = """
    import errno, pathlib, sys, warnings
    import numpy as np
    if sys.argv[1] == "full":
        def full(self, *args, **kwargs):
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        pathlib.Path.write_text = full
    import passes
    import s2s_ad as ad
    x = np.array([0.3, -0.7, 1.1])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        g = ad.jit(ad.grad(passes.cached_loss))(x)
        h = ad.jit(ad.vmap(ad.grad(passes.cached_loss)))(np.stack([x, x]))
        v = ad.grad(passes.cached_loss)(x)
    print(len([w for w in caught if "cannot use its cache folder" in str(w.message)]))
    print(repr(g.tolist()))
    print(repr(h[1].tolist()))
    print(repr(v.tolist()))
"""


def test_an_unusable_cache_folder_compiles_in_memory_with_one_warning(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    foreign = tmp_path / "foreign"
    (foreign / "generated").mkdir(parents=True)
    cases = [(blocker / "cache", "blocked"), (tmp_path / "ok", "full")]
    if os.getuid() == 0:       # only root can give a folder away
        os.chown(foreign / "generated", 65534, 65534)
        cases.append((foreign, "foreign"))
    x = np.array([0.3, -0.7, 1.1])
    want = (1 - np.tanh(x) ** 2) * np.sin(x) + np.tanh(x) * np.cos(x) + 2 * x
    for cache, case in cases:
        lines, err = _finish(_python(UNUSABLE, cache, case))
        assert lines[-4] == "1", (case, err)
        for r in lines[-3:]:
            np.testing.assert_allclose(eval(r), want, rtol=1e-12)
    assert not list((tmp_path / "ok").rglob("*.py"))
    assert not list((foreign / "generated").iterdir())
