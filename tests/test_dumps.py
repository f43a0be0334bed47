"""``S2S_AD_DUMP_AFTER`` prints the code after every pass, under the pass's name.

Each dump is real code of that stage: the tests check the banner and that the
text below it parses as Python.  Builds are cached per function, so each test
builds functions of its own.
"""
import ast
import pathlib

import numpy as np
import pytest
from conftest import load_program

import s2s_ad as ad
from s2s_ad import pipeline

P = load_program(pathlib.Path(__file__).parent / "programs" / "dumps.py")
X = np.linspace(0.1, 0.9, 6)
A = np.outer(np.arange(1.0, 7.0), np.ones(6)) / 10.0


def _dumps(text):
    """{pass name: [dumped source, ...]} from stderr."""
    out, name = {}, None
    for line in text.splitlines():
        if line.startswith("# ---- s2s_ad: after "):
            name = line.removeprefix("# ---- s2s_ad: after ").removesuffix(" ----")
            out.setdefault(name, []).append("")
        elif name is not None:
            out[name][-1] += line + "\n"
    return out


def _run(monkeypatch, capsys, build):
    monkeypatch.setenv("S2S_AD_DUMP_AFTER", "all")
    build()
    return _dumps(capsys.readouterr().err)


@pytest.mark.parametrize("name", ["parse", "normalize", "reverse", "generate"])
def test_reverse_mode_passes_are_dumped(monkeypatch, capsys, name):
    dumps = _run(monkeypatch, capsys, lambda: ad.grad(P.loss)(X))
    assert name in dumps or name == "parse", sorted(dumps)
    for text in dumps.get(name, []):
        ast.parse(text)


def test_every_pass_that_changes_code_is_dumped(monkeypatch, capsys):
    seen = set()
    seen |= set(_run(monkeypatch, capsys, lambda: ad.grad(P.loss)(X)))
    seen |= set(_run(monkeypatch, capsys, lambda: ad.jvp(P.loss, (X,), (X,))))
    seen |= set(_run(monkeypatch, capsys,
                     lambda: ad.vmap(P.loss_again, method="vectorize")(np.stack([X, X]))))
    seen |= set(_run(monkeypatch, capsys, lambda: ad.jit(ad.jacrev(P.rows_again))(X, A)))
    names = {name for name, _ in pipeline.PASSES} - {"parse", "compile", "mixed", "scalarize"}
    assert names | {"batch", "widen"} <= seen, sorted(seen)


def test_batch_and_widen_dumps_show_their_own_code(monkeypatch, capsys):
    dumps = _run(monkeypatch, capsys,
                 lambda: ad.vmap(P.loss, method="vectorize")(np.stack([X, X])))
    assert "batch" in dumps
    ast.parse(dumps["batch"][0])
    dumps = _run(monkeypatch, capsys, lambda: ad.jit(ad.jacrev(P.rows))(X, A))
    widened = dumps["widen"][0]
    ast.parse(widened)
    # several cotangent rows per sweep: the seeds carry a row suffix
    assert "_0" in widened and "_1" in widened


def test_nothing_is_printed_without_the_variable(monkeypatch, capsys):
    monkeypatch.delenv("S2S_AD_DUMP_AFTER", raising=False)
    ad.grad(P.loss)(X)
    assert "s2s_ad: after" not in capsys.readouterr().err
