"""ad.vmap's vectorized lowering (``method="vectorize"``) against the batching oracle.

The oracle: ``ad.vmap(f, in_axes, method="vectorize")(*batched)`` equals
stacking ``f`` over the examples -- a Python loop that calls the *un-batched*
function on each example and ``np.stack``-s the results -- in tree structure,
shape, dtype and value; and so does ``method="loop"``.  Where the vectorized
lowering cannot batch a function it raises ``ValueError`` saying why, and
``method=None`` then equals the loop.

1. Rules.  One small program per rule and call form (every rule of
   ``s2s_ad.rules.RULES`` a batched value can flow through): elementwise
   programs are generated from the registry (every operand-rank combination
   that broadcasts), the others are listed in ``ARRAY_PROGRAMS``.  Each runs on
   a batch of ``B`` examples for every in_axes combination of 0 / None / 1
   (1 where the per-example rank permits), float64 and, for most, float32.
   Programs are written to a module file once per session (s2s_ad reads
   source); ids read ``<program>-<dtype>``.
2. The control-flow corpus (``tests/programs/control_flow.py``): batched over
   its float arguments (integer arguments shared), ``VECTORIZES`` pins the
   programs the vectorized lowering batches and ``REFUSALS`` why it refuses
   the others; ``method=None`` equals the loop for all of them.
3. Composition: ad.jvp inside the batched function, helpers, pytrees,
   nested vmap, ``ad.vmap(ad.jit(f))`` (vectorized when f is loop-free, the
   compiled per-sample loop when it loops; ``ad.source`` names which),
   float32.

Known bugs are ``xfail(strict=True)`` with the cause in the reason.
"""
import dataclasses
import importlib
import itertools
import pathlib
import re
import sys
import zlib

import numpy as np
import pytest
from conftest import load_program

import s2s_ad as ad
from s2s_ad import rules
from s2s_ad.ir import pytree

HERE = pathlib.Path(__file__).resolve().parent
vp = load_program(HERE / "programs" / "vectorize_programs.py")
cf = load_program(HERE / "programs" / "control_flow.py")

B = 3                                  # examples per batch (no per-example dim is 3)
TOL = {"float64": 1e-12, "float32": 1e-5}
DTYPES = {"float64": np.float64, "float32": np.float32}

# -- argument specs ------------------------------------------------------------------
# ("f", shape, domain): floats; ("i", shape, hi): ints in [0, hi); ("b", shape): bools;
# ("k", value): a fixed value, always shared (in_axes None).


def F(*shape, d=None):
    return ("f", shape, d)


def I(hi, *shape):                                            # noqa: E743
    return ("i", shape, hi)


def Bo(*shape):
    return ("b", shape)


def K(value):
    return ("k", value)


DOMAINS = {
    None: lambda rng, shape: rng.uniform(0.3, 2.0, shape) * rng.choice([-1.0, 1.0], shape),
    "positive": lambda rng, shape: rng.uniform(0.5, 2.0, shape),
    "unit": lambda rng, shape: rng.uniform(-0.9, 0.9, shape),
    "above_one": lambda rng, shape: rng.uniform(1.1, 3.0, shape),
    # Linear algebra: singular values (eigenvalues for "spd") spread over 1 .. 3.
    "invertible": lambda rng, shape: _conditioned(rng, shape, symmetric=False),
    "spd": lambda rng, shape: _conditioned(rng, shape, symmetric=True),
}


def _conditioned(rng, shape, symmetric):
    m, n = shape
    q1, _ = np.linalg.qr(rng.normal(size=(m, m)))
    q2, _ = np.linalg.qr(rng.normal(size=(n, n)))
    k = min(m, n)
    s = np.linspace(1.0, 3.0, k)
    if symmetric:
        return (q1 * s) @ q1.T
    return (q1[:, :k] * s) @ q2[:, :k].T


def sample(spec, rng, dtype):
    kind = spec[0]
    if kind == "f":
        _, shape, domain = spec
        v = DOMAINS[domain](rng, shape).astype(dtype)
        if shape:
            return v
        return float(v) if dtype is np.float64 else dtype(v)
    if kind == "i":
        v = rng.integers(0, spec[2], spec[1])
        return int(v) if spec[1] == () else v
    if kind == "b":
        v = rng.uniform(size=spec[1]) < 0.5
        return bool(v) if spec[1] == () else v
    return spec[1]


def _rank(spec):
    return len(spec[1]) if spec[0] in "fib" else None


def axes_options(spec):
    if spec[0] == "k":
        return [None]
    return [0, None] + ([1] if _rank(spec) >= 1 else [])


def all_in_axes(specs):
    """Every combination of 0 / None / 1 per argument, at least one batched."""
    return [c for c in itertools.product(*map(axes_options, specs))
            if any(a is not None for a in c)]


# -- programs ------------------------------------------------------------------------------


@dataclasses.dataclass
class Prog:
    """``def name(params): body`` with argument specs and what vectorize does with it.

    ``expect``: "ok" (equals the loop), "refuse" (ValueError matching ``why``;
    method=None equals the loop) or "xfail" (a known bug, ``why`` says which).
    """
    rule: str
    name: str
    params: tuple
    body: str
    specs: tuple
    expect: str = "ok"
    why: str = ""
    dtypes: tuple = ("float64", "float32")
    axes: tuple = None              # in_axes combinations, when not all of them

    def source(self):
        lines = self.body.split("\n")
        if len(lines) == 1 and not lines[0].startswith(("return", "raise")):
            lines = [f"return {lines[0]}"]
        return f"def {self.name}({', '.join(self.params)}):\n" + "".join(
            f"    {line}\n" for line in lines)

    def in_axes(self):
        return list(self.axes) if self.axes is not None else all_in_axes(self.specs)


def _ident(text):
    return re.sub(r"\W", "_", text).strip("_")


# Refusals (regexes of the reason) and bugs (xfail reasons; file:line of the cause).
DOT_3D = "with more than 2 dimensions"
NOT_OP = "not has no batching rule"
FLOAT_CAST_DTYPE = ("float(x) of a float32 value: per example a Python float (float64), "
                    "vectorized a float32 array (transforms/batch.py _same: float becomes a copy)")

# The rank of np.zeros/np.full of a shape held in a variable (np.shape(x), x.shape) is
# not inferred (s2s_ad/analyses/ranks.py _shape_rank), so what reads it refuses.
UNKNOWN_RANK = "the number of dimensions of a value here is not known"

# module-level constants the programs read (a Const, unlike a literal tuple)
CONSTANTS = """
AX02 = (0, 2)
AXNEG = (-1, 0)
T102 = (1, 0, 2)
T201 = (2, 0, 1)
E0N = (0, -1)
E02 = (0, 2)
SQ02 = (0, 2)
"""

V, M, T = (4,), (5, 4), (2, 5, 4)


def P(rule, form, params, body, *specs, **kw):
    return Prog(rule, f"{_ident(rule)}__{form}", tuple(params.split()), body, specs, **kw)


# -- elementwise rules: generated from the registry ---------------------------------------

_BOOL_OPERANDS = {"np.logical_and", "np.logical_or", "np.logical_xor", "np.logical_not"}
UNARY_SHAPES = {"scalar": [()], "vector": [V], "matrix": [M]}
BINARY_SHAPES = {"scalars": [(), ()], "scalar_matrix": [(), M], "matrix_scalar": [M, ()],
                 "vector_matrix": [V, M], "matrix_vector": [M, V], "broadcast": [(5, 1), V],
                 "matrix": [M, M]}
TERNARY_SHAPES = {"scalars": [(), (), ()], "vectors": [V, V, V], "mixed": [M, (), V],
                  "broadcast": [(5, 1), V, M]}
FLOAT32_SHAPE = {1: "vector", 2: "broadcast", 3: "broadcast"}
MATH_NOT_BATCHED = {"math.floor", "math.ceil", "math.trunc", "math.isnan", "math.isinf",
                    "math.isfinite", "math.erf", "math.erfc", "math.degrees", "math.radians",
                    "math.lgamma", "math.gamma", "math.copysign",
                    "math.remainder"}  # no NumPy rule to batch them with


def _domains(rule, params):
    s = rule.samples
    return [s.get(p) for p in params] if isinstance(s, dict) else [s] * len(params)


def _spec(domain, shape, boolean):
    """An integer sample (polygamma's order n, ldexp's exponent) is a fixed value."""
    if isinstance(domain, int) and not isinstance(domain, bool):
        return K(domain)
    return Bo(*shape) if boolean or domain == "bool" else F(*shape, d=domain)


def _is_plain_nondiff(rule):
    return rule.nondiff and rule.name.startswith(("np.", "math.")) and \
        rule.operands == rule.params and len(rule.params) in (1, 2) and \
        rule.name not in ("np.shape", "np.ndim", "np.size", "np.argsort", "np.eye", "np.arange",
                          "np.zeros", "np.ones", "np.empty")


def elementwise_programs():
    out = []
    for rule in rules.RULES.values():
        if not (rule.elementwise or _is_plain_nondiff(rule)):
            continue
        # Options that are not operands (np.nan_to_num's nan=, posinf=...) keep
        # their defaults: the program passes the operands.
        params = rule.operands if rule.elementwise else rule.params
        doms = _domains(rule, params)
        call = f"{rule.name}({', '.join(params)})"
        if rule.name.startswith("math."):
            specs = [_spec(d, (), False) for d in doms]
            kw = {}
            if rule.name in MATH_NOT_BATCHED:
                kw = {"expect": "refuse", "why": f"{re.escape(rule.name)} has no batching rule"}
            out.append(P(rule.name, "scalar", " ".join(params), call, *specs,
                         dtypes=("float64",), **kw))
            continue
        table = {1: UNARY_SHAPES, 2: BINARY_SHAPES, 3: TERNARY_SHAPES}[len(params)]
        forms = {}         # specs -> (label, dtypes): a fixed operand gives fewer programs
        for label, shapes in table.items():
            specs = tuple(_spec(d, s, rule.name in _BOOL_OPERANDS) for s, d in zip(shapes, doms))
            first, dtypes = forms.get(specs, (label, ("float64",)))
            if label == FLOAT32_SHAPE[len(params)]:
                dtypes = ("float64", "float32")
            forms[specs] = (first, dtypes)
        for specs, (label, dtypes) in forms.items():
            out.append(P(rule.name, label, " ".join(params), call, *specs, dtypes=dtypes))
    return out


