"""Transforms called inside functions that are themselves transformed.

``ad.grad(f)(x)``, ``value_and_grad``, ``vjp``, ``jvp``, ``jacfwd``,
``jacrev``, ``hessian``, ``hvp`` and ``vmap`` written inside user code, under
an outer ``grad``, ``jvp``, ``jacrev`` and ``vmap``, jitted and not, to depth
three.  Oracles: central finite differences of the plain Python function (in
which the inner transforms run as ordinary calls) and closed forms.
"""
import pathlib

import numpy as np
import pytest
from conftest import load_program

import s2s_ad as ad
from s2s_ad.testing import check_grad, check_jvp

nt = load_program(pathlib.Path(__file__).resolve().parent / "programs" / "nested_transforms.py")

rng = np.random.default_rng(0)
X3 = rng.normal(size=3)
V3 = rng.normal(size=3)
Y3 = rng.normal(size=3)
XS = rng.normal(size=(4, 3))
YS = rng.normal(size=4)

CASES = {
    "penalty": (nt.penalty, (X3,)),
    "value_and_grad": (nt.penalty_value_and_grad, (X3,)),
    "maml": (nt.maml, (X3, XS, YS, 0.1)),
    "maml_loop": (nt.maml_two_steps, (X3, XS, YS, 0.1)),
    "newton_diag": (nt.newton_diag, (X3,)),
    "newton_scalar": (nt.newton_scalar, (0.7,)),
    "per_sample": (nt.per_sample_norms, (X3, XS)),
    "argnums_tuple": (nt.argnums_tuple, (X3, Y3)),
    "argnums_one": (nt.argnums_one, (X3, Y3)),
    "has_aux": (nt.aux_penalty, (X3,)),
    "jacfwd": (nt.jac_trace_fwd, (X3,)),
    "jacrev": (nt.jac_trace_rev, (X3,)),
    "hvp": (nt.hvp_inside, (X3, V3)),
    "jvp_of_grad": (nt.jvp_of_grad, (X3, V3)),
    "vjp": (nt.vjp_inside, (X3, V3)),
    "depth2": (nt.level2, (X3,)),
    "depth3": (nt.level3, (X3,)),
    "grad_of_grad_inline": (nt.scalar_depth, (0.7,)),
    "module_level": (nt.module_level_grad, (X3,)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_outer_grad(name):
    f, args = CASES[name]
    check_grad(f, args)


@pytest.mark.parametrize("name", ["penalty", "maml", "per_sample", "vjp", "newton_scalar",
                                  "depth2"])
def test_outer_grad_jit(name):
    f, args = CASES[name]
    check_grad(f, args, target="cpu")


@pytest.mark.parametrize("name", ["penalty", "maml", "per_sample", "hvp", "depth2", "jacrev"])
def test_outer_jvp(name):
    f, args = CASES[name]
    check_jvp(f, args)


def test_closed_forms():
    x = X3
    np.testing.assert_allclose(ad.grad(nt.penalty)(x), -2 * np.sin(x) * np.cos(x), rtol=1e-12)
    np.testing.assert_allclose(nt.penalty(x), np.sum(np.cos(x) ** 2), rtol=1e-12)
    a = 0.7
    np.testing.assert_allclose(nt.scalar_depth(a), 20 * a ** 3, rtol=1e-12)
    np.testing.assert_allclose(ad.grad(nt.scalar_depth)(a), 60 * a ** 2, rtol=1e-12)
    # The Newton step: sep's Hessian is diag(12 w^2 + 2).
    g, h = 4 * x ** 3 + 2 * x, 12 * x ** 2 + 2
    np.testing.assert_allclose(nt.newton_diag(x), nt.sep(x - 0.5 * g / h), rtol=1e-12)


def test_outer_jacrev_and_jacfwd():
    x = X3
    expected = np.diag(np.cos(x) - x * np.sin(x))
    np.testing.assert_allclose(ad.jacrev(nt.grad_field)(x), expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ad.jacfwd(nt.grad_field)(x), expected, rtol=1e-10, atol=1e-12)


def test_outer_vmap():
    xs = XS
    np.testing.assert_allclose(ad.vmap(nt.penalty)(xs), np.sum(np.cos(xs) ** 2, axis=1),
                               rtol=1e-12)
    np.testing.assert_allclose(ad.vmap(ad.grad(nt.penalty))(xs), -2 * np.sin(xs) * np.cos(xs),
                               rtol=1e-10)
    per = ad.vmap(ad.grad(nt.maml), in_axes=(0, None, None, None))(xs[:, :3], XS, YS, 0.1)
    stacked = np.stack([ad.grad(nt.maml)(w, XS, YS, 0.1) for w in xs[:, :3]])
    np.testing.assert_allclose(per, stacked, rtol=1e-12)


def test_per_sample_gradients_inside():
    """vmap(grad) inside: the per-sample gradients are 2 t (1 - t^2) x with t = tanh(w.x)."""
    w, X = X3, XS
    t = np.tanh(X @ w)
    G = (2 * t * (1 - t ** 2))[:, None] * X
    np.testing.assert_allclose(nt.per_sample_norms(w, X), np.sum(G ** 2), rtol=1e-12)
    np.testing.assert_allclose(ad.jit(nt.per_sample_norms)(w, X), np.sum(G ** 2), rtol=1e-12)


def test_source_names_the_helper():
    """The inner gradient runs inner's reverse sweep, and its adjoint is the VJP
    of inner's JVP: no forward-mode columns (rt.unit_like) anywhere."""
    text = ad.source(ad.grad(nt.penalty), X3)
    assert "def grad_inner(x):" in text
    assert "the adjoint of grad_inner: the VJP of inner's JVP" in text
    assert "rt.unit_like" not in text


def test_source_of_forward_columns_when_asked(monkeypatch):
    """S2S_AD_NESTED=columns lowers the same inner gradient by forward-mode
    columns (the reference the oracle compares reverse code with)."""
    monkeypatch.setenv("S2S_AD_NESTED", "columns")
    text = ad.source(ad.grad(nt.penalty), X3)
    assert "rt.unit_like(x, j)" in text
    assert "the adjoint of grad_inner" not in text


def _line_of(fn, text):
    import inspect
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


@pytest.mark.parametrize("fn, text, message", [
    (nt.returns_transform, "g = ad.grad(inner)", "can only be called where it is written"),
    (nt.returns_vjp_fn, "return vjp_fn", "can only be called"),
    (nt.aux_not_pair, "ad.grad(inner, has_aux=True)", "has_aux=True requires"),
])
def test_unsupported_forms_point_at_the_line(fn, text, message):
    with pytest.raises(ad.UnsupportedSyntaxError, match=message) as info:
        ad.grad(fn)(X3)
    assert info.value.lineno == _line_of(fn, text)
    assert info.value.filename.endswith("nested_transforms.py")


def test_grad_of_an_array_valued_function_is_a_type_error():
    with pytest.raises(TypeError, match="scalar"):
        ad.grad(nt.vector_grad)(X3)
