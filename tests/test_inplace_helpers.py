"""Helpers that write into the arrays they are passed (the NumPy habit).

User code lives in tests/programs/inplace_forms.py (one function per form of
write), inplace_kernels.py (NPBench kernels) and inplace_errors.py (what is
refused).  Derivatives are checked against central finite differences or the
plain Python function, never against s2s_ad itself; every transform must
leave the caller's arrays unchanged.
"""
import functools
import importlib.util
import pathlib

import numpy as np
import pytest

import s2s_ad as ad
from s2s_ad.testing import check_grad, check_jvp

PROGRAMS = pathlib.Path(__file__).parent / "programs"
U = np.linspace(0.1, 1.0, 7) ** 2


@functools.cache
def load(stem):
    spec = importlib.util.spec_from_file_location(f"inplace_{stem}", PROGRAMS / f"{stem}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def forms():
    return load("inplace_forms").FORMS


def fd_jacobian(f, x, eps=1e-6):
    """Central-difference Jacobian of the plain function (run on copies)."""
    cols = []
    for k in range(x.size):
        e = np.zeros_like(x)
        e.flat[k] = eps
        plus, minus = np.asarray(f(x + e)), np.asarray(f(x - e))
        cols.append((plus - minus) / (2 * eps))
    return np.stack(cols, axis=-1).reshape(np.shape(cols[0]) + x.shape)


FORM_NAMES = [f.__name__ for f in load("inplace_forms").FORMS]


@pytest.fixture(params=FORM_NAMES)
def form(request):
    return getattr(load("inplace_forms"), request.param)


def test_grad(form):
    u = U.copy()
    check_grad(form, (u,))
    assert np.array_equal(u, U)


def test_jvp(form):
    u = U.copy()
    check_jvp(form, (u,))
    assert np.array_equal(u, U)


def test_jacrev(form):
    u = U.copy()
    jac = ad.jacrev(form)(u)
    np.testing.assert_allclose(jac, fd_jacobian(form, U), rtol=1e-6, atol=1e-7)
    assert np.array_equal(u, U)


def test_vmap(form):
    us = np.stack([U, U[::-1] * 0.5, -U])
    kept = us.copy()
    out = ad.vmap(form)(us)
    expected = [form(row.copy()) for row in kept]
    np.testing.assert_allclose(out, expected, rtol=1e-12)
    assert np.array_equal(us, kept)


def test_value_and_grad_vjp_jacfwd():
    m = load("inplace_forms")
    f = m.f_several_arguments
    u = U.copy()
    value, g = ad.value_and_grad(f)(u)
    fd = fd_jacobian(f, U)
    np.testing.assert_allclose(value, f(U.copy()), rtol=1e-12)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-7)
    out, pullback = ad.vjp(m.vector_smoothed, u)
    (ct,) = pullback(np.arange(7.0))
    np.testing.assert_allclose(out, m.vector_smoothed(U.copy()), rtol=1e-12)
    np.testing.assert_allclose(ct, np.arange(7.0) @ fd_jacobian(m.vector_smoothed, U),
                               rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(ad.jacfwd(m.vector_smoothed)(u),
                               fd_jacobian(m.vector_smoothed, U), rtol=1e-6, atol=1e-7)
    assert np.array_equal(u, U)


def test_hessian_closed_form():
    """f(u) = |S^3 u|^2 with S the smoothing map: the Hessian is 2 (S^3)^T S^3."""
    m = load("inplace_forms")
    s3 = np.eye(7)
    for _ in range(3):
        for col in s3.T:
            m.smooth(col)
    u = U.copy()
    np.testing.assert_allclose(ad.hessian(m.f_statement_in_loop)(u), 2 * s3.T @ s3,
                               rtol=1e-12, atol=1e-12)
    assert np.array_equal(u, U)


def test_argument_written_stays_unchanged_under_every_transform():
    f = load("inplace_forms").f_argument_written
    u = U.copy()
    ad.grad(f)(u)
    ad.jvp(f, (u,), (np.ones(7),))
    ad.jacrev(f)(u)
    ad.jacfwd(f)(u)
    ad.hessian(f)(u)
    ad.vmap(f)(np.stack([u, u]))
    assert np.array_equal(u, U)


KERNEL_NAMES = list(load("inplace_kernels").KERNELS)


@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_kernel_grad(name):
    k = load("inplace_kernels")
    args = k.inputs(name, np.random.default_rng(0))
    kept = [a.copy() for a in args]
    check_grad(k.KERNELS[name], args, argnums=tuple(range(len(args))))
    assert all(np.array_equal(a, b) for a, b in zip(args, kept))


# -- under ad.jit (each case compiles once with Numba) ----------------------

def test_jit_forms():
    m = load("inplace_forms")
    for f in (m.f_statement_in_loop, m.f_slice_view):
        u = U.copy()
        check_grad(f, (u,), target="cpu")
        assert np.array_equal(u, U)
    u = U.copy()
    check_jvp(m.f_augmented, (u,), target="cpu")
    assert np.array_equal(u, U)


@pytest.mark.parametrize("name", ["jacobi_2d", "trmm"])
def test_jit_kernels(name):
    k = load("inplace_kernels")
    args = k.inputs(name, np.random.default_rng(1))
    kept = [a.copy() for a in args]
    check_grad(k.KERNELS[name], args, argnums=tuple(range(len(args))), target="cpu")
    assert all(np.array_equal(a, b) for a, b in zip(args, kept))


# -- what stays refused -------------------------------------------------------

def marked(key):
    lines = (PROGRAMS / "inplace_errors.py").read_text().splitlines()
    (hit,) = [i for i, line in enumerate(lines, 1) if line.endswith(f"# <- {key}")]
    return hit


@pytest.mark.parametrize("fname, key, words", [
    ("recursive_writer", "recursion", "recursive call to 'countdown'"),
    ("reshaped_view", "reshape", "view of another array made otherwise than by slicing"),
    ("overlapping_arguments", "overlap", "also passed to it another way"),
    ("pure_statement", "pure", "has no effect"),
    ("fancy_index_view", "fancy", "NumPy passes a copy there, not a view"),
])
def test_refused_with_a_clear_error(fname, key, words):
    f = getattr(load("inplace_errors"), fname)
    with pytest.raises(ad.UnsupportedSyntaxError) as info:
        ad.grad(f)(np.linspace(0.1, 0.6, 6))
    err = info.value
    assert words in str(err)
    assert err.filename.endswith("inplace_errors.py")
    assert err.lineno == marked(key)
