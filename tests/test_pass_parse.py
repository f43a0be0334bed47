"""The parse pass: free names resolved, the fence, locations in the user's file.

``FunctionSource`` reads a user function from ``programs/passes.py`` and must
resolve every free name to the object it denotes whatever the import form
(``import numpy as np``/``as onp``, ``from numpy import sin``, ``import
math``, ``from math import exp as e``), read module constants and closure
cells, and tell user helpers from library functions.  Each program is also
differentiated end to end, against central finite differences, and the
generated text is checked to reach NumPy through its own fixed alias.
"""
import ast
import builtins
import math
import os
import sys

import gast
import numpy as np
import pytest

import s2s_ad as ad
from s2s_ad.frontend.parse import FunctionSource, is_user_function

PROGRAMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs")
sys.path.insert(0, PROGRAMS)
import passes as P

X = np.array([0.3, -0.7, 1.1])


def marked(key):
    """The line number in passes.py of the line ending in ``# <- key``."""
    with open(P.__file__) as fh:
        hits = [i for i, line in enumerate(fh, 1) if line.rstrip().endswith(f"# <- {key}")]
    assert len(hits) == 1, key
    return hits[0]


def called(fn):
    """{dotted callee text: the object parse resolves it to} for every call in ``fn``."""
    src = FunctionSource(fn)
    out = {}
    for node in gast.walk(src.node):
        if isinstance(node, gast.Call):
            ok, obj = src.resolve(node.func)
            assert ok, gast.dump(node.func)
            out[_dotted(node.func)] = obj
    return out


def callee_roots(source):
    """The root names of every call in generated ``source`` (``np`` for ``np.sin(x)``),
    other than calls of the functions the module defines and of builtins."""
    tree = ast.parse(source)
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            while isinstance(f, ast.Attribute):
                f = f.value
            if not isinstance(f, ast.Name):
                continue
            if f is not node.func or f.id not in defined and f.id not in dir(builtins):
                roots.add(f.id)
    return roots


def _dotted(node):
    if isinstance(node, gast.Attribute):
        return _dotted(node.value) + "." + node.attr
    return node.id


# -- name resolution under import aliases ----------------------------------------

ALIASES = [
    (P.alias_np, {"np.sum": np.sum, "np.sin": np.sin}),
    (P.alias_onp, {"onp.sum": np.sum, "onp.cos": np.cos}),
    (P.alias_from, {"np.sum": np.sum, "sin": np.sin}),
    (P.alias_math, {"math.exp": math.exp, "math.sin": math.sin}),
    (P.alias_math_as, {"e": math.exp}),
]


@pytest.mark.parametrize("fn, want", ALIASES, ids=[f.__name__ for f, _ in ALIASES])
def test_callees_resolve_under_any_alias(fn, want):
    assert called(fn) == want


# (function, argument, derivative by hand, text the generated code must hold)
ALIAS_GRADS = [
    (P.alias_np, X, np.cos(X), "np.sin(x)"),
    (P.alias_onp, X, -np.sin(X), "np.cos(x)"),
    (P.alias_from, X, np.cos(X), "np.cos(x)"),    # sin(x) itself: not needed for the sum's adjoint
    (P.alias_math, 0.4, math.exp(0.4) * (math.sin(0.4) + math.cos(0.4)), "math.exp(t)"),
    (P.alias_math_as, 0.4, math.exp(0.4) * 1.4, "math.exp(t)"),
]


@pytest.mark.parametrize("fn, arg, want, text", ALIAS_GRADS,
                         ids=[f.__name__ for f, *_ in ALIAS_GRADS])
def test_aliases_differentiate_through_fixed_aliases(fn, arg, want, text):
    g = ad.grad(fn)
    np.testing.assert_allclose(g(arg), want, rtol=1e-12)
    np.testing.assert_allclose(g(arg), P.fd_grad(fn, (arg,)), rtol=1e-7)
    source = ad.source(g)
    assert text in source
    # generated code reaches NumPy and math through its own imports, never the user's
    assert callee_roots(source) <= {"np", "math", "rt"}


# -- constants, closures, helpers ----------------------------------------------------


def test_module_constants_resolve_to_their_objects():
    src = FunctionSource(P.module_constants)
    found = {n.id: src.lookup(n) for n in gast.walk(src.node)
             if isinstance(n, gast.Name) and n.id in ("W", "SCALE", "PAIR")}
    assert found["W"] is P.W and found["SCALE"] == 1.5 and found["PAIR"] == (2.0, -0.5)