# -- the other rules, one program per call form ---------------------------------------------


def _reductions(r):
    n = f"np.{r}"
    return [
        P(n, "scalar", "a", f"{n}(a)", F()),
        P(n, "vector", "a", f"{n}(a)", F(*V)),
        P(n, "axis0_vector", "a", f"{n}(a, axis=0)", F(*V)),
        P(n, "keepdims_vector", "a", f"{n}(a, axis=-1, keepdims=True)", F(*V)),
        P(n, "matrix", "a", f"{n}(a)", F(*M)),
        P(n, "axis0", "a", f"{n}(a, axis=0)", F(*M)),
        P(n, "axis1", "a", f"{n}(a, axis=1)", F(*M)),
        P(n, "axis_neg1", "a", f"{n}(a, axis=-1)", F(*M)),
        P(n, "positional_axis", "a", f"{n}(a, 1)", F(*M)),
        P(n, "keepdims_axis", "a", f"{n}(a, axis=0, keepdims=True)", F(*M)),
        P(n, "keepdims_all", "a", f"{n}(a, keepdims=True)", F(*M)),
        P(n, "method", "a", f"a.{r}(axis=1)", F(*M)),
        P(n, "method_chain", "a", f"np.exp(a).{r}()", F(*M)),
        P(n, "axis1_3d", "a", f"{n}(a, axis=1)", F(*T)),
        P(n, "const_tuple_3d", "a", f"{n}(a, axis=AX02)", F(*T)),
        P(n, "const_tuple_neg_keepdims_3d", "a", f"{n}(a, axis=AXNEG, keepdims=True)", F(*T)),
        P(n, "literal_tuple_3d", "a", f"{n}(a, axis=(0, 2))", F(*T), dtypes=("float64",)),
        P(n, "of_product", "a b", f"{n}(a * b, axis=0)", F(*M), F(*M)),
    ]


def _dots():
    a_shapes = {0: (), 1: V, 2: M}
    b_shapes = {0: (), 1: V, 2: (4, 2)}
    out = []
    for name, text, ranks in [("np.dot", "np.dot(a, b)", range(3)),
                              ("np.matmul", "np.matmul(a, b)", range(1, 3)),
                              ("np.inner", "np.inner(a, b)", range(3)),
                              ("np.outer", "np.outer(a, b)", range(3))]:
        for ra, rb in itertools.product(ranks, ranks):
            bs = (2, 4) if name == "np.inner" and rb == 2 else b_shapes[rb]
            kw = {}
            out.append(P(name, f"r{ra}_r{rb}", "a b", text, F(*a_shapes[ra]), F(*bs), **kw))
    out += [
        P("np.matmul", "op_mv", "a b", "a @ b", F(*M), F(*V)),
        P("np.matmul", "op_mm", "a b", "a @ b", F(*M), F(4, 2)),
        P("np.dot", "method_mv", "a b", "a.dot(b)", F(*M), F(*V)),
        P("np.dot", "r3_r1", "a b", "np.dot(a, b)", F(*T), F(*V), expect="refuse", why=DOT_3D,
          dtypes=("float64",)),
        P("np.dot", "r1_r3", "a b", "np.dot(a, b)", F(5), F(2, 5, 4), expect="refuse",
          why=DOT_3D, dtypes=("float64",)),
        P("np.matmul", "r3_r2", "a b", "np.matmul(a, b)", F(*T), F(4, 2), expect="refuse",
          why=DOT_3D, dtypes=("float64",)),
    ]
    return out


def _shape_ops():
    return [
        P("np.reshape", "matrix", "a", "np.reshape(a, (4, 5))", F(*M)),
        P("np.reshape", "flat", "a", "np.reshape(a, -1)", F(*M)),
        P("np.reshape", "infer", "a", "np.reshape(a, (2, -1))", F(*M)),
        P("np.reshape", "vector", "a", "np.reshape(a, (2, 2))", F(*V)),
        P("np.reshape", "scalar", "a", "np.reshape(a, (1, 1))", F()),
        P("np.reshape", "method", "a", "a.reshape((10, 2))", F(*M)),
        P("np.reshape", "method_varargs", "a", "a.reshape(2, 10)", F(*M)),
        P("np.reshape", "int_variable", "a n", "np.reshape(a, (n, -1))", F(*M), K(2)),
        P("np.reshape", "shape_variable", "a b", "np.reshape(a, np.shape(b))", F(*M), F(*M),
          axes=[(0, 0), (0, None), (1, 0)]),
        P("np.reshape", "shape_variable_shared", "a b", "np.reshape(a, np.shape(b))", F(*M),
          F(*M), axes=[(None, 0)]),
        P("np.ravel", "matrix", "a", "np.ravel(a)", F(*M)),
        P("np.ravel", "3d", "a", "np.ravel(a)", F(*T)),
        P("np.ravel", "method", "a", "a.ravel()", F(*M)),
        P("np.ravel", "flatten", "a", "a.flatten()", F(*T)),
        P("np.transpose", "vector", "a", "np.transpose(a)", F(*V)),
        P("np.transpose", "matrix", "a", "np.transpose(a)", F(*M)),
        P("np.transpose", "3d", "a", "np.transpose(a)", F(*T)),
        P("np.transpose", "T", "a", "a.T", F(*M)),
        P("np.transpose", "method", "a", "a.transpose()", F(*T)),
        P("np.transpose", "const_axes", "a", "np.transpose(a, T102)", F(*T)),
        P("np.transpose", "const_axes_method", "a", "a.transpose(T201)", F(*T)),
        P("np.transpose", "literal_axes", "a", "np.transpose(a, (1, 0, 2))", F(*T), dtypes=("float64",)),
        P("np.transpose", "literal_axes_matrix", "a", "np.transpose(a, (1, 0))", F(*M), dtypes=("float64",)),
        P("np.transpose", "method_varargs", "a", "a.transpose(2, 0, 1)", F(*T), dtypes=("float64",)),
        P("np.expand_dims", "axis0_scalar", "a", "np.expand_dims(a, 0)", F()),
        P("np.expand_dims", "axis0_vector", "a", "np.expand_dims(a, 0)", F(*V)),
        P("np.expand_dims", "axis1_matrix", "a", "np.expand_dims(a, 1)", F(*M)),
        P("np.expand_dims", "axis_neg1_matrix", "a", "np.expand_dims(a, axis=-1)", F(*M)),
        P("np.expand_dims", "const_tuple_neg", "a", "np.expand_dims(a, E0N)", F(*V), dtypes=("float64",)),
        P("np.expand_dims", "const_tuple", "a", "np.expand_dims(a, E02)", F(*V), dtypes=("float64",)),
        P("np.squeeze", "axis1", "a", "np.squeeze(a, axis=1)", F(5, 1, 4)),
        P("np.squeeze", "axis_neg1", "a", "np.squeeze(a, -1)", F(4, 1)),
        P("np.squeeze", "method_axis", "a", "a.squeeze(0)", F(1, 4)),
        P("np.squeeze", "const_tuple", "a", "np.squeeze(a, axis=SQ02)", F(1, 4, 1)),
        P("np.squeeze", "literal_tuple", "a", "np.squeeze(a, axis=(0, 2))", F(1, 4, 1), dtypes=("float64",)),
        P("np.squeeze", "no_axis", "a", "np.squeeze(a)", F(5, 1, 4), expect="refuse",
          why="np.squeeze without an axis"),
        P("np.concatenate", "axis0", "a b", "np.concatenate((a, b))", F(2, 4), F(*M)),
        P("np.concatenate", "axis1", "a b", "np.concatenate([a, b], axis=1)", F(5, 2), F(*M)),
        P("np.concatenate", "axis_neg1_three", "a b c", "np.concatenate((a, b, c), axis=-1)",
          F(5, 2), F(*M), F(5, 1)),
        P("np.concatenate", "same_twice", "a", "np.concatenate((a, a))", F(*V)),
        P("np.concatenate", "vectors", "a b", "np.concatenate((a, b))", F(*V), F(2)),
        P("np.concatenate", "axis_none", "a b", "np.concatenate((a, b), axis=None)", F(*M),
          F(*V), expect="refuse", why="np.concatenate with axis=None"),
        P("np.stack", "axis0", "a b", "np.stack((a, b))", F(*V), F(*V)),
        P("np.stack", "axis1", "a b", "np.stack([a, b], axis=1)", F(*M), F(*M)),
        P("np.stack", "axis_neg1", "a b", "np.stack((a, b), axis=-1)", F(*M), F(*M)),
        P("np.stack", "scalars", "a b", "np.stack((a, b, a * b))", F(), F()),
        P("np.array", "scalars", "x y", "np.array([x, y, x * y])", F(), F()),
        P("np.array", "with_constants", "x", "np.array([x, 1.0, 2.0 * x])", F()),
        P("np.array", "vectors", "a b", "np.array([a, b])", F(*V), F(*V)),
        P("np.array", "nested", "x y", "np.array([[x, y], [y, x]])", F(), F()),
        P("np.copy", "fn", "a", "np.copy(a) * 2.0", F(*V)),
        P("np.copy", "method", "a", "a.copy()", F(*M)),
        P("np.asarray", "fn", "a", "np.asarray(a)", F(*V)),
        P("float", "scalar", "x", "float(x) * 2.0", F(), dtypes=("float64",)),
        P("float", "scalar_f32", "x", "float(x) * 2.0", F(), dtypes=("float32",),
          expect="xfail", why=FLOAT_CAST_DTYPE),
        P("float", "of_sum", "x", "float(np.sum(x))", F(*V), dtypes=("float64",)),
        P("np.astype", "method", "a", "a.astype(np.float64) * a", F(*M)),
        P("np.astype", "of_sum", "x", "np.sum(x).astype(np.float64) * x", F(*V)),
        P("astype_exact", "to_int", "a", "(a * 3.0).astype(int) * a", F(*M)),
        P("stop_gradient", "fn", "a", "ad.stop_gradient(a) * a", F(*M)),
        P("np.round", "fn", "a", "np.round(a)", F(*M)),
        P("np.round", "decimals", "a", "np.round(a, 1)", F(*V)),
        P("np.round", "method", "a", "a.round()", F(*V)),
    ]


