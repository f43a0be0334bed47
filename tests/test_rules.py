"""Every derivative rule, checked against finite differences.

The cases are generated from the rule registry: for each rule in
``s2s_ad.rules.RULES`` one small program per call form (function, operator,
method, import alias, axis/keepdims option...) is written as source text
(s2s_ad reads source, so the programs live in real module files written
once per session), and each program runs on sample inputs inside the rule's
domain for every shape (scalar, vector, matrix, broadcast), dtype and
backend.  Elementwise rules need no entry here: their programs follow from
their operands.  Array rules, whose call forms differ, list theirs in
``ARRAY_PROGRAMS``.  ``test_every_rule_has_cases`` fails when a rule is
added without samples.

Test ids read ``<rule>-<form>-<shape>-<dtype>-<backend>`` (``np.`` dropped,
other dots as ``_``; the plain function form has no ``<form>``), so
``pytest -k tanh`` or ``-k "sum and numba"`` selects cases.

Numba compiles each program once per argument type: about 0.1 s for
scalars, 0.5-1 s for vectors, 1-3 s for matrices and broadcasting on a CI
core, while the Python backend costs milliseconds.  So every case runs on
the Python backend, and the Numba backend runs a representative subset
that still reaches every rule: each differentiable elementwise rule once
(a float64 vector, or a broadcast for the rules in ``NUMBA_BROADCAST``; a
float32 matrix too for those in ``NUMBA_FLOAT32``), ``math`` and
non-differentiable elementwise rules on a scalar, and the array-rule forms
marked ``NB``.  The generated derivative code is the same text for every
shape and dtype, so the other combinations would mostly re-test Numba's
typing of NumPy, at a cost of minutes.
"""
import dataclasses
import importlib
import pathlib
import sys
import zlib

import numpy as np
import pytest

import s2s_ad as ad
from s2s_ad import rules
from s2s_ad.rules import table
from s2s_ad.testing import check_grad, check_vjp

# -- sample inputs ----------------------------------------------------------------

DOMAINS = {
    None: lambda rng, shape: _signed(rng, shape, 0.3, 2.0),   # away from kinks at 0
    "positive": lambda rng, shape: rng.uniform(0.5, 2.0, shape),
    "unit": lambda rng, shape: rng.uniform(-0.9, 0.9, shape),
    "above_one": lambda rng, shape: rng.uniform(1.1, 3.0, shape),
    "bool": lambda rng, shape: rng.uniform(size=shape) < 0.5,
    # Linear algebra: well-conditioned matrices with well-separated spectra.
    "invertible": lambda rng, shape: _conditioned(rng, shape, symmetric=False),
    "spd": lambda rng, shape: _conditioned(rng, shape, symmetric=True),
}


def _conditioned(rng, shape, symmetric):
    """A matrix with singular values 1 .. 3 (evenly spaced); ``symmetric``:
    positive definite, with eigenvalues 1 .. 3."""
    m, n = shape
    q1, _ = np.linalg.qr(rng.normal(size=(m, m)))
    q2, _ = np.linalg.qr(rng.normal(size=(n, n)))
    k = min(m, n)
    s = np.linspace(1.0, 3.0, k)
    if symmetric:
        return (q1 * s) @ q1.T
    return (q1[:, :k] * s) @ q2[:, :k].T

SCALAR, VECTOR, MATRIX = (), (5,), (3, 4)
# Methods need an array (a Python float has none).
ARRAY_SHAPES = ("vector", "matrix", "broadcast")
# Operand i of a broadcast case gets BROADCAST[i]: every operand is
# broadcast along some axis, so every un-broadcast path is exercised.
BROADCAST = [(3, 1), (4,), (3, 4)]
DTYPES = {"float64": np.float64, "float32": np.float32}


def _signed(rng, shape, lo, hi):
    return rng.uniform(lo, hi, shape) * rng.choice([-1.0, 1.0], shape)


def sample(domain, shape, dtype, rng):
    """A sample operand: a Python/NumPy scalar for shape (), else an array."""
    if isinstance(domain, int) and not isinstance(domain, bool):
        return domain
    value = DOMAINS[domain](rng, shape)
    if domain == "bool":
        return bool(value) if shape == () else value
    if shape == ():
        return float(value) if dtype is np.float64 else dtype(value)
    return value.astype(dtype)


# -- programs and cases -----------------------------------------------------------

@dataclasses.dataclass
class Program:
    """One generated function: ``def name(params): <body>``."""
    rule: str
    form: str            # "" for the plain function call
    params: tuple
    body: str            # expression returned, or statements ending in return
    imports: tuple = ()
    only: tuple = ()     # the shape labels it runs on, when not all

    @property
    def name(self):
        return f"{_ident(self.rule)}__{_ident(self.form) or 'fn'}"

    def source(self):
        lines = self.body.split("\n")
        if len(lines) == 1 and not lines[0].startswith("return"):
            lines = [f"return {lines[0]}"]
        body = "".join(f"    {line}\n" for line in lines)
        return f"def {self.name}({', '.join(self.params)}):\n{body}"


@dataclasses.dataclass
class Case:
    program: Program
    shape: str            # label: scalar, vector, matrix, broadcast, or the form's own
    inputs: tuple         # (domain, shape) per parameter
    dtype: str
    backend: str

    @property
    def id(self):
        parts = [_short(self.program.rule), self.program.form, self.shape, self.dtype,
                 self.backend]
        return "-".join(p for p in parts if p)


def _ident(text):
    return "".join(c if c.isalnum() else "_" for c in text)


# Rule names that would read like another rule's id.
_ID_NAMES = {"copy": "join_copy"}


def _short(rule):
    if rule in _ID_NAMES:
        return _ID_NAMES[rule]
    return rule[3:] if rule.startswith("np.") else rule.replace(".", "_")


_OP_TEXT = {"Add": "{} + {}", "Sub": "{} - {}", "Mult": "{} * {}", "Div": "{} / {}",
            "Pow": "{} ** {}", "Mod": "{} % {}", "MatMult": "{} @ {}", "USub": "-{}",
            "UAdd": "+{}", "FloorDiv": "{} // {}", "Lt": "{} < {}", "LtE": "{} <= {}",
            "Gt": "{} > {}", "GtE": "{} >= {}", "Eq": "{} == {}", "NotEq": "{} != {}",
            "And": "{} and {}", "Or": "{} or {}", "Not": "not {}"}
_OPERATOR_OF = {name: op.__name__ for op, name in rules.OPERATORS.items()}
_METHODS_OF = {}
for _m, _r in rules.METHODS.items():
    _METHODS_OF.setdefault(_r, []).append(_m)
