"""Values adjoints read for their shape alone (issue 22, docs/array_loops.md).

Three mechanisms of the reverse transform, each checked against finite
differences through the differential oracle (``programs/shape_only.py``),
and on the generated source so that none can silently regress:

* slice expressions along one axis share a shape class
  (``analyses.ranks._slice_length``): their adjoints need no
  ``rt.unbroadcast``, so the intermediate sums are not stacked;
* the value a slice write stores is un-broadcast to a view of its shape
  class (re-sliced by the reversed loop), so it is not stacked either;
* a write saves and restores what it overwrites only when an adjoint reads
  the array's values after the restore (``shape_only.value_reads``).
"""
import ast
import itertools
import pathlib
import re

import numpy as np
import pytest
from conftest import load_program

import s2s_ad as ad
from s2s_ad import oracle
from s2s_ad.analyses.ranks import _slice_length
from s2s_ad.transforms.reverse.shape_only import value_reads

HERE = pathlib.Path(__file__).resolve().parent
so = load_program(HERE / "programs" / "shape_only.py")
al = load_program(HERE / "programs" / "array_loops.py")


#: Compiled witnesses too (seconds of Numba each) for the program with saves
#: both kept and dropped; tests/test_array_loops.py compiles the stencils.
COMPILED = {"product_stencil", "shifted_sums", "written_after_the_sum"}


@pytest.mark.parametrize("name", sorted(so.CASES))
def test_gradient_agrees_with_finite_differences(name):
    fn, make, argnums = so.CASES[name]
    args = make(np.random.default_rng(0))
    families = oracle.FAMILIES if name in COMPILED else ("python",)
    report = oracle.check(fn, args, "grad", argnums, name=name, families=families)
    assert report.checks and not report.refusals, (name, report.refusals)
    assert not report.disagreements, "\n".join(map(str, report.disagreements))


def _source(corpus, name):
    fn, make, argnums = corpus.CASES[name]
    return ad.source(ad.grad(fn, argnums=argnums), *make(np.random.default_rng(0)))


def _code(src):
    return "\n".join(ln for ln in src.splitlines() if not ln.lstrip().startswith("#"))


def test_slice_lengths_name_pythons_slices():
    # (c, cap) must give len(range(n)[lo:hi]) for every n, and differ whenever
    # two slices' lengths differ for some n
    bounds = [None] + list(range(-6, 7))
    forms = {}
    for lo, hi in itertools.product(bounds, bounds):
        form = _slice_length(lo, hi, None)
        if form is None:
            assert lo is not None and lo < 0 and hi is not None and hi >= 0
            continue
        c, cap = form
        lengths = tuple(len(range(n)[lo:hi]) for n in range(20))
        assert lengths == tuple(min(max(n - c, 0), 10 ** 9 if cap is None else cap)
                                for n in range(20)), (lo, hi)
        assert forms.setdefault(form, lengths) == lengths
    assert len(set(forms.values())) == len(forms)      # one form per function
    assert _slice_length(None, None, 2) is None


def test_stencil_sums_and_written_values_are_not_stacked():
    for corpus, name in ((so, "linear_jacobi"), (al, "jacobi_1d"), (al, "jacobi_2d"),
                         (so, "rows_of_a_matrix")):
        code = _code(_source(corpus, name))
        assert "_stack" not in code and ".append(" not in code, (name, code)
    code = _code(_source(so, "linear_jacobi"))
    # the written value's shape comes from a re-sliced view; no un-broadcast
    # is left between the slices of one axis
    reverse = code[code.index("range(2, -1, -1)"):]
    assert re.search(r"= A_copy\[:-2\]", reverse) and re.search(r"= B_copy\[:-2\]", reverse)
    assert code.count("rt.unbroadcast(") == 2, code


def test_restores_only_where_an_adjoint_reads_the_values():
    for corpus, name in ((so, "linear_jacobi"), (al, "jacobi_1d"), (al, "jacobi_2d")):
        assert "_saved" not in _code(_source(corpus, name)), name
    # the product's adjoint reads A's slices: A keeps its saves, B does not
    code = _code(_source(so, "product_stencil"))
    assert re.search(r"\bA\w*_saved\.append\(", code) and not re.search(r"\bB\w*_saved", code)
    # A * A before the loop: its adjoint runs after the loop's restores
    assert "_saved.append(" in _code(_source(so, "read_before_loop"))
    # the nonlinear stencil's adjoint reads u's views
    assert "_saved.append(" in _code(_source(al, "nonlinear_stencil"))


def test_broadcasting_slices_keep_their_unbroadcast():
    code = _code(_source(so, "broadcast_corner"))
    assert "rt.unbroadcast(" in code
    code = _code(_source(so, "from_the_end"))    # a[-3:] and b[1:4]: equal only when long
    assert "rt.unbroadcast(" in code


def test_broadcast_sums_are_counted_not_summed():
    # np.sum(a + s): the cotangent of s is the broadcast value times a.size, and
    # the cotangent written into element by element is made writable (a copy
    # only of NumPy's read-only broadcast), not copied
    code = _code(_source(al, "trace_then_shift"))
    assert "rt.broadcast_total(" in code and "np.sum(" not in code, code
    assert "rt.writable(ba)" in code and "np.copy(" not in code, code
    code = _code(_source(so, "shifted_sums"))
    assert code.count("rt.broadcast_total(") == 2 and "a * 2.0" not in code, code
    # written into before it is summed: summed
    code = _code(_source(so, "written_after_the_sum"))
    assert "rt.broadcast_total(" not in code and "np.sum(" in code, code


def test_value_reads_leave_out_shape_arguments():
    nodes = ast.parse("v = A[:-2]\n"
                      "g = rt.unbroadcast(rt.snapshot(bB[1:-1]), v)\n"
                      "h = rt.sum_grad(g, C, None, False) * D.shape[0]\n"
                      "k = rt.dot_grad_a(g, w, E)\n").body
    # A is only re-sliced, v and C are read for shapes, D for its shape
    assert value_reads(nodes, {"v": "A"}) == {"rt", "bB", "g", "w", "E"}


def test_slice_cotangents_are_added_into_the_view():
    # bx[s] += g under Numba adds into the view, then stores the view onto
    # itself; rt.add_into(bx[s], g) does the add alone
    code = _code(_source(so, "linear_jacobi"))
    assert "rt.add_into(bA_copy[:-2], " in code and "rt.add_into(bB_copy[2:], " in code
    assert not re.search(r"\]\s*\+=", code)


def test_several_cotangents_through_slice_adds():
    # jacrev carries one cotangent per output through one sweep (widen): each
    # must get its own adjoint array for rt.add_into to add into
    from conftest import fd_jacobian
    fn, x = so.smooth_vector, np.random.default_rng(0).uniform(0.1, 1.0, 7)
    want = fd_jacobian(lambda v: fn(v.copy()), x)
    for jac in (ad.jacrev(fn), ad.jit(ad.jacrev(fn))):
        np.testing.assert_allclose(jac(x.copy()), want, rtol=1e-6, atol=1e-8)