def _indexing():
    ia, ib = np.array([1, 0]), np.array([3, 1])
    return [
        P("getitem", "int", "x", "x[2]", F(6)),
        P("getitem", "negative", "x", "x[-1]", F(6)),
        P("getitem", "slice", "x", "x[1:3]", F(6)),
        P("getitem", "step", "x", "x[::2]", F(6)),
        P("getitem", "reversed", "x", "x[::-1]", F(6)),
        P("getitem", "negative_slice", "x", "x[-4:-1]", F(6)),
        P("getitem", "row", "x", "x[1]", F(*M)),
        P("getitem", "negative_row", "x", "x[-2]", F(*M)),
        P("getitem", "column", "x", "x[:, 2]", F(*M)),
        P("getitem", "element", "x", "x[1, 2]", F(*M)),
        P("getitem", "negative_element", "x", "x[-1, -2]", F(*M)),
        P("getitem", "slices", "x", "x[1:4, ::2]", F(*M)),
        P("getitem", "newaxis", "x", "x[:, None]", F(*M)),
        P("getitem", "newaxis_front", "x", "x[None]", F(*V)),
        P("getitem", "3d", "x", "x[1, :, 1:3]", F(*T)),
        P("getitem", "int_variable", "x i", "x[i]", F(6), K(4)),
        P("getitem", "batched_int", "x i", "x[i]", F(6), I(6)),
        P("getitem", "batched_int_row", "x i", "x[i]", F(*M), I(5)),
        P("getitem", "batched_int_expr", "x i", "x[-1 - i]", F(6), I(6)),
        P("getitem", "batched_int_twice", "x i", "x[i] * x[i] + x[0]", F(6), I(6)),
        P("getitem", "slice_variable", "x i", "x[i:i + 2]", F(6), K(3)),
        P("getitem", "int_array", "x", "x[np.arange(6) // 2]", F(6)),
        P("getitem", "int_array_arg", "x idx", "x[idx]", F(6), K(np.array([3, 0, 0, 5]))),
        P("getitem", "int_array_2d", "x idx", "x[idx]", F(6), K(np.array([[0, 1], [5, 5]]))),
        P("getitem", "int_array_rows", "x idx", "x[idx]", F(*M), K(np.array([4, 0]))),
        P("getitem", "int_arrays_adjacent", "x ia ib", "x[ia, ib]", F(*M), K(ia), K(ib)),
        P("getitem", "mask", "x m", "x[m]", F(6), K(np.array([1, 0, 1, 1, 0, 1], bool))),
        P("getitem", "unpack", "x", "a, b, c, d = x\nreturn a * b + c * d", F(4)),
        P("getitem", "int_arrays_split", "x ia ib", "x[ia, :, ib]", F(*T), K(ia), K(ib)),
        P("getitem", "int_and_array_split", "x ib", "x[1, :, ib]", F(*T), K(ib)),
        P("getitem", "batched_slice", "x i", "x[i:i + 2]", F(6), I(4), expect="refuse",
          why="indexing at batched positions", axes=[(0, 0), (None, 0)]),
        P("getitem", "batched_int_tuple", "x i", "x[i, 0]", F(*M), I(5)),
    ]


def _batched_indexing():
    """Index arrays that differ per example, writes and scatters through them, and the
    library functions written over them (transforms/batch_index.py): one gather over the
    batch, checked for every in_axes combination (batched array, batched index, both)."""
    mask = np.array([[1, 0, 1, 1], [0, 0, 1, 0], [1, 1, 1, 1], [0, 1, 0, 0], [1, 0, 0, 1]],
                    bool)
    return [
        P("getitem", "index_array", "x i", "x[i]", F(6), I(6, 4)),
        P("getitem", "index_array_rows", "x i", "x[i]", F(*M), I(5, 3)),
        P("getitem", "index_array_2d", "x i", "x[i]", F(6), I(6, 2, 3)),
        P("getitem", "index_arrays_two", "x i j", "x[i, j]", F(*M), I(5, 3), I(4, 3)),
        P("getitem", "index_arrays_broadcast", "x i j", "x[i, j]", F(*M), I(5, 2, 1), I(4, 3)),
        P("getitem", "index_array_columns", "x i", "x[:, i]", F(*M), I(4, 3)),
        P("getitem", "index_array_middle", "x i", "x[:, i, 1:]", F(*T), I(5, 3)),
        P("getitem", "index_arrays_split", "x i j", "x[i, :, j]", F(*T), I(2, 3), I(4, 3)),
        P("getitem", "int_and_index_array", "x k i", "x[k, i]", F(*M), I(5), I(4, 3)),
        P("getitem", "int_and_index_array_split", "x k i", "x[k, :, i]", F(*T), I(2), I(4, 3)),
        P("getitem", "index_array_ellipsis", "x i", "x[..., i]", F(*T), I(4, 3)),
        P("getitem", "ix", "x i j", "x[np.ix_(i, j)]", F(*M), I(5, 2), I(4, 3)),
        P("getitem", "index_array_then_columns", "x i j", "x[i][:, j]", F(*M), I(5, 2),
          I(4, 3)),
        P("getitem", "index_array_times", "x i", "x[i] * x[0]", F(6), I(6, 4)),
        P("getitem", "mask_shared_2d", "x m", "x[m]", F(*M), K(mask)),
        P("getitem", "mask_shared_1d", "x m", "np.sum(x[m] * 2.0)", F(6),
          K(np.array([1, 0, 1, 1, 0, 1], bool))),
        P("getitem", "mask_with_index_array", "x m i", "x[m, i]", F(6, 4),
          K(np.array([1, 0, 1, 1, 0, 1], bool)), I(4, 4), axes=[(0, None, 0), (None, None, 0)]),
        P("getitem", "mask_per_example", "x", "np.sum(x[x > 0.0])", F(6), expect="refuse",
          why="ragged; write np.where"),
        P("setitem", "index_array", "x i v", "y = x * 1.0\ny[i] = v\nreturn y", F(6), I(6, 3),
          F(3)),
        P("setitem", "index_array_scalar", "x i c", "y = x * 1.0\ny[i] = c\nreturn y", F(6),
          I(6, 3), F()),
        P("setitem", "index_array_columns", "x i v", "y = x * 1.0\ny[:, i] = v\nreturn y",
          F(*M), I(4, 2), F(5, 2)),
        P("setitem", "index_array_columns_row", "x i v", "y = x * 1.0\ny[:, i] = v\nreturn y",
          F(*M), I(4, 2), F(2)),
        P("setitem", "index_arrays_two", "x i j v",
          "y = x * 1.0\ny[i, j] = v * v\nreturn y * x", F(*M), I(5, 3), I(4, 3), F(3)),
        P("setitem", "index_array_augmented", "x i v", "y = x * 1.0\ny[i] += v\nreturn y",
          F(*M), I(5, 3), F(4)),
        P("np.add.at", "index_array", "x i v", "y = x * 1.0\nnp.add.at(y, i, v)\nreturn y",
          F(6), I(6, 4), F(4)),
        P("np.add.at", "rows", "x i v", "y = x * 1.0\nnp.add.at(y, i, v)\nreturn y", F(*M),
          I(5, 3), F(3, 4)),
        P("np.add.at", "row_value", "x i v", "y = x * 1.0\nnp.add.at(y, i, v)\nreturn y",
          F(*M), I(5, 3), F(4)),
        P("np.add.at", "two_arrays", "x i j v",
          "y = x * 1.0\nnp.add.at(y, (i, j), v)\nreturn y", F(*M), I(5, 3), I(4, 3), F(3)),
        P("np.add.at", "scalar", "x i c", "y = x * 1.0\nnp.add.at(y, i, c)\nreturn y", F(6),
          I(6, 4), F()),
        P("np.add.at", "into_zeros", "i v", "y = np.zeros(6)\nnp.add.at(y, i, v)\nreturn y",
          I(6, 4), F(4)),
        P("np.put", "shared_positions", "x v",
          "y = x * 1.0\nnp.put(y, np.array([4, 1]), v)\nreturn y", F(6), F(2)),
        P("np.roll", "flat", "x", "np.roll(x, 2) * x", F(*M)),
        P("np.roll", "flat_vector", "x", "np.roll(x, -1)", F(6)),
        P("np.take", "flat", "x i", "np.take(x, i)", F(*M), I(20, 3)),
        P("np.take", "axis1", "x i", "np.take(x, i, axis=1)", F(*M), I(4, 3)),
        # float64 only: NumPy's np.interp returns float64 for float32 inputs, the library's
        # (rules/library/numeric.py) keeps float32 (unbatched too).
        P("np.interp", "fn", "x d fp", "np.interp(x, np.cumsum(np.abs(d)), fp)", F(5), F(4),
          F(4), dtypes=("float64",)),
    ]


