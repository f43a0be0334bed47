"""Lambdas, nested defs and bound methods, in every transform and under jit.

User code lives in tests/programs/lambdas.py; derivatives are checked
against central finite differences or closed forms, never the tool itself.
"""
import functools
import importlib.util
import pathlib

import numpy as np
import pytest

import s2s_ad as ad

PROGRAMS = pathlib.Path(__file__).parent / "programs"


@functools.cache
def load():
    spec = importlib.util.spec_from_file_location("lambdas_programs", PROGRAMS / "lambdas.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def marked(key):
    lines = (PROGRAMS / "lambdas.py").read_text().splitlines()
    (hit,) = [i for i, line in enumerate(lines, 1) if line.endswith(f"# <- {key}")]
    return hit


def fd_jac(f, x, eps=1e-6):
    """Central-difference Jacobian of f at array x: shape out.shape + x.shape."""
    x = np.asarray(x, dtype=float)
    out = np.asarray(f(x))
    jac = np.zeros(out.shape + x.shape)
    for idx in np.ndindex(*x.shape):
        up, down = x.copy(), x.copy()
        up[idx] += eps
        down[idx] -= eps
        jac[(Ellipsis,) + idx] = (np.asarray(f(up)) - np.asarray(f(down))) / (2 * eps)
    return jac


X = np.array([0.3, -0.5, 0.7])
V = np.array([0.2, 0.1, -0.4])
C = np.array([1.5, -2.0, 0.5])


def scaled_grad(w, C, s):                      # closed form of make_scaled's gradient
    return np.cos(w) * C + 2 * s * w


# -- a lambda as the function transformed: every transform ------------------------

TRANSFORMS = ["grad", "value_and_grad", "vjp", "jvp", "jacfwd", "jacrev", "hessian", "hvp",
              "vmap"]


@pytest.mark.parametrize("kind", TRANSFORMS)
def test_every_transform_of_a_closure_lambda(kind):
    s = 0.7
    f = load().make_scaled(C, s)                  # closes over an array and a float
    vec = load().make_vector(C)
    if kind == "grad":
        np.testing.assert_allclose(ad.grad(f)(X), fd_jac(f, X), rtol=1e-6, atol=1e-8)
    elif kind == "value_and_grad":
        value, g = ad.value_and_grad(f)(X)
        assert value == pytest.approx(f(X))
        np.testing.assert_allclose(g, fd_jac(f, X), rtol=1e-6, atol=1e-8)
    elif kind == "vjp":
        out, pull = ad.vjp(vec, X)
        np.testing.assert_allclose(out, vec(X))
        np.testing.assert_allclose(pull(V)[0], V @ fd_jac(vec, X), rtol=1e-6, atol=1e-8)
    elif kind == "jvp":
        out, tangent = ad.jvp(vec, (X,), (V,))
        np.testing.assert_allclose(tangent, fd_jac(vec, X) @ V, rtol=1e-6, atol=1e-8)
    elif kind in ("jacfwd", "jacrev"):
        jac = getattr(ad, kind)(vec)(X)
        np.testing.assert_allclose(jac, fd_jac(vec, X), rtol=1e-6, atol=1e-8)
    elif kind == "hessian":
        hess = ad.hessian(f)(X)
        want = fd_jac(lambda w: scaled_grad(w, C, s), X)
        np.testing.assert_allclose(hess, want, rtol=1e-6, atol=1e-7)
    elif kind == "hvp":
        got = ad.hvp(f, (X,), (V,))
        want = fd_jac(lambda w: scaled_grad(w, C, s), X) @ V
        np.testing.assert_allclose(np.asarray(got).ravel(), want, rtol=1e-6, atol=1e-7)
    elif kind == "vmap":
        batch = np.stack([X, V, C])
        got = ad.vmap(lambda x: np.sum(np.sin(x) * C))(batch)
        np.testing.assert_allclose(got, np.sin(batch) @ C)
        grads = ad.vmap(ad.grad(f))(batch)
        np.testing.assert_allclose(grads, np.stack([fd_jac(f, b) for b in batch]),
                                   rtol=1e-6, atol=1e-8)


def test_the_issue_example_lambda_over_a_module_function():
    m = load()
    A = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]])
    y = np.array([0.5, -1.0])
    g = ad.grad(lambda w: m.loss(w, A, y))(X)
    np.testing.assert_allclose(g, 2 * A.T @ (A @ X - y), rtol=1e-12)


