"""The ``s2s-ad`` command line: output, every error path, exit statuses.

The CLI runs in-process (``main([...])`` with capsys) for speed; one
subprocess run of ``python -m s2s_ad`` proves the entry point.  Programs come
from ``tests/programs``; files that must be broken are written to tmp_path.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import s2s_ad as ad
from s2s_ad import cli
from s2s_ad.cli import main

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = ROOT / "tests" / "programs"
DEMO = PROGRAMS / "cli_demo.py"
UNSUPPORTED = PROGRAMS / "unsupported.py"
FUTURE_MODES = ["jvp", "jacfwd", "jacrev", "hessian", "vmap"]


def adjoint_of(name):
    """The returned gradient of parameter ``name``: ``rt.like(b<name>..., <name>)``."""
    return re.compile(rf"rt\.like\(b{name}\w*, {name}\)")


def run(capsys, *argv):
    """(status, stdout, stderr) of ``s2s-ad argv...``."""
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def fails(capsys, *argv):
    """stderr of a run that must fail with status 1, print nothing and no traceback."""
    status, out, err = run(capsys, *argv)
    assert status == 1, err
    assert out == ""
    assert "Traceback" not in err
    return err


def printed(source):
    """What the CLI prints for ``source``: the text, ending in one newline."""
    return source if source.endswith("\n") else source + "\n"


def load_demo():
    """cli_demo imported as the CLI imports it (its folder on sys.path)."""
    with cli.user_path(DEMO):
        return cli.import_file(DEMO)


# -- show ---------------------------------------------------------------------

def test_show_prints_ad_source_of_grad(capsys):
    status, out, err = run(capsys, "show", f"{DEMO}:loss")
    assert (status, err) == (0, "")
    assert out == printed(ad.source(ad.grad(load_demo().loss)))
    assert "def grad_loss(x):" in out


def test_show_argnums_tuple(capsys):
    status, out, _ = run(capsys, "show", f"{DEMO}:weighted", "--argnums", "0, 1")
    assert status == 0
    assert out == printed(ad.source(ad.grad(load_demo().weighted, argnums=(0, 1))))


def test_show_single_argnum(capsys):
    status, out, _ = run(capsys, "show", f"{DEMO}:weighted", "--argnums", "-1")
    assert status == 0
    assert out == printed(ad.source(ad.grad(load_demo().weighted, argnums=-1)))


def test_show_value_and_grad(capsys):
    status, out, err = run(capsys, "show", f"{DEMO}:loss", "--mode", "value_and_grad")
    assert (status, err) == (0, "")
    assert "def " in out


def test_show_vjp_differentiates_every_argument(capsys):
    status, out, _ = run(capsys, "show", f"{DEMO}:weighted", "--mode", "vjp")
    assert status == 0
    assert "vector-Jacobian product of weighted" in out
    assert "def vjp_weighted(x, w, " in out
    assert adjoint_of("x").search(out) and adjoint_of("w").search(out)


def test_show_vjp_with_argnums(capsys):
    status, out, _ = run(capsys, "show", f"{DEMO}:weighted", "--mode", "vjp", "--argnums", "1")
    assert status == 0
    assert adjoint_of("w").search(out) and not adjoint_of("x").search(out)


def test_show_target_cpu(capsys):
    status, out, _ = run(capsys, "show", f"{DEMO}:loss", "--target", "cpu")
    assert status == 0
    assert "numba.njit" in out.splitlines()[1]
    assert out == printed(ad.source(ad.jit(ad.grad(load_demo().loss))))


def test_show_function_already_jitted_keeps_its_target(capsys):
    status, out, _ = run(capsys, "show", f"{DEMO}:jitted_loss")
    assert status == 0
    assert "Target: cpu" in out and "def grad_loss(x):" in out
    status, out, _ = run(capsys, "show", f"{DEMO}:jitted_loss", "--target", "python")
    assert "Target: python" in out


def test_show_imports_like_python_file(capsys):
    """Sibling imports resolve, ``__main__`` blocks do not run, sys.path is restored."""
    path_before = list(sys.path)
    status, out, _ = run(capsys, "show", f"{DEMO}:scaled_loss")
    assert status == 0
    assert out == printed(ad.source(ad.grad(load_demo().scaled_loss)))
    assert sys.path == path_before


def test_show_relative_path(capsys, monkeypatch):
    monkeypatch.chdir(PROGRAMS)
    status, out, _ = run(capsys, "show", "cli_demo.py:loss")
    assert status == 0 and "def grad_loss(x):" in out


def test_show_future_mode_uses_the_transform_once_it_exists(capsys, monkeypatch):
    monkeypatch.setattr(ad, "jacrev", lambda f, argnums=0: ad.grad(f, argnums), raising=False)
    status, out, _ = run(capsys, "show", f"{DEMO}:weighted", "--mode", "jacrev",
                         "--argnums", "1")
    assert status == 0 and "def grad_weighted(x, w):" in out


def test_show_vmap_passes_in_axes(capsys, monkeypatch):
    seen = []

    def fake_vmap(f, in_axes=0):
        seen.append(in_axes)
        return ad.jit(f, target="python")
    monkeypatch.setattr(ad, "vmap", fake_vmap, raising=False)
    status, out, _ = run(capsys, "show", f"{DEMO}:weighted", "--mode", "vmap",
                         "--in-axes", "0,None")
    assert status == 0 and "def weighted(x, w):" in out
    run(capsys, "show", f"{DEMO}:weighted", "--mode", "vmap")
    assert seen == [(0, None), 0]


def test_entry_point_python_m():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "s2s_ad", "show", f"{DEMO}:loss"],
                          capture_output=True, text=True, check=False, cwd=ROOT, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "def grad_loss(x):" in proc.stdout and proc.stderr == ""


# -- errors: status 1, one message, no traceback --------------------------------

@pytest.mark.parametrize("spec, words", [
    (f"{DEMO}", ["FILE.py:FUNC"]),
    (f"{DEMO}:", ["FILE.py:FUNC"]),
    (":loss", ["FILE.py:FUNC"]),
    (f"{DEMO}:1loss", ["'1loss'", "not a Python name"]),
    (f"{PROGRAMS}/missing.py:f", ["no such file", "missing.py"]),
    (f"{PROGRAMS}:f", ["not a file"]),
    (f"{ROOT}/pyproject.toml:f", ["not a Python source file"]),
], ids=["no-colon", "no-func", "no-file", "bad-name", "missing", "folder", "not-py"])
def test_bad_path(capsys, spec, words):
    err = fails(capsys, "show", spec)
    assert err.startswith("s2s-ad: error: ") and err.count("\n") == 1
    for word in words:
        assert word in err


def test_no_such_function_lists_the_candidates(capsys):
    err = fails(capsys, "show", f"{DEMO}:lost")
    assert "no function 'lost'" in err and "loss, " in err and "weighted" in err


def test_not_a_function(capsys):
    err = fails(capsys, "show", f"{DEMO}:SCALE")
    assert "'SCALE'" in err and "is a float, not a function" in err


def test_library_function_without_a_rule(capsys):
    """np.sin has a rule (``show`` prints its gradient, as ``ad.grad(np.sin)``
    gives); np.frexp has none and is refused by name."""
    err = fails(capsys, "show", f"{DEMO}:np.frexp")
    assert err.startswith("s2s-ad: TypeError: ad.grad cannot transform np.frexp")


def test_file_that_fails_to_import_leaves_no_module(capsys, tmp_path):
    path = tmp_path / "half_imported_s2s.py"
    path.write_text("raise ImportError('nope')\n")
    fails(capsys, "show", f"{path}:f")
    assert "half_imported_s2s" not in sys.modules


@pytest.mark.parametrize("body, words", [
    ("import numpy as np\nimport no_such_module_s2s\n",
     ["ModuleNotFoundError", "no_such_module_s2s", "line 2"]),
    ("x = 1\nraise RuntimeError('boom')\n", ["RuntimeError: boom", "line 2"]),
    ("import sys\nsys.exit(3)\n", ["SystemExit: 3", "line 2"]),
], ids=["missing-import", "raises", "sys-exit"])
def test_file_that_fails_to_import(capsys, tmp_path, body, words):
    path = tmp_path / "broken.py"
    path.write_text(body + "\ndef f(x):\n    return x\n")
    err = fails(capsys, "show", f"{path}:f")
    assert err.startswith(f"s2s-ad: error: cannot import {path}: ") and err.count("\n") == 1
    for word in words:
        assert word in err


def test_file_with_a_syntax_error(capsys, tmp_path):
    path = tmp_path / "bad_syntax.py"
    path.write_text("def f(x):\n    return x +\n")
    err = fails(capsys, "show", f"{path}:f")
    lines = err.splitlines()
    assert "not valid Python" in lines[0]
    assert lines[1:3] == [f'  File "{path}", line 2', "    return x +"]
    assert lines[3].strip() == "^"
    assert lines[4:] == ["SyntaxError: invalid syntax"]


def test_unsupported_syntax_prints_like_python(capsys):
    err = fails(capsys, "show", f"{UNSUPPORTED}:use_lambda")
    lineno = next(i for i, line in enumerate(UNSUPPORTED.read_text().splitlines(), 1)
                  if line.endswith("# <- lambda"))
    assert err.splitlines() == [
        f'  File "{UNSUPPORTED}", line {lineno}',
        "    h = lambda *z: z[0] * z[0]  # <- lambda",
        "        ^",
        ("UnsupportedSyntaxError: nested functions and lambdas take plain positional "
         "parameters only (no *args, **kwargs, keyword-only or positional-only parameters)")]


def test_non_differentiable_call(capsys):
    err = fails(capsys, "show", f"{DEMO}:through_unknown")
    lineno = next(i for i, line in enumerate(DEMO.read_text().splitlines(), 1)
                  if line.endswith("# <- unknown_call"))
    assert err.startswith(f"s2s-ad: NonDifferentiableError: {DEMO}:{lineno}: ")
    assert "spacing" in err and "custom_vjp" in err and err.count("\n") == 1


@pytest.mark.parametrize("argnums, words", [
    ("x", ["--argnums", "'x'"]),
    ("0.5", ["--argnums", "'0.5'"]),
    ("", ["--argnums"]),
    ("2", ["ValueError", "argnums=2", "out of range", "weighted takes 2"]),
    ("0,-3", ["ValueError", "out of range"]),
], ids=["word", "float", "empty", "too-big", "too-small"])
def test_bad_argnums(capsys, argnums, words):
    err = fails(capsys, "show", f"{DEMO}:weighted", "--argnums", argnums)
    assert err.count("\n") == 1
    for word in words:
        assert word in err


@pytest.mark.parametrize("in_axes", ["x", "0,1.5"])
def test_bad_in_axes(capsys, monkeypatch, in_axes):
    monkeypatch.setattr(ad, "vmap", lambda f, in_axes=0: f, raising=False)
    err = fails(capsys, "show", f"{DEMO}:weighted", "--mode", "vmap", "--in-axes", in_axes)
    assert "--in-axes" in err


def test_options_that_do_not_apply(capsys, monkeypatch):
    monkeypatch.setattr(ad, "vmap", lambda f, in_axes=0: f, raising=False)
    err = fails(capsys, "show", f"{DEMO}:loss", "--mode", "vmap", "--argnums", "0")
    assert "--argnums does not apply to --mode vmap" in err
    err = fails(capsys, "show", f"{DEMO}:loss", "--in-axes", "0")
    assert "--in-axes applies only to --mode vmap" in err


@pytest.mark.parametrize("mode", FUTURE_MODES)
def test_mode_without_its_transform(capsys, monkeypatch, mode):
    monkeypatch.delattr(ad, mode, raising=False)
    err = fails(capsys, "show", f"{DEMO}:loss", "--mode", mode)
    assert err == (f"s2s-ad: error: --mode {mode} is not available: this version of s2s_ad "
                   f"({ad.__version__}) has no ad.{mode} transform yet\n")


def test_cuda_target_of_a_non_batched_function(capsys):
    err = fails(capsys, "show", f"{DEMO}:loss", "--target", "cuda")
    assert err.startswith("s2s-ad: ValueError: ") and "cuda" in err


def test_internal_error_asks_for_a_report(capsys, monkeypatch):
    def broken(fn):
        raise KeyError("oops")
    monkeypatch.setattr(ad, "source", broken)
    err = fails(capsys, "show", f"{DEMO}:loss")
    assert err.startswith("s2s-ad: internal error: KeyError: 'oops'")
    assert "--debug" in err


def test_debug_prints_the_traceback(capsys):
    status, out, err = run(capsys, "show", f"{UNSUPPORTED}:use_lambda", "--debug")
    assert status == 1 and out == ""
    assert err.startswith("Traceback (most recent call last):")
    assert err.rstrip().endswith("keyword-only or positional-only parameters)")


# -- usage errors: argparse, status 2 -----------------------------------------

@pytest.mark.parametrize("argv", [
    [], ["frobnicate"], ["show"], ["show", f"{DEMO}:loss", "--mode", "hess"],
    ["show", f"{DEMO}:loss", "--target", "gpu"], ["show", f"{DEMO}:loss", "--bogus"],
], ids=["no-command", "unknown-command", "no-spec", "bad-mode", "bad-target", "bad-option"])
def test_usage_errors_exit_2(capsys, argv):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert "usage: s2s-ad" in capsys.readouterr().err


def test_bench_hands_its_options_to_the_suite(capsys):
    with pytest.raises(SystemExit) as info:
        main(["bench", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "usage: s2s-ad bench" in out and "--quick" in out


def test_help_documents_everything(capsys):
    with pytest.raises(SystemExit) as info:
        main(["show", "-h"])
    assert info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for word in ["FILE.py:FUNC", "--mode", "--argnums", "--in-axes", "--target", "--debug",
                 "exit status", "sys.path", "every argument of FUNC is one array",
                 "python,cpu,cuda", *cli.MODES]:
        assert word in text, word
    with pytest.raises(SystemExit):
        main(["-h"])
    assert "show" in capsys.readouterr().out