def _writes():
    return [
        P("setitem", "into_zeros", "x c", "y = np.zeros(4)\ny[1] = c\nreturn y * x", F(*V), F()),
        P("setitem", "overwrite", "x c", "y = x * 1.0\ny[2] = c * c\nreturn y * x", F(*V), F()),
        P("setitem", "row", "x v", "y = x * 2.0\ny[1] = v\nreturn y", F(*M), F(*V)),
        P("setitem", "row_scalar", "x c", "y = x * 2.0\ny[1] = c\nreturn y", F(*M), F()),
        P("setitem", "column", "x v", "y = x * 1.0\ny[:, 0] = v\nreturn y", F(*M), F(5)),
        P("setitem", "slice", "x v", "y = x + 0.0\ny[1:3] = v[:2]\nreturn y * v", F(*V), F(*V)),
        P("setitem", "slice_scalar", "x c", "y = x * 1.0\ny[1:3] = c\nreturn y", F(*V), F()),
        P("setitem", "negative_slice", "x v", "y = x * 1.0\ny[-1, 1:3] = v\nreturn y", F(*M),
          F(2)),
        P("setitem", "augmented", "x c", "y = x * 1.0\ny[0] += c\nreturn y * y", F(*V), F()),
        P("setitem", "int_variable", "v i", "y = np.zeros((5, 4))\ny[i] = v\nreturn y", F(*V),
          K(2)),
        P("setitem", "unbatched_write", "x w", "y = x * 1.0\ny[0] = w[1]\nreturn y", F(*V),
          F(*V)),
        P("setitem", "alias", "w c", "y = np.zeros(4)\nz = y\ny[0] = c\nreturn z + w", F(*V),
          F()),
        P("setitem", "loop_fill", "x",
          "y = np.zeros(x.shape[0])\nfor i in range(x.shape[0]):\n    y[i] = x[i] * 2.0\n"
          "return y", F(*V)),
        P("setitem", "into_arg", "w c", "w[0] = c\nreturn w * 2.0", F(*V), F(),
          axes=[(0, 0), (0, None), (1, 0)]),
        P("setitem", "into_shared_arg", "w c", "w[0] = c\nreturn w * 2.0", F(*V), F(),
          axes=[(None, 0)], dtypes=("float64",)),
        P("setitem", "batched_position", "x i c", "y = x * 1.0\ny[i] = c\nreturn y", F(*V),
          I(4), F()),
        P("setitem", "split_int_arrays", "x ia ib v", "y = x * 1.0\ny[ia, :, ib] = v\nreturn y",
          F(*T), K(np.array([1, 0])), K(np.array([3, 1])), F(2, 5)),
    ]


def _constructors_and_queries():
    return [
        P("np.zeros_like", "plus", "x", "x + np.zeros_like(x)", F(*V)),
        P("np.zeros_like", "alone", "x", "np.zeros_like(x)", F(*M)),
        P("np.ones_like", "times", "x", "x * np.ones_like(x)", F(*V)),
        P("np.ones_like", "dtype", "x", "x * np.ones_like(x, dtype=np.float64)", F(*M)),
        P("np.empty_like", "size", "x", "x * np.size(np.empty_like(x))", F(*M)),
        P("dtype", "ones_like", "x", "x * np.ones_like(x, dtype=x.dtype)", F(*V)),
        P("np.full_like", "scalar_fill", "a c", "np.full_like(a, c)", F(*V), F(), dtypes=("float64",)),
        P("np.full_like", "times_a", "a", "a * np.full_like(a, 2.0)", F(*M), dtypes=("float64",)),
        P("np.full", "shape_of", "x", "x * np.full(np.shape(x), 2.0)", F(*M), expect="refuse",
          why=UNKNOWN_RANK),
        P("np.full", "constant_shape", "x", "x * np.full((5, 4), 2.0)", F(*M)),
        P("np.full", "batched_fill", "c", "np.full((5, 4), c)", F(), expect="refuse",
          why="np.full has no batching rule"),
        P("np.zeros", "shape_of", "x", "x + np.zeros(np.shape(x))", F(*V), expect="refuse",
          why=UNKNOWN_RANK),
        P("np.zeros", "dtype", "x", "x * (1.0 + np.zeros(x.shape, dtype=x.dtype))", F(*M),
          expect="refuse", why=UNKNOWN_RANK),
        P("np.zeros", "shape_of_into", "x", "y = np.zeros(np.shape(x))\ny[0] = x[1]\nreturn y",
          F(*V), expect="refuse", why=UNKNOWN_RANK),
        P("np.zeros", "constant_shape", "x", "x + np.zeros((5, 4))", F(*M)),
        P("np.zeros", "scalar_shape", "x", "x + np.zeros(x.shape[0])", F(*V)),
        P("np.ones", "int", "x", "x * np.ones(4)", F(*V)),
        P("np.empty", "size", "x", "x * np.size(np.empty(np.shape(x)))", F(*V)),
        P("np.arange", "stop", "x", "x * np.arange(4)", F(*V)),
        P("np.arange", "start_stop", "x", "x * np.arange(1, 5)", F(*M)),
        P("np.eye", "matrix", "x", "x * np.eye(4)", F(4, 4)),
        P("np.shape", "fn", "x", "x * np.shape(x)[0]", F(*M)),
        P("np.shape", "attribute", "x", "x * x.shape[1]", F(*M)),
        P("np.ndim", "fn", "x", "x * np.ndim(x)", F(*V)),
        P("np.ndim", "attribute", "x", "x * x.ndim", F(*M)),
        P("np.size", "fn", "x", "x * np.size(x)", F(*V)),
        P("np.size", "attribute", "x", "x * x.size", F(*M)),
        P("len", "fn", "x", "x * len(x)", F(*M)),
        P("int", "unbatched", "x n", "x * int(n)", F(*V), K(2.7)),
        P("int", "batched", "x", "x * int(3.7 * x)", F(), expect="refuse",
          why="int has no batching rule"),
        P("np.argmax", "axis0", "x", "np.argmax(x, axis=0)", F(*M)),
        P("np.argmax", "axis1", "x", "np.argmax(x, axis=1)", F(*M)),
        P("np.argmax", "axis_neg1", "x", "np.argmax(x, axis=-1)", F(*T)),
        P("np.argmax", "vector_axis0", "x", "np.argmax(x, axis=0)", F(*V)),
        P("np.argmax", "times", "x", "x * np.argmax(x, axis=0)", F(*M)),
        P("np.argmax", "method", "x", "x.argmax(axis=1)", F(*M)),
        P("np.argmax", "no_axis", "x", "x[np.argmax(x)]", F(*V), expect="refuse",
          why="np.argmax without an axis"),
        P("np.argmin", "axis1", "x", "np.argmin(x, axis=1)", F(*M)),
        P("np.argmin", "no_axis", "x", "x[np.argmin(x)]", F(*V), expect="refuse",
          why="np.argmin without an axis"),
        # argsort batches along its axis; indexing with its (batched) result is a
        # gather (transforms/batch_index.py), as np.take_along_axis is (see _scans).
        P("np.argsort", "fn", "x", "x[np.argsort(x)]", F(*V)),
        P("np.argsort", "times", "x", "x * np.argsort(x)", F(*V)),
        P("np.argsort", "axis0", "x", "np.argsort(x, axis=0)", F(*M)),
        P("np.argsort", "axis_none", "x", "np.argsort(x, axis=None)", F(*M)),
        P("np.argsort", "method", "x", "x.argsort(1)", F(*T)),
    ]


def _operators_and_flow():
    return [
        P("np.where", "comparison", "x", "np.where(x > 0.0, x, 0.5 * x)", F(*M)),
        P("np.where", "shared_condition", "m x y", "np.where(m, x, y)", K(np.array(
            [True, False, True, False])), F(*V), F()),
        P("np.clip", "constants", "x", "np.clip(x, -0.5, 0.5)", F(*M)),
        P("np.clip", "method", "x", "x.clip(-0.5, 0.5)", F(*V)),
        P("np.maximum", "relu", "x", "np.maximum(x, 0.0)", F(*M)),
        P("np.maximum", "builtin", "x y", "max(x, y)", F(), F()),
        P("np.minimum", "builtin", "x y", "min(x, y)", F(), F()),
        P("np.abs", "builtin", "x", "abs(x)", F(*V)),
        P("np.power", "square_op", "x", "x ** 2", F(*M)),
        P("np.power", "base_constant", "x", "2.0 ** x", F(*V)),
        P("np.negative", "op", "x", "-x", F(*V)),
        P("np.add", "op_broadcast", "x y", "x + y", F(5, 1), F(*V)),
        P("np.divide", "op_constant", "x", "2.0 / x", F(*V)),
        P("np.less", "op_times", "x y", "(x + y) * (x < y)", F(*M), F(*V)),
        # A Python bool left unbatched is known when the code is built (True and y
        # is y), so only a batched left operand needs the missing rule.
        P("and", "scalars", "x y", "x and y", Bo(), Bo(), expect="refuse",
          why="and has no batching rule", axes=[(0, 0), (0, None)]),
        P("or", "scalars", "x y", "x or y", Bo(), Bo(), expect="refuse",
          why="or has no batching rule", axes=[(0, 0), (0, None)]),
        P("not", "scalar", "x", "1.0 * (not (x > 0.0))", F(), expect="refuse", why=NOT_OP,
          dtypes=("float64",)),
        P("copy", "branch_shared", "x c",
          "if c > 0.0:\n    y = x * c\nelse:\n    y = np.sin(x)\nreturn y", F(*V), K(0.5)),
        P("copy", "branch_shared_else", "x c",
          "if c > 0.0:\n    y = x * c\nelse:\n    y = np.sin(x)\nreturn y", F(*V), K(-0.5)),
        P("copy", "branch_batched", "x c",
          "if c > 0.0:\n    y = x * c\nelse:\n    y = np.sin(x)\nreturn y", F(*V), F(),
          expect="refuse", why="a branch depends on batched values", axes=[(0, 0), (None, 0)]),
        P("copy", "loop", "x", "y = x\nfor i in range(3):\n    y = y * x\nreturn y", F(*V)),
        P("copy", "loop_shared_start", "x w",
          "y = w\nfor i in range(3):\n    y = y * x + w\nreturn y", F(*V), F(*V)),
    ]


