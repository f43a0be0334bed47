"""The reverse pass: the text of generated VJP code, executed.

For programs of ``programs/passes.py`` the tests read ``ad.source`` and
check what the reverse pass promises: adjoints named after their primal
(``x`` -> ``bx``), ``# adjoint of: <user line>  [line N]`` comments in
reverse order with the user's real line numbers, one ``fwd_h``/``bwd_h``
pair per helper however often it is called, primal code the adjoint does not
need left out.  The source is then executed on its own (``exec``) and its
gradients compared with central finite differences and closed forms.
"""
import ast
import os
import re
import sys

import numpy as np
import pytest

import s2s_ad as ad

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs"))
import passes as P

X = np.array([0.3, -0.7, 1.1])
W = np.array([0.5, 0.2, -0.4])
COMMENT = re.compile(r"^\s*# (adjoint of: )?(.*?)  \[line (\d+)\]$")


def marked(key):
    with open(P.__file__) as fh:
        hits = [i for i, line in enumerate(fh, 1) if line.rstrip().endswith(f"# <- {key}")]
    assert len(hits) == 1, key
    return hits[0]


def comments(source):
    """[(is adjoint, user text, line)] of the location comments, in order."""
    out = []
    for line in source.splitlines():
        m = COMMENT.match(line)
        if m:
            out.append((bool(m.group(1)), m.group(2), int(m.group(3))))
    return out


def functions(source):
    """{name: ast.FunctionDef} of the generated module."""
    return {n.name: n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)}


