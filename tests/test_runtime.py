"""Tests of s2s_ad.runtime in both worlds: plain Python and numba.njit.

Every helper is called directly and from a small njit wrapper; the two
results must agree in value, shape, dtype and scalar-ness (the Numba
dtype of a scalar is read from the compiled signature, because Numba
boxes float32 scalars as Python floats).  Python results are checked
against NumPy, finite differences or the adjoint identity
<L^T g, x> == <g, L x> for the linear maps.  Wrappers are cached by
source text so each static configuration compiles once.
"""

import pathlib
import sys

import numba
import numpy as np
import pytest
from numba.core.errors import TypingError

try:
    from s2s_ad import runtime as rt
except ImportError:  # the runtime folder on its own
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
    import runtime as rt

RNG = np.random.default_rng(0)
_WRAPPERS = {}


@pytest.fixture(scope="module", autouse=True)
def _fast_numba_compiles():
    """Compile at LLVM -O0 while this module runs, then restore the level.

    These tests check results, not speed, and about 150 small
    compilations at full optimisation would double the module's run time.
    """
    saved = numba.config.OPT
    numba.config.OPT = type(saved)(0)
    yield
    numba.config.OPT = saved


def _wrapper(body, nargs):
    """njit function of p0..p{nargs-1} running `body` lines (cached)."""
    params = ", ".join(f"p{i}" for i in range(nargs))
    src = f"def w({params}):\n" + "\n".join("    " + b for b in body)
    if src not in _WRAPPERS:
        scope = {"rt": rt, "np": np}
        exec(src, scope)  # noqa: S102 - test-written source
        _WRAPPERS[src] = numba.njit(scope["w"])
    return _WRAPPERS[src]


def run_nb(body, *args):
    """Run `body` compiled; return (result, Numba return type)."""
    if isinstance(body, str):
        body = [f"return {body}"]
    w = _wrapper(body, len(args))
    res = w(*args)
    sig = tuple(numba.typeof(a) for a in args)
    return res, w.overloads[sig].signature.return_type


def kw(**static):
    """Source of keyword arguments with literal values."""
    return "".join(f", {k}={v!r}" for k, v in static.items())


def tol(dtype):
    dt = np.result_type(dtype)
    if dt == np.float32:
        return {"rtol": 2e-5, "atol": 2e-6}
    return {"rtol": 1e-11, "atol": 1e-12}


def assert_same(py, nb, nbt):
    """Python result `py` and Numba result `nb` (of type nbt) agree."""
    if isinstance(py, tuple):
        for p, n, t in zip(py, nb, nbt.types):
            assert_same(p, n, t)
        return
    if isinstance(py, np.ndarray):
        assert isinstance(nb, np.ndarray), (py, nb)
        assert (nb.shape, nb.dtype) == (py.shape, py.dtype)
    else:
        assert not isinstance(nb, np.ndarray), (py, nb)
        assert str(nbt) == np.result_type(py).name, (nbt, type(py))
    np.testing.assert_allclose(nb, py, **tol(np.result_type(py)))


def both(fname, *args, **static):
    """rt.<fname>(*args, **static) in both worlds; returns the Python one."""
    py = getattr(rt, fname)(*args, **static)
    params = ", ".join(f"p{i}" for i in range(len(args)))
    nb, nbt = run_nb(f"rt.{fname}({params}{kw(**static)})", *args)
    assert_same(py, nb, nbt)
    return py


def rand(shape, dtype=np.float64, layout="C"):
    """Random array; layout "T" gives a transposed (F-ordered) view and
    "S" a strided slice, both non-contiguous in C order."""
    if layout == "T":
        return rand(shape[::-1], dtype).T
    if layout == "S":
        big = rand(tuple(2 * n for n in shape), dtype)
        return big[tuple(slice(None, None, 2) for _ in shape)]
    return RNG.uniform(-1.0, 1.0, shape).astype(dtype)


def vdot(x, y):
    return float(np.sum(np.asarray(x, np.float64) * np.asarray(y)))


# --------------------------------------------------------------- plumbing