def _scans():
    """Scans and gathers along an axis (s2s_ad/rules/scans.py): the axis moves past the
    batch axis; axis=None runs once per example."""
    return [
        P("np.cumsum", "vector", "a", "np.cumsum(a)", F(*V)),
        P("np.cumsum", "axis1", "a", "np.cumsum(a, axis=1)", F(*M)),
        P("np.cumsum", "axis_neg1_3d", "a", "np.cumsum(a, axis=-1)", F(*T)),
        P("np.cumsum", "flat", "a", "np.cumsum(a)", F(*M)),
        P("np.cumsum", "method", "a", "a.cumsum(0)", F(*M)),
        P("np.cumprod", "axis0", "a", "np.cumprod(a, axis=0)", F(*M)),
        P("np.cumprod", "flat", "a", "np.cumprod(a)", F(*M)),
        P("np.cumprod", "method", "a", "a.cumprod(-1) * a", F(*V)),
        P("np.take_along_axis", "sorted", "x", "np.take_along_axis(x, np.argsort(x, axis=0), 0)",
          F(*M)),
        P("np.take_along_axis", "constant_indices", "x",
          "np.take_along_axis(x, np.array([0, 0, 3]), axis=0)", F(*V)),
        P("np.take_along_axis", "indices", "x i", "np.take_along_axis(x, i, axis=0)", F(*M),
          I(5, 2, 4)),
        P("np.take_along_axis", "axis1", "x i", "np.take_along_axis(x, i, 1)", F(*M), I(4, 5, 2)),
        P("np.take_along_axis", "axis_none", "x i", "np.take_along_axis(x, i, None)", F(*M),
          I(20, 6)),
    ]


# np.linalg batches by running the function once per example (rules/linalg.py
# batch_loop, a vectorized rule: no refusal); eigen- and singular vectors are
# squared (they are defined up to sign).
INV, SPD = "invertible", "spd"


def _linalg():
    return [
        P("np.linalg.solve", "vector", "a b", "np.linalg.solve(a, b)", F(4, 4, d=INV), F(*V)),
        P("np.linalg.solve", "matrix", "a b", "np.linalg.solve(a, b)", F(4, 4, d=INV),
          F(4, 2)),
        P("np.linalg.inv", "fn", "a", "np.linalg.inv(a)", F(4, 4, d=INV)),
        P("np.linalg.det", "fn", "a", "np.linalg.det(a)", F(4, 4, d=INV)),
        P("np.linalg.slogdet", "unpacked", "a", "s, logdet = np.linalg.slogdet(a)\n"
          "return s * logdet", F(4, 4, d=INV)),
        P("linalg.slogdet[logabsdet]", "fn", "a", "np.linalg.slogdet(a)[1]", F(4, 4, d=INV)),
        P("linalg.slogdet[sign]", "fn", "a", "np.linalg.slogdet(a)[0] * a", F(4, 4, d=INV)),
        P("np.linalg.cholesky", "fn", "a", "np.linalg.cholesky(a)", F(4, 4, d=SPD)),
        P("np.linalg.eigh", "unpacked", "a", "w, v = np.linalg.eigh(a)\nreturn w, v * v",
          F(4, 4, d=SPD)),
        P("linalg.eigh[eigenvalues]", "fn", "a", "np.linalg.eigh(a)[0]", F(4, 4, d=SPD)),
        P("linalg.eigh[eigenvectors]", "fn", "a", "np.linalg.eigh(a)[1] ** 2", F(4, 4, d=SPD)),
        P("np.linalg.svd", "unpacked", "a",
          "u, s, vh = np.linalg.svd(a, full_matrices=False)\nreturn u * u, s, vh * vh",
          F(5, 4, d=INV)),
        P("linalg.svd[U]", "square", "a", "np.linalg.svd(a)[0] ** 2", F(4, 4, d=INV)),
        P("linalg.svd[S]", "tall", "a", "np.linalg.svd(a, compute_uv=False)", F(5, 4, d=INV)),
        P("linalg.svd[S]", "wide", "a", "np.linalg.svd(a, full_matrices=False)[1]",
          F(2, 4, d=INV)),
        P("linalg.svd[Vh]", "wide", "a", "np.linalg.svd(a, full_matrices=False)[2] ** 2",
          F(2, 4, d=INV)),
        P("np.linalg.qr", "unpacked", "a", "q, r = np.linalg.qr(a)\nreturn q, r",
          F(5, 4, d=INV)),
        P("linalg.qr[Q]", "square", "a", "np.linalg.qr(a)[0]", F(4, 4, d=INV)),
        P("linalg.qr[R]", "tall", "a", "np.linalg.qr(a)[1]", F(5, 4, d=INV)),
        P("np.linalg.pinv", "tall", "a", "np.linalg.pinv(a)", F(5, 4, d=INV)),
        P("np.linalg.pinv", "wide", "a", "np.linalg.pinv(a)", F(2, 4, d=INV)),
        P("np.linalg.lstsq", "unpacked", "a b",
          "x, res, rank, sv = np.linalg.lstsq(a, b, rcond=None)\nreturn x, res, rank, sv",
          F(5, 4, d=INV), F(5), dtypes=("float64",)),
        P("linalg.lstsq[x]", "matrix", "a b", "np.linalg.lstsq(a, b, rcond=None)[0]",
          F(5, 4, d=INV), F(5, 2)),
        P("linalg.lstsq[residuals]", "fn", "a b", "np.linalg.lstsq(a, b, rcond=None)[1]",
          F(5, 4, d=INV), F(5), dtypes=("float64",)),
        P("linalg.lstsq[rank]", "times", "x a b", "x * np.linalg.lstsq(a, b, rcond=None)[2]",
          F(*V), F(5, 4, d=INV), F(5)),
        P("linalg.lstsq[s]", "fn", "a b", "np.linalg.lstsq(a, b, rcond=None)[3]",
          F(5, 4, d=INV), F(5)),
        P("np.linalg.matrix_power", "cube", "a", "np.linalg.matrix_power(a, 3)",
          F(4, 4, d=INV)),
        P("np.linalg.matrix_power", "keyword", "a", "np.linalg.matrix_power(a, n=2)",
          F(4, 4, d=INV)),
        P("np.linalg.norm", "vector", "x", "np.linalg.norm(x)", F(*V)),
        P("np.linalg.norm", "ord1", "x", "np.linalg.norm(x, 1)", F(*V)),
        P("np.linalg.norm", "inf", "x", "np.linalg.norm(x, ord=np.inf)", F(*V)),
        P("np.linalg.norm", "fro", "x", "np.linalg.norm(x, 'fro')", F(*M)),
        P("np.linalg.norm", "nuc", "x", "np.linalg.norm(x, 'nuc')", F(5, 4, d=INV)),
        P("np.linalg.norm", "ord2", "x", "np.linalg.norm(x, 2)", F(5, 4, d=INV)),
        P("np.linalg.norm", "axis1", "x", "np.linalg.norm(x, axis=1)", F(*M)),
        P("np.linalg.norm", "keepdims", "x", "np.linalg.norm(x, axis=0, keepdims=True)", F(*M)),
    ]


def _matrix_ops():
    """Linear matrix functions: once per example, except einsum (one more subscript)."""
    return [
        P("np.trace", "fn", "a", "np.trace(a)", F(*M)),
        P("np.trace", "offset", "a", "np.trace(a, offset=1)", F(*M)),
        P("np.trace", "axes_3d", "a", "np.trace(a, 0, 1, 2)", F(*T)),
        P("np.diagonal", "fn", "a", "np.diagonal(a)", F(*M)),
        P("np.diagonal", "offset", "a", "np.diagonal(a, -1)", F(*M)),
        P("np.diag", "of_vector", "v", "np.diag(v)", F(*V)),
        P("np.diag", "of_matrix", "v", "np.diag(v)", F(*M)),
        P("np.diag", "k1", "v", "np.diag(v, k=1)", F(*V)),
        P("np.tril", "fn", "m", "np.tril(m)", F(*M)),
        P("np.tril", "k", "m", "np.tril(m, -1)", F(*M)),
        P("np.triu", "fn", "m", "np.triu(m)", F(*M)),
        P("np.triu", "k", "m", "np.triu(m, k=1)", F(*M)),
        P("np.kron", "vectors", "a b", "np.kron(a, b)", F(2), F(*V)),
        P("np.kron", "matrices", "a b", "np.kron(a, b)", F(2, 2), F(2, 4)),
        # np.cross needs 3-vectors (the batch size, too).
        P("np.cross", "vectors", "a b", "np.cross(a, b)", F(3), F(3)),
        P("np.cross", "rows", "a b", "np.cross(a, b)", F(5, 3), F(3)),
        P("np.vdot", "vectors", "a b", "np.vdot(a, b)", F(*V), F(*V)),
        P("np.vdot", "matrices", "a b", "np.vdot(a, b)", F(*M), F(*M)),
        P("np.tensordot", "axes1", "a b", "np.tensordot(a, b, axes=1)", F(*M), F(4, 2)),
        P("np.tensordot", "axes2", "a b", "np.tensordot(a, b)", F(*T), F(*M)),
        P("np.tensordot", "axes_lists", "a b", "np.tensordot(a, b, axes=([0], [0]))", F(*M),
          F(5, 2)),
        P("np.einsum", "matmul", "a b", "np.einsum('ij,jk->ik', a, b)", F(*M), F(4, 2)),
        P("np.einsum", "diagonal", "a", "np.einsum('ii->i', a)", F(4, 4)),
        P("np.einsum", "three", "a b c", "np.einsum('ij,jk,k->i', a, b, c)", F(*M), F(4, 2),
          F(2)),
        P("np.einsum", "implicit", "a b", "np.einsum('ij,ij', a, b)", F(*M), F(*M)),
        P("np.einsum", "outer", "a b", "np.einsum('i,j', a, b)", F(*V), F(2)),
    ]


