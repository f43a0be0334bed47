"""Array loops (issue 22) through the differential oracle.

Every program of ``programs/array_loops.py`` -- products of slices in loops,
stencils over arrays written in place, column loops, a diagonal loop -- has
its gradient computed by every witness (NumPy backend, ``ad.jit(grad)``,
``grad(ad.jit(f))``, without mixed mode), each checked against central
finite differences.  The generated source is checked for the lowerings these
programs exercise: slice views recomputed in the adjoint sweep instead of
stacked, and product adjoints added into the slice in place.
"""
import pathlib

import numpy as np
import pytest
from conftest import load_program

import s2s_ad as ad
from s2s_ad import oracle

HERE = pathlib.Path(__file__).resolve().parent
al = load_program(HERE / "programs" / "array_loops.py")


#: Known compiler bugs (strict: the mark fails loudly once fixed).
KNOWN_BUGS = {}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(
    reason=KNOWN_BUGS[n], strict=True)) if n in KNOWN_BUGS else n for n in sorted(al.CASES)])
def test_gradient_agrees_with_finite_differences(name):
    fn, make, argnums = al.CASES[name]
    args = make(np.random.default_rng(0))
    report = oracle.check(fn, args, "grad", argnums, name=name)
    assert not report.disagreements, "\n".join(map(str, report.disagreements))


def _source(name):
    fn, make, argnums = al.CASES[name]
    return ad.source(ad.grad(fn, argnums=argnums), *make(np.random.default_rng(0)))


def test_slice_views_are_recomputed_not_stacked():
    src = _source("tri_product")
    assert "t7_stack" not in src and "_stack.append(_t" not in src.split("B_copy_saved")[0]
    # the two slice views of the dot are recomputed at the top of the reversed body
    reverse = src[src.index("for j in range(_t4 - 1, -1, -1):"):]
    assert "# recomputed, not stored" in reverse
    assert "= A[_t6:, i]" in reverse and "= B_copy[_t8:, j]" in reverse


def test_product_adjoints_add_into_the_slice():
    src = _source("tri_product")
    assert "rt.add_dot_grad_a(bA[_t6:, i], " in src
    assert "rt.add_dot_grad_b(bB_copy[_t8:, j], " in src
    assert "rt.dot_grad_a(" not in src and "rt.dot_grad_b(" not in src
    src = _source("covariance_columns")
    assert "rt.add_matmul_grad_a(bX[:, i], " in src
    assert "rt.add_matmul_grad_b(bX[:, i:], " in src
    src = _source("matrix_times_slice")
    assert "rt.add_matmul_grad_a(bM[:, i:], " in src and "rt.add_matmul_grad_b(bx[i:], " in src


def test_rebound_base_keeps_its_views_on_the_stack():
    # a[1:] looks into a new array each step: recomputing it would read the last one
    src = _source("rebound_base")
    assert src.count("= a_2[1:]") == 1          # the primal's read only
    assert "t3_stack.append(_t3)" in src and "_t3 = t3_stack.pop()" in src


def test_a_shifted_array_is_not_computed_for_its_sum():
    # np.sum(a + trace): the sum's adjoint takes its shape from a, so neither
    # the full-size a + trace nor trace itself is computed by the gradient
    src = _source("trace_then_shift")
    assert "rt.sum_grad(bt7, a, None, False)" in src
    code = [ln for ln in src.splitlines() if not ln.lstrip().startswith("#")]
    assert not any("+ trace" in ln for ln in code)
    assert not any(ln.lstrip().startswith("trace_1 = ") for ln in code), src
    assert "trace_stack" not in src
