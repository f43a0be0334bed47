"""Compiled ``jacfwd`` in vector mode: one generated JVP carries up to 16 tangents.

The primal and the partials run once per call; each tangent is its own
local.  Each Jacobian is checked against reverse mode on NumPy (``jacrev``
without jit: an independent derivation) and, for the chunking cases,
against central finite differences.
"""
import ast
import math

import numpy as np
import pytest

import s2s_ad as ad
from s2s_ad.api import core
from s2s_ad.codegen import printer as codegen
from s2s_ad.ir.names import Names
from s2s_ad.transforms import widen


def ring(x):
    """R^n -> R^n with loops, a branch and in-place writes."""
    n = x.shape[0]
    y = np.zeros(n)
    for i in range(n):
        a = x[i]
        b = x[(i + 1) % n]
        if a > b:
            y[i] = math.sin(a) * b
        else:
            y[i] = a * a - math.cos(b)
    y[0] += np.sum(x * x)
    return y


def _scale(a, s):
    return a * s + math.exp(-a)


def with_helpers(params, t, c):
    """Pytree argument, a scalar argument, a helper called in a loop, a while loop."""
    w, b = params
    out = np.empty(t.shape[0])
    for i in range(t.shape[0]):
        v = _scale(w[0] * t[i] + b, c)
        k = 0
        while v > 1.0 and k < 5:
            v = v * 0.5 + w[1] * 0.1
            k += 1
        out[i] = v
    return out


@ad.custom_jvp
def softclip(x):
    return math.log1p(math.exp(x))


@softclip.defjvp
def softclip_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    return softclip(x), dx / (1.0 + math.exp(-x))


def uses_custom(x):
    y = np.empty(x.shape[0] - 1)
    for i in range(x.shape[0] - 1):
        y[i] = softclip(x[i] - x[i + 1]) * x[i]
    return y


def aliased(x):
    """A fresh array whose tangent must not alias its operand's under element writes."""
    z = x * 1.0
    z[0] = z[1] * z[2]
    return z + x


def fd_jacobian(f, x, eps=1e-6):
    cols = []
    for k in range(x.size):
        e = np.zeros_like(x)
        e[k] = eps
        cols.append((f(x + e) - f(x - e)) / (2 * eps))
    return np.stack(cols, axis=-1)


JIT = {}


def jitted(f, mode="jacfwd"):
    """``mode(ad.jit(f))``, built once per module (Numba compiles cost seconds)."""
    if (f, mode) not in JIT:
        JIT[f, mode] = getattr(ad, mode)(ad.jit(f))
    return JIT[f, mode]


@pytest.mark.parametrize("n", [1, 5, 16, 17, 40])
def test_chunked_columns_match_finite_differences_and_reverse_mode(n):
    """16 columns or fewer in one call; more in ceil(n / 16) calls, the last padded."""
    x = np.random.default_rng(n).normal(size=n)
    got = jitted(ring)(x)
    assert got.shape == (n, n)
    np.testing.assert_allclose(got, ad.jacrev(ring)(x), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got, fd_jacobian(ring, x), rtol=1e-6, atol=1e-7)


def test_width_and_number_of_calls():
    layered, calls, _, total = jitted(ring)._vector_plan(
        core._as_transformed(jitted(ring).fun), (np.ones(40),), [0])
    assert total == 40
    assert layered.width == 14 and len(calls) == 3       # 40 columns: 14 + 14 + 12
    assert all(len(c) == 14 for c in calls)
    assert not np.any(calls[-1][-1]) and calls[-1][11][39] == 1.0


def test_pytree_and_scalar_arguments_with_helpers_and_while_loops():
    params = (np.array([0.7, -0.3]), 0.2)
    t = np.linspace(0.0, 2.0, 9)
    f = ad.jit(with_helpers)
    got = ad.jacfwd(f, argnums=(0, 2))(params, t, 1.3)
    want = ad.jacrev(with_helpers, argnums=(0, 2))(params, t, 1.3)
    (dw, db), dc = got
    (ww, wb), wc = want
    for g, w in ((dw, ww), (db, wb), (dc, wc)):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    assert isinstance(params[1], float) and np.shape(db) == (9,)


def test_custom_jvp_rule_runs_once_per_direction():
    x = np.array([0.3, -1.2, 0.8, 2.0, -0.4])
    got = jitted(uses_custom)(x)
    np.testing.assert_allclose(got, fd_jacobian(uses_custom, x), rtol=1e-6, atol=1e-8)


