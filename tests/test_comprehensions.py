"""Comprehensions and generator expressions in differentiated code (docs/comprehensions.md).

Each form is checked by :mod:`s2s_ad.oracle` against central finite
differences through every plain-NumPy witness of grad, jvp, jacrev and vmap;
a few forms also through the Numba witnesses (``ad.jit``).
"""
import sys
from pathlib import Path

import numpy as np
import pytest

import s2s_ad as ad
from s2s_ad import oracle

sys.path.insert(0, str(Path(__file__).parent / "programs"))
import comprehensions as c  # noqa: E402

X = np.array([0.3, -0.5, 0.9, 0.1, 0.7, -0.2])
M = np.array([[0.4, -0.3, 0.8], [0.1, 0.6, -0.7], [0.9, 0.2, 0.5], [-0.4, 0.35, 0.45]])
XB = np.stack([X, X[::-1] * 0.9, X * 1.1 + 0.05])          # three examples for vmap
MB = np.stack([M, M * 0.8, M[::-1]])
PARAMS = (np.array([0.5, -1.0]), np.array([[0.2, 0.3], [0.4, -0.1]]), 0.7)

# (function, arguments, batched arguments for vmap)
FORMS = {
    "sum_list": (c.sum_squares_list, (X,), (XB,)),
    "sum_range": (c.sum_genexp_range, (X,), (XB,)),
    "sum_start_filter": (c.sum_start_filter, (X,), (XB,)),
    "sum_zip": (c.sum_zip, (X, X[::-1] * 2.0), (XB, XB * 0.5)),
    "sum_enumerate": (c.sum_enumerate, (X,), (XB,)),
    "sum_nested_filter": (c.sum_nested, (X,), (XB,)),
    "sum_rows": (c.sum_rows, (M,), (MB,)),
    "nested_rows_zip": (c.nested_rows, (M,), (MB,)),
    "np_sum_list": (c.np_sum_list, (X,), (XB,)),
    "array_static_length": (c.array_static, (X,), (XB,)),
    "array_dynamic_length": (c.array_dynamic, (X,), (XB,)),
    "stack_rows": (c.stack_rows, (M,), (MB,)),
    "array_filtered": (c.array_filtered, (X,), (XB,)),
    "named_list": (c.named_list, (X,), (XB,)),
    "max_min": (c.max_genexp, (X,), (XB,)),
    "vector_output": (c.vector_out, (X,), (XB,)),
    "not_leaking": (c.var_not_leaking, (X,), (XB,)),
    "inside_ifexp": (c.inside_ifexp, (X,), (XB,)),
}
TRANSFORMS = ("grad", "jvp", "jacrev", "vmap")


def _check(name, transform, families):
    fn, args, batched = FORMS[name]
    if transform == "grad" and np.ndim(fn(*args)) != 0:
        pytest.skip("vector output: no gradient")
    if transform == "vmap":
        report = oracle.check(fn, batched, "vmap", in_axes=(0,) * len(batched), name=name,
                              families=families)
    else:
        report = oracle.check(fn, args, transform, name=name, families=families)
    assert not report.disagreements, "\n".join(map(str, report.disagreements))
    # A forced method="vectorize" may refuse (a loop with no batching rule);
    # method=None and method="loop" must not.
    refused = [r for r in report.refusals if "vectorize" not in r[1]]
    assert not refused and report.checks > 0, report


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("name", sorted(FORMS))
def test_form(name, transform):
    _check(name, transform, ("python",))


@pytest.mark.parametrize("name, transform", [
    ("sum_start_filter", "grad"), ("array_filtered", "grad"), ("stack_rows", "jacrev"),
    ("nested_rows_zip", "grad"), ("named_list", "jvp"), ("sum_zip", "vmap"),
])
def test_jit(name, transform):
    _check(name, transform, ("numba",))


def test_value_and_grad_vjp_jacfwd_hessian():
    x = X[:3]
    for fn in (c.sum_squares_list, c.sum_start_filter, c.array_dynamic):
        for transform in ("value_and_grad", "vjp", "jacfwd", "hessian"):
            report = oracle.check(fn, (x,), transform, families=("python",))
            assert not report.disagreements and not report.refusals, (fn, transform, report)


def test_over_tuples_unrolled():
    g = ad.grad(c.over_tuple)(PARAMS)
    want = (2 * PARAMS[0], 2 * PARAMS[1], 2 * PARAMS[2])
    for a, b in zip(g, want):
        np.testing.assert_allclose(a, b)
    ws, bs = PARAMS[:2], (np.array([1.0, 2.0]), np.array([[1.0, 0.0], [0.5, 2.0]]))
    gw = ad.grad(c.over_zip_tuples)(ws, bs)
    for a, b in zip(gw, bs):
        np.testing.assert_allclose(a, b)


def test_values_match_python():
    """The lowered primal computes what Python computes (lists made arrays)."""
    for name, (fn, args, _) in FORMS.items():
        value, _ = ad.vjp(fn, *args)
        np.testing.assert_allclose(value, np.asarray(fn(*args)), err_msg=name)


def test_variable_does_not_leak():
    x = np.array([1.0, 2.0, 3.0])
    value, grad = ad.value_and_grad(c.var_not_leaking)(x)
    assert value == pytest.approx(14.0 * 2.0)      # v is 2.0 again after the generator
    np.testing.assert_allclose(grad, 2 * x * 2.0)


def test_generated_code_is_a_loop():
    src = ad.source(ad.grad(c.array_filtered))
    assert "for " in src and "rt.stack_like" in src and "ys = rt.stack_like" in src


@pytest.mark.parametrize("fn, marker, words", [
    (c.square_of_list, "list_add", ["comprehension", "one comprehension"]),
    (c.set_comp, "setcomp", ["set comprehension", "list comprehension"]),
    (c.dict_comp, "dictcomp", ["dict comprehension"]),
    (c.stored_generator, "stored_genexp", ["generator expression", "list comprehension"]),
    (c.over_generator, "over_generator", ["generator function", "array"]),
    (c.concatenated, "concatenate", ["np.concatenate", "np.stack"]),
])
def test_errors_point_at_the_line(fn, marker, words):
    lines = (Path(__file__).parent / "programs" / "comprehensions.py").read_text().splitlines()
    lineno = next(i for i, line in enumerate(lines, 1) if line.endswith(f"# <- {marker}"))
    with pytest.raises(ad.UnsupportedSyntaxError) as info:
        ad.grad(fn)(X)
    err = info.value
    assert err.lineno == lineno, (err.lineno, lineno, str(err))
    for w in words:
        assert w in str(err), str(err)
