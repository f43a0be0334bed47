"""The activity analysis: only names on a path from a differentiated input to
the output get adjoints.

A name is *active* when it depends on a differentiated input (varied) and
influences the seeded output (useful).  The tests call
``activity.analyse`` on lowered programs of ``programs/passes.py`` and check
the generated source: an inactive name ``a`` has no adjoint ``ba`` (nor
``ba_1``...).  Every gradient is checked by hand and against central
finite differences, since leaving an adjoint out must not change a value.
"""
import ast
import os
import re
import sys

import numpy as np
import pytest

import s2s_ad as ad
from s2s_ad.analyses.activity import analyse
from s2s_ad.frontend.anf import Program

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs"))
import passes as P

X = np.array([0.3, -0.7, 1.1])
Y = np.array([0.5, 0.2, -0.4])


def code(source):
    """``source`` without its comments (which quote the user's lines)."""
    return ast.unparse(ast.parse(source))


def adjoints(source):
    """The primal names that have an adjoint in ``source``: ``x`` for ``bx`` or
    ``bx_1``, and ``_t`` for the adjoints ``bt1``, ``bt2``... of temporaries."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and \
                node.id.startswith("b"):
            base = re.sub(r"_\d+$", "", node.id[1:])
            out.add("_t" if re.fullmatch(r"t\d+", base) else base)
    return out


def activity(fn, wrt):
    lowered = Program().lower(fn, [None] * fn.__code__.co_argcount)
    seeds = [leaf.name for leaf in lowered.out_tree.leaves()] if hasattr(
        lowered.out_tree, "leaves") else [lowered.out_tree.name]
    return analyse(lowered, wrt, seeds)


# -- the analysis --------------------------------------------------------------------


def test_varied_and_useful_sets():
    act = activity(P.mixed_activity, ["x"])
    assert {"x", "c"} <= {n for n in act.varied if n in act.useful}
    assert "a" in act.useful and "a" not in act.varied     # reaches the output, not from x
    assert "d" in act.varied and "d" not in act.useful     # from x, reaches only a test
    assert "y" not in act and "a" not in act and "d" not in act
    assert "x" in act and "c" in act


def test_activity_flips_with_the_differentiated_argument():
    act = activity(P.mixed_activity, ["y"])
    assert "y" in act and "a" in act and "c" in act
    assert "x" not in act and "d" not in act


# -- the generated code ------------------------------------------------------------------


def test_inactive_names_get_no_adjoint():
    g = ad.grad(P.mixed_activity)
    source = ad.source(g, X, Y)
    assert adjoints(source) == {"x", "c", "_t"}
    assert not re.search(r"\bb[day](_\d+)?\b", code(source))
    want = np.sin(Y) * (2.0 if np.sum(np.exp(X)) > 1.0 else 1.0)
    np.testing.assert_allclose(g(X, Y), want, rtol=1e-12)
    np.testing.assert_allclose(g(X, Y), P.fd_grad(P.mixed_activity, (X, Y)), rtol=1e-7)


def test_other_argument_makes_other_names_active():
    g = ad.grad(P.mixed_activity, argnums=1)
    source = ad.source(g, X, Y)
    assert adjoints(source) == {"y", "a", "c", "_t"}
    assert not re.search(r"\bb[xd](_\d+)?\b", code(source))
    want = X * np.cos(Y) * (2.0 if np.sum(np.exp(X)) > 1.0 else 1.0)
    np.testing.assert_allclose(g(X, Y), want, rtol=1e-12)
    np.testing.assert_allclose(g(X, Y), P.fd_grad(P.mixed_activity, (X, Y), 1), rtol=1e-7)


def test_stop_gradient_cuts_activity():
    g = ad.grad(P.stopped)
    source = ad.source(g, X)
    assert adjoints(source) == {"x", "_t"}
    assert not re.search(r"\bbs(_\d+)?\b", code(source))
    act = activity(P.stopped, ["x"])
    assert "s" not in act
    # d/dx sum(stop(x^2) * x) = x^2 (the stopped factor is a constant)
    np.testing.assert_allclose(g(X), X * X, rtol=1e-12)


def test_integer_loop_counters_are_inactive():
    g = ad.grad(P.counted)
    source = ad.source(g, X)
    assert adjoints(source) == {"x", "acc", "_t"}
    for counter in ("n", "i", "k"):
        assert not re.search(rf"\bb{counter}(_\d+)?\b", code(source)), counter
    act = activity(P.counted, ["x"])
    assert not {"n", "i", "k"} & {n.rstrip("_0123456789") for n in act.varied & act.useful}
    np.testing.assert_allclose(g(X), P.fd_grad(P.counted, (X,)), rtol=1e-7)


@pytest.mark.parametrize("fn, args", [(P.mixed_activity, (X, Y)), (P.counted, (X,)),
                                      (P.dead_code, (X, np.abs(Y)))],
                         ids=lambda v: getattr(v, "__name__", ""))
def test_every_adjoint_belongs_to_an_active_name(fn, args):
    """Each ``bname`` in the code is the adjoint of a name the analysis calls active."""
    lowered = Program().lower(fn, [None] * len(args))
    act = analyse(lowered, ["x"], [lowered.out_tree.name])
    source = ad.source(ad.grad(fn), *args)
    for var in adjoints(source) - {"_t"}:
        assert any(n == var or re.fullmatch(rf"{var}_\d+", n) for n in act.varied & act.useful), var