# Builtins that denote an elementwise rule (the compiler maps them).
# Python's max/min compare whole arrays, so their forms are scalar-only.
_BUILTIN_FORMS = {"np.abs": ("abs({})", ()), "np.maximum": ("max({}, {})", ("scalar",)),
                  "np.minimum": ("min({}, {})", ("scalar",))}
# Alias imports, tried on a few rules (any rule would do: one resolver).
_ALIAS_FORMS = {
    "np.sin": ("from numpy import sin", "sin({})"),
    "np.exp": ("import numpy as onp", "onp.exp({})"),
    "math.exp": ("from math import exp as mexp", "mexp({})"),
    "np.sum": ("import numpy as onp", "onp.sum({})"),
}


def elementwise_programs(rule):
    """Function form, operator form, method and alias forms of an elementwise rule."""
    params = rule.params
    out = [Program(rule.name, "", params, f"{rule.name}({', '.join(params)})")]
    op = _OPERATOR_OF.get(rule.name)
    if op:
        out.append(Program(rule.name, "op", params, _OP_TEXT[op].format(*params)))
    for m in _METHODS_OF.get(rule.name, ()):
        if not m.startswith("__"):
            rest = ", ".join(params[1:])
            out.append(Program(rule.name, "method", params, f"{params[0]}.{m}({rest})",
                               only=ARRAY_SHAPES))
    if rule.name in _BUILTIN_FORMS:
        text, only = _BUILTIN_FORMS[rule.name]
        out.append(Program(rule.name, "builtin", params, text.format(*params), only=only))
    if rule.name in _ALIAS_FORMS:
        imp, text = _ALIAS_FORMS[rule.name]
        out.append(Program(rule.name, "alias", params, text.format(*params), imports=(imp,)))
    # Another name resolves to the same rule; one shape shows that.
    return out + alias_programs(rule, out[0], _one_shape(rule))


def _one_shape(rule):
    return ("scalar",) if rule.name.startswith("math.") else ("vector",)


def alias_programs(rule, base, only=()):
    """``base`` with the rule's call spelled by each of its other names
    (np.absolute, np.amax, np.concat...)."""
    out = []
    for other in table.other_names(rule):
        body = base.body.replace(f"{rule.name}(", f"{other}(")
        assert body != base.body, (rule.name, base.body)
        out.append(Program(rule.name, "alias_" + other.split(".")[1], base.params, body,
                           base.imports, only or base.only))
    return out


def _domains(rule):
    """Domain hint per operand (``samples`` is one hint or a dict per operand)."""
    s = rule.samples
    if isinstance(s, dict):
        return [s.get(p) for p in rule.params]
    return [s] * len(rule.params)


# Elementwise rules whose Numba case also runs on a float32 matrix: partials
# that mix Python-float constants into float32 arithmetic.
NUMBA_FLOAT32 = {"np.divide", "np.exp2"}
# Rules whose Numba case broadcasts.  Un-broadcasting is the same runtime
# code for every rule, but these primals are not plain ufuncs in Numba (and
# np.multiply stands for the ufuncs).
NUMBA_BROADCAST = {"np.multiply", "np.where", "np.clip"}
# Non-differentiable elementwise rules that also run on a Numba vector.
NUMBA_ON_ARRAYS = {"np.sign", "np.floor", "np.less", "np.round", "np.logical_and"}


def numba_subset(rule):
    """(shape, dtype) pairs an elementwise rule's plain form runs on with Numba."""
    if rule.name.startswith("math."):
        return {("scalar", "float64")}
    out = {("broadcast" if rule.name in NUMBA_BROADCAST else "vector", "float64")}
    if rule.name in NUMBA_FLOAT32:
        out.add(("matrix", "float32"))
    if rule.name == "np.sin":
        out.add(("scalar", "float32"))      # a NumPy float32 scalar keeps its dtype
    return out


def elementwise_cases(rule):
    domains = _domains(rule)
    n = len(rule.params)
    shapes = {"scalar": [SCALAR] * n}
    if not rule.name.startswith("math."):
        shapes.update(vector=[VECTOR] * n, matrix=[MATRIX] * n)
        if n > 1:
            shapes["broadcast"] = BROADCAST[:n]
            shapes["mixed"] = [SCALAR] + [MATRIX] * (n - 1)
    numba = numba_subset(rule)
    # math functions take Python floats (float64).
    dtypes = ["float64"] if rule.name.startswith("math.") else DTYPES
    for prog in elementwise_programs(rule):
        for label, shp in shapes.items():
            if prog.only and label not in prog.only:
                continue
            for dtype in dtypes:
                inputs = tuple(zip(domains, shp))
                yield Case(prog, label, inputs, dtype, "python")
                if prog.form == "" and (label, dtype) in numba:
                    yield Case(prog, label, inputs, dtype, "numba")


# Non-differentiable elementwise rules run inside a differentiated
# expression; the derivative must be the other factor's alone.  Logical
# rules take comparisons of the differentiated inputs; Python's and/or/not
# work on scalars only.
_BOOL_OPERANDS = {"np.logical_and", "np.logical_or", "np.logical_xor", "np.logical_not",
                  "and", "or", "not"}


def nondiff_elementwise_programs(rule):
    params = rule.operands
    args = [f"({p} > 0.0)" if rule.name in _BOOL_OPERANDS else p for p in params]
    factor = " + ".join(params)
    op = _OPERATOR_OF.get(rule.name)
    forms = []
    if rule.name not in ("and", "or", "not"):
        forms.append(("", f"{rule.name}({', '.join(args)})"))
    if op:
        forms.append(("op" if forms else "", "(" + _OP_TEXT[op].format(*args) + ")"))
    for m in _METHODS_OF.get(rule.name, ()):
        forms.append(("method", f"{params[0]}.{m}()"))   # arrays only, see below
    if rule.name == "np.round":
        forms.append(("decimals", f"np.round({params[0]}, 1)"))
    progs = [Program(rule.name, form, params, f"({factor}) * {text}",
                     only=ARRAY_SHAPES if form == "method" else ()) for form, text in forms]
    return progs + alias_programs(rule, progs[0], _one_shape(rule))


def nondiff_elementwise_cases(rule):
    scalar_only = rule.name.startswith("math.") or rule.name in ("and", "or", "not")
    n = len(rule.operands)
    shapes = {"scalar": [SCALAR] * n}
    if not scalar_only:
        shapes.update(vector=[VECTOR] * n, matrix=[MATRIX] * n)
        if n > 1:
            shapes["broadcast"] = BROADCAST[:n]
    # Scalars compile in a tenth of the time of arrays.
    numba_shape = "vector" if rule.name in NUMBA_ON_ARRAYS else "scalar"
    dtypes = ["float64"] if rule.name.startswith("math.") else DTYPES
    for prog in nondiff_elementwise_programs(rule):
        for label, shp in shapes.items():
            if prog.only and label not in prog.only:
                continue
            for dtype in dtypes:
                inputs = tuple((None, s) for s in shp)
                yield Case(prog, label, inputs, dtype, "python")
                if prog.form == "" and label == numba_shape and dtype == "float64":
                    yield Case(prog, label, inputs, dtype, "numba")