def test_two_lambdas_on_one_line_are_told_apart():
    f, g = load().make_pair(2.0)
    np.testing.assert_allclose(ad.grad(f)(X), 2.0 * np.cos(X))       # sum(sin(x) * c)
    np.testing.assert_allclose(ad.grad(g)(X), 6.0 * X ** 2)          # sum(x**3 * c)
    assert f"lambdas.py:{marked('pair')}" in ad.source(ad.grad(g), X)


def test_lambda_starting_inside_a_multiline_call():
    made = ad.grad(
        lambda x: np.sum(x ** 2)
        * 3.0)
    np.testing.assert_allclose(made(X), 6.0 * X)


# -- under jit: closures read at each call ----------------------------------------

def test_jitted_lambda_sees_a_changed_closure_without_recompiling():
    A = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]])
    y = np.array([0.5, -1.0])
    m = load()
    g = ad.jit(ad.grad(lambda w: m.loss(w, A, y)))
    np.testing.assert_allclose(g(X), 2 * A.T @ (A @ X - y), rtol=1e-12)
    A[0, 0] = 4.0                                     # written in place
    np.testing.assert_allclose(g(X), 2 * A.T @ (A @ X - y), rtol=1e-12)
    A = A * 2.0                                       # the variable rebound
    y = y + 1.0
    np.testing.assert_allclose(g(X), 2 * A.T @ (A @ X - y), rtol=1e-12)
    assert len(g._built) == 1                         # one build for all three calls
    for _ in range(3):                                # later calls: the fast path
        np.testing.assert_allclose(g(X), 2 * A.T @ (A @ X - y), rtol=1e-12)


def test_jitted_lambdas_from_one_line_with_different_closures():
    f1, _ = load().make_pair(1.0)
    f2, _ = load().make_pair(-3.0)
    g1, g2 = ad.jit(ad.grad(f1)), ad.jit(ad.grad(f2))
    np.testing.assert_allclose(g1(X), np.cos(X))
    np.testing.assert_allclose(g2(X), -3.0 * np.cos(X))
    np.testing.assert_allclose(g1(X), np.cos(X))
    def code(g):                                      # without the measured timings
        return [line for line in ad.source(g).splitlines() if "# Execution" not in line]
    assert code(g1) == code(g2)                       # the same compiled code


def test_closed_over_int_change_rebuilds():
    def make():
        k = 2
        f = lambda x: np.sum(x[:k] ** 2)  # noqa: E731  (k is built in as a constant)

        def set_k(v):
            nonlocal k
            k = v
        return f, set_k
    f, set_k = make()
    g = ad.grad(f)
    np.testing.assert_allclose(g(X), [2 * X[0], 2 * X[1], 0.0])
    set_k(3)
    np.testing.assert_allclose(g(X), 2 * X)


@pytest.mark.parametrize("kind", ["jacfwd", "jacrev", "hessian", "vmap-grad"])
def test_jitted_jacobians_see_a_changed_closure(kind):
    C2 = C.copy()
    f, vec = load().make_scaled(C2, 0.7), load().make_vector(C2)
    if kind == "hessian":
        run, want = ad.jit(ad.hessian(f)), lambda: fd_jac(lambda w: scaled_grad(w, C2, 0.7), X)
    elif kind == "vmap-grad":
        batch = np.stack([X, 2 * X])
        run = lambda _: ad.jit(ad.vmap(ad.grad(f)))(batch)  # noqa: E731
        want = lambda: np.stack([fd_jac(f, b) for b in batch])  # noqa: E731
    else:
        run, want = ad.jit(getattr(ad, kind)(vec)), lambda: fd_jac(vec, X)
    np.testing.assert_allclose(run(X), want(), rtol=1e-6, atol=1e-7)
    C2[1] = 4.0                                       # the closed-over array, in place
    np.testing.assert_allclose(run(X), want(), rtol=1e-6, atol=1e-7)


