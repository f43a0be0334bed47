"""Complex primals, integer primals and Python floats, as JAX treats them.

Every expected value comes from JAX itself (x64, CPU) or from finite
differences; each check runs on the NumPy target and under ``ad.jit``.
The complex examples are those of the JAX autodiff cookbook's "Complex
numbers and differentiation" section.
"""
import math

import numpy as np
import pytest

import s2s_ad as ad

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jax.config.update("jax_enable_x64", True)

TARGETS = {"python": lambda f: f, "numba": ad.jit}

A_, B_, C_, D_ = 0.3, 0.8, -0.6, 1.7         # u = a x + b y, v = c x + d y


def cookbook(z):
    x, y = np.real(z), np.imag(z)
    return (A_ * x + B_ * y) + (C_ * x + D_ * y) * 1j


def jax_cookbook(z):
    x, y = jnp.real(z), jnp.imag(z)
    return (A_ * x + B_ * y) + (C_ * x + D_ * y) * 1j


def sq_norm(z):
    x, y = np.real(z), np.imag(z)
    return x ** 2 + y ** 2


def sine(z):
    return np.sin(z)


def conjugate(z):
    return np.conjugate(z)


def abs_loss(z):
    return np.sum(np.abs(z) ** 2 * np.real(z))


def norm_loss(z):
    return np.linalg.norm(z) + np.real(np.vdot(z, z * 2.0 + 1j))


def var_loss(z):
    return np.var(z) + np.std(z)


def fft_loss(z):
    return np.sum(np.abs(np.fft.fft(z)) ** 2)


def power_loop(z):
    a = 1.0 + 0j
    for _ in range(4):
        a = a * z + 0.5
    return np.real(a) * np.imag(a)


def holo_poly(z):
    return z * z * z + 2.0 * np.exp(z)


def chol_loss(m):
    return np.real(np.sum(np.linalg.cholesky(m)))


def twice(n):
    return n * 2


def scaled(x, n):
    return x * n


def with_flag(x, flag):
    return x * 3.0 if flag else x


def log_of(x):
    return np.log(x)


def sqrt_pow(x):
    return x ** 0.5


def reciprocal(x):
    return 1.0 / x


def math_sqrt(x):
    return math.sqrt(x)


def close(got, want, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=atol)


Z0 = 0.7 + 0.4j
ZS = np.array([1.0 + 2.0j, -0.5 + 0.3j, 0.7 - 1.1j])


# -- the cookbook: jvp, vjp, grad, holomorphic grad -------------------------------------

@pytest.mark.parametrize("target", TARGETS)
def test_cookbook_jvp_is_the_directional_derivative(target):
    dz = 0.25 - 0.9j
    out, tangent = ad.jvp(TARGETS[target](cookbook), (Z0,), (dz,))
    want_out, want = jax.jvp(jax_cookbook, (Z0,), (dz,))
    close(out, want_out)
    close(tangent, want)
    # the cookbook's own formula: [1 i] J [c d]^T
    c, d = dz.real, dz.imag
    close(tangent, A_ * c + B_ * d + (C_ * c + D_ * d) * 1j)


@pytest.mark.parametrize("target", TARGETS)
def test_cookbook_vjp_follows_jax(target):
    ct = 0.35 + 0.6j
    _, pull = ad.vjp(TARGETS[target](cookbook), Z0)
    (got,) = pull(ct)
    (want,) = jax.vjp(jax_cookbook, Z0)[1](ct)
    close(got, want)
    c, d = ct.real, ct.imag                        # the cookbook's formula
    close(got, A_ * c + C_ * (-d) + B_ * c * (-1j) + D_ * (-d) * (-1j))


@pytest.mark.parametrize("target", TARGETS)
def test_grad_of_a_real_function_of_complex_z(target):
    got = ad.grad(TARGETS[target](sq_norm))(3.0 + 4.0j)
    want = jax.grad(lambda z: jnp.real(z) ** 2 + jnp.imag(z) ** 2)(3.0 + 4.0j)
    assert got == pytest.approx(complex(want)) and complex(want) == 6 - 8j
    assert isinstance(got, complex)


@pytest.mark.parametrize("target", TARGETS)
def test_grad_holomorphic(target):
    got = ad.grad(TARGETS[target](sine), holomorphic=True)(3.0 + 4.0j)
    close(got, jax.grad(jnp.sin, holomorphic=True)(3.0 + 4.0j))
    got = ad.grad(TARGETS[target](conjugate), holomorphic=True)(3.0 + 4.0j)
    close(got, jax.grad(jnp.conjugate, holomorphic=True)(3.0 + 4.0j))       # 1, as JAX


