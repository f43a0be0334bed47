"""Array loops (issue 22): what the gradient computes of the primal, and
vector-mode sweeps over in-place product adjoints, through the oracle.

* A gradient that reads an array for its shape alone (``rt.sum_grad(g, B)``,
  ``rt.unbroadcast(g, A[:-2])``) needs none of the writes into it
  (``analyses/shape_live.py``): a linear stencil whose loss sums its
  outputs runs no primal time loop at all.  Writes an adjoint or a later
  primal statement reads the values of stay.
* ``jacrev`` of an array loop widens its adjoint sweep to several cotangents
  at once; ``rt.add_dot_grad_*`` / ``rt.add_matmul_grad_*`` write into their
  first argument, which must be widened like any other adjoint written in
  place (it was shared between the cotangents: wrong Jacobians).
* ``alpha * A @ x`` scales the vector, not the matrix (``transforms/scalings.py``).
"""
import pathlib

import numpy as np
import pytest
from conftest import load_program

import s2s_ad as ad
from s2s_ad import oracle

HERE = pathlib.Path(__file__).resolve().parent
al = load_program(HERE / "programs" / "array_loops.py")


def _source(name, transform=ad.grad):
    fn, make, argnums = al.CASES[name]
    return ad.source(transform(fn, argnums=argnums), *make(np.random.default_rng(0)))


def _primal_sweep(src):
    """The generated gradient up to its first adjoint statement."""
    return src[:src.index("# adjoint of:")]


@pytest.mark.parametrize("name", ["linear_stencil_sum", "heat_3d_sum"])
def test_a_linear_stencil_summed_runs_no_primal_loop(name):
    src = _source(name)
    forward = _primal_sweep(src)
    assert "for t in range(" not in forward, src
    assert "np.copy(A)" in forward and "np.copy(B)" in forward    # the shapes' sources
    assert "for t in range(" in src[len(forward):]                 # the adjoint's loop


@pytest.mark.parametrize("name", ["read_through_an_earlier_view",
                                  "shape_read_then_value_read", "jacobi_1d"])
def test_writes_whose_values_are_read_stay(name):
    forward = _primal_sweep(_source(name))
    assert "for t in range(" in forward and "] = _t" in forward, forward


def test_value_and_grad_keeps_what_it_returns():
    fn, make, argnums = al.CASES["linear_stencil_sum"]
    args = make(np.random.default_rng(0))
    report = oracle.check(fn, args, "value_and_grad", argnums, name="linear_stencil_sum",
                          only={"python", "jit"})
    assert not report.refusals and report.checks >= 2, report
    assert not report.disagreements, "\n".join(map(str, report.disagreements))
    forward = _primal_sweep(_source("linear_stencil_sum", ad.value_and_grad))
    assert "for t in range(" in forward


@pytest.mark.parametrize("name", sorted(al.VECTOR_CASES))
def test_jacrev_widens_in_place_product_adjoints(name):
    fn, make, argnums = al.VECTOR_CASES[name]
    args = make(np.random.default_rng(0))
    report = oracle.check(fn, args, "jacrev", argnums, name=name, only={"python", "jit"})
    assert not report.refusals and not report.skipped and report.checks >= 2, report
    assert not report.disagreements, "\n".join(map(str, report.disagreements))


def test_a_scalar_factor_moves_onto_the_vector():
    # alpha * A @ x, x @ (B * alpha), (A / 3.0) @ y: no scaled matrix
    src = _source("scaled_products")
    code = [ln.strip() for ln in src.splitlines() if not ln.lstrip().startswith("#")]
    assert not any(ln.endswith(("alpha * A", "1.2 * B", "B * alpha", "A / 3.0")) for ln in code)
    for product in ("rt.matmul(A, x)", "rt.matmul(B, x)", "rt.matmul(x, B)", "rt.matmul(A, y)"):
        assert any(ln.endswith("= " + product) for ln in code), src
    # the scaling's adjoints are vector-sized: bA comes from an unscaled product
    assert not any(ln.startswith("bA = ") and ln.endswith("* alpha") for ln in code)


def test_a_scaled_matrix_read_twice_stays_a_matrix():
    src = _source("scaled_product_kept")
    assert "S = 2.0 * A" in src and "rt.matmul(S, x)" in src


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(al.SLOW_CASES))
def test_slow_programs_agree_with_finite_differences(name):
    fn, make, argnums = al.SLOW_CASES[name]
    report = oracle.check(fn, make(np.random.default_rng(0)), "grad", argnums, name=name)
    assert not report.refusals and report.checks >= 2, report
    assert not report.disagreements, "\n".join(map(str, report.disagreements))
