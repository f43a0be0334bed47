"""Fused slice loops (s2s_ad/transforms/fuse_slices.py, docs/array_loops.md).

Every program of ``programs/fused_slices.py`` through the differential
oracle (gradients against finite differences, every witness, the compiled
ones running the fused nests), its compiled primal against NumPy's own
evaluation of the user's function (the cases where a nest must not run, or
must fall back, give NumPy's answer only if it did not), the generated
source for what is fused and what is not, and the runtime helpers of the
guard.
"""
import pathlib
import re

import numba
import numpy as np
import pytest
from conftest import load_program

import s2s_ad as ad
from s2s_ad import oracle
from s2s_ad import runtime as rt
from s2s_ad.transforms.fuse_slices import fuse_source

HERE = pathlib.Path(__file__).resolve().parent
fs = load_program(HERE / "programs" / "fused_slices.py")
al = load_program(HERE / "programs" / "array_loops.py")

#: The NumPy backend, the compiled gradient (the fused nests) and the NumPy
#: tier (the same module run by NumPy: the statements the guard falls back to).
WITNESSES = {"python", "jit", "jit[numpy tier]"}
FAST = sorted(set(fs.CASES) - {"horizontal_diffusion"})


def _args(name):
    fn, make, argnums = {**fs.CASES, **fs.PRIMAL_CASES}[name]
    return fn, make(np.random.default_rng(0)), argnums


@pytest.mark.parametrize("name", FAST)
def test_gradient_agrees_with_finite_differences(name):
    fn, args, argnums = _args(name)
    report = oracle.check(fn, args, "grad", argnums, name=name, only=WITNESSES)
    assert not report.disagreements, "\n".join(map(str, report.disagreements))


@pytest.mark.slow
def test_horizontal_diffusion_gradient():
    fn, args, argnums = _args("horizontal_diffusion")
    report = oracle.check(fn, args, "grad", argnums, name="horizontal_diffusion")
    assert not report.disagreements, "\n".join(map(str, report.disagreements))