@pytest.mark.parametrize("target", TARGETS)
def test_value_and_grad_holomorphic(target):
    value, g = ad.value_and_grad(TARGETS[target](holo_poly), holomorphic=True)(Z0)
    want_value, want = jax.value_and_grad(lambda z: z ** 3 + 2.0 * jnp.exp(z),
                                          holomorphic=True)(Z0)
    close(value, want_value)
    close(g, want)
    close(g, 3 * Z0 ** 2 + 2 * np.exp(Z0))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("fn, jfn", [
    (abs_loss, lambda z: jnp.sum(jnp.abs(z) ** 2 * jnp.real(z))),
    (norm_loss, lambda z: jnp.linalg.norm(z) + jnp.real(jnp.vdot(z, z * 2.0 + 1j))),
    (var_loss, lambda z: jnp.var(z) + jnp.std(z)),
    (fft_loss, lambda z: jnp.sum(jnp.abs(jnp.fft.fft(z)) ** 2)),
], ids=["abs", "norm-vdot", "var-std", "fft"])
def test_grad_of_complex_arrays(target, fn, jfn):
    close(ad.grad(TARGETS[target](fn))(ZS), jax.grad(jfn)(jnp.asarray(ZS)))


@pytest.mark.parametrize("target", TARGETS)
def test_a_loop_over_complex_values(target):
    def jax_loop(z):
        a = 1.0 + 0j
        for _ in range(4):
            a = a * z + 0.5
        return jnp.real(a) * jnp.imag(a)
    close(ad.grad(TARGETS[target](power_loop))(Z0), jax.grad(jax_loop)(Z0))
    _, tangent = ad.jvp(TARGETS[target](power_loop), (Z0,), (1j,))
    h = 1e-6                                       # central differences along i
    close(tangent, (power_loop(Z0 + 1j * h) - power_loop(Z0 - 1j * h)) / (2 * h), rtol=1e-7)


def test_vdot_conjugates_its_first_operand():
    b = np.array([1.0, 2.0 - 1j, 0.5j])
    for target in TARGETS.values():
        got = target(lambda a: np.vdot(a, b))(ZS)
        close(got, np.vdot(ZS, b))


@pytest.mark.parametrize("target", TARGETS)
def test_jacobians_holomorphic(target):
    f = TARGETS[target](sine)
    zs = jnp.asarray(ZS)
    close(ad.jacfwd(f, holomorphic=True)(ZS), jax.jacfwd(jnp.sin, holomorphic=True)(zs))
    close(ad.jacrev(f, holomorphic=True)(ZS), jax.jacrev(jnp.sin, holomorphic=True)(zs))
    close(ad.hessian(TARGETS[target](holo_poly), holomorphic=True)(Z0),
          jax.hessian(lambda z: z ** 3 + 2.0 * jnp.exp(z), holomorphic=True)(Z0))
    close(ad.jacrev(TARGETS[target](abs_loss))(ZS),
          jax.jacrev(lambda z: jnp.sum(jnp.abs(z) ** 2 * jnp.real(z)))(zs))


@pytest.mark.parametrize("target", TARGETS)
def test_hvp_and_vmap_of_grad_with_complex_values(target):
    f = TARGETS[target](abs_loss)
    jf = lambda z: jnp.sum(jnp.abs(z) ** 2 * jnp.real(z))        # noqa: E731
    v = np.array([0.5 + 2j, -1.0 + 0.1j, 0.3j])
    close(ad.hvp(f, (ZS,), (v,)), jax.jvp(jax.grad(jf), (jnp.asarray(ZS),), (v,))[1])
    batch = np.stack([ZS, 2 * ZS])
    close(ad.vmap(ad.grad(f))(batch), jax.vmap(jax.grad(jf))(jnp.asarray(batch)))


# -- what JAX refuses, refused with JAX's TypeError ---------------------------------------