def test_fresh_arrays_get_fresh_tangents_in_every_direction():
    x = np.array([0.5, -1.5, 2.0, 0.25])
    got = jitted(aliased)(x)
    np.testing.assert_allclose(got, ad.jacrev(aliased)(x), rtol=1e-13)
    np.testing.assert_allclose(got, fd_jacobian(aliased, x), rtol=1e-7, atol=1e-9)


def test_float32_stays_float32():
    x = np.array([0.3, -0.7, 1.1], dtype=np.float32)
    got = jitted(ring)(x)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, ad.jacrev(ring)(x.astype(np.float64)), rtol=1e-5,
                               atol=1e-5)


def test_source_shows_one_primal_for_all_tangents():
    x = np.ones(6)
    src = ad.source(jitted(ring), x)
    assert "vector mode: one JVP carries 6 unit tangents at once" in src
    assert "def jvp_ring(x, dx_0, dx_1, dx_2, dx_3, dx_4, dx_5):" in src
    # the primal and each partial once, whatever the number of tangents:
    # sin and cos, and each as the other's derivative
    code = "\n".join(line for line in src.splitlines() if not line.lstrip().startswith("#"))
    assert code.count("math.sin(") == 2 and code.count("math.cos(") == 2
    assert "return (y, (dy_0, dy_1, dy_2, dy_3, dy_4, dy_5))" in src


# -- jacrev: adjoint sweeps that carry up to 16 rows (s2s_ad.transforms.widen) ----------------------------

def kde(x, centers):
    """In-place accumulation over a double loop (the jac_wide benchmark's shape)."""
    dens = np.zeros(centers.shape[0])
    for i in range(x.shape[0]):
        for c in range(centers.shape[0]):
            z = x[i] - centers[c]
            dens[c] += math.exp(-0.5 * z * z)
    return np.log(dens)


@pytest.mark.parametrize("n", [1, 5, 16, 17, 40])
def test_rows_in_shared_sweeps_match_forward_mode_and_finite_differences(n):
    x = np.random.default_rng(n + 100).normal(size=n)
    got = jitted(ring, "jacrev")(x)
    np.testing.assert_allclose(got, ad.jacfwd(ring)(x), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got, fd_jacobian(ring, x), rtol=1e-6, atol=1e-7)


def test_accumulating_loops_share_one_sweep():
    x = np.linspace(-1.0, 1.0, 30)
    centers = np.array([-0.5, 0.0, 0.25, 0.8])
    got = jitted(kde, "jacrev")(x, centers)
    np.testing.assert_allclose(got, fd_jacobian(lambda v: kde(v, centers), x), rtol=1e-6,
                               atol=1e-8)
    src = ad.source(jitted(kde, "jacrev"), x, centers)
    assert "4 rows per adjoint sweep" in src and "for row in range(0, m, 4):" in src
    code = [line.strip() for line in src.split("for row in range")[1].splitlines()]
    pops = [line.split(".pop()")[0].split("= ")[-1] for line in code if line.endswith(".pop()")]
    assert pops and len(pops) == len(set(pops))          # each stack popped once per sweep
    assert sum(line.startswith("bx_") and "+=" in line for line in code) == 4


def recurrence(x):
    """Element writes that read the old value: the adjoint restores them."""
    y = x * 1.0
    for i in range(1, y.shape[0]):
        y[i] = y[i] * 0.5 + math.sin(y[i - 1])
    return y


@pytest.mark.parametrize("n", [6, 40])
def test_sweeps_restore_overwritten_elements_from_the_second_on(n):
    x = np.random.default_rng(n).normal(size=n)
    got = jitted(recurrence, "jacrev")(x)
    np.testing.assert_allclose(got, ad.jacfwd(recurrence)(x), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got, fd_jacobian(recurrence, x), rtol=1e-6, atol=1e-8)
    src = ad.source(jitted(recurrence, "jacrev"), x)
    assert "if row > 0:" in src and "rt.copy_into(y, y_final)" in src


def _widen(text, seeds=("b_out",), width=2, pure=lambda name: False):
    """widen on the tree of ``text``; the widened sweep printed back as lines."""
    names = Names({n.id for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Name)})
    got = widen.widen(codegen.parse(text.splitlines()), list(seeds), width, names, pure)
    return None if got is None else (codegen.unparse(got[0]).splitlines(), got[1])