@pytest.mark.parametrize("gshape, xshape, dtype, layout", [
    ((2, 3, 4), (3, 1), np.float64, "C"),
    ((2, 3, 4), (2, 1, 4), np.float32, "T"),
    ((3, 4), (4,), np.float64, "S"),
    ((3, 4), (1, 1), np.float32, "C"),
    ((3, 4), None, np.float64, "C"),
])
def test_unbroadcast_sums_broadcast_axes(gshape, xshape, dtype, layout):
    g = rand(gshape, dtype, layout)
    x = 1.5 if xshape is None else rand(xshape, dtype)
    res = both("unbroadcast", g, x)
    assert np.shape(res) == np.shape(x)
    dx = rand(np.shape(x))
    assert np.isclose(vdot(res, dx), vdot(g, np.broadcast_to(dx, gshape)),
                      rtol=1e-5)


def test_unbroadcast_identity_and_scalars():
    g = rand((2, 3))
    assert rt.unbroadcast(g, rand((2, 3))) is g
    assert run_nb("rt.unbroadcast(p0, p1)", g, rand((2, 3)))[0] is g
    assert both("unbroadcast", 2.5, 1.0) == 2.5
    full = both("unbroadcast", 2.5, rand((2, 3), np.float32))
    assert full.dtype == np.float32 and np.all(full == 2.5)
    np.testing.assert_array_equal(
        both("unbroadcast", np.array(2.0), rand((3,))), [2.0] * 3)


@pytest.mark.parametrize("x", [
    1.5, np.float32(1.5), rand((2, 3), np.float32), np.array(2.0)])
def test_zeros_like(x):
    res = both("zeros_like", x)
    assert np.all(np.asarray(res) == 0)
    assert np.result_type(res) == np.result_type(x)


@pytest.mark.parametrize("b, x", [
    (rand((2, 3)), rand((2, 3), np.float32)),
    (0.0, rand((2, 3), np.float32)),
    (rand((3,), np.float32, "S"), rand((3,))),
    (np.array(2.0), 1.0),
    (np.float64(2.0), np.float32(1.0)),
    (rand((1, 1)), 1.0),
])
def test_like_casts_to_primal(b, x):
    res = both("like", b, x)
    assert np.shape(res) == np.shape(x)
    assert np.result_type(res) == np.result_type(x)
    ref = np.broadcast_to(np.reshape(b, (-1,))[0] if np.size(b) == 1
                          else b, np.shape(x))
    np.testing.assert_allclose(res, ref, rtol=1e-6)


def test_like_rejects_wrong_shapes():
    with pytest.raises(ValueError, match="wrong shape"):
        rt.like(rand((3,)), rand((2, 3)))
    with pytest.raises(ValueError, match="wrong shape"):
        run_nb("rt.like(p0, p1)", rand((3,)), rand((4,)))
    with pytest.raises(TypingError):
        run_nb("rt.like(p0, p1)", rand((3,)), rand((2, 3)))


def test_like_returns_right_b_unchanged():
    b = rand((2, 3), np.float32)
    assert rt.like(b, rand((2, 3), np.float32)) is b
    assert run_nb("rt.like(p0, p1)", b, rand((2, 3), np.float32))[0] is b


@pytest.mark.parametrize("g, x", [
    (rand((6,)), rand((2, 3))),
    (rand((3, 2), np.float32, "T"), rand((6,))),
    (rand((1,)), 1.0),
    (2.0, rand((1, 1))),
    (rand((2, 3), np.float32, "S"), rand((3, 1, 2))),
])
def test_reshape_like(g, x):
    res = both("reshape_like", g, x)
    assert np.shape(res) == np.shape(x)
    np.testing.assert_array_equal(np.ravel(res), np.ravel(g))


# ------------------------------------------------------------- reductions

_GRAD = {"sum": "sum_grad", "mean": "mean_grad", "prod": "prod_grad",
         "amax": "minmax_grad", "amin": "minmax_grad"}


