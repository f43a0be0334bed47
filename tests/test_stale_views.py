"""A view read after a write into its array sees the write, as in NumPy.

``v = a[i:]; a[i] = ...; use(v)``: NumPy's ``v`` shows the new ``a[i]``.  The
lowering reads such a view again from its array where it is used
(``Memory.current_view``), so every transform differentiates what NumPy
computes; a reshape or transpose of the array (or of its slice) is made
again the same way.  Checked against central
differences through the differential oracle (every witness).
"""
import pathlib

import numpy as np
import pytest
from conftest import load_program

import s2s_ad as ad
from s2s_ad import oracle

P = load_program(pathlib.Path(__file__).parent / "programs" / "stale_views.py")
RNG = np.random.default_rng(5)
A = RNG.uniform(0.2, 0.9, 5)
W = RNG.standard_normal(5)


@pytest.mark.parametrize("fn, args", [
    (P.view_before_loop, (A, W)),
    (P.view_then_branch_write, (A, W)),
    (P.view_then_branch_write, (-A, W)),
    (P.row_view_of_matrix, (RNG.standard_normal((3, 4)), RNG.standard_normal(4))),
    (P.element_then_write, (A,)),
], ids=["before_loop", "branch_taken", "branch_not_taken", "row_of_matrix", "element_copy"])
@pytest.mark.parametrize("transform", ["grad", "jvp", "jacrev"])
def test_views_read_after_a_write_agree_with_finite_differences(fn, args, transform):
    report = oracle.check(fn, args, transform, argnums=0, name=fn.__name__,
                          families=("python",))
    assert not report.disagreements, "\n".join(map(str, report.disagreements))


def test_compiled_gradient_of_a_view_read_after_a_write():
    report = oracle.check(P.view_before_loop, (A, W), "grad", argnums=0,
                          name="view_before_loop")
    assert not report.disagreements, "\n".join(map(str, report.disagreements))


@pytest.mark.parametrize("fn, args", [
    (P.reshaped_then_written, (np.arange(1.0, 5.0),)),
    (P.reshaped_slice_then_written, (np.arange(1.0, 6.0),)),
], ids=["reshape", "transpose_of_a_reshaped_slice"])
def test_a_reshaped_view_read_after_a_write_is_made_again(fn, args):
    report = oracle.check_all(fn, args, 0, name=fn.__name__, families=("python",),
                              transforms=("grad", "jvp", "jacrev", "hessian"))
    assert report.checks and not report.disagreements, \
        "\n".join(map(str, report.disagreements))


def test_the_primal_is_unchanged():
    a = A.copy()
    want = P.view_before_loop(A.copy(), W)
    assert np.allclose(ad.jit(P.view_before_loop)(a, W), want)
    assert np.array_equal(a, A)          # the caller's array is not written