# Array rules: (form, {param: (domain, shape)}, body, Numba dtypes).  A
# parameter's spec is a tuple of specs for a tuple argument, and an int for
# an integer argument.  NB marks the forms that also run on Numba.
NB = ("float64",)
NB32 = ("float32",)
V, M, T3 = (4,), (3, 4), (2, 3, 4)


def _reductions(name, method, domain=None):
    fn = f"np.{name}"
    a_v, a_m = {"a": (domain, V)}, {"a": (domain, M)}
    return [
        ("vector", a_v, f"{fn}(a)", ()),
        ("axis0-vector", a_v, f"{fn}(a, axis=0)", ()),
        ("keepdims-vector", a_v, f"{fn}(a, axis=-1, keepdims=True)", ()),
        ("matrix", a_m, f"{fn}(a)", NB if name == "sum" else ()),
        ("axis0-matrix", a_m, f"{fn}(a, axis=0)", ()),
        ("axis-1-matrix", a_m, f"{fn}(a, axis=-1)", NB32),
        ("keepdims-matrix", a_m, f"{fn}(a, axis=-1, keepdims=True)", ()),
        ("keepdims_all-matrix", a_m, f"{fn}(a, keepdims=True)", ()),
        ("positional_axis-matrix", a_m, f"{fn}(a, 1)", ()),
        ("axis_tuple-3d", {"a": (domain, T3)}, f"{fn}(a, axis=(0, 2))", ()),
        ("method-matrix", a_m, f"a.{method}(axis=0)", ()),
        ("method_chain-matrix", a_m, f"np.exp(a).{method}()", ()),
    ]