def test_widen_repeats_only_what_depends_on_the_cotangent():
    lines, per_row = _widen(
        "bx = rt.zeros_like(x)\n"
        "for i in range(n - 1, -1, -1):\n"
        "    # adjoint of: s += x[i]\n"
        "    v = v_stack.pop()\n"
        "    w = math.cos(v)\n"
        "    rt.index_add(bx, i, b_out * w)\n"
        "rt.copy_into(x, x_final)\n")
    assert lines == [
        "bx_0 = rt.zeros_like(x)",
        "bx_1 = rt.zeros_like(x)",
        "for i in range(n - 1, -1, -1):",
        "    # adjoint of: s += x[i]",
        "    v = v_stack.pop()",
        "    w = math.cos(v)",
        "    rt.index_add(bx_0, i, b_out_0 * w)",
        "    rt.index_add(bx_1, i, b_out_1 * w)",
        "rt.copy_into(x, x_final)"]
    assert per_row == [{"b_out": "b_out_0", "bx": "bx_0"}, {"b_out": "b_out_1", "bx": "bx_1"}]


@pytest.mark.parametrize("text", [
    "if b_out > 0.0:\n    y = 1.0\n",                      # control flow on a cotangent
    "bx = b_out * 2.0\nbv, = bwd_h(v_stack, bx)\n",          # a generated function that pops
    "bv = b_out * v_stack.pop()\n",                          # a pop repeated per cotangent
    "rt.index_add(x, 0, b_out)\n",                           # a write into a shared array
    "bm = b_out * 2.0\nbx = rt.add_minmax_grad(x, bm, x, m, 1, True)\n",   # ... in an assignment
])
def test_widen_refuses_sweeps_it_cannot_share(text):
    assert _widen(text) is None


def test_widen_repeats_calls_of_pure_generated_functions():
    lines, _ = _widen("bv, = vjp_h(v, b_out)\n", pure=lambda name: name == "vjp_h")
    assert lines == ["bv_0, = vjp_h(v, b_out_0)", "bv_1, = vjp_h(v, b_out_1)"]


# -- lanes: the K copies of an array side by side, for the SLP vectorizer ---------------------

def _lanes(text, ranks, width=2, after=()):
    names = Names({n.id for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Name)})
    body = widen.widen(codegen.parse(text.splitlines()), ["b_out"], width, names,
                       lambda name: False, ranks, after)[0]
    return codegen.unparse(body).splitlines()


def test_widen_gives_arrays_the_loops_index_lanes():
    lines = _lanes("bd = b_out * s\n"
                   "bx = rt.zeros_like(x)\n"
                   "for i in range(n):\n"
                   "    bx[i] += bd[i + 1] * w\n",
                   {"b_out": 1, "bd": 1, "bx": 1, "i": 0}, after={"bx"})
    assert lines == [
        "bd_0 = b_out_0 * s",
        "bd_1 = b_out_1 * s",
        "bd_lanes = rt.lanes((bd_0, bd_1))",       # bd's copies are read nowhere else
        "bx_lanes = rt.zeros_lanes(x, 2)",
        "bx_0 = bx_lanes[..., 0]",                 # bx is read after the sweep
        "bx_1 = bx_lanes[..., 1]",
        "for i in range(n):",
        "    bx_lanes[i, 0] += bd_lanes[i + 1, 0] * w",
        "    bx_lanes[i, 1] += bd_lanes[i + 1, 1] * w"]


@pytest.mark.parametrize("text", [
    "bx = rt.zeros_like(x)\nfor i in range(n):\n    bx[k] += b_out\n",          # index of unknown rank
    "bx = rt.zeros_like(x)\nfor i in range(n):\n    rt.index_add(bx, i, b_out)\n",   # passed on
    "bx = b_out\nfor i in range(n):\n    bx[i] += 1.0\n",                  # an alias, not a new array
    "bx = rt.zeros_like(x)\nfor i in range(n):\n    bx = bx * b_out\n",   # rebound in the loop
    "for i in range(n):\n    bx = b_out * 2.0\n    bx[i] += 1.0\n",       # bound inside the loop
])
def test_widen_leaves_arrays_without_lanes_where_views_could_differ(text):
    lines = _lanes(text, {"b_out": 1, "bx": 1, "i": 0, "k": None})
    assert lines and not any("lanes" in line for line in lines)


def planes(a, w):
    """2-D elements, row views and slices in the loops: lanes of rank 2."""
    n, m = a.shape
    out = np.zeros(m)
    acc = np.zeros((n, m))
    for i in range(n):
        acc[i] = a[i] * w[i]
        for j in range(m):
            out[j] += math.tanh(acc[i, j]) * a[i, (j + 1) % m]
        out[1:] += acc[i, :m - 1] * 0.5
    return out