@pytest.mark.parametrize("target", TARGETS)
def test_complex_output_needs_holomorphic(target):
    with pytest.raises(TypeError, match="real-valued outputs.*holomorphic=True"):
        ad.grad(TARGETS[target](sine))(3.0 + 4.0j)
    with pytest.raises(TypeError, match="real-valued outputs"):
        ad.grad(TARGETS[target](lambda x: x * (1 + 1j)))(2.0)
    with pytest.raises(TypeError, match="real-valued outputs"):
        ad.jacrev(TARGETS[target](lambda x: x * (1 + 1j)))(2.0)
    with pytest.raises(TypeError, match="real-valued inputs"):
        ad.jacfwd(TARGETS[target](sine))(ZS)
    with pytest.raises(TypeError, match="requires inputs with complex dtype.*'z'"):
        ad.grad(TARGETS[target](sine), holomorphic=True)(3.0)
    with pytest.raises(TypeError, match="requires outputs with complex dtype"):
        ad.grad(TARGETS[target](lambda z: np.abs(z)), holomorphic=True)(Z0)
    # jacfwd of a real input with a complex output is fine, as in JAX
    close(ad.jacfwd(TARGETS[target](lambda x: x * (1 + 1j)))(2.0), 1 + 1j)


def test_a_float_build_then_a_complex_call_is_checked_again():
    g = ad.grad(lambda x: x * x)
    assert g(3.0) == 6.0
    with pytest.raises(TypeError, match="real-valued outputs"):
        g(3.0 + 1j)


@pytest.mark.parametrize("target", TARGETS)
def test_tangent_and_cotangent_dtypes(target):
    f = TARGETS[target](twice)
    with pytest.raises(TypeError, match="tangent of argument 0 \\('n'\\).*complex"):
        ad.jvp(f, (3.0,), (1j,))
    with pytest.raises(TypeError, match="cotangent leaf 0 is complex"):
        ad.vjp(f, 3.0)[1](1j)
    out, tangent = ad.jvp(f, (3.0 + 0j,), (1.0,))     # a real direction of a complex z
    assert tangent == 2.0 + 0j and isinstance(tangent, complex)


@pytest.mark.parametrize("target", TARGETS)
def test_real_only_derivatives_refuse_complex_arguments(target):
    h = np.array([[4.0, 1.0 - 1j], [1.0 + 1j, 3.0]])
    with pytest.raises(TypeError, match="argument 0 \\('m'\\).*np.linalg.cholesky"):
        ad.grad(TARGETS[target](chol_loss))(h)


def test_grad_of_a_non_holomorphic_gradient_is_refused():
    inner = ad.grad(lambda z: np.abs(z) ** 2)
    with pytest.raises(TypeError, match="complex argument without holomorphic=True"):
        ad.grad(inner, holomorphic=True)(1.0 + 1j)


# -- integer and boolean primals -----------------------------------------------------------

@pytest.mark.parametrize("target", TARGETS)
def test_integer_primal_with_a_nonzero_tangent_is_a_type_error(target):
    with pytest.raises(TypeError, match="jax.jvp"):
        jax.jvp(lambda n: n * 2, (3,), (1,))
    with pytest.raises(TypeError, match="argument 0 \\('n'\\).*never differentiated"):
        ad.jvp(TARGETS[target](twice), (3,), (1,))
    with pytest.raises(TypeError, match="argument 1 \\('flag'\\)"):
        ad.jvp(TARGETS[target](with_flag), (2.0, True), (1.0, True))
    with pytest.raises(TypeError, match="argument 1 \\('n'\\)"):
        ad.jvp(TARGETS[target](scaled), (np.ones(2), np.arange(2)), (np.ones(2), np.ones(2)))


@pytest.mark.parametrize("target", TARGETS)
def test_integer_primal_with_a_zero_tangent(target):
    # zero (or JAX's float0) tangents: the value is not differentiated
    out, tangent = ad.jvp(TARGETS[target](twice), (3,), (0,))
    assert out == 6 and tangent == 0
    out, tangent = ad.jvp(TARGETS[target](scaled), (1.5, 4), (1.0, 0))
    assert out == 6.0 and tangent == 4.0
    float0 = np.zeros((), dtype=[("float0", "V")])
    assert ad.jvp(TARGETS[target](scaled), (1.5, 4), (1.0, float0))[1] == 4.0