ARRAY_PROGRAMS = {
    "np.sum": _reductions("sum", "sum") + [
        ("alias-matrix", {"a": (None, M)}, "onp.sum(a)", ())],
    "np.mean": _reductions("mean", "mean"),
    "np.prod": _reductions("prod", "prod") + [
        # A zero entry: the derivative there is the product of the others.
        ("zero_entry-vector", {"a": ("zero_entry", V)}, "np.prod(a)", NB),
        ("zero_entry-matrix", {"a": ("zero_entry", M)}, "np.prod(a, axis=0)", ())],
    "np.max": _reductions("max", "max"),
    "np.min": _reductions("min", "min"),
    "np.dot": [
        ("vv", {"a": (None, V), "b": (None, V)}, "np.dot(a, b)", NB),
        ("mv", {"a": (None, M), "b": (None, V)}, "np.dot(a, b)", ()),
        ("vm", {"a": (None, (3,)), "b": (None, M)}, "np.dot(a, b)", ()),
        ("mm", {"a": (None, M), "b": (None, (4, 2))}, "np.dot(a, b)", NB),
        ("scalar_vector", {"a": (None, ()), "b": (None, V)}, "np.dot(a, b)", ()),
        ("method-mv", {"a": (None, M), "b": (None, V)}, "a.dot(b)", ())],
    "np.matmul": [
        ("vv", {"x1": (None, V), "x2": (None, V)}, "np.matmul(x1, x2)", ()),
        ("mv", {"x1": (None, M), "x2": (None, V)}, "np.matmul(x1, x2)", NB),
        ("vm", {"x1": (None, (3,)), "x2": (None, M)}, "np.matmul(x1, x2)", ()),
        ("mm", {"x1": (None, M), "x2": (None, (4, 2))}, "np.matmul(x1, x2)", ()),
        ("op-mm", {"x1": (None, M), "x2": (None, (4, 2))}, "x1 @ x2", ()),
        ("op-vv", {"x1": (None, V), "x2": (None, V)}, "x1 @ x2", ())],
    "np.inner": [
        ("vv", {"a": (None, V), "b": (None, V)}, "np.inner(a, b)", ()),
        ("mv", {"a": (None, M), "b": (None, V)}, "np.inner(a, b)", ()),
        ("mm", {"a": (None, M), "b": (None, (2, 4))}, "np.inner(a, b)", NB)],
    "np.outer": [
        ("vv", {"a": (None, V), "b": (None, (3,))}, "np.outer(a, b)", NB),
        ("mv", {"a": (None, (2, 2)), "b": (None, (3,))}, "np.outer(a, b)", ())],
    "np.reshape": [
        ("matrix", {"a": (None, M)}, "np.reshape(a, (4, 3))", ()),
        ("flat", {"a": (None, M)}, "np.reshape(a, -1)", ()),
        ("infer", {"a": (None, M)}, "np.reshape(a, (2, -1))", ()),
        ("method-matrix", {"a": (None, M)}, "a.reshape((6, 2))", ()),
        ("method_varargs-matrix", {"a": (None, M)}, "a.reshape(2, 6)", NB)],
    "np.ravel": [
        ("matrix", {"a": (None, M)}, "np.ravel(a)", NB),
        ("method-matrix", {"a": (None, M)}, "a.ravel()", ()),
        ("flatten-matrix", {"a": (None, M)}, "a.flatten()", ())],
    "np.squeeze": [
        ("all", {"a": (None, (3, 1, 4))}, "np.squeeze(a)", ()),
        ("axis", {"a": (None, (3, 1, 4))}, "np.squeeze(a, axis=1)", NB),
        ("method", {"a": (None, (1, 4))}, "a.squeeze()", ()),
        ("method_axis", {"a": (None, (1, 4))}, "a.squeeze(0)", ())],
    "np.expand_dims": [
        ("axis0-vector", {"a": (None, V)}, "np.expand_dims(a, 0)", NB),
        ("axis-1-matrix", {"a": (None, M)}, "np.expand_dims(a, axis=-1)", ())],
    "np.transpose": [
        ("matrix", {"a": (None, M)}, "np.transpose(a)", ()),
        ("axes-matrix", {"a": (None, M)}, "np.transpose(a, (1, 0))", NB),
        ("axes-3d", {"a": (None, T3)}, "np.transpose(a, (1, 0, 2))", ()),
        ("T-matrix", {"a": (None, M)}, "a.T", NB),
        ("method-matrix", {"a": (None, M)}, "a.transpose()", ()),
        ("method_axes-3d", {"a": (None, T3)}, "a.transpose(2, 0, 1)", ())],
    "np.copy": [
        ("vector", {"a": (None, V)}, "np.copy(a)", NB),
        ("method-matrix", {"a": (None, M)}, "a.copy()", ())],
    "np.asarray": [("vector", {"a": (None, V)}, "np.asarray(a)", NB)],
    "np.astype": [
        ("vector", {"a": (None, V)}, "a.astype(np.float64) * a", NB),
        ("of_sin-matrix", {"a": (None, M)}, "np.sin(a).astype(np.float64)", NB32),
        ("of_sum-vector", {"a": (None, V)}, "np.sum(a).astype(np.float64) * a", NB)],
    "astype_exact": [
        ("vector", {"a": (None, V)}, "(a * 3.0).astype(int) * a", NB),
        ("bool-matrix", {"a": (None, M)}, "(a > 0.0).astype(np.float64) * a", ())],
    "float": [
        ("scalar", {"x": (None, ())}, "float(x)", NB),
        ("of_sum-vector", {"x": (None, V)}, "float(np.sum(x))", ())],
    "np.concatenate": [
        ("axis0", {"a": (None, (2, 4)), "b": (None, (3, 4))}, "np.concatenate((a, b))", NB),
        ("axis1", {"a": (None, (3, 2)), "b": (None, M)}, "np.concatenate([a, b], axis=1)", ()),
        ("axis-1_three", {"a": (None, (3, 2)), "b": (None, M), "c": (None, (3, 1))},
         "np.concatenate((a, b, c), axis=-1)", ()),
        ("same_twice", {"a": (None, V)}, "np.concatenate((a, a))", ()),
        ("pytree_arg", {"xs": ((None, V), (None, (2,)))}, "np.concatenate(xs)", ())],
    "np.stack": [
        ("axis0", {"a": (None, V), "b": (None, V)}, "np.stack((a, b))", NB),
        ("axis1", {"a": (None, M), "b": (None, M)}, "np.stack([a, b], axis=1)", ()),
        ("axis-1", {"a": (None, M), "b": (None, M)}, "np.stack((a, b), axis=-1)", ())],
    "np.array": [
        ("scalars", {"x": (None, ()), "y": (None, ())}, "np.array([x, y, x * y])", NB),
        ("vectors", {"a": (None, V), "b": (None, V)}, "np.array([a, b])", ())],
    "getitem": [
        ("int-vector", {"x": (None, V)}, "x[2]", NB),
        ("negative-vector", {"x": (None, V)}, "x[-1]", ()),
        ("slice-vector", {"x": (None, V)}, "x[1:3]", ()),
        ("step-vector", {"x": (None, V)}, "x[::2]", ()),
        ("reversed-vector", {"x": (None, V)}, "x[::-1]", ()),
        ("row-matrix", {"x": (None, M)}, "x[1]", ()),
        ("column-matrix", {"x": (None, M)}, "x[:, 2]", ()),
        ("element-matrix", {"x": (None, M)}, "x[1, 2]", ()),
        ("slices-matrix", {"x": (None, M)}, "x[1:3, ::2]", NB),
        ("runtime_int-vector", {"x": (None, V), "i": (2, None)}, "x[i]", NB),
        ("runtime_slice-vector", {"x": (None, V), "i": (1, None)}, "x[i:i + 2]", ()),
        ("twice-vector", {"x": (None, V)}, "x[1] * x[1] + x[0]", ()),
        # An integer-array index with a repeated position: both reads count.
        ("repeated_index-vector", {"x": (None, V)}, "x[np.arange(5) // 2]", ()),
        ("unpack-vector", {"x": (None, (3,))}, "a, b, c = x\nreturn a * b + c", ())],
    "np.full": [
        ("scalar_fill", {"c": (None, ())}, "np.full((3, 4), c)", NB),
        ("int_shape", {"c": (None, ())}, "np.full(5, c)", ()),
        ("broadcast_fill", {"c": (None, V)}, "np.full((3, 4), c)", ()),
        ("times_x", {"x": (None, M), "c": (None, ())}, "x * np.full(np.shape(x), c)", ())],
    "np.full_like": [
        ("scalar_fill", {"a": (None, V), "c": (None, ())}, "np.full_like(a, c)", NB),
        ("times_a", {"a": (None, M), "c": (None, ())}, "a * np.full_like(a, c)", ())],
    # Constructors and queries: zero derivative, run inside a differentiated expression.
    "np.zeros": [("vector", {"x": (None, V)}, "x + np.zeros(np.shape(x))", NB),
                 ("dtype-matrix", {"x": (None, M)}, "x * (1.0 + np.zeros(x.shape, dtype=x.dtype))",
                  ())],
    "np.ones": [("vector", {"x": (None, V)}, "x * np.ones(np.shape(x))", NB),
                ("int-vector", {"x": (None, V)}, "x * np.ones(4)", ())],
    "np.empty": [("vector", {"x": (None, V)}, "x * np.size(np.empty(np.shape(x)))", NB)],
    "np.zeros_like": [("vector", {"x": (None, V)}, "x + np.zeros_like(x)", NB)],
    "np.ones_like": [("vector", {"x": (None, V)}, "x * np.ones_like(x)", NB),
                     ("dtype-matrix", {"x": (None, M)}, "x * np.ones_like(x, dtype=np.float64)",
                      ())],
    "np.empty_like": [("vector", {"x": (None, V)}, "x * np.size(np.empty_like(x))", NB)],
    "np.arange": [("stop-vector", {"x": (None, V)}, "x * np.arange(4)", NB),
                  ("start_stop-vector", {"x": (None, V)}, "x * np.arange(1, 5)", ()),
                  ("step-vector", {"x": (None, V)}, "x * np.arange(0, 8, 2)", ())],
    "np.eye": [("matrix", {"x": (None, (4, 4))}, "x * np.eye(4)", NB)],
    "np.shape": [("matrix", {"x": (None, M)}, "x * np.shape(x)[0]", ()),
                 ("attribute-vector", {"x": (None, V)}, "x * x.shape[0]", NB)],
    "np.ndim": [("vector", {"x": (None, V)}, "x * np.ndim(x)", NB),
                ("attribute-matrix", {"x": (None, M)}, "x * x.ndim", ())],
    "np.size": [("vector", {"x": (None, V)}, "x * np.size(x)", NB),
                ("attribute-matrix", {"x": (None, M)}, "x * x.size", ())],
    "len": [("vector", {"x": (None, V)}, "x * len(x)", NB)],
    "int": [("scalar", {"x": (None, ())}, "x * int(3.7 * x)", NB)],
    "np.argmax": [("vector", {"x": (None, V)}, "x[np.argmax(x)]", NB),
                  ("method-vector", {"x": (None, V)}, "x[x.argmax()]", ()),
                  ("axis-matrix", {"x": (None, M)}, "x * np.argmax(x, axis=0)", ())],
    "np.argmin": [("vector", {"x": (None, V)}, "x[np.argmin(x)]", NB),
                  ("method-vector", {"x": (None, V)}, "x[x.argmin()]", ())],
    "np.argsort": [("vector", {"x": (None, V)}, "x[np.argsort(x)] * np.arange(4)", NB),
                   ("method-vector", {"x": (None, V)}, "x * x.argsort()", ()),
                   ("axis0-matrix", {"x": (None, M)}, "x * np.argsort(x, axis=0)", NB)],
    "np.searchsorted": [
        ("vector", {"x": (None, V)}, "x * np.searchsorted(np.array([-1.0, 0.0, 1.0]), x)", NB),
        ("right-matrix", {"x": (None, M)},
         "x * np.searchsorted(np.array([-1.0, 0.0, 1.0]), x, side='right')", ())],
    # Only the kth position of a partition is specified: the programs read it.
    "np.argpartition": [
        ("vector", {"x": (None, V)}, "x[np.argpartition(x, 2)[2]] * x", NB),
        ("axis0-matrix", {"x": (None, M)},
         "np.take_along_axis(x, np.argpartition(x, 1, axis=0), 0)[1] * x[0]", ())],
    "dtype": [("vector", {"x": (None, V)}, "x * np.ones_like(x, dtype=x.dtype)", NB)],
    # Writes into an array.  Never into an argument: finite differences
    # call the function again.
    "setitem": [
        ("into_zeros-vector", {"x": (None, V), "c": (None, ())},
         "y = np.zeros(4)\ny[1] = c\nreturn y * x", NB),
        ("overwrite-vector", {"x": (None, V), "c": (None, ())},
         "y = x * 1.0\ny[2] = c * c\nreturn y * x", ()),
        ("row-matrix", {"x": (None, M), "v": (None, V)}, "y = x * 2.0\ny[1] = v\nreturn y", NB),
        ("slice-vector", {"x": (None, V), "v": (None, V)},
         "y = x + 0.0\ny[1:3] = v[:2]\nreturn y * v", ()),
        ("augmented-vector", {"x": (None, V), "c": (None, ())},
         "y = x * 1.0\ny[0] += c\nreturn y * y", ())],
    # Scans and gathers along an axis (s2s_ad/rules/scans.py).
    "np.cumsum": [("vector", {"a": (None, V)}, "np.cumsum(a)", NB),
                  ("axis1-matrix", {"a": (None, M)}, "np.cumsum(a, axis=1)", ()),
                  ("method-matrix", {"a": (None, M)}, "a.cumsum(0)", ())],
    "np.cumprod": [("axis0-matrix", {"a": (None, M)}, "np.cumprod(a, axis=0)", NB),
                   ("flat-matrix", {"a": (None, M)}, "np.cumprod(a)", ()),
                   ("zero_entry-vector", {"a": ("zero_entry", V)}, "np.cumprod(a)", ())],
    "np.take_along_axis": [
        ("sorted-matrix", {"x": (None, M)}, "np.take_along_axis(x, np.argsort(x, axis=0), 0)",
         NB),
        ("repeated-vector", {"x": (None, V)},
         "np.take_along_axis(x, np.array([0, 0, 3]), axis=0)", ())],
    # log(x > 0) is -inf or 0, and constant: the derivative is 1 where x > 0.
    "np.nan_to_num": [("vector", {"x": (None, V)}, "np.nan_to_num(x + np.log(x > 0.0))", NB),
                      ("neginf-matrix", {"x": (None, M)},
                       "np.nan_to_num(x - np.log(x > 0.0), posinf=3.0) * x", ())],
    # Linear algebra (s2s_ad/rules/linalg.py), on well-conditioned matrices.
    # Eigen- and singular vectors are defined up to sign: the programs square them.
    "np.linalg.solve": [
        ("vector", {"a": ("invertible", (4, 4)), "b": (None, V)}, "np.linalg.solve(a, b)", NB),
        ("matrix", {"a": ("invertible", (4, 4)), "b": (None, (4, 2))},
         "np.linalg.solve(a, b)", ())],
    "np.linalg.inv": [("matrix", {"a": ("invertible", (4, 4))}, "np.linalg.inv(a)", ())],
    "np.linalg.det": [("matrix", {"a": ("invertible", (3, 3))}, "np.linalg.det(a)", ())],
    "np.linalg.slogdet": [("unpacked", {"a": ("invertible", (4, 4))},
                           "sign, logdet = np.linalg.slogdet(a)\nreturn sign * logdet", ())],
    "linalg.slogdet[logabsdet]": [("matrix", {"a": ("invertible", (4, 4))},
                                   "np.linalg.slogdet(a)[1]", ())],
    "linalg.slogdet[sign]": [("matrix", {"a": ("invertible", (3, 3))},
                              "np.linalg.slogdet(a)[0] * a", ())],
    "np.linalg.cholesky": [("spd", {"a": ("spd", (4, 4))}, "np.linalg.cholesky(a)", ())],
    "np.linalg.eigh": [("unpacked", {"a": ("spd", (4, 4))},
                        "w, v = np.linalg.eigh(a)\n"
                        "return np.sum(w * np.arange(1.0, 5.0)) + np.sum(v * v * np.cos(a))", ())],
    "linalg.eigh[eigenvalues]": [("spd", {"a": ("spd", (4, 4))}, "np.linalg.eigh(a)[0]", ())],
    "linalg.eigh[eigenvectors]": [("spd", {"a": ("spd", (3, 3))}, "np.linalg.eigh(a)[1] ** 2",
                                   ())],
    "np.linalg.svd": [("unpacked-tall", {"a": ("invertible", (5, 3))},
                       "u, s, vh = np.linalg.svd(a, full_matrices=False)\n"
                       "return np.sum(s * np.arange(1.0, 4.0)) + np.sum(u * u * np.cos(a)) + "
                       "np.sum(vh * vh * np.arange(9.0).reshape(3, 3))", ())],
    "linalg.svd[U]": [("square", {"a": ("invertible", (3, 3))}, "np.linalg.svd(a)[0] ** 2", ())],
    "linalg.svd[S]": [("tall", {"a": ("invertible", (5, 3))},
                       "np.linalg.svd(a, compute_uv=False)", ()),
                      ("wide", {"a": ("invertible", (3, 4))},
                       "np.linalg.svd(a, full_matrices=False)[1]", ())],
    "linalg.svd[Vh]": [("wide", {"a": ("invertible", (3, 4))},
                        "np.linalg.svd(a, full_matrices=False)[2] ** 2", ())],
    "np.linalg.qr": [("unpacked-tall", {"a": ("invertible", (5, 3))},
                      "q, r = np.linalg.qr(a)\nreturn np.sum(np.sin(q)) + np.sum(r * r)", ())],
    "linalg.qr[Q]": [("square", {"a": ("invertible", (3, 3))}, "np.linalg.qr(a)[0]", ())],
    "linalg.qr[R]": [("tall", {"a": ("invertible", (5, 3))}, "np.linalg.qr(a)[1]", ())],
    "np.linalg.pinv": [("tall", {"a": ("invertible", (5, 3))}, "np.linalg.pinv(a)", ()),
                       ("wide", {"a": ("invertible", (3, 4))}, "np.linalg.pinv(a)", ())],
    "np.linalg.lstsq": [("unpacked", {"a": ("invertible", (5, 3)), "b": (None, (5,))},
                         "x, res, rank, sv = np.linalg.lstsq(a, b, rcond=None)\nreturn x", ())],
    "linalg.lstsq[x]": [("matrix", {"a": ("invertible", (5, 3)), "b": (None, (5, 2))},
                         "np.linalg.lstsq(a, b, rcond=None)[0]", ())],
    # Residuals and singular values have no derivative rule (an error where
    # differentiated): run here on constants.
    "linalg.lstsq[residuals]": [("constant", {"x": (None, V)},
                                 "m = np.reshape(np.arange(1.0, 16.0), (5, 3)) ** 1.5\n"
                                 "return x * np.linalg.lstsq(m, np.arange(5.0), rcond=None)[1]",
                                 ())],
    "linalg.lstsq[s]": [("constant", {"x": (None, (3,))},
                         "m = np.reshape(np.arange(1.0, 16.0), (5, 3)) ** 1.5\n"
                         "return x * np.linalg.lstsq(m, np.arange(5.0), rcond=None)[3]", ())],
    "linalg.lstsq[rank]": [("times", {"x": (None, V), "a": ("invertible", (5, 3)),
                                      "b": (None, (5,))},
                            "x * np.linalg.lstsq(a, b, rcond=None)[2]", ())],
    "np.linalg.matrix_power": [
        ("cube", {"a": ("invertible", (3, 3))}, "np.linalg.matrix_power(a, 3)", ()),
        ("keyword", {"a": ("invertible", (3, 3))}, "np.linalg.matrix_power(a, n=2)", ())],
    "np.linalg.norm": [
        ("vector", {"x": (None, V)}, "np.linalg.norm(x)", NB),
        ("ord1-vector", {"x": (None, V)}, "np.linalg.norm(x, 1)", ()),
        ("inf-vector", {"x": (None, V)}, "np.linalg.norm(x, ord=np.inf)", ()),
        ("p3-vector", {"x": (None, V)}, "np.linalg.norm(x, 3)", ()),
        ("fro-matrix", {"x": (None, M)}, "np.linalg.norm(x, 'fro')", ()),
        ("nuc-matrix", {"x": ("invertible", M)}, "np.linalg.norm(x, 'nuc')", ()),
        ("ord2-matrix", {"x": ("invertible", M)}, "np.linalg.norm(x, 2)", ()),
        ("axis1-matrix", {"x": (None, M)}, "np.linalg.norm(x, axis=1)", ()),
        ("keepdims-matrix", {"x": (None, M)}, "np.linalg.norm(x, axis=0, keepdims=True)", ())],
    "np.trace": [("matrix", {"a": (None, M)}, "np.trace(a)", NB),
                 ("offset-matrix", {"a": (None, M)}, "np.trace(a, offset=1)", ()),
                 ("axes-3d", {"a": (None, T3)}, "np.trace(a, 0, 1, 2)", ())],
    "np.diagonal": [("matrix", {"a": (None, M)}, "np.diagonal(a)", ()),
                    ("offset-matrix", {"a": (None, M)}, "np.diagonal(a, -1)", ())],
    "np.diag": [("of_vector", {"v": (None, V)}, "np.diag(v)", ()),
                ("of_matrix", {"v": (None, M)}, "np.diag(v)", ()),
                ("k1-vector", {"v": (None, (3,))}, "np.diag(v, k=1)", ())],
    "np.tril": [("matrix", {"m": (None, M)}, "np.tril(m)", ()),
                ("k-matrix", {"m": (None, M)}, "np.tril(m, -1)", ())],
    "np.triu": [("matrix", {"m": (None, M)}, "np.triu(m)", ()),
                ("k-matrix", {"m": (None, M)}, "np.triu(m, k=1)", ())],
    "np.kron": [("vv", {"a": (None, (3,)), "b": (None, (2,))}, "np.kron(a, b)", ()),
                ("mm", {"a": (None, (2, 2)), "b": (None, (2, 3))}, "np.kron(a, b)", ())],
    "np.cross": [("vv", {"a": (None, (3,)), "b": (None, (3,))}, "np.cross(a, b)", ())],
    "np.vdot": [("vv", {"a": (None, V), "b": (None, V)}, "np.vdot(a, b)", ()),
                ("mm", {"a": (None, M), "b": (None, M)}, "np.vdot(a, b)", ())],
    "np.tensordot": [
        ("axes1", {"a": (None, M), "b": (None, (4, 2))}, "np.tensordot(a, b, axes=1)", ()),
        ("axes2", {"a": (None, T3), "b": (None, (3, 4))}, "np.tensordot(a, b)", ()),
        ("axes_lists", {"a": (None, M), "b": (None, (3, 2))},
         "np.tensordot(a, b, axes=([0], [0]))", ()),
        # every axis contracted: a number, whose cotangent is a number too
        ("full", {"a": (None, M), "b": (None, M)}, "np.tensordot(a, b, 2)", NB)],
    "np.einsum": [
        ("matmul", {"a": (None, M), "b": (None, (4, 2))}, "np.einsum('ij,jk->ik', a, b)", ()),
        ("diagonal", {"a": (None, (3, 3))}, "np.einsum('ii->i', a)", ()),
        ("three", {"a": (None, M), "b": (None, (4, 2)), "c": (None, (2,))},
         "np.einsum('ij,jk,k->i', a, b, c)", ()),
        ("implicit", {"a": (None, M), "b": (None, M)}, "np.einsum('ij,ij', a, b)", ())],
    # np.fft (s2s_ad/rules/fft.py): real losses of complex results, on real inputs.
    "np.fft.fft": [("abs-vector", {"a": (None, V)}, "np.abs(np.fft.fft(a))", NB),
                   ("n_axis_ortho-matrix", {"a": (None, M)},
                    "np.fft.fft(a, 6, 0, 'ortho').imag", NB32),
                   ("crop_forward-matrix", {"a": (None, M)},
                    "np.abs(np.fft.fft(a, n=3, norm='forward'))", ())],
    "np.fft.ifft": [("real_imag-vector", {"a": (None, V)},
                     "np.real(np.fft.ifft(a)) * np.imag(np.fft.ifft(a, n=4))", NB),
                    ("of_complex-matrix", {"a": (None, M)},
                     "np.abs(np.fft.ifft(np.fft.fft(a) * a, n=5, axis=-1, norm='ortho'))", ())],
    "np.fft.rfft": [("power-vector", {"a": (None, (5,))}, "np.abs(np.fft.rfft(a)) ** 2", NB),
                    ("n_axis-matrix", {"a": (None, M)},
                     "np.fft.rfft(a, n=5, axis=0, norm='ortho').real", NB32),
                    ("crop-vector", {"a": (None, (6,))}, "np.fft.rfft(a, 4).imag", ())],
    "np.fft.irfft": [
        ("roundtrip-vector", {"a": (None, (6,))}, "np.fft.irfft(np.fft.rfft(a) * a[:4])", NB),
        ("n_odd-matrix", {"a": (None, M)},
         "np.fft.irfft(np.fft.rfft(a, axis=0) * a[:2], n=5, axis=0, norm='forward')", ()),
        ("n_even_ortho-vector", {"a": (None, (5,))},
         "np.fft.irfft(np.fft.fft(a), n=6, norm='ortho')", NB32)],
    "np.fft.hfft": [("real-vector", {"a": (None, (5,))}, "np.fft.hfft(a) * a[0]", NB),
                    ("spectrum-vector", {"a": (None, V)},
                     "np.fft.hfft(np.fft.fft(a) * a, n=7, norm='ortho')", ()),
                    ("axis-matrix", {"a": (None, M)}, "np.fft.hfft(a, 5, 0, 'forward')", NB32)],
    "np.fft.ihfft": [("abs-vector", {"a": (None, V)}, "np.abs(np.fft.ihfft(a)) ** 2", NB),
                     ("n-matrix", {"a": (None, M)},
                      "np.fft.ihfft(a, n=6, axis=0, norm='forward').imag", NB32),
                     ("ortho-vector", {"a": (None, (5,))},
                      "np.real(np.fft.ihfft(a * a, norm='ortho') * a[:3])", ())],
    "np.fft.fftn": [("abs-3d", {"a": (None, T3)}, "np.abs(np.fft.fftn(a))", NB),
                    ("s_axes-3d", {"a": (None, T3)},
                     "np.fft.fftn(a, s=(3, 2), axes=(0, 2), norm='ortho').real", ())],
    "np.fft.fft2": [("abs-matrix", {"a": (None, M)}, "np.abs(np.fft.fft2(a))", NB32),
                    ("s-3d", {"a": (None, T3)}, "np.fft.fft2(a, s=(4, 3)).imag", ())],
    "np.fft.ifftn": [("abs-matrix", {"a": (None, M)},
                      "np.abs(np.fft.ifftn(np.fft.fftn(a) * a, axes=(0,)))", NB)],
    "np.fft.ifft2": [("imag-3d", {"a": (None, T3)},
                      "np.fft.ifft2(np.fft.fft2(a) * a, norm='forward').imag", ())],
    "np.fft.rfftn": [("power-3d", {"a": (None, T3)}, "np.abs(np.fft.rfftn(a)) ** 2", NB),
                     ("s_axes-matrix", {"a": (None, M)},
                      "np.fft.rfftn(a, s=(2, 6), axes=(1, 0)).real", ())],
    "np.fft.rfft2": [("ortho-3d", {"a": (None, T3)},
                      "np.abs(np.fft.rfft2(a, norm='ortho'))", NB32)],
    "np.fft.irfftn": [("roundtrip-3d", {"a": (None, T3)},
                       "np.fft.irfftn(np.fft.rfftn(a) * a[:, :, :3])", NB),
                      ("s_odd-matrix", {"a": (None, M)},
                       "np.fft.irfftn(np.fft.rfftn(a) * a[:, :3], s=(2, 5), axes=(0, 1))", ())],
    "np.fft.irfft2": [("ortho-matrix", {"a": (None, M)},
                       "np.fft.irfft2(np.fft.rfft2(a) * a[:, :3], norm='ortho')", ())],
    "np.fft.fftshift": [("vector", {"x": (None, (5,))}, "np.fft.fftshift(x) * x", NB),
                        ("axes-matrix", {"x": (None, M)},
                         "np.abs(np.fft.fftshift(np.fft.fft2(x), axes=(1,)))", ())],
    "np.fft.ifftshift": [("matrix", {"x": (None, M)}, "np.fft.ifftshift(x) * x", NB)],
    "np.real": [("of_fft-vector", {"val": (None, V)}, "np.real(np.fft.fft(val) * val)", NB),
                ("real_input-matrix", {"val": (None, M)}, "np.real(val) * val", NB),
                ("attribute-vector", {"val": (None, V)}, "(np.fft.fft(val) * val).real", ())],
    "np.imag": [("of_fft-vector", {"val": (None, V)}, "np.imag(np.fft.fft(val) * val)", NB),
                ("real_input-matrix", {"val": (None, M)}, "np.imag(val) + val", ()),
                ("attribute-vector", {"val": (None, V)}, "np.fft.fft(val * val).imag", NB32)],
    "np.conj": [("of_fft-vector", {"x": (None, V)},
                 "np.real(np.conj(np.fft.fft(x)) * np.fft.fft(x * x))", NB),
                ("real_input-matrix", {"x": (None, M)}, "np.conj(x) * x", ()),
                ("method-vector", {"x": (None, V)}, "np.imag(np.fft.fft(x).conj() * x)", ())],
    # Joins of values at the end of branches and loop bodies.
    "copy": [
        ("branch-vector", {"x": (None, V), "c": (None, ())},
         "if c > 0.0:\n    y = x * c\nelse:\n    y = np.sin(x)\nreturn y", NB),
        ("loop-vector", {"x": (None, V)}, "y = x\nfor i in range(3):\n    y = y * x\nreturn y", ())],
}


