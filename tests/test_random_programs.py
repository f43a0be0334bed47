"""Random small programs, differentiated and checked against finite differences.

Hypothesis builds programs from a small grammar -- straight-line arithmetic
with sin/exp/tanh and products, loop-carried updates (``v = v * e``),
``if``/``else`` on comparisons of
differentiated values, ``for`` loops with small constant or data-dependent
trip counts, ``while`` loops, loop-carried accumulators, writes into a zeros
array that are read back, ``break`` on a condition -- writes each to a module
file (the compiler reads source from files) and checks ``ad.grad``,
``ad.vjp`` and ``ad.jvp`` against central finite differences, and ``ad.vmap``
against the function applied to each example.

Finite differences are only valid where the program is smooth, so every
program is first run with its comparisons and trip counts instrumented, and
rejected unless each comparison is at least ``MARGIN`` from a tie and each
data-dependent trip count at least ``MARGIN`` from an integer.  A perturbation
of 1e-6 then takes the same branches.

``S2S_AD_RANDOM_EXAMPLES=500`` runs more programs on the Python backend (the
default keeps the suite quick).
"""
import hashlib
import importlib.util
import math
import os
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, given, note, settings
from hypothesis import strategies as st

import s2s_ad as ad
from s2s_ad.testing import check_grad, check_jvp, check_vjp

N = 4                  # length of the array argument and of the zeros buffer
VARS = ("v0", "v1", "v2")
MARGIN = 1e-3
CONSTS = (0.5, -0.3, 1.2, 2.0, -1.5)

SETTINGS = {"derandomize": True, "database": None, "deadline": None, "print_blob": True,
            "suppress_health_check": [HealthCheck.too_slow, HealthCheck.filter_too_much,
                                      HealthCheck.data_too_large]}

# -- the grammar ------------------------------------------------------------------
# Expressions and statements are nested tuples, rendered to source twice: as
# the user would write it, and instrumented (comparisons and trip counts go
# through recording functions) to measure how far the sample is from a tie.


@st.composite
def exprs(draw, indices, depth=2):
    """A scalar expression.  ``indices``: loop counters usable as x[i] / buf[i]."""
    idx = st.sampled_from(tuple(range(N)) + tuple(indices))
    leaves = st.one_of(
        st.tuples(st.just("var"), st.sampled_from(VARS + ("a",))),
        st.tuples(st.just("x"), idx),
        st.tuples(st.just("buf"), idx),
        st.tuples(st.just("const"), st.sampled_from(CONSTS)),
    )
    if depth == 0 or draw(st.booleans()):
        return draw(leaves)
    kind = draw(st.sampled_from(["sin", "tanh", "exp", "+", "-", "*", "*", "scale"]))
    if kind in ("sin", "tanh", "exp"):
        return (kind, draw(exprs(indices, depth - 1)))
    if kind == "scale":
        return ("scale", draw(st.sampled_from(CONSTS)), draw(exprs(indices, depth - 1)))
    return (kind, draw(exprs(indices, depth - 1)), draw(exprs(indices, depth - 1)))


@st.composite
def blocks(draw, indices=(), in_loop=False, depth=2, counter=None):
    """A list of statements: 2 to 4 at the top, 1 to 3 nested."""
    top = counter is None
    counter = [0] if top else counter
    out = []
    for _ in range(draw(st.integers(2, 4) if top else st.integers(1, 3))):
        kinds = ["assign", "assign", "aug", "carry", "write"]
        if in_loop:
            kinds += ["carry", "carry"]
        if depth > 0:
            kinds += ["if", "for", "for", "for", "while"]
        if in_loop:
            kinds += ["break"]
        kind = draw(st.sampled_from(kinds))
        e = exprs(indices)
        if kind == "assign":
            out.append(("assign", draw(st.sampled_from(VARS)), draw(e)))
        elif kind == "aug":
            op = draw(st.sampled_from(["+=", "-=", "*="]))
            value = draw(e)
            out.append(("aug", draw(st.sampled_from(VARS)), op,
                        ("tanh", value) if op == "*=" else value))
        elif kind == "carry":
            form = draw(st.sampled_from(["{v} * ({e})", "{v} + {v} * ({e})", "{c} * {v} + ({e})"]))
            out.append(("carry", draw(st.sampled_from(VARS)), form, draw(e),
                        draw(st.sampled_from(CONSTS))))
        elif kind == "write":
            where = draw(st.sampled_from(tuple(range(N)) + tuple(indices)))
            out.append(("write", where, draw(st.booleans()), draw(e)))
        elif kind == "if":
            out.append(("if", (draw(e), draw(e)),
                        draw(blocks(indices, in_loop, depth - 1, counter)),
                        draw(blocks(indices, in_loop, depth - 1, counter))
                        if draw(st.booleans()) else []))
        elif kind == "break":
            out.append(("break", (draw(e), draw(e))))
        else:
            counter[0] += 1
            name = f"i{counter[0]}" if kind == "for" else f"k{counter[0]}"
            if kind == "for" and draw(st.booleans()):
                trips = ("data", draw(e))           # 0, 1 or 2 trips
            else:
                trips = ("const", draw(st.integers(1, N if kind == "for" else 3)))
            inner = indices + (name,) if kind == "for" else indices
            out.append((kind, name, trips, draw(blocks(inner, True, depth - 1, counter))))
    return out


