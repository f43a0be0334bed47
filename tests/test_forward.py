"""Forward mode: ``ad.jvp`` on the control-flow corpus and on every rule.

Every program of ``programs/control_flow.py`` (``CORPUS`` and
``ARRAY_CORPUS``) is run through ``ad.jvp`` on both backends (``python``
runs the generated NumPy code, ``numba`` runs ``ad.jvp(ad.jit(f), ...)``):

* the tangent output against central finite differences along a random
  tangent, entry by entry, and the primal output against ``f(*args)``
  (``s2s_ad.testing.check_jvp``);
* the JVP against the VJP: ``<jvp(f, x)(t), u> == <t, vjp(f, x)(u)>`` holds
  exactly (up to rounding), for random ``t`` and ``u`` -- a much tighter
  check than finite differences, and an independent one (reverse mode is a
  different transform);
* linearity in the tangent (python backend).

Integer arguments get a zero tangent of their own type (``primals`` and
``tangents`` have equal structure).  Then pytrees (tuples and lists),
float32, Python floats, tuple outputs, the argument errors, and a rule table
that runs each differentiable rule of ``s2s_ad.rules.RULES`` through a JVP,
reusing the generated programs of ``test_rules.py`` (python backend for
every case, Numba for a representative subset).

Known compiler bugs are marked ``xfail(strict=True)``: when a fix lands the
mark fails loudly and should be removed.
"""
import importlib
import math
import pathlib
import sys
import zlib

import numpy as np
import pytest
from conftest import as_float32, is_float_tree, known_params, load_program

import s2s_ad as ad
from s2s_ad import rules
from s2s_ad import testing as adt
from s2s_ad.ir import pytree
from s2s_ad.testing import check_jvp

HERE = pathlib.Path(__file__).resolve().parent
cf = load_program(HERE / "programs" / "control_flow.py")

PROGRAMS = {**{fn.__name__: (fn, make) for fn, make, _ in cf.CORPUS},
            **{fn.__name__: (fn, make) for fn, make in cf.ARRAY_CORPUS}}
TARGETS = {"python": "python", "numba": "cpu"}

# -- known bugs ---------------------------------------------------------------------


# (test, program, backend or None for every backend) -> reason
KNOWN_BUGS = {}


def _params(test, names, backends=(None,)):
    return known_params(KNOWN_BUGS, test, names, backends)


# -- helpers ----------------------------------------------------------------------------


_JITTED = {}      # one Numba build per function, shared by the tests


def _jit(fn):
    if fn not in _JITTED:
        _JITTED[fn] = ad.jit(fn)
    return _JITTED[fn]


def _backend(fn, backend):
    return fn if backend == "python" else _jit(fn)


def _rng(*key):
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def _random_like(x, rng):
    """Standard-normal values shaped and typed like ``x`` (zeros for integer leaves)."""
    if isinstance(x, (tuple, list)):
        return type(x)(_random_like(v, rng) for v in x)
    if isinstance(x, np.ndarray):
        if x.dtype.kind != "f":
            return np.zeros_like(x)
        return rng.standard_normal(x.shape).astype(x.dtype)
    if isinstance(x, np.floating):
        return type(x)(rng.standard_normal())
    if isinstance(x, float):
        return float(rng.standard_normal())
    return type(x)(0)


def _tangents(args, rng):
    """A random tangent for each float argument, zeros of their type for the others."""
    return tuple(_random_like(a, rng) if is_float_tree(a) else _zero(a) for a in args)


def _zero(a):
    if isinstance(a, (tuple, list)):
        return type(a)(_zero(v) for v in a)
    return np.zeros_like(a) if isinstance(a, np.ndarray) else type(a)(0)


def _leaves(x):
    return pytree.flatten(x)[0]


def _dot(a, b):
    """``sum(a * b)`` over matching float leaves, in float64."""
    return float(sum(np.sum(np.asarray(x, np.float64) * np.asarray(y, np.float64))
                     for x, y in zip(_leaves(a), _leaves(b))))


def _abs_dot(a, b):
    return float(sum(np.sum(np.abs(np.asarray(x, np.float64) * np.asarray(y, np.float64)))
                     for x, y in zip(_leaves(a), _leaves(b))))


def _float_out_like(out, rng):
    """A random cotangent for ``out``: floats where ``out`` has floats, zeros elsewhere."""
    if isinstance(out, (tuple, list)):
        return type(out)(_float_out_like(v, rng) for v in out)
    if isinstance(out, np.ndarray):
        return rng.standard_normal(out.shape).astype(out.dtype)
    if isinstance(out, np.floating):
        return type(out)(rng.standard_normal())
    return float(rng.standard_normal())