# More forms of elementwise rules: constant operands (nothing to
# un-broadcast) and integer powers of negative numbers.
EXTRA_PROGRAMS = {
    "np.power": [
        ("cube-vector", {"x1": (None, V)}, "x1 ** 3", NB),
        ("square-scalar", {"x1": (None, ())}, "x1 ** 2", ()),
        ("sqrt-vector", {"x1": ("positive", V)}, "x1 ** 0.5", ()),
        ("base_constant-vector", {"x2": (None, V)}, "2.0 ** x2", ())],
    "np.divide": [
        ("by_constant-vector", {"x1": (None, V)}, "x1 / 3.0", ()),
        ("constant_by-vector", {"x2": (None, V)}, "2.0 / x2", ())],
    "np.subtract": [("constant_minus-matrix", {"x2": (None, M)}, "1.0 - x2", ())],
}


def array_cases(rule, entries):
    progs = []
    for form, params, body, numba in entries:
        imports = ("import numpy as onp",) if "onp." in body else ()
        progs.append((Program(rule.name, form, tuple(params), body, imports), params, numba))
    base = next((p for p in progs if f"{rule.name}(" in p[0].body), None)
    if base is not None and not rule.elementwise:
        progs += [(alias, base[1], ()) for alias in alias_programs(rule, base[0])]
    for prog, params, numba in progs:
        inputs = tuple(params.values())
        for dtype in DTYPES:
            yield Case(prog, "", inputs, dtype, "python")
            if dtype in numba:
                yield Case(prog, "", inputs, dtype, "numba")


