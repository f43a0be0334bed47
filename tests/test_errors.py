"""Every error path of the library: type, message and location.

The functions transformed here live in ``tests/programs/*.py`` because the
compiler reads source from files.  A line an error must point at ends in a
``# <- KEY`` marker; :func:`marked` finds that line, so each test asserts the
exact line (and, for syntax errors, the column of the construct) while the
fixture files stay free to grow.
"""
import functools
import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

import s2s_ad as ad

PROGRAMS = Path(__file__).resolve().parent / "programs"
X = np.linspace(0.1, 0.9, 3)


@functools.cache
def load(stem, module_name=None):
    """Import ``tests/programs/<stem>.py`` under a private module name."""
    name = module_name or f"programs_{stem}"
    spec = importlib.util.spec_from_file_location(name, PROGRAMS / f"{stem}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@functools.cache
def marked(stem, key):
    """(line number, line text) of the line ending in ``# <- key``."""
    lines = (PROGRAMS / f"{stem}.py").read_text().splitlines()
    hits = [(i, line) for i, line in enumerate(lines, 1) if line.endswith(f"# <- {key}")]
    assert len(hits) == 1, f"marker {key!r} must occur once in {stem}.py"
    return hits[0]


# -- syntax outside the differentiable subset --------------------------------
# (function, marker, words the message must contain, text at the error column)
FENCE = [
    ("use_lambda", "lambda", ["lambdas", "plain positional parameters"], "lambda"),
    ("use_listcomp", "listcomp", ["comprehension", "for loop"], "[x * i"),
    ("use_setcomp", "setcomp", ["comprehension"], "{x * i"),
    ("use_dictcomp", "dictcomp", ["comprehension"], "{i: x"),
    ("use_genexp", "genexp", ["generator expression"], "(x * i for"),
    ("use_yield", "yield", ["generator"], "yield"),
    ("use_yield_from", "yield_from", ["generator"], "yield from"),
    ("use_try", "try", ["try/except", "if"], "try:"),
    ("use_with", "with", ["with statement"], "with "),
    ("use_global", "global", ["global", "argument"], "global"),
    ("use_nested_def", "nested_def", ["decorators", "module level"], "def helper"),
    ("use_class", "class", ["class definition"], "class Box"),
    ("use_del", "del", ["del"], "del y"),
    ("use_import", "import", ["import", "module level"], "import math"),
    ("use_import_from", "import_from", ["import"], "from math"),
    ("use_raise", "raise", ["raise"], "raise"),
    ("use_print", "print", ["print()", "sep=", "file="], "print"),
    ("use_assert", "assert", ["assert"], "assert"),
    ("use_starred_call", "starred_call", ["*args", "explicitly"], "*parts"),
    ("use_dict", "dict", ["dict keys", "constant strings"], "1.5"),
    ("use_set", "set", ["set", "tuple"], "{x}"),
    ("use_fstring", "fstring", ["f-string"], 'f"x='),
    ("use_walrus", "walrus", [":=", "separate line"], "z := "),
    ("use_match", "match", ["match", "if/elif/else"], "match"),
    ("code_after_return", "after_return", ["after return", "unreachable"], "y = x"),
    ("bare_expression", "bare_expr", ["only an expression", "assign"], "np.sin(x)"),
    ("call_local", "call_local", ["can be called"], "h(x)"),
    ("unknown_method", "unknown_method", [".frobnicate()", "NumPy function"], "x.frobnicate"),
    ("unknown_array_attribute", "unknown_array_attribute", [".flavour"], "x.flavour"),
    ("unknown_module_attribute", "unknown_module_attribute", ["np.frobnicate", "not exist"],
     "np.frobnicate"),
    ("undefined_name", "undefined_name", ["'not_defined_anywhere'", "not defined"],
     "not_defined_anywhere"),
    ("recursive", "recursive", ["recursive call", "'recursive'", "loop"], "recursive(x"),
    ("calls_recursive", "recursive", ["recursive call", "'recursive'"], "recursive(x"),
    ("star_kwargs", "star_kwargs", ["**kwargs"], "def star_kwargs"),
    ("keyword_only", "keyword_only", ["keyword-only"], "def keyword_only"),
    ("positional_only", "positional_only", ["positional-only"], "def positional_only"),
    ("write_through_view", "write_through_view", ["view", "changes that array too"], "v[0]"),
    ("write_through_row", "write_through_row", ["view", "M[i, j] = v"], "row[0]"),
]


def assert_points_at(err, stem, key, at):
    """``err`` is a SyntaxError located at the marked line, column on ``at``."""
    lineno, line = marked(stem, key)
    assert isinstance(err, SyntaxError)
    assert err.filename == str(PROGRAMS / f"{stem}.py")
    assert err.lineno == lineno
    assert err.text.rstrip("\n") == line
    assert err.text[err.offset - 1:].startswith(at), (err.offset, err.text)


@pytest.mark.parametrize("fn_name, key, words, at", FENCE, ids=[f[0] for f in FENCE])
def test_unsupported_syntax(fn_name, key, words, at):
    fn = getattr(load("unsupported"), fn_name)
    with pytest.raises(ad.UnsupportedSyntaxError) as info:
        ad.grad(fn)(X)
    assert_points_at(info.value, "unsupported", key, at)
    for word in words:
        assert word in info.value.msg


def test_nonlocal_in_a_closure():
    fn = load("unsupported").make_nonlocal()
    with pytest.raises(ad.UnsupportedSyntaxError) as info:
        ad.grad(fn)(X)
    assert_points_at(info.value, "unsupported", "nonlocal", "nonlocal")
    assert "nonlocal" in info.value.msg


@pytest.mark.parametrize("transform", ["source", "jit", "vjp", "value_and_grad"])
def test_every_transform_reports_the_same_location(transform):
    fn = load("unsupported").use_lambda
    calls = {"source": lambda: ad.source(fn),
             "jit": lambda: ad.jit(fn, target="python")(X),
             "vjp": lambda: ad.vjp(fn, X),
             "value_and_grad": lambda: ad.value_and_grad(fn)(X)}
    with pytest.raises(ad.UnsupportedSyntaxError) as info:
        calls[transform]()
    assert_points_at(info.value, "unsupported", "lambda", "lambda")


def test_unsupported_syntax_prints_like_a_syntax_error():
    import traceback
    with pytest.raises(ad.UnsupportedSyntaxError) as info:
        ad.source(load("unsupported").use_try)
    lineno, _ = marked("unsupported", "try")
    text = "".join(traceback.format_exception_only(info.value))
    assert f'File "{PROGRAMS / "unsupported.py"}", line {lineno}' in text
    assert "    try:  # <- try\n    ^" in text


def test_star_args_signature_through_grad():
    with pytest.raises(ad.UnsupportedSyntaxError) as info:
        ad.grad(load("unsupported").star_args)(X)
    assert_points_at(info.value, "unsupported", "star_args", "def star_args")


def test_star_args_signature_through_source():
    with pytest.raises(ad.UnsupportedSyntaxError) as info:
        ad.source(load("unsupported").star_args)
    assert_points_at(info.value, "unsupported", "star_args", "def star_args")
    assert "*args" in info.value.msg


def test_call_local_names_the_variable():
    with pytest.raises(ad.UnsupportedSyntaxError) as info:
        ad.grad(load("unsupported").call_local)(X)
    assert "'h'" in info.value.msg


# -- calls without a derivative rule -----------------------------------------

def test_unknown_function_on_a_differentiated_path():
    fn = load("transform_errors").through_unknown
    with pytest.raises(ad.NonDifferentiableError) as info:
        ad.grad(fn)(X)
    err = info.value
    lineno, _ = marked("transform_errors", "unknown_call")
    assert isinstance(err, TypeError)
    assert err.filename == str(PROGRAMS / "transform_errors.py")
    assert err.lineno == lineno
    assert f"transform_errors.py:{lineno}" in str(err)
    assert "spacing" in str(err) and "custom_vjp" in str(err)


def test_unknown_function_inside_a_called_helper():
    fn = load("transform_errors").calls_helper_unknown
    with pytest.raises(ad.NonDifferentiableError) as info:
        ad.grad(fn)(X)
    lineno, _ = marked("transform_errors", "helper_unknown")
    assert info.value.lineno == lineno
    assert "spacing" in str(info.value)


def test_unknown_function_off_the_differentiated_path_works():
    m = load("transform_errors")
    c = np.array([0.5, 1.0, 2.0])
    np.testing.assert_allclose(ad.grad(m.unknown_off_path)(X, c), np.spacing(c))
    np.testing.assert_allclose(ad.grad(m.unknown_stopped)(X), np.spacing(X))
    assert ad.jit(m.through_unknown, target="python")(X) == pytest.approx(np.sum(np.spacing(2 * X)))


def test_user_module_named_like_numpy():
    m = load("numpy_user_code", module_name="numpy_user_code")
    np.testing.assert_allclose(ad.grad(m.uses_helper)(X), 2.0 * np.ones(3))


# -- bad arguments to the transforms -----------------------------------------

def test_non_scalar_output_for_grad():
    with pytest.raises(TypeError, match=r"vector_out.*scalar.*shape \(3,\)"):
        ad.grad(load("transform_errors").vector_out)(X)


def test_non_scalar_output_for_value_and_grad():
    with pytest.raises(TypeError, match=r"scalar.*shape \(3,\)"):
        ad.value_and_grad(load("transform_errors").vector_out)(X)


@pytest.mark.parametrize("argnums", ["0", 0.0, [0, 1], (), True, (0, "1")],
                         ids=["str", "float", "list", "empty", "bool", "tuple-with-str"])
def test_argnums_not_int(argnums):
    with pytest.raises(TypeError, match="argnums"):
        ad.grad(load("transform_errors").weighted, argnums=argnums)


@pytest.mark.parametrize("argnums", [2, -3, (0, 5)], ids=["2", "-3", "tuple"])
def test_argnums_out_of_range(argnums):
    with pytest.raises(ValueError, match=r"argnums=.*out of range.*weighted takes 2"):
        ad.grad(load("transform_errors").weighted, argnums=argnums)


def test_negative_argnums_counts_from_the_end():
    w = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(ad.grad(load("transform_errors").weighted, argnums=-1)(X, w), X * X)


@pytest.mark.parametrize("value, what", [
    (3, "a Python int"), (np.arange(3), "dtype int64"), (np.array([True, False, True]), "bool")],
    ids=["python-int", "int-array", "bool-array"])
def test_integer_argument_differentiated(value, what):
    with pytest.raises(TypeError, match=r"argument 1 \('n'\)") as info:
        ad.grad(load("transform_errors").scaled, argnums=1)(X, value)
    assert what in str(info.value) and "float" in str(info.value)


def test_integer_leaf_inside_a_pytree_argument():
    with pytest.raises(TypeError, match=r"argument 0 \('p'\).*int64"):
        ad.grad(load("transform_errors").pytree_in)((X, np.arange(3)))


def test_integer_argument_not_differentiated_is_fine():
    np.testing.assert_allclose(ad.grad(load("transform_errors").scaled)(X, 3), 3.0 * np.ones(3))


@pytest.mark.parametrize("transform", ["grad", "vjp"])
def test_has_aux_without_a_pair(transform):
    fn = load("transform_errors").loss
    with pytest.raises(TypeError, match=r"has_aux=True.*loss.*pair"):
        if transform == "grad":
            ad.grad(fn, has_aux=True)(X)
        else:
            ad.vjp(fn, X, has_aux=True)


@pytest.mark.parametrize("cotangent, words", [
    (np.ones(4), ["shape (4,)", "(3,)"]),
    (1.0, ["shape ()", "(3,)"]),
    ((np.ones(3), np.ones(3)), ["structure"]),
], ids=["wrong-shape", "scalar-for-vector", "tuple-for-leaf"])
def test_vjp_cotangent_mismatch(cotangent, words):
    _, vjp_fn = ad.vjp(load("transform_errors").vector_out, X)
    with pytest.raises(ValueError) as info:
        vjp_fn(cotangent)
    for word in words:
        assert word in str(info.value)


def test_source_of_a_vjp_function():
    _, vjp_fn = ad.vjp(load("transform_errors").vector_out, X)
    assert "def vjp_vector_out(" in ad.source(vjp_fn)


def test_vjp_cotangent_leaf_for_a_pair():
    _, vjp_fn = ad.vjp(load("transform_errors").pair_out, X)
    with pytest.raises(ValueError, match="structure"):
        vjp_fn(np.ones(3))


# -- functions the compiler cannot read --------------------------------------

# Since issue 38 a NumPy/math callable with a rule is a function transforms take, as in
# JAX (ad.grad(np.tanh), docs/jax_api.md); one with no rule is refused naming it.

@pytest.mark.parametrize("fn, d", [(math.sin, math.cos), (np.sin, np.cos)],
                         ids=["math.sin", "np.sin"])
def test_library_function_with_a_rule_is_transformed(fn, d):
    assert ad.grad(fn)(1.0) == pytest.approx(d(1.0), rel=1e-14)


def test_len_of_a_float_is_pythons_error():
    with pytest.raises(TypeError, match="has no len"):
        ad.grad(len)(1.0)


@pytest.mark.parametrize("fn, name", [(np.frexp, "np.frexp"), (np.gcd, "np.gcd")])
def test_numpy_ufunc_with_no_rule(fn, name):
    with pytest.raises(TypeError, match=f"ad.grad cannot transform {name}: s2s_ad has no "
                                        f"derivative rule"):
        ad.grad(fn)(X)


def test_builtin_without_signature():
    with pytest.raises(TypeError, match="cannot read the source"):
        ad.grad(max)(X)


def test_source_of_a_ufunc():
    assert "np.sin(x)" in ad.source(np.sin)
    with pytest.raises(TypeError, match="cannot transform np.frexp: s2s_ad has no derivative"):
        ad.source(np.frexp)


def test_function_made_by_exec():
    scope = {}
    exec("def made(x):\n    return x * 2.0\n", scope)  # noqa: S102  (the point)
    with pytest.raises(TypeError, match="cannot read the source"):
        ad.grad(scope["made"])(1.0)


def test_lambda():
    # Lambdas are transformed (tests/test_lambdas.py); d(x*x)/dx at 1.5 is 3.
    assert ad.grad(load("transform_errors").square)(1.5) == pytest.approx(3.0)


def test_lambda_inside_a_multiline_call():
    # The lambda starts on the line after the call: found by its own line.
    assert load("transform_errors").make_wrapped_lambda()(2.0) == pytest.approx(3.0)


def test_not_a_function():
    with pytest.raises(TypeError, match="expected a function"):
        ad.grad(3)


def test_jit_unknown_target():
    with pytest.raises(ValueError, match=r"target.*'gpu'"):
        ad.jit(load("transform_errors").loss, target="gpu")


# -- wrong number of arguments -----------------------------------------------

@pytest.mark.parametrize("call", ["grad-too-few", "grad-too-many", "jit", "vjp"])
def test_wrong_number_of_arguments(call):
    m = load("transform_errors")
    runs = {"grad-too-few": lambda: ad.grad(m.weighted)(X),
            "grad-too-many": lambda: ad.grad(m.loss)(X, X),
            "jit": lambda: ad.jit(m.loss, target="python")(X, X),
            "vjp": lambda: ad.vjp(m.weighted, X)}
    with pytest.raises(TypeError, match=r"(weighted|loss)\(\) takes (1|2) positional "
                                        r"argument.* but (1|2) (was|were) given"):
        runs[call]()