def reduce_both(kind, a, **static):
    """Reduction and its adjoint for a random g, in both worlds."""
    out = getattr(np, kind)(a, **static)
    g = RNG.uniform(-1, 1, np.shape(out)).astype(np.result_type(out))
    if not isinstance(out, np.ndarray):
        g = g.item()
    out_arg = "out, " if kind in ("amax", "amin") else ""
    grad = getattr(rt, _GRAD[kind])
    py_out = getattr(rt, kind)(a, **static)
    py = (py_out, grad(g, a, *([py_out] if out_arg else []), **static))
    grad_args = f"p1, p0, {out_arg}{kw(**static)[2:]}"
    body = [f"out = rt.{kind}(p0{kw(**static)})",
            f"return out, rt.{_GRAD[kind]}({grad_args})"]
    nb, nbt = run_nb(body, a, g)
    assert_same(py, nb, nbt)
    np.testing.assert_allclose(py[0], out, **tol(np.result_type(out)))
    return g, py[1]


SUM_CASES = [
    ((), None, False, np.float64, "C"),
    ((), None, True, np.float32, "C"),
    ((4,), None, False, np.float64, "C"),
    ((4,), -1, True, np.float32, "C"),
    ((3, 4), 0, False, np.float64, "T"),
    ((3, 4), -1, True, np.float64, "C"),
    ((3, 4), None, True, np.float32, "C"),
    ((2, 3, 4), 1, False, np.float32, "S"),
    ((2, 3, 4), (0, 2), False, np.float64, "C"),
    ((2, 3, 4), -1, True, np.float64, "C"),
]


@pytest.mark.parametrize("kind, shape, axis, keepdims, dtype, layout", [
    ("sum",) + case for case in SUM_CASES] + [
    ("mean",) + SUM_CASES[i] for i in (2, 6, 7, 8)])
def test_sum_and_mean_grads(kind, shape, axis, keepdims, dtype, layout):
    a = rand(shape, dtype, layout) if shape else np.array(0.5, dtype)
    static = {"axis": axis, "keepdims": keepdims}
    g, grad = reduce_both(kind, a, **static)
    assert grad.shape == a.shape and grad.dtype == a.dtype
    da = rand(shape)
    lin = getattr(np, kind)(da, **static)
    assert np.isclose(vdot(grad, da), vdot(g, lin), rtol=1e-5)


def test_scalar_reduction_inputs():
    for kind in _GRAD:
        g, grad = reduce_both(kind, 2.5)
        assert grad == g


@pytest.mark.parametrize("shape, dtype", [((), np.float64), ((3,), np.float32),
                                          ((2, 3), np.float64), ((2, 3, 4), np.int64)])
def test_broadcast_total_is_the_sum_of_sum_grad(shape, dtype):
    a = rand(shape, dtype) if shape else dtype(0.5)
    total = both("broadcast_total", 0.75, a)
    want = np.sum(rt.sum_grad(0.75, a))
    assert np.result_type(total) == np.result_type(want)
    np.testing.assert_allclose(total, want, **tol(np.result_type(want)))


def test_writable_copies_only_what_is_read_only():
    view = rt.sum_grad(2.0, rand((3, 2)))           # NumPy: a read-only broadcast
    made = rt.writable(view)
    assert made.flags.writeable and not np.shares_memory(made, view)
    np.testing.assert_array_equal(made, view)
    owned = rand((4,))
    assert rt.writable(owned) is owned
    # compiled, sum_grad makes a new array: writable passes it on (same values)
    got, _ = run_nb(["g = rt.sum_grad(p0, p1)", "w = rt.writable(g)",
                     "w[0, 0] += 1.0", "return g[0, 0], w[0, 0]"], 2.0, rand((3, 2)))
    assert got == (3.0, 3.0)


def fd_grad(f, a, g, h=1e-6):
    """Central finite-difference vector-Jacobian product of f at a."""
    res = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        ap, am = a.copy(), a.copy()
        ap[i] += h
        am[i] -= h
        res[i] = vdot(g, (f(ap) - f(am)) / (2 * h))
    return res


@pytest.mark.parametrize("axis, keepdims", [
    (1, False), (None, False), ((0, 2), True), (-1, False)])