def stored(fn_node):
    return {n.id for n in ast.walk(fn_node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def run_source(source, entry, *args, **consts):
    """Execute generated ``source`` as a fresh module and call ``entry``."""
    namespace = dict(consts)
    exec(compile(source, f"<{entry}>", "exec"), namespace)  # noqa: S102
    return namespace[entry](*args)


def entry_of(source):
    return re.search(r"^# Entry point: (\w+)\.", source, re.MULTILINE).group(1)


# -- names and comments --------------------------------------------------------------


@pytest.fixture(scope="module")
def commented_source():
    return ad.source(ad.grad(P.commented, argnums=(0, 1)), X, W)


def test_entry_and_adjoint_names(commented_source):
    fns = functions(commented_source)
    assert list(fns) == ["grad_commented"]
    assert [a.arg for a in fns["grad_commented"].args.args] == ["x", "w"]
    assert {"bx", "bw", "by", "bz"} <= stored(fns["grad_commented"])


def test_comments_carry_the_users_lines_in_reverse(commented_source):
    lines = {k: marked(f"commented_{k}") for k in ("sin", "mul", "return")}
    found = comments(commented_source)
    forward = [line for adj, _, line in found if not adj]
    backward = [line for adj, _, line in found if adj]
    # The return line's z * z is not computed before the adjoint sweep: its sum's
    # adjoint needs only the shape, which z has.
    assert forward == [lines["sin"], lines["mul"]]
    assert backward == [lines["return"], lines["mul"], lines["sin"]]
    texts = {line: text for _, text, line in found}
    assert texts[lines["sin"]].startswith("y = np.sin(x)")
    assert texts[lines["mul"]].startswith("z = y * w")
    assert "# adjoint of: y = np.sin(x)" in commented_source


def test_each_adjoint_block_follows_its_comment(commented_source):
    body = commented_source.split("# adjoint of: y = np.sin(x)")[1]
    assert re.search(r"^\s+bx = by \* np\.cos\(x\)$", body, re.MULTILINE)


@pytest.mark.parametrize("fn, args", [
    (P.commented, (X, W)), (P.two_calls, (X,)), (P.counted, (X,)), (P.with_break, (X,)),
    (P.over_expression, (np.ones((3, 2)),)),
], ids=lambda v: getattr(v, "__name__", ""))
def test_comments_point_into_the_body(fn, args):
    first = fn.__code__.co_firstlineno
    source = ad.source(ad.grad(fn), *args)
    found = comments(source.split(f"def grad_{fn.__name__}(")[1])     # the entry's own
    assert found and all(line > first for _, _, line in found)
    assert not any(text.startswith("def ") for _, text, _ in found)


@pytest.mark.parametrize("make, name", [
    (lambda f: ad.grad(f), "grad_reassigned"),
    (lambda f: ad.value_and_grad(f), "value_and_grad_reassigned"),
])
def test_entry_names_per_transform(make, name):
    assert entry_of(ad.source(make(P.reassigned), X)) == name


def test_vjp_entry_name():
    _, back = ad.vjp(P.reassigned, X)
    assert entry_of(ad.source(back)) == "vjp_reassigned"


# -- helpers ------------------------------------------------------------------------------


def test_helper_called_twice_is_generated_once():
    source = ad.source(ad.grad(P.two_calls), X)
    defs = [n for n in functions(source)]
    assert defs.count("fwd_smooth") == 1 and defs.count("bwd_smooth") == 1
    code = ast.unparse(ast.parse(source))
    assert len(re.findall(r"\bfwd_smooth\(", code)) == 1 + 2    # the def and two calls
    assert len(re.findall(r"\bbwd_smooth\(", code)) == 1 + 2
    assert "def grad_smooth" not in source


def test_inactive_call_runs_the_plain_helper():
    source = ad.source(ad.grad(P.mixed_calls), X)
    defs = list(functions(source))
    assert sorted(defs) == ["bwd_smooth", "fwd_smooth", "grad_mixed_calls", "smooth"]
    assert re.search(r"^\s+b = smooth\(W\)$", source, re.MULTILINE)


def _smooth_prime(v):
    return np.tanh(v) + v * (1 - np.tanh(v) ** 2)


def test_helper_gradients():
    h = np.tanh(X) * X
    want = _smooth_prime(2 * h) * 2 * _smooth_prime(X)
    np.testing.assert_allclose(ad.grad(P.two_calls)(X), want, rtol=1e-12)
    np.testing.assert_allclose(ad.grad(P.mixed_calls)(X), P.fd_grad(P.mixed_calls, (X,)),
                               rtol=1e-7)


# -- dead code --------------------------------------------------------------------------------


def test_grad_drops_primal_code_the_adjoint_does_not_need():
    g = ad.grad(P.dead_code)
    w = np.abs(W) + 0.1
    source = ad.source(g, X, w)
    code = ast.unparse(ast.parse(source))
    for gone in ("arctan", "log1p", "np.log", "unused", "penalty"):
        assert gone not in code, gone
    np.testing.assert_allclose(g(X, w), np.cos(X) - X * np.sin(X), rtol=1e-12)


def test_value_and_grad_keeps_what_the_value_needs():
    vg = ad.value_and_grad(P.dead_code)
    w = np.abs(W) + 0.1
    code = ast.unparse(ast.parse(ad.source(vg, X, w)))
    assert "np.log(w)" in code
    assert "arctan" not in code and "log1p" not in code
    value, grad = vg(X, w)
    np.testing.assert_allclose(value, P.dead_code(X, w), rtol=1e-14)
    np.testing.assert_allclose(grad, np.cos(X) - X * np.sin(X), rtol=1e-12)


def test_grad_drops_a_while_loop_only_the_value_reads():
    source = ad.source(ad.grad(P.value_only_while), X)
    assert not any(isinstance(n, ast.While) for n in ast.walk(ast.parse(source)))


def test_value_only_while_gradient():
    np.testing.assert_allclose(ad.grad(P.value_only_while)(X), 2 * X, rtol=1e-12)


# -- the source runs on its own ------------------------------------------------------------------


EXECUTED = [
    (P.commented, (X, W), (0, 1)),
    (P.two_calls, (X,), (0,)),
    (P.dead_code, (X, np.abs(W) + 0.1), (0,)),
    (P.counted, (X,), (0,)),
    (P.with_break, (np.array([0.5, 0.7, 1.5, 0.2]),), (0,)),
    (P.over_zip, (X, W), (0, 1)),
]


@pytest.mark.parametrize("fn, args, argnums", EXECUTED, ids=lambda v: getattr(v, "__name__", ""))
def test_executed_source_gives_finite_difference_gradients(fn, args, argnums):
    source = ad.source(ad.grad(fn, argnums=argnums), *args)
    assert "module constants" not in source      # nothing to bind: exec runs it as is
    value, grads = run_source(source, entry_of(source), *args)
    assert value is None                          # grad does not compute the value
    assert len(grads) == len(argnums)
    for g, i in zip(grads, argnums):
        assert g.shape == args[i].shape and g.dtype == args[i].dtype
        np.testing.assert_allclose(g, P.fd_grad(fn, args, i), rtol=1e-7, atol=1e-9)


def test_executed_source_with_a_module_constant():
    source = ad.source(ad.grad(P.module_constants), X)
    assert "# module constants bound at import: W" in source
    _, (g,) = run_source(source, "grad_module_constants", X, W=P.W)
    np.testing.assert_allclose(g, P.fd_grad(P.module_constants, (X,)), rtol=1e-7)


# -- early return ------------------------------------------------------------------------------


@pytest.mark.parametrize("t", [2.0, -2.0], ids=["taken", "not-taken"])
def test_early_return_gradient(t):
    x = np.array([0.5, 1.5])
    want = np.full(2, t) if t > 0 else 2 * x
    np.testing.assert_allclose(ad.grad(P.early_return)(x, t), want, rtol=1e-12)