@pytest.mark.parametrize("target", TARGETS)
def test_differentiating_with_respect_to_integers_names_the_argument(target):
    f = TARGETS[target](scaled)
    for transform in (ad.grad, ad.value_and_grad, ad.jacfwd, ad.jacrev, ad.hessian):
        with pytest.raises(TypeError, match="argument 1"):
            transform(lambda x, n: np.sum(x * n), argnums=1)(np.ones(2), 3)
    with pytest.raises(TypeError, match="argument 0 \\('x'\\).*integer and boolean"):
        ad.grad(f)(3, 2.0)
    with pytest.raises(TypeError, match="argument 1 \\('flag'\\)"):
        ad.grad(TARGETS[target](with_flag), argnums=1)(2.0, True)
    with pytest.raises(TypeError, match="only float64/float32|first argument"):
        ad.hvp(TARGETS[target](lambda n: n * 2.0), (3,), (0,))
    # an integer primal of vjp gets a zero cotangent (JAX: float0 zeros)
    _, pull = ad.vjp(f, 2.0, 3)
    assert pull(1.0) == (3.0, 0)


# -- Python floats follow NumPy's float64 semantics in generated code --------------------

@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("fn, jfn", [(log_of, jnp.log), (sqrt_pow, lambda x: x ** 0.5),
                                     (reciprocal, lambda x: 1.0 / x)],
                         ids=["log", "pow-half", "reciprocal"])
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_python_float_at_a_singularity_gives_jax_inf(target, fn, jfn):
    got = ad.grad(TARGETS[target](fn))(0.0)
    want = float(jax.grad(jfn)(0.0))
    assert got == want and math.isinf(want)
    assert type(got) is float


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_python_float_arithmetic_in_generated_code(target):
    _, tangent = ad.jvp(TARGETS[target](math_sqrt), (0.0,), (1.0,))
    assert tangent == math.inf
    _, tangent = ad.jvp(TARGETS[target](log_of), (0.0,), (1.0,))
    assert tangent == math.inf
    assert ad.grad(TARGETS[target](math_sqrt))(0.0) == math.inf


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_compiled_primal_follows_numpy_float64():
    f = ad.jit(reciprocal)
    assert f(0.0) == math.inf and type(f(0.0)) is float
    assert math.isnan(ad.jit(sqrt_pow)(-1.0))          # NumPy's nan, not Python's complex


def test_python_float_results_keep_their_types():
    assert type(ad.grad(lambda x: x * x)(3.0)) is float
    assert type(ad.jit(ad.grad(lambda x: x * x))(3.0)) is float


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_vjp_of_a_python_float_at_a_pole():
    out, pull = ad.vjp(reciprocal, 0.0)
    want_out, jax_pull = jax.vjp(lambda x: 1.0 / x, 0.0)
    assert out == float(want_out) == math.inf
    assert pull(1.0)[0] == float(jax_pull(1.0)[0]) == -math.inf


def angle_loss(z):
    return np.sum(np.angle(z) * np.abs(z))


@pytest.mark.parametrize("target", TARGETS)
def test_angle(target):
    close(ad.grad(TARGETS[target](angle_loss))(ZS),
          jax.grad(lambda z: jnp.sum(jnp.angle(z) * jnp.abs(z)))(jnp.asarray(ZS)))
    close(TARGETS[target](lambda z: np.angle(z, deg=True))(ZS), np.angle(ZS, deg=True))


def nested_grad_of_complex(x):
    return ad.grad(abs_loss)(x * (1 + 1j))


@pytest.mark.parametrize("target", TARGETS)
def test_a_nested_grad_of_a_complex_value_is_refused_not_wrong(target):
    # called plainly, the inner ad.grad runs as a transform: JAX's numbers
    close(nested_grad_of_complex(ZS.real),
          jax.grad(lambda z: jnp.sum(jnp.abs(z) ** 2 * jnp.real(z)))(ZS.real * (1 + 1j)))
    # written inside a transformed function it is built from real unit tangents: refused
    with pytest.raises(TypeError, match="complex argument cannot be differentiated"):
        TARGETS[target](nested_grad_of_complex)(ZS.real) if target == "numba" else \
            ad.grad(lambda x: np.real(np.sum(nested_grad_of_complex(x))))(ZS.real)


def nested_grad_of_complex_output(x):
    return ad.grad(lambda t: t * (1 + 1j))(x)


def test_a_nested_grad_of_a_complex_output_is_a_type_error():
    with pytest.raises(TypeError, match="real-valued outputs"):
        ad.jit(nested_grad_of_complex_output)(2.0)
    with pytest.raises(TypeError, match="real-valued outputs"):
        ad.grad(lambda x: np.real(nested_grad_of_complex_output(x)))(2.0)