def test_module_constants_array_bound_scalars_inlined():
    g = ad.grad(P.module_constants)
    got = g(X)
    want = P.W * P.SCALE + np.array([P.PAIR[0], 0.0, 0.0])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(got, P.fd_grad(P.module_constants, (X,)), rtol=1e-7)
    source = ad.source(g)
    # the array is bound into the generated module by name; the float is a literal
    assert "module constants bound at import: W (ndarray float64 (3,))" in source
    tree = ast.parse(source)
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert "W" in names and not {"SCALE", "PAIR"} & names
    assert 1.5 in {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)}




@pytest.mark.parametrize("fn, want", [
    (P.nested_constant, np.full(3, 2.0)),
    (P.numpy_scalar_constant, np.full(3, 2.5)),
    (P.tuple_of_arrays_constant, P.ARRAYS[0]),
    (P.list_constant, np.full(3, 2.0)),
], ids=lambda v: getattr(v, "__name__", ""))
def test_constant_kinds(fn, want):
    np.testing.assert_allclose(ad.grad(fn)(X), want, rtol=1e-12)


def test_closure_cells_resolve_to_their_values():
    src = FunctionSource(P.CLOSED)
    names = {n.id: src.lookup(n) for n in gast.walk(src.node)
             if isinstance(n, gast.Name) and n.id in ("k", "v")}
    assert names["k"] == 0.5
    np.testing.assert_array_equal(names["v"], [1.0, 2.0, 3.0])
    assert {"k", "v"}.isdisjoint(src.locals)


def test_closure_over_constants_differentiates():
    g = ad.grad(P.CLOSED)
    np.testing.assert_allclose(g(X), 0.5 * np.array([1.0, 2.0, 3.0]), rtol=1e-12)
    other = P.make_closure(-2.0, np.array([3.0, 0.0, 1.0]))
    np.testing.assert_allclose(ad.grad(other)(X), [-6.0, 0.0, -2.0], rtol=1e-12)


def test_closure_over_a_user_function():
    src = FunctionSource(P.CLOSED_HELPER)
    assert called(P.CLOSED_HELPER) == {"np.sum": np.sum, "h": P.square}
    assert is_user_function(src.lookup(gast.Name("h", gast.Load(), None, None)))
    np.testing.assert_allclose(ad.grad(P.CLOSED_HELPER)(X), 2 * X, rtol=1e-12)


def test_user_helpers_are_user_functions_library_calls_are_not():
    callees = called(P.calls_helper)
    assert callees["square"] is P.square and is_user_function(callees["square"])
    assert not is_user_function(callees["np.cos"])
    assert not is_user_function(called(P.uses_stop_gradient)["ad.stop_gradient"])
    assert not is_user_function(math.exp)


def test_user_helper_is_transformed_not_called_as_a_constant():
    g = ad.grad(P.calls_helper)
    want = 2 * X - 2 * np.cos(X) * np.sin(X)
    np.testing.assert_allclose(g(X), want, rtol=1e-12)
    source = ad.source(g)
    assert "def square(" in source or "def fwd_square(" in source
    assert "module constants" not in source    # the helper is generated code, not bound


def test_stop_gradient_resolves_under_the_package_alias():
    np.testing.assert_allclose(ad.grad(P.uses_stop_gradient)(X), X, rtol=1e-12)


# -- the fence and locations -------------------------------------------------------------


@pytest.mark.parametrize("fn, key, text", [(P.fenced_lambda, "lambda", "lambda"),
                                           (P.fenced_try, "try", "try:")])
def test_fence_points_at_the_users_line(fn, key, text):
    with pytest.raises(ad.UnsupportedSyntaxError) as info:
        FunctionSource(fn)
    err = info.value
    assert err.filename == P.__file__ and err.lineno == marked(key)
    assert err.text.strip().startswith(text) or text in err.text
    assert err.text[err.offset - 1:].startswith(text)


def test_fence_applies_when_the_transform_is_applied():
    with pytest.raises(ad.UnsupportedSyntaxError):
        ad.grad(P.fenced_lambda)


def test_loc_gives_the_users_file_and_line():
    src = FunctionSource(P.located)
    assigns = [n for n in src.node.body if isinstance(n, gast.Assign)]
    ret = src.node.body[-1]
    loc = src.loc(assigns[0])
    assert (loc.filename, loc.lineno) == (P.__file__, marked("located_sin"))
    assert loc.text.strip().startswith("y = np.sin(x)")
    assert loc.col == loc.text.index("y") + 1
    call = assigns[0].value
    assert src.loc(call).col == loc.text.index("np.sin") + 1
    assert src.loc(ret).lineno == marked("located_return")


def test_docstring_and_signature():
    src = FunctionSource(P.located)
    assert not isinstance(src.node.body[0], gast.Expr)     # docstring removed
    assert src.param_names == ["x"]
    assert src.first_lineno == P.located.__code__.co_firstlineno
