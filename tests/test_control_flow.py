"""Reverse mode through control flow, on the corpus in programs/control_flow.py.

Every program's gradient is checked against central finite differences (the
dot-product test of ``s2s_ad.testing``) on both backends: ``python`` runs
the generated NumPy code, ``numba`` runs ``ad.jit(ad.grad(f))``.  Programs
with array outputs are checked through ``ad.vjp``.  The primal under
``ad.jit`` must equal the Python function, and the generated code must keep
the shape of the user's code: one reversed loop per loop, comments that
carry the user's lines.

Known compiler bugs are marked ``xfail(strict=True)`` in ``KNOWN_BUGS``:
when a fix lands the mark fails loudly and should be removed.
"""
import ast
import inspect
import pathlib
import re

import numpy as np
import pytest
from conftest import as_float32, is_float_tree, known_params, load_program

import s2s_ad as ad
from s2s_ad.ir import pytree as ad_pytree
from s2s_ad.testing import check_grad, check_vjp

cf = load_program(pathlib.Path(__file__).resolve().parent / "programs" / "control_flow.py")

CASES = {fn.__name__: (fn, make, argnums) for fn, make, argnums in cf.CORPUS}
ARRAY_CASES = {fn.__name__: (fn, make) for fn, make in cf.ARRAY_CORPUS}
TARGETS = {"python": "python", "numba": "cpu"}

# -- known bugs ---------------------------------------------------------------

# (test, program, backend or None for every backend) -> reason
KNOWN_BUGS = {}


def _params(test, names, backends=(None,)):
    return known_params(KNOWN_BUGS, test, names, backends)


def _same_args(got, want):
    """``got`` (arguments after a call) still equals a fresh ``want``."""
    if isinstance(want, (tuple, list)):
        return all(_same_args(g, w) for g, w in zip(got, want))
    return np.array_equal(got, want)


# -- gradients ------------------------------------------------------------------


@pytest.mark.parametrize("name, backend", _params("grad", CASES, TARGETS))
def test_grad(name, backend):
    fn, make, argnums = CASES[name]
    args = make()
    check_grad(fn, args, argnums, target=TARGETS[backend])
    assert _same_args(args, make()), "the gradient wrote into the caller's arrays"


@pytest.mark.parametrize("name, backend", _params("vjp", ARRAY_CASES, TARGETS))
def test_vjp_array_output(name, backend):
    fn, make = ARRAY_CASES[name]
    args = make()
    check_vjp(fn, args, target=TARGETS[backend])
    assert _same_args(args, make()), "the vjp wrote into the caller's arrays"


@pytest.mark.parametrize("name", _params("vjp_scalar", CASES))
def test_vjp_scalar_output(name):
    """vjp with a random scalar cotangent, differentiating every float argument."""
    fn, make, _ = CASES[name]
    check_vjp(fn, make())


@pytest.mark.parametrize("name", _params("value_and_grad", CASES))
def test_value_and_grad(name):
    fn, make, argnums = CASES[name]
    value, grads = ad.value_and_grad(fn, argnums)(*make())
    np.testing.assert_allclose(value, fn(*make()), rtol=1e-12, atol=1e-14)
    want = ad.grad(fn, argnums)(*make())
    for g, w in zip(grads if isinstance(argnums, tuple) else (grads,),
                    want if isinstance(argnums, tuple) else (want,)):
        for a, b in zip(_leaves(g), _leaves(w)):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def _leaves(x):
    return [v for item in x for v in _leaves(item)] if isinstance(x, (tuple, list)) else [x]


FLOAT32 = ["cumsum_sq", "recurrence", "row_loop", "while_continue", "piecewise"]


@pytest.mark.parametrize("name, backend", _params("float32", FLOAT32, TARGETS))
def test_grad_float32(name, backend):
    """float32 arguments through loops: float32 gradients (checked by check_grad)."""
    fn, make, argnums = CASES[name]
    check_grad(fn, as_float32(make()), argnums, target=TARGETS[backend])


# -- the primal under ad.jit ------------------------------------------------------

PRIMALS = {**{k: (fn, make) for k, (fn, make, _) in CASES.items()}, **ARRAY_CASES}


@pytest.mark.parametrize("name", _params("jit_primal", PRIMALS))
def test_jit_primal_matches_python(name):
    fn, make = PRIMALS[name]
    got, want = ad.jit(fn)(*make()), fn(*make())
    for a, b in zip(_leaves(got), _leaves(want)):
        assert np.shape(a) == np.shape(b)
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


# -- the shape of the generated code ---------------------------------------------

LINE = re.compile(r"#\s*(adjoint of: |restore: )?(.*?)  \[line (\d+)\]$")