def render_expr(e):
    kind = e[0]
    if kind == "var":
        return e[1]
    if kind in ("x", "buf"):
        return f"{kind}[{e[1]}]"
    if kind == "const":
        return repr(e[1])
    if kind in ("sin", "tanh"):
        return f"np.{kind}({render_expr(e[1])})"
    if kind == "exp":
        return f"np.exp(np.tanh({render_expr(e[1])}))"
    if kind == "scale":
        return f"{e[1]!r} * ({render_expr(e[2])})"
    return f"({render_expr(e[1])} {kind} {render_expr(e[2])})"


def render_block(stmts, instrument, pad="    "):
    lines = []
    for s in stmts:
        kind = s[0]
        if kind == "assign":
            lines.append(f"{pad}{s[1]} = {render_expr(s[2])}")
        elif kind == "aug":
            lines.append(f"{pad}{s[1]} {s[2]} {render_expr(s[3])}")
        elif kind == "carry":
            _, v, form, e, c = s
            lines.append(f"{pad}{v} = " + form.format(v=v, e=render_expr(e), c=repr(c)))
        elif kind == "write":
            op = "+=" if s[2] else "="
            lines.append(f"{pad}buf[{s[1]}] {op} {render_expr(s[3])}")
        elif kind in ("if", "break"):
            lhs, rhs = (render_expr(x) for x in s[1])
            test = f"_gt({lhs}, {rhs})" if instrument else f"{lhs} > {rhs}"
            lines.append(f"{pad}if {test}:")
            if kind == "break":
                lines.append(f"{pad}    break")
            else:
                lines += render_block(s[2], instrument, pad + "    ")
                if s[3]:
                    lines.append(f"{pad}else:")
                    lines += render_block(s[3], instrument, pad + "    ")
        elif kind == "for":
            _, name, trips, body = s
            if trips[0] == "const":
                bound = str(trips[1])
            else:
                count = f"np.tanh({render_expr(trips[1])}) * 1.5 + 1.5"
                bound = f"_trip({count})" if instrument else f"int({count})"
            lines.append(f"{pad}for {name} in range({bound}):")
            lines += render_block(body, instrument, pad + "    ")
        elif kind == "while":
            _, name, trips, body = s
            lines.append(f"{pad}{name} = 0")
            lines.append(f"{pad}while {name} < {trips[1]}:")
            lines.append(f"{pad}    {name} += 1")
            lines += render_block(body, instrument, pad + "    ")
    return lines


PROLOGUE = ["    v0 = a", "    v1 = x[0] * 0.5", "    v2 = np.sin(a) + x[1]",
            f"    buf = np.zeros({N})"]


def render(body, instrument=False):
    """Module source defining ``f`` (scalar output) and ``g`` (array output)."""
    lines = render_block(body, instrument)
    out = ["import numpy as np", ""]
    for name, ret in (("f", "v0 + 0.5 * v1 - v2 + np.sum(buf * buf)"),
                      ("g", "buf * v0 + np.tanh(x) * v1 + v2")):
        out += ["", f"def {name}(x, a):", *PROLOGUE, *lines, f"    return {ret}", ""]
    return "\n".join(out)


# -- running a program --------------------------------------------------------------


class Margins:
    """What the instrumented program saw: the closest it came to a tie."""

    def __init__(self):
        self.smallest = math.inf

    def gt(self, lhs, rhs):
        self.smallest = min(self.smallest, abs(float(lhs) - float(rhs)))
        return lhs > rhs

    def trip(self, count):
        count = float(count)
        self.smallest = min(self.smallest, abs(count - round(count)))
        return int(count)


def smooth_at(body, args):
    """The program's outputs if it is smooth at ``args`` (else ``None``)."""
    margins = Margins()
    scope = {"_gt": margins.gt, "_trip": margins.trip}
    exec(compile(render(body, instrument=True), "<instrumented>", "exec"), scope)  # noqa: S102
    # An intermediate that overflows and is later overwritten leaves a finite
    # output but an inf * 0 = nan derivative: not a smooth program either.
    try:
        with np.errstate(over="raise", invalid="raise", divide="raise", under="ignore"):
            outs = [scope[name](*args) for name in ("f", "g")]
    except (FloatingPointError, OverflowError):
        return None
    if margins.smallest < MARGIN:
        return None
    if not all(np.all(np.isfinite(o)) and np.all(np.abs(o) < 1e4) for o in outs):
        return None
    return outs


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("random_programs")