def _fft():
    """np.fft (s2s_ad/rules/fft.py): the same transform with its axes counted from the
    end; the complex plumbing elementwise.  Results are read through np.abs/.real."""
    return [
        P("np.fft.fft", "abs", "a", "np.abs(np.fft.fft(a))", F(*V)),
        P("np.fft.fft", "n_axis0", "a", "np.fft.fft(a, 6, 0, 'ortho').real", F(*M)),
        P("np.fft.ifft", "n", "a", "np.fft.ifft(a, n=3).imag", F(*M)),
        P("np.fft.rfft", "power", "a", "np.abs(np.fft.rfft(a)) ** 2", F(*M)),
        P("np.fft.irfft", "n", "a", "np.fft.irfft(np.fft.rfft(a, axis=0) * 2.0, n=5, axis=0)",
          F(*M)),
        P("np.fft.hfft", "n_axis0", "a", "np.fft.hfft(a, n=5, axis=0)", F(*M)),
        P("np.fft.ihfft", "abs", "a", "np.abs(np.fft.ihfft(a, norm='ortho'))", F(*M)),
        P("np.fft.fftn", "all", "a", "np.abs(np.fft.fftn(a))", F(*M)),
        P("np.fft.fftn", "s", "a", "np.fft.fftn(a, s=(3, 4), axes=(1, 0)).real", F(*T)),
        P("np.fft.ifftn", "axes", "a", "np.fft.ifftn(a, axes=(0,)).imag", F(*M)),
        P("np.fft.rfftn", "all", "a", "np.abs(np.fft.rfftn(a))", F(*T)),
        P("np.fft.irfftn", "roundtrip", "a", "np.fft.irfftn(np.fft.rfftn(a), s=(5, 4), axes=(0, 1))",
          F(*M)),
        P("np.fft.fft2", "abs", "a", "np.abs(np.fft.fft2(a))", F(*M)),
        P("np.fft.ifft2", "abs", "a", "np.abs(np.fft.ifft2(a, norm='ortho'))", F(*T)),
        P("np.fft.rfft2", "abs", "a", "np.abs(np.fft.rfft2(a))", F(*M)),
        P("np.fft.irfft2", "roundtrip", "a", "np.fft.irfft2(np.fft.rfft2(a) * 2.0)", F(*T)),
        P("np.fft.fftshift", "all", "x", "np.fft.fftshift(x)", F(*M)),
        P("np.fft.ifftshift", "axes", "x", "np.fft.ifftshift(x, axes=(1,))", F(*M)),
        P("np.real", "of_fft", "x", "np.real(np.fft.fft(x) * x)", F(*V)),
        P("np.imag", "of_fft", "x", "np.imag(np.fft.fft(x))", F(*M)),
        P("np.conj", "of_fft", "x", "np.real(np.conj(np.fft.fft(x)) * x)", F(*M)),
        P("np.argpartition", "kth", "x", "np.take_along_axis(x, np.argpartition(x, 1, axis=0), "
          "0)[1]", F(*M)),
        P("np.searchsorted", "v", "x", "x * np.searchsorted(np.array([-1.0, 0.0, 1.0]), x)",
          F(*M)),
    ]


ARRAY_PROGRAMS = ([p for r in ("sum", "mean", "prod", "max", "min") for p in _reductions(r)]
                  + _dots() + _shape_ops() + _indexing() + _batched_indexing() + _writes()
                  + _constructors_and_queries() + _operators_and_flow()
                  + _scans() + _linalg() + _matrix_ops() + _fft())
PROGRAMS = elementwise_programs() + ARRAY_PROGRAMS


def _case(prog, dtype):
    marks = [pytest.mark.xfail(strict=True, reason=prog.why)] if prog.expect == "xfail" else []
    return pytest.param(prog, dtype, id=f"{prog.name}-{dtype}", marks=marks)


CASES = [_case(p, d) for p in PROGRAMS for d in p.dtypes]

HEADER = ("import math\n\nimport numpy as np\nimport scipy.special\n\nimport s2s_ad as ad\n"
          + CONSTANTS)


@pytest.fixture(scope="module")
def gen(tmp_path_factory):
    """The programs, written to one module (s2s_ad reads their source)."""
    folder = tmp_path_factory.mktemp("vectorize_programs")
    text = HEADER + "".join("\n\n" + p.source() for p in PROGRAMS)
    name = "s2s_vectorize_rule_programs"
    (folder / f"{name}.py").write_text(text)
    sys.path.insert(0, str(folder))
    try:
        yield importlib.import_module(name)
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop(name, None)


# -- the oracle ----------------------------------------------------------------------------


class Batch:
    """Per-example arguments and their batched form for one in_axes combination."""

    def __init__(self, specs, in_axes, dtype, seed):
        rng = np.random.default_rng(seed)
        self.in_axes = tuple(in_axes)
        self.shared = [sample(s, rng, dtype) for s in specs]
        self.examples = [[sample(s, rng, dtype) for s in specs] for _ in range(B)]

    def batched(self):
        """Fresh batched arguments (programs may write into their arguments)."""
        return [_copy(self.shared[i]) if ax is None else
                np.stack([np.asarray(ex[i]) for ex in self.examples], axis=ax)
                for i, ax in enumerate(self.in_axes)]

    def reference(self, fn):
        """Stack ``fn`` over the examples, each example sliced from the batched arguments."""
        outs = []
        for b in range(B):
            args = [a if ax is None else np.take(a, b, axis=ax)
                    for a, ax in zip(self.batched(), self.in_axes)]
            outs.append(fn(*args))
        return stack(outs)


def _copy(x):
    return x.copy() if isinstance(x, np.ndarray) else x


def stack(outs):
    flat = [pytree.flatten(o) for o in outs]
    tree = flat[0][1]
    assert all(t == tree for _, t in flat)
    return pytree.unflatten([np.stack([np.asarray(ls[k]) for ls, _ in flat])
                             for k in range(len(flat[0][0]))], tree)


def assert_same(got, want, tol, what=""):
    """Same tree (kinds too), and per leaf: an ndarray of the same shape, dtype, values."""
    gl, gt = pytree.flatten(got)
    wl, wt = pytree.flatten(want)
    assert gt == wt, f"{what}: tree {gt} != {wt}"
    for k, (g, w) in enumerate(zip(gl, wl)):
        assert isinstance(g, np.ndarray) or (w.ndim == 0 and isinstance(g, np.generic)), \
            f"{what}: leaf {k} is a {type(g).__name__}"
        assert g.shape == w.shape, f"{what}: leaf {k} shape {g.shape} != {w.shape}"
        assert g.dtype == w.dtype, f"{what}: leaf {k} dtype {g.dtype} != {w.dtype}"
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=what)
        else:
            np.testing.assert_array_equal(g, w, err_msg=what)


def check_program(fn, prog, dtype):
    tol = TOL[dtype]
    seed = zlib.crc32(f"{prog.name}-{dtype}".encode())
    for in_axes in prog.in_axes():
        batch = Batch(prog.specs, in_axes, DTYPES[dtype], seed)
        want = batch.reference(fn)
        what = f"{prog.name} in_axes={in_axes}"
        assert_same(ad.vmap(fn, in_axes, method="loop")(*batch.batched()), want, tol,
                    what + " method='loop'")
        if prog.expect == "refuse":
            with pytest.raises(ValueError, match=prog.why):
                ad.vmap(fn, in_axes, method="vectorize")(*batch.batched())
        else:
            assert_same(ad.vmap(fn, in_axes, method="vectorize")(*batch.batched()), want, tol,
                        what + " method='vectorize'")
        assert_same(ad.vmap(fn, in_axes)(*batch.batched()), want, tol, what + " method=None")


# -- 1. every rule ---------------------------------------------------------------------------


@pytest.mark.parametrize("prog, dtype", CASES)
def test_rule(prog, dtype, gen):
    check_program(getattr(gen, prog.name), prog, dtype)


def test_every_rule_has_a_program():
    covered = {p.rule for p in PROGRAMS}
    missing = sorted(set(rules.RULES) - covered)
    assert not missing, f"rules with no vectorize program: {missing}"


def test_program_names_are_unique():
    names = [p.name for p in PROGRAMS]
    assert len(names) == len(set(names))


def test_in_axes_cover_every_combination():
    """A binary rule on two matrices runs all 8 combinations of 0 / None / 1."""
    prog = next(p for p in PROGRAMS if p.name == "np_add__matrix")
    assert len(prog.in_axes()) == 8
    assert (1, None) in prog.in_axes() and (None, 1) in prog.in_axes()


# -- 2. the control-flow corpus ---------------------------------------------------------------