def _grad_source(name):
    fn, make, argnums = CASES[name]
    return ad.source(ad.grad(fn, argnums), *make())


def _functions(source):
    """{generated function name: its text}."""
    tree = ast.parse(source)
    lines = source.splitlines()
    return {n.name: "\n".join(lines[n.lineno - 1:n.end_lineno])
            for n in tree.body if isinstance(n, ast.FunctionDef)}


def _user_loops(fn):
    """Absolute line numbers of the loops in ``fn``'s own body."""
    src, first = inspect.getsourcelines(fn)
    tree = ast.parse("".join(src))
    return sorted(first + n.lineno - 1 for n in ast.walk(tree) if isinstance(n, (ast.For, ast.While)))


def _reversed_loops(text):
    """{user line: how many reversed loops} in ``text``: the loops that follow
    a ``# adjoint of: for/while ...  [line N]`` comment.  (The same comment
    also heads the adjoint of the element reads of ``for a, b in zip(x, y)``.)"""
    lines = text.splitlines()
    found = {}
    for k, line in enumerate(lines[:-1]):
        m = LINE.search(line.strip())
        if (m and m.group(1) == "adjoint of: " and re.match(r"(for|while)\b", m.group(2))
                and re.match(r"for \w+ in range\(", lines[k + 1].strip())):
            found[int(m.group(3))] = found.get(int(m.group(3)), 0) + 1
    return found


LOOPY = ["cumsum_sq", "power_iter", "triangle", "matrix_fill", "recurrence", "newton_while",
         "newton_partial", "while_continue", "zip_loop", "enumerate_loop", "row_loop",
         "nested_break", "break_threshold", "ode_rk2", "data_bounds"]


@pytest.mark.parametrize("name", _params("reversed_loops", LOOPY))
def test_one_reversed_loop_per_loop(name):
    """Each loop is reversed once, or (a scalar while loop with few
    differentiated inputs, see s2s_ad.transforms.mixed) runs once in forward mode."""
    fn = CASES[name][0]
    functions = _functions(_grad_source(name))
    entry = functions[f"grad_{name}"]
    loops = _user_loops(fn)
    forward = {line for line in loops if f"jvp_{name}_while{line}" in functions}
    assert _reversed_loops(entry) == {line: 1 for line in loops if line not in forward}
    for line in forward:
        jvp = ast.parse(functions[f"jvp_{name}_while{line}"])
        assert sum(isinstance(n, ast.While) for n in ast.walk(jvp)) == 1
    # ... and the primal sweep keeps the loops whose values the adjoint reads
    # (all of them, in these programs).
    tree = ast.parse(entry)
    assert sum(isinstance(n, (ast.For, ast.While)) for n in ast.walk(tree)) == \
        2 * (len(loops) - len(forward))


@pytest.mark.parametrize("name", _params("reversed_loops", ["looping_helper"]))
def test_helper_loop_reversed_once(name):
    """The helper's loop is reversed once, whether the helper is inlined or
    gets its own backward function."""
    loops = _user_loops(CASES[name][0]) + _user_loops(cf.horner)
    assert _reversed_loops(_grad_source(name)) == {line: 1 for line in loops}


@pytest.mark.parametrize("name", _params("line_comments", CASES))
def test_comments_carry_user_lines(name):
    """Every ``[line N]`` comment quotes line N of the user's file verbatim."""
    fn = CASES[name][0]
    with open(inspect.getsourcefile(fn)) as f:
        user = f.read().splitlines()
    source = _grad_source(name)
    quoted = [LINE.search(line.strip()) for line in source.splitlines()]
    quoted = [m for m in quoted if m]
    assert quoted
    for m in quoted:
        n = int(m.group(3))
        assert user[n - 1].strip() == m.group(2), f"line {n}: {m.group(0)!r}"


@pytest.mark.parametrize("name", _params("linear_time", ["recurrence", "fill_and_read",
                                                        "accumulate_at", "overwrite_needed",
                                                        "cumsum_sq", "triangle"]))
def test_reversed_loop_does_no_whole_array_work(name):
    """Element writes in a loop cost O(1) per reversed iteration: no copy of
    an adjoint array inside a reversed loop (that makes a loop over n
    elements cost O(n**2))."""
    entry = _functions(_grad_source(name))[f"grad_{name}"]
    lines = entry.splitlines()
    loop_indent = header = None
    for k, line in enumerate(lines):
        indent = len(line) - len(line.lstrip())
        if loop_indent is not None and k > header and line.strip() and indent <= loop_indent:
            loop_indent = None
        m = LINE.search(line.strip())
        if (loop_indent is None and m and m.group(1) == "adjoint of: "
                and re.match(r"(for|while)\b", m.group(2))):
            header = k + 1
            loop_indent = len(lines[header]) - len(lines[header].lstrip())
            continue
        if loop_indent is not None:
            assert "np.copy(" not in line, f"line {k + 1} of grad_{name}: {line.strip()}"