def load(folder, body):
    """Write the program to a module file and import it."""
    source = render(body)
    name = "random_program_" + hashlib.sha1(source.encode()).hexdigest()[:16]
    if name not in sys.modules:
        path = folder / f"{name}.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


samples = st.tuples(
    st.lists(st.floats(-1.5, 1.5, allow_nan=False).map(lambda v: round(v, 3)),
             min_size=N, max_size=N).map(np.array),
    st.floats(-1.5, 1.5, allow_nan=False).map(lambda v: round(v, 3)))


def features(stmts):
    """The statement kinds in ``stmts``, nested ones included."""
    out = set()
    for s in stmts:
        out.add(s[0])
        if s[0] == "for" and s[2][0] == "data":
            out.add("data-dependent for")
        for part in s[2:]:
            if isinstance(part, list):
                out |= {f"nested {k}" if k in ("for", "while") and s[0] in ("for", "while")
                        else k for k in features(part)}
    return out


def _check(folder, body, sample, target):
    x, a = sample
    outs = smooth_at(body, (x, a))
    assume(outs is not None)
    for kind in sorted(features(body)):
        event(kind)
    note(render(body))
    module = load(folder, body)
    np.testing.assert_allclose(module.f(x, a), outs[0], rtol=1e-12)
    check_grad(module.f, (x, a), (0, 1), target=target)
    check_vjp(module.g, (x, a), target=target)
    check_jvp(module.f, (x, a), target=target)
    check_jvp(module.g, (x, a), target=target)
    if target == "python":
        _check_vmap(module, x, a)


def _check_vmap(module, x, a):
    """vmap (whichever lowering it picks) equals the function over each example."""
    xs = np.stack([x, x[::-1], 0.5 * x])
    as_ = np.array([a, -a, 0.5 * a])
    for fn in (module.f, module.g):
        with np.errstate(all="ignore"):
            want = np.stack([np.asarray(fn(xs[b], as_[b])) for b in range(3)])
            got = ad.vmap(fn)(xs, as_)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    with np.errstate(all="ignore"):
        want = [ad.grad(module.f, argnums=(0, 1))(xs[b], as_[b]) for b in range(3)]
        got = ad.vmap(ad.grad(module.f, argnums=(0, 1)))(xs, as_)
    for k in range(2):
        np.testing.assert_allclose(got[k], np.stack([w[k] for w in want]), rtol=1e-10,
                                   atol=1e-12)


@pytest.mark.slow
@settings(max_examples=int(os.environ.get("S2S_AD_RANDOM_EXAMPLES", "100")), **SETTINGS)
@given(body=blocks(), sample=samples)
def test_random_programs_python(folder, body, sample):
    _check(folder, body, sample, "python")


@pytest.mark.slow
@settings(max_examples=3, **SETTINGS)
@given(body=blocks(), sample=samples)
def test_random_programs_numba(folder, body, sample):
    _check(folder, body, sample, "cpu")


# -- the generator itself -------------------------------------------------------------


def test_rendering_reads_like_user_code():
    body = [("for", "i1", ("data", ("x", 0)),
             [("write", "i1", True, ("*", ("x", "i1"), ("var", "v0"))),
              ("break", (("buf", "i1"), ("const", 0.5)))]),
            ("if", (("var", "v1"), ("sin", ("var", "a"))),
             [("aug", "v2", "*=", ("tanh", ("var", "v1")))], [])]
    assert render_block(body, instrument=False) == [
        "    for i1 in range(int(np.tanh(x[0]) * 1.5 + 1.5)):",
        "        buf[i1] += (x[i1] * v0)",
        "        if buf[i1] > 0.5:",
        "            break",
        "    if v1 > np.sin(a):",
        "        v2 *= np.tanh(v1)",
    ]
    assert "_trip(" in render(body, instrument=True) and "_gt(" in render(body, instrument=True)


def test_near_ties_are_rejected():
    # v0 = a, so `a > v0 + 1e-5 * x[0]` is within 1e-3 of a tie.
    body = [("if", (("var", "a"), ("+", ("var", "v0"), ("scale", 1e-5, ("x", 0)))),
             [("assign", "v1", ("const", 2.0))], [])]
    assert smooth_at(body, (np.ones(N), 0.3)) is None
    assert smooth_at([("assign", "v1", ("const", 2.0))], (np.ones(N), 0.3)) is not None


def test_overflowing_intermediates_are_rejected():
    # v2 squares itself to inf, then is overwritten: the output is finite.
    body = [("for", "i1", ("const", 4), [("for", "i2", ("const", 4), [
        ("carry", "v2", "{v} * ({e})", ("scale", 1e3, ("var", "v2")), 0.5)])]),
        ("assign", "v2", ("const", 0.5))]
    assert smooth_at(body, (np.ones(N), 1.0)) is None