def test_prod_grad_exact_with_zeros(axis, keepdims):
    a = rand((2, 3, 4))
    a[0, 1, 2] = 0.0          # one zero: only that element has a gradient
    a[1, 0, 0] = a[1, 2, 0] = 0.0  # two zeros: the lane's gradient is zero
    g, grad = reduce_both("prod", a, axis=axis, keepdims=keepdims)
    ref = fd_grad(lambda x: np.prod(x, axis=axis, keepdims=keepdims), a,
                  g)
    np.testing.assert_allclose(grad, ref, atol=1e-8)


def test_prod_float32_and_strided():
    a = rand((3, 4), np.float32, "T")
    a[1, 2] = 0.0
    g, grad = reduce_both("prod", a, axis=0)
    ref = fd_grad(lambda x: np.prod(x, axis=0), a.astype(np.float64), g)
    np.testing.assert_allclose(grad, ref, atol=1e-5)


def minmax_ref(g, a, out, axis, keepdims):
    """Tie-sharing adjoint written with an explicit walk over lanes."""
    axes = range(a.ndim) if axis is None else np.atleast_1d(axis) % a.ndim
    axes = tuple(int(ax) for ax in axes)
    g, out = np.asarray(g, np.float64), np.asarray(out)
    if not keepdims:
        g, out = np.expand_dims(g, axes), np.expand_dims(out, axes)
    ties = {}
    for i in np.ndindex(a.shape):
        lane = tuple(0 if d in axes else i[d] for d in range(a.ndim))
        if a[i] == out[lane]:
            ties.setdefault(lane, []).append(i)
    res = np.zeros(a.shape)
    for lane, where in ties.items():
        for i in where:
            res[i] = g[lane] / len(where)
    return res


@pytest.mark.parametrize("kind, axis, keepdims, dtype", [
    ("amax", 1, False, np.float64),
    ("amin", None, False, np.float64),
    ("amax", -1, True, np.float32),
    ("amin", (0, 2), False, np.float32),
])
def test_minmax_grad_shares_ties(kind, axis, keepdims, dtype):
    a = np.round(rand((2, 3, 4), dtype) * 2) / 2  # few values: many ties
    g, grad = reduce_both(kind, a, axis=axis, keepdims=keepdims)
    out = getattr(np, kind)(a, axis=axis, keepdims=keepdims)
    ref = minmax_ref(g, a, out, axis, keepdims)
    np.testing.assert_allclose(grad, ref, **tol(dtype))
    assert grad.dtype == dtype


def test_amax_propagates_nan_and_rejects_empty():
    a = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, 6.0]])
    for kind in ("amax", "amin"):
        reduce_both(kind, a, axis=1)
        both(kind, np.zeros((0, 3)), axis=1)
        with pytest.raises(ValueError):
            run_nb(f"rt.{kind}(p0, axis=0)", np.zeros((0, 3)))


def test_integer_reductions_follow_numpy_dtypes():
    a = np.arange(12).reshape(3, 4)
    for kind in _GRAD:
        both(kind, a, axis=1)
        both(kind, a)


def test_non_constant_axis_is_a_typing_error():
    f = numba.njit(lambda a, ax: rt.sum(a, ax))
    with pytest.raises(TypingError, match="compile-time constant"):
        f(np.ones((2, 3)), 1)


# ---------------------------------------------------------- linear algebra

def product_both(name, a, b):
    """Product and both operand adjoints, both worlds, adjoint-checked."""
    out = getattr(rt, name)(a, b)
    g = rand(np.shape(out), np.result_type(out))
    g = g.item() if np.ndim(out) == 0 else g
    py = (out, getattr(rt, f"{name}_grad_a")(g, a, b),
          getattr(rt, f"{name}_grad_b")(g, a, b))
    body = f"(rt.{name}(p0, p1), rt.{name}_grad_a(p2, p0, p1), " \
           f"rt.{name}_grad_b(p2, p0, p1))"
    nb, nbt = run_nb(body, a, b, g)
    assert_same(py, nb, nbt)
    check_product_grads(name, a, b, g, py[1], py[2])
    return py