@pytest.mark.parametrize("shape", [(3, 4), (5, 17)])
def test_lanes_of_matrices_match_forward_mode_and_finite_differences(shape):
    rng = np.random.default_rng(shape[1])
    a, w = rng.normal(size=shape), rng.normal(size=shape[0])
    got = jitted(planes, "jacrev")(a, w)
    np.testing.assert_allclose(got, ad.jacfwd(planes)(a, w), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got, fd_jacobian(lambda v: planes(v.reshape(shape), w), a.ravel())
                               .reshape(got.shape), rtol=1e-6, atol=1e-7)
    src = ad.source(jitted(planes, "jacrev"), a, w)
    assert "ba_lanes = rt.zeros_lanes(a, " in src and "ba_lanes[i, " in src


def test_superword_compiles_with_llvm_slp_on_and_restores_the_setting(monkeypatch):
    import numba
    from numba.core import codegen, config

    from s2s_ad import backends
    seen = []
    build = codegen.CPUCodegen._pass_builder

    def spy(self, **kwargs):
        seen.append(kwargs.get("slp_vectorize", config.SLP_VECTORIZE))
        return build(self, **kwargs)
    monkeypatch.setattr(codegen.CPUCodegen, "_pass_builder", spy)

    def twice(v):
        return v[0] * 2.0 + v[1] * 2.0

    before = config.SLP_VECTORIZE
    assert backends._superword(numba.njit(twice))(np.ones(2)) == 4.0
    assert True in seen and config.SLP_VECTORIZE == before
    seen.clear()
    assert numba.njit(twice)(np.ones(2)) == 4.0     # other code: Numba's setting
    assert seen and True not in seen