# The corpus programs the vectorized lowering batches (their float arguments
# batched, integer arguments shared): control flow that reads no batched value.
VECTORIZES = {
    "growing_prefix", "shrinking_suffix", "cumsum_sq", "power_iter", "horner_desc", "strided", "int_bound", "empty_loop",
    "tuple_carry", "aug_assign", "momentum", "triangle", "matrix_fill", "row_loop",
    "zip_loop", "enumerate_loop", "newton_partial", "while_true_break", "while_fill",
    "looping_helper", "tuple_helper", "pytree_loop", "helper_twice", "recurrence",
    "overwrite_needed", "elementwise_aug", "slice_aug", "accumulate_at", "slice_writes",
    "fill_and_read", "two_buffers", "same_read_after_write", "ode_rk2",
    "recurrence_array", "trajectory", "rosen_chain", "neighbours_and_sum", "three_point",
}
BRANCH = "a branch depends on batched values"
WHILE = "a while loop's condition depends on batched values"
# Why it refuses the others.
REFUSALS = {
    "data_bounds": "int has no batching rule",
    "grow_while": WHILE, "element_while": WHILE, "while_zero_trips": WHILE,
    "chained_compare": "and has no batching rule", "bool_ops": "and has no batching rule",
    **{name: BRANCH for name in (
        "newton_while", "bisect_then_newton", "while_in_for", "carried_array_break",
        "while_continue", "continue_negative", "break_threshold", "break_first",
        "continue_write", "nested_continue_break", "return_in_loop", "return_in_while",
        "return_in_nested", "nested_break", "inner_break_linear", "return_in_branch",
        "piecewise", "cond_expr", "cond_in_loop", "nested_cond", "helper_in_branch",
        "calls_breaking_helper", "returning_helper", "scan_pair", "tuple_return_in_loop",
        "row_normalise", "backward_difference", "early_return_helper")},
}
CORPUS = [(f, make) for f, make, _ in cf.CORPUS] + list(cf.ARRAY_CORPUS)


def _is_float_leaf(x):
    return isinstance(x, float) or (isinstance(x, np.ndarray) and x.dtype.kind == "f")


def corpus_batch(fn, make):
    """(per-example argument lists, in_axes, batched arguments): float arguments vary
    a little per example (signs kept), the others are shared."""
    rng = np.random.default_rng(zlib.crc32(fn.__name__.encode()))
    base = make()
    floats = [all(map(_is_float_leaf, pytree.flatten(a)[0])) for a in base]
    examples = []
    for b in range(B):
        args = []
        for a, is_float in zip(make(), floats):
            if is_float and b:
                leaves, tree = pytree.flatten(a)
                leaves = [type(x)(x * (1.0 + 0.03 * rng.uniform(-1.0, 1.0, np.shape(x))))
                          if isinstance(x, float) else
                          x * (1.0 + 0.03 * rng.uniform(-1.0, 1.0, np.shape(x)))
                          for x in leaves]
                a = pytree.unflatten(leaves, tree)
            args.append(a)
        examples.append(args)
    in_axes = tuple(0 if f else None for f in floats)
    batched = []
    for i, is_float in enumerate(floats):
        if not is_float:
            batched.append(base[i])
            continue
        cols = [pytree.flatten(ex[i]) for ex in examples]
        batched.append(pytree.unflatten([np.stack([c[0][k] for c in cols])
                                         for k in range(len(cols[0][0]))], cols[0][1]))
    return examples, in_axes, batched


@pytest.mark.parametrize("fn, make", CORPUS, ids=[f.__name__ for f, _ in CORPUS])
def test_control_flow_corpus(fn, make):
    examples, in_axes, batched = corpus_batch(fn, make)
    want = stack([fn(*ex) for ex in examples])
    name = fn.__name__
    assert name in VECTORIZES or name in REFUSALS, (
        f"{name} is new in the corpus: add it to VECTORIZES or REFUSALS")
    auto = ad.vmap(fn, in_axes)
    assert_same(auto(*batched), want, 1e-12, f"{name} method=None")
    assert_same(ad.vmap(fn, in_axes, method="loop")(*batched), want, 1e-12,
                f"{name} method='loop'")
    forced = ad.vmap(fn, in_axes, method="vectorize")
    if name in VECTORIZES:
        assert_same(forced(*batched), want, 1e-12, f"{name} method='vectorize'")
        assert "lowering: vectorized" in ad.source(auto)      # method=None chose it
    else:
        why = REFUSALS[name]
        with pytest.raises(ValueError, match=re.escape(why)):
            forced(*batched)
        assert "lowering: per-sample loop" in ad.source(auto)


def test_corpus_pins_are_up_to_date():
    names = {f.__name__ for f, _ in CORPUS}
    assert VECTORIZES <= names and set(REFUSALS) <= names
    assert not VECTORIZES & set(REFUSALS)


def test_refusal_message_names_the_place_and_the_way_out():
    x = np.array([0.7, 1.3, 2.0])
    with pytest.raises(ValueError) as info:
        ad.vmap(cf.grow_while, method="vectorize")(x)
    msg = str(info.value)
    assert "control_flow.py:" in msg and "while x < 10.0" in msg
    assert "method='loop'" in msg


@pytest.mark.parametrize("fn, args, in_axes, why", [
    (vp.power, lambda: (np.array([0.5, 1.5, -2.0]), np.array([1, 3, 2])), (0, 0),
     "a loop's bounds depend on batched values"),
    (cf.int_bound, lambda: (np.ones((B, 3)) * 0.3, np.array([1, 2, 3])), (0, 0),
     "a loop's bounds depend on batched values"),
    (vp.grow, lambda: (np.array([0.5, 1.5, 2.0]),), (0,), WHILE),
    (vp.branch, lambda: (np.ones((B, 4)), np.array([0.5, -0.5, 1.0])), (0, 0), BRANCH),
    (vp.rank_grows, lambda: (np.ones((B, 4)),), (0,),
     "the number of dimensions of a value here is not known"),
], ids=["loop_bound", "int_bound_batched_n", "while", "branch", "rank_changes_in_loop"])
def test_refusals_fall_back_to_the_loop(fn, args, in_axes, why):
    a = args()
    want = stack([fn(*[x if ax is None else x[b] for x, ax in zip(a, in_axes)])
                  for b in range(B)])
    with pytest.raises(ValueError, match=re.escape(why)):
        ad.vmap(fn, in_axes, method="vectorize")(*a)
    auto = ad.vmap(fn, in_axes)
    assert_same(auto(*a), want, 1e-12, "method=None")
    assert "lowering: per-sample loop" in ad.source(auto)


# -- 3. composition ------------------------------------------------------------------------

RNG = np.random.default_rng(7)
X = RNG.standard_normal((B, 4))
Y = RNG.standard_normal((B, 4))
W = RNG.standard_normal((4, 4))


def loop_ref(fn, args, in_axes):
    return stack([fn(*[a if ax is None else np.take(a, b, axis=ax)
                       for a, ax in zip(args, in_axes)]) for b in range(B)])


def test_vmap_of_a_function_that_calls_jvp_vectorizes():
    want = loop_ref(vp.directional, (X, Y), (0, 0))
    assert_same(ad.vmap(vp.directional, method="vectorize")(X, Y), want, 1e-12)


@pytest.mark.parametrize("in_axes", [(0, None), (0, 0), (None, 0)])
def test_vmap_of_a_function_returning_a_jvp_pair_vectorizes(in_axes):
    args = tuple(a if ax == 0 else a[0] for a, ax in zip((X, Y), in_axes))
    want = loop_ref(vp.jvp_pair, args, in_axes)
    assert_same(ad.vmap(vp.jvp_pair, in_axes, method="vectorize")(*args), want, 1e-12)


def test_vmap_of_a_function_that_calls_jvp_falls_back_and_matches():
    want = loop_ref(vp.directional, (X, Y), (0, 0))
    close_form = np.sum(np.cos(X) * X * Y + np.sin(X) * Y, axis=1)
    np.testing.assert_allclose(want, close_form, rtol=1e-12)
    assert_same(ad.vmap(vp.directional)(X, Y), want, 1e-12)
    assert_same(ad.vmap(vp.directional, (None, 0))(X[0], Y),
                loop_ref(vp.directional, (X[0], Y), (None, 0)), 1e-12)


@pytest.mark.parametrize("in_axes", [(0, None), (0, 0), (None, 0), (1, None)])
def test_helpers_called_on_batched_and_shared_arguments(in_axes):
    x = X.T if in_axes[0] == 1 else X
    args = (x, Y if in_axes[1] == 0 else Y[0])
    want = loop_ref(vp.uses_helper, args, in_axes)
    assert_same(ad.vmap(vp.uses_helper, in_axes, method="vectorize")(*args), want, 1e-12)


@pytest.mark.parametrize("flag", [1, -1])
def test_helper_result_batched_on_one_path_only(flag):
    want = loop_ref(vp.helper_on_paths, (X, Y[0], flag), (0, None, None))
    got = ad.vmap(vp.helper_on_paths, (0, None, None), method="vectorize")(X, Y[0], flag)
    assert_same(got, want, 1e-12)


def test_pytree_argument_with_nested_in_axes():
    w, b, c = X, Y[0], np.array([0.5, 1.0, 1.5])
    p = (w, (b, c))
    spec = ((0, (None, 0)), None)
    got = ad.vmap(vp.tree_loss, spec, method="vectorize")(p, Y[1])
    want = stack([vp.tree_loss((w[k], (b, c[k])), Y[1]) for k in range(B)])
    assert_same(got, want, 1e-12)


def test_tuple_outputs_and_out_axes():
    got = ad.vmap(vp.two_outputs, (0, None), out_axes=(1, (-1, None)),
                  method="vectorize")(X, Y[0])
    want = ((X * Y[0]).T, (np.sin(X).T, np.sum(Y[0])))
    assert_same(got, want, 1e-12)
    got = ad.vmap(vp.shared_output, (0, None), method="vectorize")(X, Y[0])
    assert_same(got, (X @ Y[0], np.tile(2.0 * Y[0], (B, 1))), 1e-12)
    got = ad.vmap(vp.constant_output, method="vectorize")(X)
    assert_same(got, np.ones(B), 0.0)


