"""The desugar pass: every for loop a range loop, no jumps, one return.

Each program of ``programs/passes.py`` is desugared (``FunctionSource``
runs the pass) and printed with ``ast.unparse``.  The tests assert on that
text, on the pass's invariants over the tree, and that the printed function,
executed, computes what the user's function computes.
"""
import ast
import os
import sys

import gast
import numpy as np
import pytest

import s2s_ad as ad
from s2s_ad.frontend.parse import FunctionSource

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs"))
import passes as P


def desugared(fn):
    """(the desugared gast tree, its text)."""
    node = FunctionSource(fn).node
    tree = gast.gast_to_ast(node)
    ast.fix_missing_locations(tree)     # ast.unparse needs a line on every statement
    return node, ast.unparse(tree)


def run_desugared(fn, *args):
    """Execute the desugared text in ``fn``'s module namespace and call it."""
    _, text = desugared(fn)
    namespace = dict(fn.__globals__)
    exec(compile(text, f"<desugared {fn.__name__}>", "exec"), namespace)  # noqa: S102
    return namespace[fn.__name__](*args)


def body_text(text):
    """The function's body, dedented, without its ``def`` line."""
    return "\n".join(line[4:] for line in text.splitlines()[1:])


# -- the text of each rewrite ---------------------------------------------------


def test_for_over_array_becomes_index_loop():
    _, text = desugared(P.over_array)
    assert body_text(text) == (
        "s = 0.0\n"
        "for _i in range(0, len(x), 1):\n"
        "    v = x[_i]\n"
        "    s = s + v * v\n"
        "return s")


def test_for_over_expression_hoists_it_once():
    _, text = desugared(P.over_expression)
    assert body_text(text) == (
        "s = 0.0\n"
        "_seq = m * 2.0\n"
        "for _i in range(0, len(_seq), 1):\n"
        "    row = _seq[_i]\n"
        "    s = s + np.sum(row * row)\n"
        "return s")


def test_zip_loop_reads_both_sequences_up_to_the_shorter():
    _, text = desugared(P.over_zip)
    assert body_text(text) == (
        "s = 0.0\n"
        "for _i in range(0, min(len(x), len(y)), 1):\n"
        "    a = x[_i]\n"
        "    b = y[_i]\n"
        "    s = s + a * b\n"
        "return s")


def test_enumerate_loop_keeps_the_users_index():
    _, text = desugared(P.over_enumerate)
    assert body_text(text) == (
        "s = 0.0\n"
        "for i in range(0, len(x), 1):\n"
        "    v = x[i]\n"
        "    s = s + i * v\n"
        "return s")


def test_break_becomes_flag_and_while_loop():
    _, text = desugared(P.with_break)
    assert body_text(text) == (
        "s = 0.0\n"
        "_k = 0\n"
        "_stop = len(x)\n"
        "_step = 1\n"
        "_brk = False\n"
        "while not _brk and _k < _stop:\n"
        "    _i = _k\n"
        "    v = x[_i]\n"
        "    if v > 1.0:\n"
        "        _brk = True\n"
        "    if not _brk:\n"
        "        s = s + v * v\n"
        "    _k = _k + _step\n"
        "return s")


def test_break_in_zip_loop():
    _, text = desugared(P.break_in_zip)
    assert body_text(text) == (
        "s = 0.0\n"
        "_k = 0\n"
        "_stop = min(len(x), len(y))\n"
        "_step = 1\n"
        "_brk = False\n"
        "while not _brk and _k < _stop:\n"
        "    _i = _k\n"
        "    a = x[_i]\n"
        "    b = y[_i]\n"
        "    if a * b < 0.0:\n"
        "        _brk = True\n"
        "    if not _brk:\n"
        "        s = s + a * b\n"
        "    _k = _k + _step\n"
        "return s")


def test_loop_else_is_rejected_at_its_line():
    with pytest.raises(ad.UnsupportedSyntaxError, match="else: clause") as info:
        FunctionSource(P.loop_else)
    with open(P.__file__) as fh:
        line = next(i for i, t in enumerate(fh, 1) if t.rstrip().endswith("# <- loop_else"))
    assert info.value.lineno == line


def test_continue_becomes_flag_guarding_the_rest():
    _, text = desugared(P.with_continue)
    assert body_text(text) == (
        "s = 0.0\n"
        "for _i in range(0, len(x), 1):\n"
        "    v = x[_i]\n"
        "    _cnt = False\n"
        "    if v < 0.0:\n"
        "        _cnt = True\n"
        "    if not _cnt:\n"
        "        s = s + v * v\n"
        "return s")


def test_early_return_moves_the_rest_into_the_other_branch():
    _, text = desugared(P.early_return)
    assert body_text(text) == (
        "if t > 0.0:\n"
        "    _ret = np.sum(x * t)\n"
        "else:\n"
        "    y = x * x\n"
        "    _ret = np.sum(y)\n"
        "return _ret")


def test_return_in_loop_stops_the_loop_and_returns_after_it():
    _, text = desugared(P.return_in_loop)
    assert body_text(text) == (
        "_done = False\n"
        "s = 0.0\n"
        "_k = 0\n"
        "_stop = x.shape[0]\n"
        "_step = 1\n"
        "while not _done and _k < _stop:\n"
        "    i = _k\n"
        "    s = s + x[i] * x[i]\n"
        "    if s > 1.0:\n"
        "        _done = True\n"
        "    _k = _k + _step\n"
        "if _done:\n"
        "    _ret = s * 2.0\n"
        "else:\n"
        "    _ret = s\n"
        "return _ret")