@pytest.mark.parametrize("name", FAST + sorted(fs.PRIMAL_CASES))
def test_compiled_primal_is_numpys_answer(name):
    fn, args, _ = _args(name)
    want = fn(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    assert np.allclose(ad.jit(fn)(*args), want, rtol=1e-12, atol=0.0)


def _jit_source(fn, args, argnums=None):
    f = fn if argnums is None else ad.grad(fn, argnums=argnums)
    return ad.source(ad.jit(f), *args)


def test_stencil_steps_run_as_one_nest_each():
    fn, args, argnums = _args("stencil_with_scalar")
    primal = _jit_source(fn, args)
    assert primal.count("# the statements below as one loop nest") == 2
    assert "c * (" not in primal.split("if rt.fusable")[1].split("else:")[0]
    # the NumPy module keeps its array expressions
    assert "fuse_slices" not in ad.source(ad.grad(fn, argnums=argnums), *args)


def test_a_slice_read_while_another_overlapping_one_is_written_is_not_fused():
    fn, args, _ = _args("shifted_in_place")
    src = _jit_source(fn, args)
    assert "rt.put3" not in src
    # the statement stays one NumPy-semantics array expression (its temporaries
    # written back into it by codegen/fusion.py)
    assert "b[1:] = b[1:] + ((0.5 * _t3) * _t3)" in src


def test_overlap_only_known_at_run_time_is_checked_by_the_guard():
    fn, args, _ = _args("overlapping_view")
    src = _jit_source(fn, args)
    # d, read after the loop's write into c, is made again from c each time
    assert re.search(r"_t\d+ = np\.reshape\(c, _t2\)", src), src
    assert re.search(r"rt\.apart\(_t\d+, _fv1\) and rt\.apart\(_t\d+, _fv1\)", src), src
    fn = ad.jit(fn)
    a = args[0]
    want = fs.overlapping_view(a)      # NumPy: each right-hand side whole, then stored
    assert fn(a) == pytest.approx(want, rel=1e-12)


def test_heat_adjoint_writes_one_array_and_adds_into_the_other():
    fn, make, argnums = al.CASES["heat_3d_sum"]
    src = _jit_source(fn, make(np.random.default_rng(0)), argnums)
    nests = [n.split("else:")[0] for n in src.split("# the statements below as one loop nest")[1:]]
    # B's write: its adjoint zeroes the written region and adds into the five
    # slices of A it read, in one nest: three different values (the stencil's
    # weights differ), so scattered, not gathered (A's write, three adds of
    # one scaled cotangent, is gathered: see test_one_value_added_into...)
    assert max(n.count("rt.put3(") for n in nests) == 6, nests
    scattered = [n for n in nests if n.count("rt.put3(") == 6]
    assert "rt.gather_add(" not in scattered[0]


_GATHERED = ("def f(g, b, c):\n    t = g[1:-1, 1:-1] * 0.5\n    u = t\n"
             "    rt.add_into(b[2:, 1:-1], t)\n    rt.add_into(b[1:-1, 1:-1], u)\n"
             "    rt.add_into(b[:-2, 2:], t)\n    rt.add_into(b[1:-1, :-2], u)\n"
             "    rt.add_into(b[:-2, 1:-1], t)\n    c[1:-1, 1:-1] += 3.0 * u\n")


def test_one_value_added_into_shifted_slices_is_gathered_and_agrees_with_numpy():
    fused = fuse_source(_GATHERED)
    # b is only added into, one value (t and its copy u) through five slices of
    # it starting at constants: stored once, then gathered into b; c, written
    # through one slice, keeps its add in the nest
    assert fused.count("rt.gather_buffer(") == 1 and fused.count("rt.gather_add(") == 1
    assert re.search(r"rt\.gather_add\(b, \(0, 0\), \(2, 2\), _gz\d+, \(\(0, 1\), \(1, 1\), "
                     r"\(2, 0\), \(1, 2\), \(2, 1\)\)\)", fused), fused
    assert "rt.put3(c, " not in fused and re.search(r"rt\.put3\(_fv\d+, ", fused), fused
    scope = {"rt": rt, "np": np}
    exec(fused, scope)          # noqa: S102 - plain Python runs the statements (NumPy)
    compiled = numba.njit(cache=False)(scope["f"])
    rng = np.random.default_rng(1)
    for shape in ((6, 7), (5, 9)):
        g, b, c = (rng.uniform(-1, 1, shape) for _ in range(3))
        want_b, want_c, got_b, got_c = b.copy(), c.copy(), b.copy(), c.copy()
        scope["f"](g, want_b, want_c)
        compiled(g, got_b, got_c)
        np.testing.assert_allclose(got_b, want_b, rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(got_c, want_c, rtol=1e-13, atol=1e-14)
    # a slice starting from the end (b[-5:-1]) has no constant offset, and two
    # different values would need two buffers: scattered
    for other in (_GATHERED.replace("b[1:-1, :-2]", "b[-5:-1, :-2]"),
                  _GATHERED.replace("u = t\n", "u = -t\n")):
        assert "rt.gather_add(" not in fuse_source(other) and "rt.put3(" in fuse_source(other)


def test_fuse_source_leaves_unfused_code_as_it_was():
    src = "def f(a, b):\n    c = a + b\n    return c\n"
    assert fuse_source(src) == src


def test_the_live_temporary_keeps_its_array():
    src = ("def f(a, b):\n    t = a[1:] * 2.0\n    b[1:] = t + a[:-1]\n    return t\n")
    assert fuse_source(src) == src


@numba.njit(cache=False)
def _guards(a, b, s):
    return (rt.fusable(a[1:], a[:-1], s), rt.fusable(a, b), rt.apart(a[1:], a[:-1]),
            rt.apart(a[1:], a[1:]), rt.apart(a, b), rt.apart(a, s), rt.shape3(a[1:]))


@numba.njit(cache=False)
def _fusable(a):
    return rt.fusable(a, 1.0)


def test_guard_helpers_compiled_and_in_numpy():
    a, b = np.arange(6.0), np.ones((2, 3))
    want = (True, False, False, True, True, True, (1, 1, 5))
    assert _guards(a, b, 2.0) == want
    assert _fusable(np.ones((2, 2, 2, 2))) is False          # four axes: not fused
    # plain Python (the NumPy tier of a tiered first call) keeps the statements
    assert (rt.fusable(a[1:], a[:-1], 2.0), rt.apart(a[1:], a[:-1]), rt.apart(a[1:], a[1:]),
            rt.apart(a, b), rt.apart(a, 2.0), rt.shape3(a[1:])) == (False, *want[2:])
    assert rt.apart(a[::2], a[1::2]) is False        # interleaved: not provably apart


def test_a_view_of_a_temporary_comes_after_the_temporary():
    src = ("def f(u, out):\n    lap = u[1:] * 2.0 + u[:-1]\n    d = lap[1:]\n"
           "    out[2:] = d * 3.0 + out[2:]\n    return out\n")
    fused = fuse_source(src)
    assert fused.index("lap = ") < fused.index("d = lap[1:]"), fused
    scope = {"rt": rt, "np": np}
    exec(fused, scope)          # plain Python: the guard keeps the statements
    u = np.arange(6.0)
    want = np.ones(6)
    want[2:] += 3.0 * (2.0 * u[1:] + u[:-1])[1:]
    assert np.array_equal(scope["f"](u, np.ones(6)), want)


@numba.njit(cache=False)
def _nest(a, z):
    if rt.fusable(a, z):
        n0, n1, n2 = rt.shape3(a)
        for i in range(n0):
            for j in range(n1):
                for k in range(n2):
                    rt.put3(a, i, j, k, rt.at3(a, i, j, k) + rt.at3(z, i, j, k))
        return True
    a += z
    return False


def test_a_nest_over_any_rank_compiles_and_runs_only_where_it_may():
    for a, z, fused in [(np.ones((2, 3)), np.arange(6.0).reshape(2, 3), True),
                        (np.ones(4), 2.0, True),
                        (np.ones((2, 2, 2, 2)), 1.0, False),      # four axes
                        (np.ones(3), np.array(2.0), False),       # a 0-d array
                        (np.ones((2, 3)), np.arange(3.0), False)]:  # broadcast
        want = a + z
        assert _nest(a, z) is fused
        assert np.array_equal(a, want)


def test_a_decorated_function_keeps_one_decorator():
    src = ("@numba.njit\ndef f(a, b):\n    t = a[1:] * 2.0\n    b[1:] = t + a[:-1]\n\n\n"
           "def g(x):\n    return x\n")
    fused = fuse_source(src)
    assert fused.count("@numba.njit") == 1 and fused.count("def g(x):") == 1
    assert "rt.put3(_fv3, _i0, _i1, _i2, t_at + rt.at3(_fv2, _i0, _i1, _i2))" in fused


def test_adds_into_shifted_slices_are_fused_only_with_enough_work():
    few = ("def f(g, b):\n    t = g[1:-1] * 0.5\n    u = -t\n    rt.add_into(b[2:], t)\n"
           "    rt.add_into(b[1:-1], u)\n    rt.add_into(b[:-2], t)\n")
    assert fuse_source(few) == few          # three vectorised adds beat one chained nest
    # one value into all three: gathered, no chain, so fused with few passes too
    one = few.replace("u = -t", "u = t")
    assert "rt.gather_add(b, (0,), (2,), " in fuse_source(one)
    many = ("def f(g, b):\n    t = g[1:-1] * 0.5\n    u = -t\n    v = u * 2.0\n    w = v + t\n"
            "    rt.add_into(b[2:], t)\n    rt.add_into(b[1:-1], w)\n    rt.add_into(b[:-2], u)\n"
            "    rt.add_into(b[1:], v)\n")
    assert "rt.put3(" in fuse_source(many)
