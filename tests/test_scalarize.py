"""Small arrays of static length become scalars in compiled code.

The programs (programs/small_arrays.py) build 1- to 4-element arrays:
``np.array`` of scalars, ``np.zeros(3)``, small arguments, helpers that
return them, loops and branches that carry them, and uses that need a real
array (matrix products, slices, index arrays, element writes).  Compiled
gradients must match finite differences and the Python backend (which
keeps the arrays); the generated source shows what was split.
"""
import pathlib
import re

import numpy as np
import pytest
from conftest import load_program

import s2s_ad as ad
from s2s_ad.testing import check_grad, check_vjp

sa = load_program(pathlib.Path(__file__).resolve().parent / "programs" / "small_arrays.py")
CASES = {f"{case[0].__name__}-{i}": case for i, case in enumerate(sa.CORPUS)}


def _code(src):
    """The generated statements, without the comments that quote the user's lines."""
    return "\n".join(line for line in src.splitlines() if not line.lstrip().startswith("#"))


@pytest.mark.parametrize("name", CASES)
def test_compiled_grad_matches_finite_differences(name):
    fn, make, argnums = CASES[name]
    check_grad(fn, make(), argnums, target="cpu")


@pytest.mark.parametrize("name", CASES)
def test_compiled_equals_python_backend(name):
    fn, make, argnums = CASES[name]
    compiled = ad.jit(ad.value_and_grad(fn, argnums=argnums))(*make())
    plain = ad.value_and_grad(fn, argnums=argnums)(*make())
    np.testing.assert_allclose(compiled[0], plain[0], rtol=1e-12)
    got = compiled[1] if isinstance(argnums, tuple) else (compiled[1],)
    want = plain[1] if isinstance(argnums, tuple) else (plain[1],)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def test_compiled_primal_equals_python():
    for fn, make, _ in sa.CORPUS:
        np.testing.assert_allclose(ad.jit(fn)(*make()), fn(*make()), rtol=1e-12)


def test_ode_gradient_is_scalar_code():
    """No array is built per step, and the loop keeps only the state."""
    g = ad.jit(ad.grad(sa.ode_midpoint, argnums=(0, 1)))
    args = (np.array([1.1, 0.4, 0.1, 0.4]), np.array([2.0, 1.5]), 0.01, 50)
    g(*args)
    src = ad.source(g, *args)
    assert "np.array(" not in _code(src)
    assert "theta_0 = theta[0]" in src
    # One stack per state element, allocated for the n steps before the loop.
    assert src.count("_stack = rt.float_stack(len(range(n)))") == 2, src
    assert "def _midpoint(state_0, state_1, theta_0, theta_1, theta_2, theta_3, h)" in src


def test_helpers_take_and_return_elements():
    g = ad.jit(ad.grad(sa.torque_energy, argnums=(0, 1)))
    args = (np.array([0.3, -1.2, 0.5]), np.array([0.7, 0.2, -0.4]))
    g(*args)
    src = ad.source(g, *args)
    assert "def _cross(a_0, a_1, a_2, b_0, b_1, b_2)" in src
    assert "np.array(" not in _code(src)


def test_constant_slices_are_elements():
    """A camera of 11 numbers sliced into rotation, centre, focal length, distortion."""
    g = ad.jit(ad.grad(sa.sliced_camera, argnums=(0, 1)))
    args = CASES[f"sliced_camera-{len(sa.CORPUS) - 1}"][1]()
    g(*args)
    code = _code(ad.source(g, *args))
    assert "np.array(" not in code and "cam[0:3]" not in code and "cam_10 = cam[10]" in code


def test_written_arrays_stay_arrays():
    for fn in (sa.written_elements, sa.written_alias):
        g = ad.jit(ad.grad(fn))
        x = np.array([0.5, -0.3, 1.2])
        g(x)
        src = ad.source(g, x)
        assert re.search(r"\n +(v|w)\[1\] = ", src), src


def test_arrays_needed_whole_are_rebuilt_once_per_use():
    g = ad.jit(ad.grad(sa.matrix_times_small, argnums=(0, 1)))
    args = (np.array([[0.3, -0.2], [0.1, 0.5]]), np.array([0.4, 0.9]))
    g(*args)
    src = ad.source(g, *args)
    code = _code(src)
    assert code.count("np.array(") == 1 and "rt.matmul(m, v_array)" in code, src


@pytest.mark.parametrize("n", [3, 5, 8, 9, 40])
def test_each_length_compiles_its_own_code(n):
    """The compiled signature holds small lengths: calls of other lengths are exact."""
    g = ad.jit(ad.grad(sa.slices_of_small))
    x = np.linspace(-0.9, 1.1, n)
    np.testing.assert_allclose(g(x), ad.grad(sa.slices_of_small)(x), rtol=1e-10, atol=1e-12)