def test_several_returns_in_a_loop_are_told_apart():
    _, text = desugared(P.two_returns_in_loop)
    assert "while not _done and i < x.shape[0]:" in text
    assert body_text(text).endswith(
        "if _which == 1:\n"
        "    _ret = s - x[i]\n"
        "elif _which == 2:\n"
        "    _ret = s * 2.0\n"
        "else:\n"
        "    _ret = s\n"
        "return _ret")


# -- invariants over every program --------------------------------------------------

PROGRAMS = [P.over_array, P.over_expression, P.over_zip, P.over_enumerate, P.with_break,
            P.break_in_zip, P.with_continue, P.early_return, P.return_in_loop,
            P.two_returns_in_loop]


@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__)
def test_invariants(fn):
    node, _ = desugared(fn)
    for n in gast.walk(node):
        assert not isinstance(n, (gast.Break, gast.Continue))
        if isinstance(n, gast.For):
            it = n.iter
            assert isinstance(it, gast.Call) and it.func.id == "range" and len(it.args) == 3
    returns = [n for n in gast.walk(node) if isinstance(n, gast.Return)]
    assert returns == [node.body[-1]]


@pytest.mark.parametrize("fn", [
    P.over_array, P.with_break, P.with_continue, P.over_expression, P.early_return,
    P.return_in_loop], ids=lambda f: f.__name__)
def test_created_statements_carry_a_users_line(fn):
    node = FunctionSource(fn).node
    first = node.lineno
    unplaced = [gast.dump(n) for n in gast.walk(node)
                if isinstance(n, gast.stmt) and n is not node and getattr(n, "lineno", first) <= first]
    assert unplaced == []


# -- the desugared function computes the same values ----------------------------------

VALUES = [
    (P.over_array, (np.array([0.5, -1.5, 2.0]),)),
    (P.over_expression, (np.arange(6.0).reshape(3, 2) / 5,)),
    (P.over_zip, (np.array([0.5, -1.5, 2.0]), np.array([1.0, 2.0]))),
    (P.over_enumerate, (np.array([0.5, -1.5, 2.0]),)),
    (P.with_break, (np.array([0.5, 0.7, 1.5, 0.2]),)),
    (P.with_break, (np.array([0.5, 0.7]),)),
    (P.with_continue, (np.array([0.5, -0.7, 1.5, -0.2]),)),
    (P.break_in_zip, (np.array([0.5, 0.7, -1.5, 0.2]), np.array([1.0, 2.0, 3.0]))),
    (P.early_return, (np.array([0.5, 1.5]), 2.0)),
    (P.early_return, (np.array([0.5, 1.5]), -2.0)),
    (P.return_in_loop, (np.array([0.1, 0.2]),)),
    (P.return_in_loop, (np.array([0.5, 1.0, 3.0]),)),
    (P.two_returns_in_loop, (np.array([0.5, -0.3, 2.0]),)),
    (P.two_returns_in_loop, (np.array([0.5, 1.3, 2.0]),)),
    (P.two_returns_in_loop, (np.array([0.5, 0.3, 0.2]),)),
]


@pytest.mark.parametrize("fn, args", VALUES, ids=lambda v: getattr(v, "__name__", ""))
def test_desugared_function_computes_the_same(fn, args):
    np.testing.assert_allclose(run_desugared(fn, *args), fn(*args), rtol=1e-15)


# -- and is differentiated correctly -------------------------------------------------------

GRADS = [
    (P.over_array, np.array([0.5, -1.5, 2.0]), lambda x: 2 * x),
    (P.over_zip, np.array([0.5, -1.5, 2.0]), lambda x: np.array([1.0, 2.0, 0.0])),
    (P.over_enumerate, np.array([0.5, -1.5, 2.0]), lambda x: np.arange(3.0)),
    (P.with_break, np.array([0.5, 0.7, 1.5, 0.2]), lambda x: np.array([1.0, 1.4, 0.0, 0.0])),
    (P.with_continue, np.array([0.5, -0.7, 1.5]), lambda x: np.array([1.0, 0.0, 3.0])),
    (P.break_in_zip, np.array([0.5, -0.7, 1.5]), lambda x: np.array([1.0, 0.0, 0.0])),
    (P.return_in_loop, np.array([0.5, 1.0, 3.0]), lambda x: np.array([2.0, 4.0, 0.0])),
    (P.two_returns_in_loop, np.array([0.5, -0.3, 2.0]), lambda x: np.array([1.0, -1.0, 0.0])),
    (P.two_returns_in_loop, np.array([0.5, 1.3, 2.0]), lambda x: 4 * x),
]


@pytest.mark.parametrize("fn, x, want", GRADS, ids=lambda v: getattr(v, "__name__", ""))
def test_desugared_loops_differentiate(fn, x, want):
    args = (x, np.array([1.0, 2.0])) if fn in (P.over_zip, P.break_in_zip) else (x,)
    got = ad.grad(fn)(*args)
    np.testing.assert_allclose(got, want(x), rtol=1e-12)
    np.testing.assert_allclose(got, P.fd_grad(fn, args), rtol=1e-7, atol=1e-9)


def test_over_expression_gradient():
    m = np.arange(6.0).reshape(3, 2) / 5
    np.testing.assert_allclose(ad.grad(P.over_expression)(m), 8.0 * m, rtol=1e-12)