# Finite differences cannot see stop_gradient: it has its own test below.
SPECIAL = {"stop_gradient": "test_stop_gradient"}


def cases_for(rule):
    if rule.name in SPECIAL:
        return []
    if rule.name in ARRAY_PROGRAMS:
        return list(array_cases(rule, ARRAY_PROGRAMS[rule.name]))
    if rule.elementwise:
        extra = EXTRA_PROGRAMS.get(rule.name, [])
        return list(elementwise_cases(rule)) + list(array_cases(rule, extra))
    if rule.nondiff and (rule.name.startswith(("np.", "math.")) or rule.name in _OPERATOR_OF):
        return list(nondiff_elementwise_cases(rule))
    return []


CASES = [c for r in rules.RULES.values() for c in cases_for(r)]
PROGRAMS = {c.program.name: c.program for c in CASES}


# -- the generated modules ------------------------------------------------------------

HEADER = "import math\n\nimport numpy as np\nimport scipy.special\n\nimport s2s_ad as ad\n"


def module_name(rule):
    return f"s2s_rule_{_ident(rule)}"


@pytest.fixture(scope="session")
def generated(tmp_path_factory):
    """Writes one module per rule holding all its programs; returns rule -> module."""
    folder = tmp_path_factory.mktemp("rule_programs")
    by_rule = {}
    for prog in PROGRAMS.values():
        by_rule.setdefault(prog.rule, []).append(prog)
    for rule, progs in by_rule.items():
        imports = sorted({i for p in progs for i in p.imports})
        text = HEADER + "".join(f"{i}\n" for i in imports)
        text += "".join("\n\n" + p.source() for p in progs)
        (folder / f"{module_name(rule)}.py").write_text(text)
    sys.path.insert(0, str(folder))
    try:
        yield {rule: importlib.import_module(module_name(rule)) for rule in by_rule}
    finally:
        sys.path.remove(str(folder))