def test_repeated_jacrev_calls_go_straight_to_the_compiled_rows():
    """After a first call, calls with the same signature and shapes skip the
    checks and plans; new shapes and argnums tuples still come out right."""
    centers = np.array([-0.5, 0.0, 0.25, 0.8])
    f = jitted(kde, "jacrev")
    for n in (30, 30, 7, 30):
        x = np.linspace(-1.0, 1.0, n)
        np.testing.assert_allclose(f(x, centers), fd_jacobian(lambda v: kde(v, centers), x),
                                   rtol=1e-6, atol=1e-8)
    shapes = {k for by_shape in f._fast.values() for k in by_shape}
    assert {((30,), (4,)), ((7,), (4,))} <= shapes       # one direct call per shape
    both = ad.jacrev(ad.jit(kde), argnums=(0, 1))
    x = np.linspace(-1.0, 1.0, 9)
    for _ in range(2):
        jx, jc = both(x, centers)
        rx, rc = ad.jacfwd(kde, argnums=(0, 1))(x, centers)
        np.testing.assert_allclose(jx, rx, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(jc, rc, rtol=1e-12, atol=1e-12)


def test_repeated_jacfwd_calls_go_straight_to_the_vector_mode_jvp():
    f = jitted(ring)
    for n in (20, 20, 40, 20):
        x = np.random.default_rng(n).normal(size=n)
        np.testing.assert_allclose(f(x), fd_jacobian(ring, x), rtol=1e-6, atol=1e-7)
    shapes = {k for by_shape in f._fast.values() for k in by_shape}
    assert {((20,),), ((40,),)} <= shapes                 # one direct call per shape
    both = ad.jacfwd(ad.jit(kde), argnums=(0, 1))
    x, centers = np.linspace(-1.0, 1.0, 9), np.array([-0.5, 0.0, 0.25, 0.8])
    for _ in range(2):
        jx, jc = both(x, centers)
        rx, rc = ad.jacrev(kde, argnums=(0, 1))(x, centers)
        np.testing.assert_allclose(jx, rx, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(jc, rc, rtol=1e-12, atol=1e-12)


# -- shared partials: one multiply-add per row for a linear chain ----------------------------

def test_widen_computes_a_chains_partials_once_and_applies_them_per_row():
    lines = _lanes("bd = b_out * s\n"
                   "bx = rt.zeros_like(x)\n"
                   "for i in range(n):\n"
                   "    for c in range(k):\n"
                   "        e = e_stack.pop()\n"
                   "        bt = bd[c]\n"
                   "        bt2 = bt * e\n"
                   "        bz = bt2 * w\n"
                   "        bz += bt2 * -0.5\n"
                   "        bx[i] += bz / h\n",
                   {"b_out": 1, "bd": 1, "bx": 1, "i": 0, "c": 0, "bt": 0, "bt2": 0, "bz": 0},
                   width=3, after={"bx"})
    loop = lines[lines.index("    for c in range(k):") + 1:]
    assert loop == [
        "        e = e_stack.pop()",
        "        bz_d = e * w",                       # partials, once per iteration
        "        bz_d_1 = e * -0.5",
        "        bz_d_2 = bz_d + bz_d_1",
        "        bx_d = bz_d_2 / h",
        "        # every row, through the partials above",
        "        bd_el_0 = bd_lanes[c, 0]",      # the rows' loads, then their writes
        "        bd_el_1 = bd_lanes[c, 1]",
        "        bd_el_2 = bd_lanes[c, 2]",
        "        bx_lanes[i, 0] += bd_el_0 * bx_d",
        "        bx_lanes[i, 1] += bd_el_1 * bx_d",
        "        bx_lanes[i, 2] += bd_el_2 * bx_d"]


def test_widen_carries_a_cotangent_through_its_partial():
    lines = _lanes("bs = b_out[0]\n"
                   "for i in range(n - 1, -1, -1):\n"
                   "    s = s_stack.pop()\n"
                   "    bt = bs * c\n"
                   "    bu = bt * s\n"
                   "    bs = bt * 0.9 + bu\n"
                   "    g = bs * 2.0\n",             # read nowhere: no partial for it
                   {"b_out": 1, "bs": 0, "bt": 0, "bu": 0, "g": 0, "i": 0}, after={"bs"})
    assert lines[lines.index("for i in range(n - 1, -1, -1):") + 1:] == [
        "    s = s_stack.pop()",
        "    bu_d = c * s",
        "    bs_d = c * 0.9",
        "    bs_d_1 = bs_d + bu_d",
        "    # every row, through the partials above",
        "    bs_0 = bs_0 * bs_d_1",
        "    bs_1 = bs_1 * bs_d_1"]


@pytest.mark.parametrize("text", [
    "    bt = bs * bs\n    bs = bt * 2.0\n",                         # not linear
    "    bt = bx[i]\n    bx[i - 1] += bt * w\n    bx[i] += bt * v\n",   # reads what it writes
    "    bt = bs * w\n    bs = bt + 1.0\n",                          # a constant term
    "    bt = bs * w\n    bx[j] += bt\n    j = j - 1\n    bx[j] += bt * v\n",   # index changes
    "    bs = bs * w\n",                                              # one statement: no gain
])
def test_widen_repeats_runs_the_partials_do_not_cover(text):
    lines = _lanes("bs = b_out[0]\nbx = rt.zeros_like(x)\nfor i in range(n):\n" + text,
                   {"b_out": 1, "bs": 0, "bt": 0, "bx": 1, "i": 0, "j": 0}, after={"bs", "bx"})
    assert not any("_d" in line for line in lines), lines


def carried_rows(x):
    """A cotangent carried through the loop next to element increments."""
    out = np.zeros(4)
    s = 0.0
    for i in range(x.shape[0]):
        s = math.sin(s) * 0.9 + x[i]
        out[i % 4] += s * s
    return out


@pytest.mark.parametrize("fn, n", [(carried_rows, 9), (kde, 30)])
def test_shared_partials_match_forward_mode_and_finite_differences(fn, n):
    x = np.random.default_rng(n).normal(size=n)
    args = (x,) if fn is carried_rows else (x, np.array([-0.5, 0.0, 0.25, 0.8]))
    f = (lambda v: fn(v, *args[1:]))
    got = jitted(fn, "jacrev")(*args)
    np.testing.assert_allclose(got, ad.jacfwd(fn)(*args), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got, fd_jacobian(f, x), rtol=1e-6, atol=1e-7)
    assert "every row, through the partials above" in ad.source(jitted(fn, "jacrev"), *args)


def test_widen_gives_lanes_to_arrays_any_new_array_call_made():
    """Every call in widen._FRESH makes a new array: np.zeros as rt.zeros_like."""
    lines = _lanes("bx = np.zeros(n)\n"
                   "for i in range(n):\n"
                   "    bx[i] += b_out[i] * w\n",
                   {"b_out": 1, "bx": 1, "i": 0}, after={"bx"})
    assert lines == [
        "bx_0 = np.zeros(n)",
        "bx_1 = np.zeros(n)",
        "bx_lanes = rt.lanes((bx_0, bx_1))",
        "bx_0 = bx_lanes[..., 0]",
        "bx_1 = bx_lanes[..., 1]",
        "for i in range(n):",
        "    bx_lanes[i, 0] += b_out_0[i] * w",
        "    bx_lanes[i, 1] += b_out_1[i] * w"]