def test_generated_loop_reads_like_the_users():
    """The cumulative-sum gradient, spelled out: the primal loop records the
    running sum on a stack allocated for its trips, the adjoint loop runs
    backwards over the same range and reads it back from the top."""
    source = _grad_source("cumsum_sq")
    entry = _functions(source)["grad_cumsum_sq"]
    line = inspect.getsourcelines(cf.cumsum_sq)[1] + 4
    assert f"# adjoint of: for i in range(x.shape[0]):  [line {line}]" in entry
    assert re.search(r"for i in range\((\w+) - 1, -1, -1\):", entry)
    assert re.search(r"s_stack = rt.float_stack\(len\(range\((\w+)\)\)\)\n *s_top = 0\n"
                     r" *for i in range\(\1\):", entry), entry
    assert "s_stack[s_top] = s\n" in entry and "s_top += 1" in entry
    assert "s_top -= 1\n" in entry and "s = s_stack[s_top]\n" in entry


# -- Jacobian rows in one compiled call ------------------------------------------------------

ROWS_CASES = dict(ARRAY_CASES)
ROWS_CASES.update((name, (fn, make)) for name, (fn, make, _) in list(CASES.items())[::9])


@pytest.mark.parametrize("name", ROWS_CASES)
@pytest.mark.parametrize("mode, reference", [("jacrev", "jacfwd"), ("jacfwd", "jacrev")])
def test_compiled_jacobians_in_vector_mode(name, mode, reference):
    """Under jit, jacrev is one primal sweep then adjoint sweeps carrying up to 16
    rows, and jacfwd one JVP carrying up to 16 unit tangents; each is checked
    against the other mode on NumPy."""
    fn, make = ROWS_CASES[name]
    args = make()
    nums = tuple(i for i, a in enumerate(args) if is_float_tree(a))
    got = getattr(ad, mode)(ad.jit(fn), argnums=nums)(*args)
    want = getattr(ad, reference)(fn, argnums=nums)(*args)
    g_leaves, g_tree = ad_pytree.flatten(got)
    w_leaves, w_tree = ad_pytree.flatten(want)
    assert g_tree == w_tree
    for g, w in zip(g_leaves, w_leaves):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-11)
    assert _same_args(args, make()), "the Jacobian wrote into the caller's arrays"


def test_compiled_jacrev_source_shows_the_rows_function():
    fn, make = ARRAY_CASES["trajectory"]
    args = make()
    src = ad.source(ad.jacrev(ad.jit(fn)), *args)
    # 12 output elements: one adjoint sweep carries all 12 rows (vector mode)
    assert "adjoint sweeps that carry 12 unit cotangents of the output each" in src
    assert "for row in range(0, m, 12):" in src and "b_out_11 = rt.snapshot(b_outs[row + 11])" in src
    # the stacks are popped once per sweep, not once per row
    assert src.count("y_stack.pop()") == 1


# -- element writes save only what a read may still need ---------------------------------------


def _filled_then_used(p, x):
    L = np.zeros((3, 3))
    for c in range(3):
        L[c, c] = np.exp(p[c])
        for r in range(c + 1, 3):
            L[r, c] = p[2 + r + c]
    return np.sum((x @ L.T) ** 2)


def _read_then_overwritten(x):
    v = np.copy(x)
    s = 0.0
    for i in range(v.shape[0]):
        s = s + v[i] ** 3
        v[i] = np.sin(v[i])
    return s + np.sum(v ** 2)


@pytest.mark.parametrize("backend", TARGETS)
def test_writes_that_no_read_precedes_save_nothing(backend):
    p = np.array([0.1, -0.2, 0.3, 0.4, -0.5, 0.6])
    x = np.array([[0.5, -1.0, 0.25], [1.5, 0.3, -0.7]])
    check_grad(_filled_then_used, (p, x), (0, 1), target=TARGETS[backend])
    g = ad.grad(_filled_then_used)
    g(p, x)
    assert "_saved" not in ad.source(g, p, x)


@pytest.mark.parametrize("backend", TARGETS)
def test_writes_after_reads_keep_their_saves(backend):
    x = np.array([0.5, -1.0, 0.25, 1.5])
    check_grad(_read_then_overwritten, (x,), 0, target=TARGETS[backend])
    g = ad.grad(_read_then_overwritten)
    g(x)
    assert "v_saved" in ad.source(g, x)