def test_lengths_alternate_through_the_fast_path():
    g = ad.jit(ad.grad(sa.variable_index))
    for n in (3, 4, 3, 4, 2):
        x = np.linspace(0.1, 0.9, n)
        np.testing.assert_allclose(g(x), 2.0 * x * np.arange(1, n + 1), rtol=1e-12)


def test_small_output_vjp_and_jacobians():
    x = np.array([0.4, -0.7, 1.3])
    check_vjp(sa.returns_small, (x,), target="cpu")
    want = ad.jacfwd(sa.returns_small)(x)
    np.testing.assert_allclose(ad.jacfwd(ad.jit(sa.returns_small))(x), want, rtol=1e-12)
    np.testing.assert_allclose(ad.jacrev(ad.jit(sa.returns_small))(x), want, rtol=1e-12)
    out = ad.jit(sa.returns_small)(x)
    assert isinstance(out, np.ndarray) and out.shape == (3,)


def test_second_order_and_forward_mode_compiled():
    r, f = np.array([0.3, -1.2, 0.5]), np.array([0.7, 0.2, -0.4])
    h = ad.hessian(ad.jit(sa.torque_energy))(r, f)
    np.testing.assert_allclose(h, ad.hessian(sa.torque_energy)(r, f), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(h, h.T, rtol=1e-9, atol=1e-12)
    t = np.array([0.2, 0.1, -0.3])
    got = ad.jvp(ad.jit(sa.torque_energy), (r, f), (t, np.zeros(3)))
    want = ad.jvp(sa.torque_energy, (r, f), (t, np.zeros(3)))
    np.testing.assert_allclose(got, want, rtol=1e-10)


def test_float32_small_arrays_keep_their_dtype():
    args = (np.array([1.1, 0.4, 0.1, 0.4], np.float32), np.array([2.0, 1.5], np.float32),
            0.01, 20)
    g = ad.jit(ad.grad(sa.ode_midpoint, argnums=(0, 1)))(*args)
    want = ad.grad(sa.ode_midpoint, argnums=(0, 1))(*[a.astype(np.float64) if
                                                     isinstance(a, np.ndarray) else a
                                                     for a in args])
    for a, b in zip(g, want):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=1e-4)


def test_vmap_of_compiled_small_array_gradient():
    g = ad.jit(ad.vmap(ad.grad(sa.torque_energy), in_axes=(0, None)))
    rs = np.random.default_rng(0).normal(size=(6, 3))
    f = np.array([0.7, 0.2, -0.4])
    want = np.stack([ad.grad(sa.torque_energy)(r, f) for r in rs])
    np.testing.assert_allclose(g(rs, f), want, rtol=1e-10, atol=1e-12)


def test_per_sample_loop_writes_element_gradients_in_place():
    """vmap(grad) under jit: small gradients come back as scalars, no array per example."""
    def_rng = np.random.default_rng(1)
    rs, fs = def_rng.normal(size=(9, 3)), def_rng.normal(size=(9, 3))
    g = ad.jit(ad.vmap(ad.grad(sa.torque_energy, argnums=(0, 1))))
    got = g(rs, fs)
    for k in range(2):
        want = np.stack([ad.grad(sa.torque_energy, argnums=k)(r, f) for r, f in zip(rs, fs)])
        np.testing.assert_allclose(got[k], want, rtol=1e-10, atol=1e-12)
    assert "out0[b, k] = v[k]" in ad.source(g, rs, fs) and "np.ravel" not in ad.source(g, rs, fs)
    g32 = ad.jit(ad.vmap(ad.grad(sa.torque_energy)))(rs.astype(np.float32), fs.astype(np.float32))
    assert g32.dtype == np.float32
    np.testing.assert_allclose(g32, got[0], rtol=1e-4)


def test_per_sample_value_and_grad_with_a_large_argument():
    rng = np.random.default_rng(2)
    m, xs = rng.normal(size=(2, 2)), rng.normal(size=(5, 2))
    g = ad.jit(ad.vmap(ad.value_and_grad(sa.matrix_times_small, argnums=(0, 1)),
                       in_axes=(None, 0)))
    value, (gm, gx) = g(m, xs)
    for b in range(5):
        v, (wm, wx) = ad.value_and_grad(sa.matrix_times_small, argnums=(0, 1))(m, xs[b])
        np.testing.assert_allclose(value[b], v, rtol=1e-12)
        np.testing.assert_allclose(gm[b], wm, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(gx[b], wx, rtol=1e-10, atol=1e-12)