def _same_args(got, want):
    if isinstance(want, (tuple, list)):
        return all(_same_args(g, w) for g, w in zip(got, want))
    return np.array_equal(got, want)


def _int_like(t):
    return (isinstance(t, (bool, int, np.integer, np.bool_))
            or isinstance(t, np.ndarray) and t.dtype.kind != "f")


def _scaled(t, a):
    """``a * t`` on the float leaves of tangent ``t`` (integer leaves stay zero)."""
    if isinstance(t, (tuple, list)):
        return type(t)(_scaled(v, a) for v in t)
    return t if _int_like(t) else t * a


def _added(s, t):
    if isinstance(s, (tuple, list)):
        return type(s)(_added(a, b) for a, b in zip(s, t))
    return s if _int_like(s) else s + t


# -- the control-flow corpus ---------------------------------------------------------------


@pytest.mark.parametrize("name, backend", _params("jvp", PROGRAMS, TARGETS))
def test_jvp_matches_finite_differences(name, backend):
    """Tangent output vs central differences, primal vs f(*args), shapes and dtypes."""
    fn, make = PROGRAMS[name]
    args = make()
    tangents = _tangents(args, _rng("jvp", name))
    check_jvp(fn, args, tangents, target=TARGETS[backend])
    assert _same_args(args, make()), "the jvp wrote into the caller's arrays"


@pytest.mark.parametrize("name, backend", _params("dot_product", PROGRAMS, TARGETS))
def test_jvp_vjp_dot_product(name, backend):
    """<J t, u> == <t, J^T u>: forward and reverse mode agree to rounding.

    The JVP runs on the backend under test, the VJP on the python backend
    (the Numba VJP is test_control_flow's business; building it here too would
    double this file's compile time for the same numbers).
    """
    fn, make = PROGRAMS[name]
    args = make()
    rng = _rng("dot", name)
    nums = [i for i, a in enumerate(args) if is_float_tree(a)]
    tangents = _tangents(args, rng)
    out, dout = ad.jvp(_backend(fn, backend), args, tangents)
    u = _float_out_like(out, rng)
    _, pull = ad.vjp(fn, *args)
    cts = pull(u)
    lhs = _dot(dout, u)
    rhs = sum(_dot(tangents[i], cts[i]) for i in nums)
    scale = _abs_dot(dout, u) + sum(_abs_dot(tangents[i], cts[i]) for i in nums)
    assert abs(lhs - rhs) <= 1e-12 * scale + 1e-300, (lhs, rhs, scale)


@pytest.mark.parametrize("name", _params("linear", PROGRAMS))
def test_jvp_is_linear_in_the_tangent(name):
    """jvp(a t1 + b t2) == a jvp(t1) + b jvp(t2), and a zero tangent gives zeros."""
    fn, make = PROGRAMS[name]
    args = make()
    rng = _rng("linear", name)
    t1, t2 = _tangents(args, rng), _tangents(args, rng)
    out1, d1 = ad.jvp(fn, args, t1)
    _, d2 = ad.jvp(fn, args, t2)
    _, d12 = ad.jvp(fn, args, _added(_scaled(t1, 2.0), _scaled(t2, -0.5)))
    for a, b, c in zip(_leaves(d1), _leaves(d2), _leaves(d12)):
        want = 2.0 * np.asarray(a, np.float64) - 0.5 * np.asarray(b, np.float64)
        scale = 2.0 * np.abs(np.asarray(a, np.float64)) + 0.5 * np.abs(np.asarray(b, np.float64))
        assert np.all(np.abs(np.asarray(c, np.float64) - want) <= 1e-12 * (1.0 + scale))
    _, d0 = ad.jvp(fn, args, _scaled(t1, 0.0))
    for z in _leaves(d0):
        assert np.all(np.asarray(z) == 0.0)


FLOAT32 = ["cumsum_sq", "recurrence", "row_loop", "while_continue", "piecewise",
           "recurrence_array", "scan_pair", "row_normalise"]


@pytest.mark.parametrize("name, backend", _params("float32", FLOAT32, TARGETS))
def test_jvp_float32(name, backend):
    """float32 arguments through loops: each tangent leaf has the dtype NumPy
    gives the plain function's output leaf (float32 where the program stays in
    float32; float64 where it fills an ``np.zeros`` buffer)."""
    fn, make = PROGRAMS[name]
    args = as_float32(make())
    check_jvp(fn, args, target=TARGETS[backend])


# -- programs for the tests below (s2s_ad reads their source from this file) ------------