def make_inputs(case):
    rng = np.random.default_rng(zlib.crc32(case.id.encode()))
    dtype = DTYPES[case.dtype]

    def one(spec):
        if isinstance(spec[0], tuple):            # a tuple argument (pytree)
            return tuple(one(s) for s in spec)
        domain, shape = spec
        if domain == "zero_entry":
            value = sample(None, shape, dtype, rng)
            value.flat[1] = 0.0
            return value
        return sample(domain, shape, dtype, rng)
    return tuple(one(s) for s in case.inputs)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_rule(case, generated):
    f = getattr(generated[case.program.rule], case.program.name)
    args = make_inputs(case)
    target = "cpu" if case.backend == "numba" else "python"
    out = f(*args)
    if np.ndim(out) == 0:
        nums = tuple(i for i, a in enumerate(args) if _floats(a))
        check_grad(f, args, nums, target=target)
    else:
        check_vjp(f, args, target=target)


def _floats(a):
    if isinstance(a, tuple):
        return all(_floats(x) for x in a)
    return isinstance(a, (float, np.floating)) or (
        isinstance(a, np.ndarray) and a.dtype.kind == "f")


def test_every_rule_has_cases():
    """A new rule needs samples here (elementwise rules get them for free)."""
    covered = {c.program.rule for c in CASES} | set(SPECIAL)
    missing = sorted(set(rules.RULES) - covered)
    assert not missing, f"rules with no generated test case: {missing}; add them to ARRAY_PROGRAMS"


