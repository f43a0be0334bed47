"""The normalize pass: A-normal form.

``Program().lower`` turns a program of ``programs/passes.py`` into
:mod:`s2s_ad.ir`.  The tests check the pass's guarantees on the IR and on the
printed text: one primitive on atoms per statement, SSA names, one rule for
the operator/method/function spellings of an operation, static tuples, and
the ``S2S_AD_DUMP_AFTER=normalize`` dump, which is executed.
"""
import math
import os
import sys

import numpy as np
import pytest

import s2s_ad as ad
from s2s_ad import rules
from s2s_ad.codegen import printer as codegen
from s2s_ad.frontend.anf import Program
from s2s_ad.ir import Call, Const, For, If, Prim, Return, Slice, Tup, Var, While, walk

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs"))
import passes as P

X = np.array([0.3, -0.7, 1.1])
M = np.arange(6.0).reshape(2, 3) / 7


def lower(fn, nargs=None):
    """``fn`` lowered with every argument a leaf."""
    n = fn.__code__.co_argcount if nargs is None else nargs
    return Program().lower(fn, [None] * n)


def printed(lowered):
    """The lowered function as Python text (what ``S2S_AD_DUMP_AFTER=normalize`` shows)."""
    w = codegen.Writer()
    codegen.primal(lowered, lowered.name, w, None)
    return w.text()


def code_lines(text):
    return [line.strip() for line in text.splitlines()
            if line.strip() and not line.strip().startswith("#")]


def is_atom(a):
    return isinstance(a, (Var, Const))


def is_operand(a):
    return is_atom(a) or (isinstance(a, Tup) and all(is_operand(i) for i in a.items))


def is_param(a):
    return is_operand(a) or (isinstance(a, Slice) and all(
        b is None or is_atom(b) for b in (a.lo, a.hi, a.step)))


# -- every statement is one primitive on atoms -------------------------------------

ANF_PROGRAMS = [P.nested_expression, P.reassigned, P.static_tuples, P.module_constants,
                P.calls_helper, P.with_break, P.with_continue, P.early_return, P.counted,
                P.mixed_activity, P.backend_loss]


@pytest.mark.parametrize("fn", ANF_PROGRAMS, ids=lambda f: f.__name__)
def test_every_statement_is_one_primitive_on_atoms(fn):
    lowered = lower(fn)
    for s in walk(lowered.body):
        if isinstance(s, Prim):
            assert all(is_operand(a) for a in s.args), s
            assert all(is_param(v) for v in s.params.values()), s
            assert all(isinstance(t, str) for t in s.targets)
        elif isinstance(s, Call):
            assert all(is_atom(a) for a in s.args), s
        elif isinstance(s, If):
            assert is_atom(s.cond)
        elif isinstance(s, For):
            assert all(is_atom(a) for a in (s.start, s.stop, s.step))
        elif isinstance(s, While):
            assert is_atom(s.cond)
        else:
            assert isinstance(s, Return) and s is lowered.body[-1]
            assert is_operand(s.value)
    returns = [s for s in walk(lowered.body) if isinstance(s, Return)]
    assert returns == [lowered.body[-1]]


def test_nested_expression_is_flattened_innermost_first():
    lowered = lower(P.nested_expression)
    assert [s.rule.name for s in lowered.body[:-1]] == [
        "np.sin", "np.multiply", "np.add", "np.exp", "np.sum"]
    assert code_lines(printed(lowered))[1:] == [
        "_t1 = np.sin(x)", "_t2 = _t1 * 2.0", "_t3 = _t2 + x", "_t4 = np.exp(_t3)",
        "_t5 = rt.sum(_t4)", "return _t5"]


def test_statements_carry_the_users_line():
    lowered = lower(P.nested_expression)
    line = P.nested_expression.__code__.co_firstlineno + 1
    for s in lowered.body:
        assert (s.loc.filename, s.loc.lineno) == (P.__file__, line)
    assert f"[line {line}]" in printed(lowered)


# -- SSA -------------------------------------------------------------------------------


def test_reassigned_variable_gets_fresh_names():
    lowered = lower(P.reassigned)
    targets = [t for s in walk(lowered.body) if isinstance(s, (Prim, Call)) for t in s.targets]
    assert targets == ["y", "y_1", "y_2", "_t4"]
    lines = code_lines(printed(lowered))
    assert lines[1:4] == ["y = x * 2.0", "y_1 = y + 1.0", "y_2 = np.sin(y_1)"]


@pytest.mark.parametrize("fn", [P.nested_expression, P.reassigned, P.static_tuples,
                                P.module_constants, P.calls_helper, P.commented],
                         ids=lambda f: f.__name__)
def test_straight_line_code_assigns_each_name_once(fn):
    lowered = lower(fn)
    targets = [t for s in walk(lowered.body) if isinstance(s, (Prim, Call)) for t in s.targets]
    assert len(targets) == len(set(targets))
    assert not set(targets) & set(lowered.params)


def test_names_joined_after_a_branch_are_assigned_once_per_branch():
    lowered = lower(P.mixed_activity)
    branch = next(s for s in lowered.body if isinstance(s, If))
    for name in branch.joins:
        in_body = [t for s in walk(branch.body) if isinstance(s, Prim) for t in s.targets]
        in_else = [t for s in walk(branch.orelse) if isinstance(s, Prim) for t in s.targets]
        assert in_body.count(name) == 1 and in_else.count(name) == 1
    outside = [t for s in lowered.body if isinstance(s, Prim) for t in s.targets]
    assert len(outside) == len(set(outside))


def test_ssa_names_compute_the_users_value():
    np.testing.assert_allclose(ad.grad(P.reassigned)(X), 2 * np.cos(2 * X + 1), rtol=1e-12)