def affine_tree(params, x):
    """A (weights, (bias, scale)) tuple argument."""
    w, (b, s) = params
    return np.tanh(w * x + b) * s


def list_tree(p):
    """A list argument holding an array and a nested tuple."""
    return np.sum(p[0] * p[1][0]) + p[1][1] * np.sin(p[1][1])


def scalar_fn(a, b):
    """Python floats in, a Python float out: d = (sin(b) + 2a) da + a cos(b) db."""
    return a * math.sin(b) + a * a


def nested_out(x, y):
    """A nested tuple output with an integer leaf."""
    return x * y, (np.sum(x * x), 3), np.sin(y)


def with_count(x, n, flag):
    """Integer and boolean arguments beside a float one."""
    y = x
    for k in range(n):
        y = np.sin(y) + x
    if flag:
        y = y * 2.0
    return y


def constant_out(x):
    """An output that does not depend on the input: a zero tangent."""
    return np.ones(3) * 2.0 + 0.0 * np.size(x)


def scalar_loop(a, b):
    """Scalars through a loop (so ad.jit always runs the Numba build)."""
    s = a
    for k in range(3):
        s = s * math.sin(b) + a * a
    return s


def with_default(x, c=2.0):
    return x * c


def list_out(x):
    """A list output: its tangent is a list too."""
    return [x * 2.0, np.sum(x * x)]


X3 = np.array([0.3, -0.7, 1.2])
Y3 = np.array([0.5, 0.2, -0.4])