def test_list_output_stays_a_list():
    want = loop_ref(vp.list_output, (X, Y), (0, 0))
    assert type(want) is list
    assert_same(ad.vmap(vp.list_output, method="loop")(X, Y), want, 1e-12)
    assert_same(ad.vmap(vp.list_output, method="vectorize")(X, Y), want, 1e-12)


def test_mlp_batched_over_examples_and_over_parameters():
    params = (RNG.standard_normal((5, 4)), RNG.standard_normal(5), RNG.standard_normal((2, 5)))
    xs = RNG.standard_normal((6, 4))
    got = ad.vmap(vp.mlp, (None, 0), method="vectorize")(params, xs)
    want = stack([vp.mlp(params, x) for x in xs])
    assert_same(got, want, 1e-12)
    stacked = tuple(np.stack([p * (1.0 + 0.1 * k) for k in range(B)]) for p in params)
    got = ad.vmap(vp.mlp, (0, None), method="vectorize")(stacked, xs[0])
    want = stack([vp.mlp(tuple(p[k] for p in stacked), xs[0]) for k in range(B)])
    assert_same(got, want, 1e-12)


def test_nested_vmap_inner_vectorized():
    xs = RNG.standard_normal((2, B, 4))
    ys = RNG.standard_normal((2, B, 4))
    want = np.sum(np.sin(xs) * ys, axis=-1)
    for outer in (None, "loop"):
        f = ad.vmap(ad.vmap(vp.sin_dot, method="vectorize"), method=outer)
        assert_same(f(xs, ys), want, 1e-12, f"outer={outer}")
    # pairwise: outer over y's rows, inner (vectorized) over x's rows
    f = ad.vmap(ad.vmap(vp.sin_dot, (0, None), method="vectorize"), (None, 0))
    assert_same(f(X, Y[:2]), np.array([[vp.sin_dot(x, y) for x in X] for y in Y[:2]]), 1e-12)


def test_nested_vmap_vectorized_at_both_levels():
    xs = RNG.standard_normal((2, B, 4))
    ys = RNG.standard_normal((2, B, 4))
    f = ad.vmap(ad.vmap(vp.sin_dot, method="vectorize"), method="vectorize")
    assert_same(f(xs, ys), np.sum(np.sin(xs) * ys, axis=-1), 1e-12)
    assert ad.source(f).startswith("# vmap (lowering: vectorized")


NESTED_LAYOUTS = {
    # name: (inner in_axes, inner out_axes, outer in_axes, outer out_axes, x shape, y shape)
    "both-batched": (0, 0, 0, 0, (2, B, 4), (2, B, 4)),
    "cross-product": ((0, None), 0, (None, 0), 0, (B, 4), (2, 4)),
    "outer-only-y": ((0, None), 0, (0, 0), 0, (2, B, 4), (2, 4)),
    "other-axes": ((1, 0), 0, (2, 1), 1, (4, B, 2), (B, 2, 4)),
    "out-axes": (0, (1, (1, 0)), 0, 1, (2, B, 4), (2, B, 4)),
}


@pytest.mark.parametrize("layout", NESTED_LAYOUTS)
@pytest.mark.parametrize("method", [None, "vectorize"])
def test_nested_vmap_layouts_vectorized(layout, method):
    ia, oa, ja, ob, xs, ys = NESTED_LAYOUTS[layout]
    x, y = RNG.standard_normal(xs), RNG.standard_normal(ys)
    got = ad.vmap(ad.vmap(vp.two_outputs, ia, oa), ja, ob, method=method)(x, y)
    want = ad.vmap(ad.vmap(vp.two_outputs, ia, oa, method="loop"), ja, ob, method="loop")(x, y)
    for g, w in zip(pytree_leaves(got), pytree_leaves(want)):
        assert_same(g, w, 1e-12)


def pytree_leaves(x):
    return pytree.flatten(x)[0]


def test_nested_vmap_of_per_example_gradients():
    xs, ys = RNG.standard_normal((2, B, 4)), RNG.standard_normal((2, B, 4))
    got = ad.vmap(ad.vmap(ad.grad(vp.sin_dot)), method="vectorize")(xs, ys)
    assert_same(got, np.cos(xs) * ys, 1e-12)


def test_vectorize_maps_gradients_and_jacobians():
    # per-example gradients: one reverse sweep over the batched function
    forced = ad.vmap(ad.grad(vp.sin_dot), method="vectorize")
    assert_same(forced(X, Y), np.cos(X) * Y, 1e-12)
    assert ad.source(forced).startswith("# vmap (lowering: vectorized")
    with pytest.raises(ValueError, match="has_aux"):
        ad.vmap(ad.grad(vp.sin_dot_aux, has_aux=True), method="vectorize")(X, Y)
    # vmap of a Jacobian: one vectorized JVP per input element, over the batch
    want = loop_ref(ad.jacfwd(vp.affine), (X, W), (0, None))
    assert_same(ad.vmap(ad.jacfwd(vp.affine), (0, None), method="vectorize")(X, W), want, 1e-12)
    assert_same(ad.vmap(ad.grad(vp.sin_dot))(X, Y), np.cos(X) * Y, 1e-12)


def test_method_none_chooses_vectorized_for_loop_free_code():
    f = ad.vmap(vp.affine, (0, None))
    assert_same(f(X, W), np.tanh(X @ W.T + 1.0), 1e-12)
    assert ad.source(f).startswith("# vmap (lowering: vectorized")
    assert "def vmap_affine(" in ad.source(f)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_float32_inputs_keep_float32(dtype):
    x, w = X.astype(dtype), W.astype(dtype)
    for fn, args, in_axes in [(vp.affine, (x, w), (0, None)), (vp.sin_dot, (x, x), (0, 0)),
                              (vp.looping, (x, w[0]), (0, None)),
                              (vp.uses_helper, (x, w[0]), (0, None)),
                              (vp.two_outputs, (x, w[0]), (0, None))]:
        want = loop_ref(fn, args, in_axes)
        got = ad.vmap(fn, in_axes, method="vectorize")(*args)
        for leaf in pytree.flatten(got)[0]:
            assert leaf.dtype == dtype, fn.__name__
        assert_same(got, want, TOL[np.dtype(dtype).name], fn.__name__)


# ad.jit: each is a Numba build (seconds), built once here.
JIT_AFFINE = ad.jit(vp.affine)
JIT_LOOPING = ad.jit(vp.looping)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_vmap_of_jit_loop_free_function_is_vectorized(dtype):
    x, w = X.astype(dtype), W.astype(dtype)
    f = ad.vmap(JIT_AFFINE, (0, None))
    got = f(x, w)
    assert got.dtype == dtype
    assert_same(got, loop_ref(vp.affine, (x, w), (0, None)), TOL[np.dtype(dtype).name])
    src = ad.source(f)
    assert src.startswith("# vmap (lowering: vectorized") and "def vmap_affine(" in src
    g = ad.jit(ad.vmap(vp.affine, (0, None)))                  # jit outside: the same
    assert_same(g(x, w), got, TOL[np.dtype(dtype).name])
    assert ad.source(g).startswith("# vmap (lowering: vectorized")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_vmap_of_jit_looping_function_runs_the_compiled_loop(dtype):
    x, w = X.astype(dtype), W[0].astype(dtype)
    want = loop_ref(vp.looping, (x, w), (0, None))
    f = ad.vmap(JIT_LOOPING, (0, None))
    got = f(x, w)
    assert got.dtype == dtype
    assert_same(got, want, TOL[np.dtype(dtype).name])
    src = ad.source(f)
    assert src.startswith("# vmap (lowering: per-sample loop, compiled with Numba")
    assert "def vmap_loop(" in src
    # forced, the vectorized lowering batches it anyway (its loop reads no batched value)
    forced = ad.vmap(JIT_LOOPING, (0, None), method="vectorize")
    assert_same(forced(x, w), want, TOL[np.dtype(dtype).name])
    assert ad.source(forced).startswith("# vmap (lowering: vectorized")


def test_jit_of_vmap_of_looping_function_runs_the_compiled_loop():
    want = loop_ref(vp.looping, (X, W[0]), (0, None))
    f = ad.jit(ad.vmap(vp.looping, (0, None)))
    assert_same(f(X, W[0]), want, 1e-12)
    assert ad.source(f).startswith("# vmap (lowering: per-sample loop, compiled with Numba")


GRAD_CORPUS = [(f, make, nums) for f, make, nums in cf.CORPUS]


@pytest.mark.parametrize("fn, make, nums", GRAD_CORPUS, ids=[f.__name__ for f, _, _ in GRAD_CORPUS])
def test_control_flow_corpus_per_example_gradients(fn, make, nums):
    """vmap(grad) (one reverse sweep over the batched function where it vectorizes, the
    per-sample loop otherwise) equals the gradient of each example."""
    examples, in_axes, batched = corpus_batch(fn, make)
    g = ad.grad(fn, argnums=nums)
    want = stack([g(*ex) for ex in examples])
    assert_same(ad.vmap(g, in_axes)(*batched), want, 1e-10, f"{fn.__name__} vmap(grad)")
    if fn.__name__ in VECTORIZES:
        assert_same(ad.vmap(g, in_axes, method="vectorize")(*batched), want, 1e-10,
                    f"{fn.__name__} vmap(grad, method='vectorize')")


@pytest.mark.parametrize("fn", ["affine", "horner"])
def test_nested_vmap_under_jit(fn):
    """Loop-free code vectorizes both levels; code with loops runs the compiled loop."""
    if fn == "affine":
        f, args = vp.affine, (RNG.standard_normal((2, B, 4)), W)
    else:
        f, args = cf.horner, (RNG.standard_normal((2, B, 4)), 0.7)
    got = ad.jit(ad.vmap(ad.vmap(f, (0, None)), (0, None)))(*args)
    want = ad.vmap(ad.vmap(f, (0, None), method="loop"), (0, None), method="loop")(*args)
    assert_same(got, want, 1e-12)