def check_product_grads(name, a, b, g, ga, gb):
    """Python adjoints: dtype/shape of the operand and adjoint identity."""
    ref = {"dot": np.dot, "matmul": np.matmul, "inner": np.inner}[name]
    for x, gx in ((a, ga), (b, gb)):
        assert np.shape(gx) == np.shape(x)
        assert np.result_type(gx) == np.result_type(x)
        assert isinstance(gx, np.ndarray) == isinstance(x, np.ndarray)
    da, db = rand(np.shape(a)), rand(np.shape(b))
    assert np.isclose(vdot(ga, da), vdot(g, ref(da, b)), rtol=1e-4)
    assert np.isclose(vdot(gb, db), vdot(g, ref(a, db)), rtol=1e-4)


DOT_CASES = [
    ((), (3,), np.float64), ((3,), (), np.float32), ((), (), np.float64),
    ((4,), (4,), np.float64), ((3, 4), (4,), np.float64),
    ((4,), (4, 2), np.float32), ((3, 4), (4, 2), np.float64),
]


def operand(shape, dtype, layout="C"):
    return float(rand((), np.float64)) if shape == () else \
        rand(shape, dtype, layout)


@pytest.mark.parametrize("ashape, bshape, dtype", DOT_CASES)
def test_dot(ashape, bshape, dtype):
    product_both("dot", operand(ashape, dtype), operand(bshape, dtype))


@pytest.mark.parametrize("ashape, bshape, dtype", DOT_CASES[3:])
def test_matmul(ashape, bshape, dtype):
    product_both("matmul", operand(ashape, dtype), operand(bshape, dtype))


@pytest.mark.parametrize("ashape, alayout, bshape, blayout", [
    ((40, 4), "C", (4, 3), "T"),      # a small F operand on the right: copied to C first
    ((3, 4), "T", (4, 50), "C"),      # ... on the left
    ((6, 5), "C", (5, 6), "T"),       # an F operand as large as the other: passed as is
    ((6, 5), "T", (5, 6), "T"),       # both F
])
def test_products_with_f_ordered_operands(ashape, alayout, bshape, blayout):
    for name in ("dot", "matmul"):
        product_both(name, rand(ashape, np.float64, alayout), rand(bshape, np.float64, blayout))


def test_products_mixed_dtypes_and_layouts():
    a, b = rand((3, 4), np.float32, "T"), rand((4, 2), np.float64, "S")
    for name in ("dot", "matmul"):
        out, ga, gb = product_both(name, a, b)
        assert (out.dtype, ga.dtype, gb.dtype) == (
            np.float64, np.float32, np.float64)


@pytest.mark.parametrize("ashape, bshape, dtype, layout", [
    ((4,), (4,), np.float32, "C"), ((2, 3, 4), (5, 4), np.float64, "S"),
    ((3, 4), (4,), np.float32, "T"), ((4,), (2, 4), np.float64, "C"),
    ((), (3, 4), np.float64, "C"),
])
def test_inner(ashape, bshape, dtype, layout):
    product_both("inner", operand(ashape, dtype, layout),
                 operand(bshape, dtype))


@pytest.mark.parametrize("name, ashape, bshape", [
    ("dot", (2, 3, 4), (4, 5)), ("dot", (2, 3, 4), (5, 4, 2)),
    ("dot", (3, 4), (2, 4, 5)),
    ("matmul", (2, 3, 4), (4, 5)), ("matmul", (5, 1, 3, 4), (2, 4, 6)),
    ("matmul", (4,), (2, 4, 3)), ("matmul", (2, 3, 4), (4,)),
])
def test_python_nd_products(name, ashape, bshape):
    a, b = rand(ashape), rand(bshape)
    g = rand(getattr(np, name)(a, b).shape)
    check_product_grads(name, a, b, g, getattr(rt, f"{name}_grad_a")(g, a, b),
                        getattr(rt, f"{name}_grad_b")(g, a, b))


