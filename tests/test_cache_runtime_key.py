"""Generated modules are named by the hash of their text, their constants and the
runtime's source: compiled code that inlined an older runtime helper (Numba's disk
cache checks only the generated file) is not found after the runtime changes."""
from pathlib import Path

from s2s_ad.runtime import _nb_cached

from s2s_ad import backends, runtime


def test_module_name_covers_the_runtime_source(monkeypatch):
    before = backends.module_name("x = 1\n", {}, "f")
    assert before == backends.module_name("x = 1\n", {}, "f")       # stable
    monkeypatch.setitem(_nb_cached._DIGEST, "digest", "another runtime")
    assert backends.module_name("x = 1\n", {}, "f") != before


def test_runtime_fingerprint_reads_every_runtime_module(monkeypatch):
    monkeypatch.delitem(_nb_cached._DIGEST, "digest", raising=False)
    read = []
    original = Path.read_bytes

    def spy(self):
        read.append(self.name)
        return original(self)
    monkeypatch.setattr(Path, "read_bytes", spy)
    backends._runtime_fingerprint()
    assert {"linalg.py", "_nb_linalg.py", "_nb_lapack.py", "_nb_einsum.py"} <= set(read)
    assert set(read) == {p.name for p in Path(runtime.__file__).parent.glob("*.py")}