# -- one rule for every spelling ---------------------------------------------------------

SPELLINGS = [
    pytest.param(P.sum_method, P.sum_function, "np.sum", id="sum"),
    pytest.param(P.mul_operator, P.mul_function, "np.multiply", id="multiply"),
    pytest.param(P.matmul_operator, P.matmul_function, "np.matmul", id="matmul"),
    pytest.param(P.pow_operator, P.pow_function, "np.power", id="power"),
    pytest.param(P.neg_operator, P.neg_function, "np.negative", id="negative"),
    pytest.param(P.abs_builtin, P.abs_function, "np.abs", id="abs"),
    pytest.param(P.reshape_method, P.reshape_function, "np.reshape", id="reshape"),
    pytest.param(P.transpose_attribute, P.transpose_function, "np.transpose", id="transpose"),
]


def _statements(fn):
    return [(type(s).__name__, getattr(s, "rule", None), getattr(s, "targets", None),
             getattr(s, "args", None), getattr(s, "params", None), getattr(s, "value", None))
            for s in lower(fn).body]


@pytest.mark.parametrize("short, long, rule", SPELLINGS)
def test_spellings_lower_to_one_rule(short, long, rule):
    assert _statements(short) == _statements(long)
    assert lower(short).body[0].rule is rules.RULES[rule]
    assert code_lines(printed(lower(short)))[1:] == code_lines(printed(lower(long)))[1:]


def test_attribute_T_is_the_transpose_rule():
    assert lower(P.transpose_attribute).body[0].rule is rules.RULES["np.transpose"]


def test_attribute_T_differentiates():
    y = np.array([[1.0, -2.0], [0.5, 3.0]])
    x = np.array([[0.2, 0.4, -0.1], [0.3, -0.5, 0.7]])
    # d/dx sum((x.T @ y)**2) = 2 * y @ (x.T @ y).T
    want = 2 * y @ (x.T @ y).T
    np.testing.assert_allclose(ad.grad(P.transpose_loss)(x, y), want, rtol=1e-12)


def test_method_and_function_sum_differentiate_alike():
    w = np.array([1.0, -2.0, 0.5])
    for fn in (P.sum_method, P.sum_function):
        out, back = ad.vjp(fn, M)
        np.testing.assert_allclose(out, M.sum(axis=0), rtol=1e-15)
        np.testing.assert_allclose(back(w)[0], np.broadcast_to(w, M.shape), rtol=1e-15)


# -- tuples are static ---------------------------------------------------------------------


def test_tuples_are_never_built_at_run_time():
    lowered = lower(P.static_tuples)
    prims = [s for s in walk(lowered.body) if isinstance(s, Prim)]
    assert [s.rule.name for s in prims] == ["np.multiply", "np.multiply"]
    assert not any(isinstance(a, Tup) for s in prims for a in s.args)
    # `t`, `a, b = t` and `pair[1][0]` left no statement; the output is a static tree
    assert lowered.out_tree == Tup((Var("_t2"), Tup((Var("x"), Tup((Var("b"), Const(3.0)))))))
    assert code_lines(printed(lowered))[-1] == "return (_t2, (x, (b, 3.0)))"


def test_tuple_parameters_are_flattened_to_leaves():
    lowered = Program().lower(P.static_tuples, [(None, (None, None))])
    assert lowered.params == ["x_0", "x_1_0", "x_1_1"]
    assert lowered.param_trees == [Tup((Var("x_0"), Tup((Var("x_1_0"), Var("x_1_1")))))]


def test_static_tuples_vjp():
    out, back = ad.vjp(P.static_tuples, X)
    np.testing.assert_allclose(out[0], 2 * X * X, rtol=1e-15)
    ct = (np.ones(3), (np.full(3, 2.0), (np.full(3, -1.0), 5.0)))
    # d/dx of <ct, (2x^2, (x, (2x, 3)))> = 4x + 2 - 2
    np.testing.assert_allclose(back(ct)[0], 4 * X, rtol=1e-12)


# -- the dump -------------------------------------------------------------------------------


def test_dump_after_normalize_prints_lowered_source(monkeypatch, capsys):
    monkeypatch.setenv("S2S_AD_DUMP_AFTER", "normalize")
    g = ad.grad(P.reassigned)
    g(X)
    err = capsys.readouterr().err
    assert err.startswith("# ---- s2s_ad: after normalize ----\n")
    assert "after reverse" not in err and "after generate" not in err
    text = err.split("\n", 1)[1]
    assert "def reassigned(x):" in text and "y_1 = y + 1.0" in text
    # the dump is runnable Python computing the user's function
    namespace = {"np": np, "math": math, "rt": ad.runtime}
    exec(compile(text, "<dump>", "exec"), namespace)  # noqa: S102
    np.testing.assert_allclose(namespace["reassigned"](X), P.reassigned(X), rtol=1e-15)


def test_dump_after_several_passes(monkeypatch, capsys):
    monkeypatch.setenv("S2S_AD_DUMP_AFTER", "normalize, reverse")
    ad.grad(P.nested_expression)(X)
    err = capsys.readouterr().err
    assert "after normalize" in err and "after reverse" in err and "after generate" not in err
    assert err.index("after normalize") < err.index("after reverse")
    assert "def grad_nested_expression(x):" in err.split("after reverse")[1]


def test_no_dump_by_default(monkeypatch, capsys):
    monkeypatch.delenv("S2S_AD_DUMP_AFTER", raising=False)
    ad.grad(P.nested_expression)(X)
    assert "s2s_ad: after" not in capsys.readouterr().err