@pytest.mark.parametrize("backend", TARGETS)
def test_jvp_tuple_argument(backend):
    params = (np.array([0.5, -0.3, 0.2]), (np.array([0.1, 0.2, 0.3]), 1.5))
    tangents = (_random_like(params, _rng("tree")), _random_like(X3, _rng("tree-x")))
    out, dout = check_jvp(affine_tree, (params, X3), tangents, target=TARGETS[backend])
    w, (b, s) = params
    (dw, (db, ds)), dx = tangents
    z = w * X3 + b
    want = (1 - np.tanh(z) ** 2) * (dw * X3 + w * dx + db) * s + np.tanh(z) * ds
    np.testing.assert_allclose(dout, want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("backend", TARGETS)
def test_jvp_list_argument(backend):
    p = [X3, (Y3, 0.7)]
    t = [Y3 * 2.0, (X3 - 1.0, -0.3)]
    out, dout = check_jvp(list_tree, (p,), (t,), target=TARGETS[backend])
    c = 0.7
    want = np.sum(t[0] * Y3 + X3 * t[1][0]) + t[1][1] * (np.sin(c) + c * np.cos(c))
    np.testing.assert_allclose(dout, want, rtol=1e-12)


@pytest.mark.parametrize("backend", TARGETS)
def test_jvp_python_floats(backend):
    out, dout = check_jvp(scalar_fn, (0.3, 0.7), (1.0, 0.5), target=TARGETS[backend])
    assert np.ndim(out) == 0 and np.ndim(dout) == 0
    assert np.result_type(dout) == np.float64
    np.testing.assert_allclose(out, 0.3 * math.sin(0.7) + 0.09, rtol=1e-14)
    np.testing.assert_allclose(dout, (math.sin(0.7) + 0.6) + 0.5 * 0.3 * math.cos(0.7),
                               rtol=1e-14)


@pytest.mark.parametrize("backend", TARGETS)
def test_jvp_nested_tuple_output(backend):
    out, dout = check_jvp(nested_out, (X3, 0.4), (Y3, -1.5), target=TARGETS[backend])
    assert isinstance(dout, tuple) and len(dout) == 3 and isinstance(dout[1], tuple)
    np.testing.assert_allclose(dout[0], Y3 * 0.4 - 1.5 * X3, rtol=1e-14)
    np.testing.assert_allclose(dout[1][0], np.sum(2 * X3 * Y3), rtol=1e-14)
    assert dout[1][1] == 0
    np.testing.assert_allclose(dout[2], -1.5 * np.cos(0.4), rtol=1e-14)




@pytest.mark.parametrize("backend", TARGETS)
def test_jvp_list_output(backend):
    out, dout = ad.jvp(_backend(list_out, backend), (X3,), (Y3,))
    assert isinstance(out, list) and isinstance(dout, list)
    np.testing.assert_allclose(dout[0], 2.0 * Y3, rtol=1e-14)
    np.testing.assert_allclose(dout[1], np.sum(2.0 * X3 * Y3), rtol=1e-14)


@pytest.mark.parametrize("backend", TARGETS)
def test_jvp_integer_and_boolean_arguments(backend):
    """Integer and boolean primals take a zero tangent of their type; their
    values still steer the control flow."""
    f = _backend(with_count, backend)
    for n, flag in ((0, False), (3, True)):
        check_jvp(with_count, (X3, n, flag), (Y3, 0, False), target=TARGETS[backend])
    _, d = ad.jvp(f, (X3, 2, False), (Y3, 0, False))
    y1 = np.sin(X3) + X3
    np.testing.assert_allclose(d, np.cos(y1) * (np.cos(X3) * Y3 + Y3) + Y3, rtol=1e-13)


@pytest.mark.parametrize("backend", TARGETS)
def test_jvp_constant_output(backend):
    out, dout = ad.jvp(_backend(constant_out, backend), (X3,), (Y3,))
    np.testing.assert_array_equal(out, np.full(3, 2.0))
    assert np.shape(dout) == (3,)
    np.testing.assert_array_equal(dout, np.zeros(3))


@pytest.mark.parametrize("backend", TARGETS)
def test_jvp_float32_tangent_dtype(backend):
    x = np.array([0.3, -0.2, 0.5], np.float32)
    t = np.ones(3, np.float32)
    out, dout = ad.jvp(_backend(affine_tree, backend), ((x, (x, x)), x), ((t, (t, t)), t))
    assert out.dtype == np.float32 and dout.dtype == np.float32


@pytest.mark.parametrize("backend", ["python", "numba"])
def test_jvp_float32_scalar_tangent_dtype(backend):
    """Float32 scalar arguments: the tangent output is float32, as NumPy's own
    output is (ad.grad keeps float32 scalars under ad.jit; ad.jvp should too)."""
    args = (np.float32(0.3), np.float32(0.7))
    assert isinstance(scalar_loop(*args), np.float32)
    out, dout = ad.jvp(_backend(scalar_loop, backend), args, (np.float32(1.0), np.float32(0.5)))
    assert np.result_type(dout) == np.float32
    check_jvp(scalar_loop, args, target=TARGETS[backend])


def test_jvp_does_not_mutate_tangents():
    t = (Y3.copy(), 0.5)
    ad.jvp(nested_out, (X3, 0.4), t)
    np.testing.assert_array_equal(t[0], Y3)


# -- argument errors ----------------------------------------------------------------------


@pytest.mark.parametrize("backend", TARGETS)
def test_tangent_shape_mismatch_is_value_error(backend):
    f = _backend(affine_tree, backend)
    params = (X3, (Y3, 1.5))
    with pytest.raises(ValueError, match="shape"):
        ad.jvp(f, (params, X3), ((X3, (Y3, 1.0)), np.ones(2)))
    with pytest.raises(ValueError, match="shape"):
        ad.jvp(f, (params, X3), ((X3[:2], (Y3, 1.0)), X3))


@pytest.mark.parametrize("backend", TARGETS)
def test_tangent_count_mismatch_is_value_error(backend):
    f = _backend(scalar_fn, backend)
    with pytest.raises(ValueError, match="2 primals but 1 tangents"):
        ad.jvp(f, (0.3, 0.7), (1.0,))
    with pytest.raises(ValueError):
        ad.jvp(f, (0.3, 0.7), (1.0, 0.5, 0.2))


def test_tangent_structure_mismatch_is_value_error():
    params = (X3, (Y3, 1.5))
    with pytest.raises(ValueError, match="structure"):
        ad.jvp(affine_tree, (params, X3), ((X3, Y3), X3))


def test_tangents_not_a_tuple_is_type_error():
    with pytest.raises(TypeError, match="tangents"):
        ad.jvp(constant_out, (X3,), X3)
    with pytest.raises(TypeError, match="primals"):
        ad.jvp(constant_out, X3, (X3,))


def test_jvp_fills_in_default_arguments():
    out, dout = ad.jvp(with_default, (X3,), (Y3,))
    np.testing.assert_allclose(dout, 2.0 * Y3)


# -- check_jvp itself --------------------------------------------------------------------


def test_check_jvp_catches_a_wrong_tangent(monkeypatch):
    real = adt.api_jvp

    def off_by_a_bit(f, primals, tangents):
        out, dout = real(f, primals, tangents)
        return out, dout * (1.0 + 1e-4)
    monkeypatch.setattr(adt, "api_jvp", off_by_a_bit)
    with pytest.raises(AssertionError, match="finite differences"):
        check_jvp(affine_tree, ((X3, (Y3, 1.5)), X3))


def test_check_jvp_catches_a_wrong_dtype(monkeypatch):
    real = adt.api_jvp

    def widened(f, primals, tangents):
        out, dout = real(f, primals, tangents)
        return out, dout.astype(np.float64)
    monkeypatch.setattr(adt, "api_jvp", widened)
    x = X3.astype(np.float32)
    with pytest.raises(AssertionError, match="dtype"):
        check_jvp(affine_tree, ((x, (x, np.float32(1.5))), x))


def test_check_jvp_draws_tangents_and_returns_the_pair():
    out, dout = check_jvp(with_count, (X3, 2, True))
    np.testing.assert_allclose(out, with_count(X3, 2, True), rtol=1e-14)
    assert np.shape(dout) == (3,)


# -- every rule, through a JVP --------------------------------------------------------------

import test_rules as tr  # noqa: E402  (the rule programs: one generator for both test files)

DIFFERENTIABLE = {name for name, r in rules.RULES.items() if not r.nondiff}
RULE_CASES = [c for c in tr.CASES if c.backend == "python" and c.program.rule in DIFFERENTIABLE]

# A representative Numba subset: every math.* rule (scalars compile fast),
# a spread of NumPy elementwise rules (a float32 matrix, broadcasting), and
# one form of most array rules.
NUMBA_RULE_IDS = {
    "sin-vector-float64-numba", "divide-matrix-float32-numba", "where-broadcast-float64-numba",
    "maximum-vector-float64-numba", "arctan2-vector-float64-numba",
    "power-cube-vector-float64-numba",
    "sum-matrix-float64-numba", "mean-axis-1-matrix-float32-numba",
    "prod-zero_entry-vector-float64-numba", "max-axis-1-matrix-float32-numba",
    "dot-vv-float64-numba", "matmul-mv-float64-numba", "getitem-slices-matrix-float64-numba",
    "getitem-runtime_int-vector-float64-numba", "setitem-row-matrix-float64-numba",
    "concatenate-axis0-float64-numba", "stack-axis0-float64-numba",
    "array-scalars-float64-numba", "reshape-method_varargs-matrix-float64-numba",
    "join_copy-branch-vector-float64-numba", "full_like-scalar_fill-float64-numba",
    "float-scalar-float64-numba",
}
NUMBA_RULE_CASES = [c for c in tr.CASES if c.backend == "numba" and (
    c.program.rule.startswith("math.") or c.id in NUMBA_RULE_IDS)]

# case id -> reason
RULE_BUGS = {}


def _rule_params(cases):
    return [pytest.param(c, id=c.id, marks=[pytest.mark.xfail(strict=True,
                                                              reason=RULE_BUGS[c.id])]
                         if c.id in RULE_BUGS else []) for c in cases]


@pytest.fixture(scope="module")
def rule_modules(tmp_path_factory):
    """The rule programs of test_rules.py, one module per rule (as its fixture writes them)."""
    folder = tmp_path_factory.mktemp("jvp_rule_programs")
    by_rule = {}
    for prog in tr.PROGRAMS.values():
        by_rule.setdefault(prog.rule, []).append(prog)
    for rule, progs in by_rule.items():
        imports = sorted({i for p in progs for i in p.imports})
        text = tr.HEADER + "".join(f"{i}\n" for i in imports)
        text += "".join("\n\n" + p.source() for p in progs)
        (folder / f"{tr.module_name(rule)}.py").write_text(text)
    sys.path.insert(0, str(folder))
    try:
        yield {rule: importlib.import_module(tr.module_name(rule)) for rule in by_rule}
    finally:
        sys.path.remove(str(folder))


def _check_rule(case, modules):
    f = getattr(modules[case.program.rule], case.program.name)
    args = tr.make_inputs(case)
    tangents = _tangents(args, _rng("rule", case.id))
    check_jvp(f, args, tangents, target="cpu" if case.backend == "numba" else "python")


@pytest.mark.parametrize("case", _rule_params(RULE_CASES))
def test_rule_jvp(case, rule_modules):
    _check_rule(case, rule_modules)


@pytest.mark.parametrize("case", _rule_params(NUMBA_RULE_CASES))
def test_rule_jvp_numba(case, rule_modules):
    _check_rule(case, rule_modules)


def test_every_differentiable_rule_has_a_jvp_case():
    covered = {c.program.rule for c in RULE_CASES} | set(tr.SPECIAL)
    missing = sorted(DIFFERENTIABLE - covered)
    assert not missing, f"differentiable rules without a JVP case: {missing}"
    assert {c.id for c in NUMBA_RULE_CASES} >= NUMBA_RULE_IDS, \
        sorted(NUMBA_RULE_IDS - {c.id for c in NUMBA_RULE_CASES})