def test_ids_are_unique():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))


STOP_SOURCE = '''
def stopped(x):
    return np.sum(x * ad.stop_gradient(x))


def stopped_all(x):
    return np.sum(ad.stop_gradient(np.sin(x)))
'''


@pytest.mark.parametrize("backend", ["python", "numba"])
def test_stop_gradient(backend, tmp_path, monkeypatch):
    """stop_gradient(x) has zero derivative: d/dx sum(x * stop(x)) = x, not 2x."""
    (tmp_path / "s2s_stop_program.py").write_text(HEADER + STOP_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("s2s_stop_program")
    x = np.array([0.5, -1.0, 2.0])
    grad = ad.grad(mod.stopped)
    grad_all = ad.grad(mod.stopped_all)
    if backend == "numba":
        grad, grad_all = ad.jit(grad), ad.jit(grad_all)
    np.testing.assert_array_equal(grad(x), x)
    np.testing.assert_array_equal(grad_all(x), np.zeros(3))


# -- the supported surface and its documentation --------------------------------------

def test_surface_is_partitioned():
    """Each NumPy ufunc, math function and common array function is ruled,
    non-differentiable, or unsupported with a reason -- exactly one."""
    kinds = {name: table.classify(name) for name in table.surface()}
    unaccounted = sorted(n for n, k in kinds.items() if k is None)
    assert not unaccounted, (f"no rule and no entry in s2s_ad.rules.table.UNSUPPORTED: "
                             f"{unaccounted}")
    ruled_and_listed = sorted(n for n in table.UNSUPPORTED
                              if rules.lookup(table.resolve(n)) is not None)
    assert not ruled_and_listed, f"ruled, yet listed as unsupported: {ruled_and_listed}"
    stale = sorted(n for n in table.UNSUPPORTED if table.resolve(n) is None)
    assert not stale, f"listed as unsupported but not in NumPy/math: {stale}"
    assert all(reason.strip() for reason in table.UNSUPPORTED.values())
    counts = {k: sum(v == k for v in kinds.values()) for k in ("rule", "nondiff", "unsupported")}
    assert min(counts.values()) > 0, counts


def test_supported_md_is_up_to_date():
    page = pathlib.Path(__file__).resolve().parents[1] / "docs" / "supported.md"
    assert page.read_text() == table.render(), (
        "docs/supported.md is stale: run python -m s2s_ad.rules.table > docs/supported.md")


def test_every_rule_is_listed_in_supported_md():
    """Each rule is in one section of the page (scipy.special's were in none)."""
    page = table.render()
    missing = [name for name in rules.RULES if f"| `{name}` |" not in page]
    assert not missing, f"rules in no section of docs/supported.md: {missing}"