def test_jit_of_a_lambda_primal_and_vmap():
    f = ad.jit(lambda x: np.sum(np.sin(x) * C))
    assert f(X) == pytest.approx(np.sum(np.sin(X) * C))
    batch = np.stack([X, V])
    per_sample = ad.jit(ad.vmap(ad.grad(load().make_scaled(C, 0.7))))
    np.testing.assert_allclose(per_sample(batch), scaled_grad(batch, C, 0.7), rtol=1e-12)


# -- lambdas and nested defs inside differentiated code ---------------------------

INSIDE = ["local_lambda", "nested_def", "late_binding", "passes_lambda", "passes_nested_def",
          "writes_closed_over", "energy", "functions_in_a_list", "functions_by_index_and_key"]


@pytest.mark.parametrize("name", INSIDE)
def test_local_functions_inside_differentiated_code(name):
    f = getattr(load(), name)
    np.testing.assert_allclose(ad.grad(f)(X), fd_jac(f, X), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", ["nested_def", "energy", "functions_in_a_list",
                                  "functions_by_index_and_key"])
def test_local_functions_under_jit(name):
    f = getattr(load(), name)
    g = ad.jit(ad.value_and_grad(f))
    value, grad = g(X)
    assert value == pytest.approx(f(X))
    np.testing.assert_allclose(grad, fd_jac(f, X), rtol=1e-6, atol=1e-8)


def test_functions_as_values_batched():
    f = load().functions_by_index_and_key
    batch = np.stack([X, 0.5 * X])
    got = ad.jit(ad.vmap(ad.grad(f)))(batch)
    np.testing.assert_allclose(got, np.stack([fd_jac(f, b) for b in batch]), rtol=1e-6,
                               atol=1e-8)


def test_local_function_jacobians():
    apply = load().apply                   # a closed-over function: built in

    def f(x):
        scale = x[0]
        g = lambda z: np.sin(z) * scale  # noqa: E731
        return apply(g, x)
    np.testing.assert_allclose(ad.jacfwd(f)(X), fd_jac(f, X), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(ad.jacrev(f)(X), fd_jac(f, X), rtol=1e-6, atol=1e-8)


# -- bound methods ----------------------------------------------------------------

def test_bound_method():
    W = np.array([[0.1, 0.2, 0.3], [0.4, -0.5, 0.6]])
    y = np.array([1.0, -2.0])
    model = load().Model(W, 0.5)

    def reference(x):
        return np.sum(np.tanh(W @ x) * y) + 0.5 * np.sum(x ** 2)
    # argnums count from the first argument after self, as in JAX
    np.testing.assert_allclose(ad.grad(model.loss)(X, y), fd_jac(reference, X),
                               rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(ad.grad(model.loss, argnums=1)(X, y), np.tanh(W @ X))
    jitted = ad.jit(ad.grad(model.loss))
    np.testing.assert_allclose(jitted(X, y), fd_jac(reference, X), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(ad.jacrev(model.penalty)(X), 2 * 0.5 * X)


# -- errors -----------------------------------------------------------------------

def test_lambda_without_source():
    scope = {"np": np}
    exec(compile("f = lambda x: np.sum(x ** 2)\n", "<string>", "exec"), scope)  # noqa: S102
    with pytest.raises(TypeError, match="keeps no source.*interactive prompt.*exec"):
        ad.grad(scope["f"])(X)
    with pytest.raises(TypeError, match="keeps no source"):
        ad.jit(scope["f"])


def test_nonlocal_assignment_points_at_the_line():
    with pytest.raises(ad.UnsupportedSyntaxError) as info:
        ad.grad(load().make_nonlocal())(1.0)
    assert info.value.lineno == marked("nonlocal")
    assert info.value.filename == str(PROGRAMS / "lambdas.py")
    assert "nonlocal" in info.value.msg and "return the new value" in info.value.msg


def test_returning_a_lambda_points_at_the_line():
    with pytest.raises(ad.UnsupportedSyntaxError) as info:
        ad.grad(load().returns_a_lambda)(X)
    assert info.value.lineno == marked("returns_lambda")
    assert "returning a function" in info.value.msg


def test_lambda_used_as_a_value():
    def f(x):
        g = lambda z: z  # noqa: E731
        return np.sum(x * g)
    with pytest.raises(ad.UnsupportedSyntaxError, match="can only be called"):
        ad.grad(f)(X)