@pytest.mark.parametrize("ashape,bshape", [
    ((2, 3, 4), (4, 5)), ((5, 1, 3, 4), (2, 4, 6)), ((4,), (2, 4, 3)), ((2, 3, 4), (4,)),
    ((2, 2, 3, 4), (2, 2, 4, 3)),
])
def test_numba_nd_matmul(ashape, bshape):
    """Stacks of matrices: one product per matrix, batch axes broadcast."""
    a, b = rand(ashape), rand(bshape)
    g = rand(np.matmul(a, b).shape)
    assert np.allclose(run_nb("rt.matmul(p0, p1)", a, b)[0], np.matmul(a, b))
    for which in "ab":
        got = run_nb(f"rt.matmul_grad_{which}(p0, p1, p2)", g, a, b)[0]
        assert np.allclose(got, getattr(rt, f"matmul_grad_{which}")(g, a, b))


def test_numba_rejects_mismatched_matmul_batches():
    with pytest.raises(ValueError, match="batch axes"):
        run_nb("rt.matmul(p0, p1)", rand((2, 3, 4)), rand((3, 4, 5)))


# ------------------------------------------------------------- shape ops

@pytest.mark.parametrize("shape, axis, layout", [
    ((3, 1, 2), 1, "C"), ((1, 3, 1), (0, -1), "S"), ((1, 1), (0, 1), "C"),
    ((2, 1), -1, "T"),
])
def test_squeeze(shape, axis, layout):
    a = rand(shape, np.float32, layout)
    np.testing.assert_array_equal(both("squeeze", a, axis=axis),
                                  np.squeeze(a, axis))


def test_squeeze_errors():
    assert rt.squeeze(rand((1, 3, 1))).shape == (3,)
    with pytest.raises(TypingError, match="explicit axis"):
        run_nb("rt.squeeze(p0)", rand((1, 3)))
    with pytest.raises(ValueError):
        run_nb("rt.squeeze(p0, axis=1)", rand((1, 3)))


@pytest.mark.parametrize("axes", [None, (1, 2, 0), (-1, 0, 1)])
def test_transpose_grad(axes):
    x = rand((2, 3, 4), np.float32)
    g = np.transpose(x, axes)
    np.testing.assert_array_equal(both("transpose_grad", g, axes=axes), x)


def test_transpose_grad_runtime_axes():
    x = rand((2, 3, 4))
    res, _ = run_nb("rt.transpose_grad(p0, p1)", x.transpose(2, 0, 1),
                    (2, 0, 1))
    np.testing.assert_array_equal(res, x)


@pytest.mark.parametrize("axis", [1, -1, 0])
def test_split_grad(axis):
    g = rand((4, 7, 5), np.float32, "S")
    res = both("split_grad", g, 1, 3, axis=axis)
    ref = np.split(g, [1, 4], axis=axis)[1]
    np.testing.assert_array_equal(res, ref)
    assert not np.shares_memory(res, g)


@pytest.mark.parametrize("shape, i, axis", [
    ((2, 3, 4), 1, 1), ((2, 3, 4), -1, -1), ((3,), 2, 0), ((3, 4), 0, 0)])
def test_stack_grad(shape, i, axis):
    g = rand(shape, np.float32)
    res = both("stack_grad", g, i, axis=axis)
    np.testing.assert_array_equal(res, np.take(g, i, axis))
    assert not np.shares_memory(res, g)


@pytest.mark.parametrize("index, gshape", [
    ((1, slice(1, 4, None)), (3,)), (2, (5,)), ((slice(None, None, None), 3),
                                               (4,)),
    ((1, 2), ()), (slice(1, 3, None), ()), ((Ellipsis, 1), (4,)),
    ((slice(None, None, None), slice(1, 3, None)), (1, 2)),
    ((None, 2, slice(None, None, -2)), (3,)),
])
def test_index_grad(index, gshape):
    x = rand((4, 5), np.float32)
    g = 1.5 if gshape == () else rand(gshape)
    res = both("index_grad", g, x, index=index)
    assert res.dtype == np.float32 and res.shape == x.shape
    dx = rand(x.shape)
    assert np.isclose(vdot(res, dx), vdot(g, dx[index]), rtol=1e-5)


def test_index_grad_python_accumulates_repeated_indices():
    res = rt.index_grad(np.ones(3), np.zeros(4), np.array([1, 1, 2]))
    np.testing.assert_array_equal(res, [0.0, 2.0, 1.0, 0.0])
