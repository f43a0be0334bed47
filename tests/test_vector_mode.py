"""Compiled ``jacfwd`` in vector mode: one generated JVP carries up to 16 tangents.

The primal and the partials run once per call; each tangent is its own
local.  Each Jacobian is checked against reverse mode on NumPy (``jacrev``
without jit: an independent derivation) and, for the chunking cases,
against central finite differences.
"""
import math

import numpy as np
import pytest

import s2s_ad as ad
from s2s_ad import jacobians


def ring(x):
    """R^n -> R^n with loops, a branch and in-place writes."""
    n = x.shape[0]
    y = np.zeros(n)
    for i in range(n):
        a = x[i]
        b = x[(i + 1) % n]
        if a > b:
            y[i] = math.sin(a) * b
        else:
            y[i] = a * a - math.cos(b)
    y[0] += np.sum(x * x)
    return y


def _scale(a, s):
    return a * s + math.exp(-a)


def with_helpers(params, t, c):
    """Pytree argument, a scalar argument, a helper called in a loop, a while loop."""
    w, b = params
    out = np.empty(t.shape[0])
    for i in range(t.shape[0]):
        v = _scale(w[0] * t[i] + b, c)
        k = 0
        while v > 1.0 and k < 5:
            v = v * 0.5 + w[1] * 0.1
            k += 1
        out[i] = v
    return out


@ad.custom_jvp
def softclip(x):
    return math.log1p(math.exp(x))


@softclip.defjvp
def softclip_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    return softclip(x), dx / (1.0 + math.exp(-x))


def uses_custom(x):
    y = np.empty(x.shape[0] - 1)
    for i in range(x.shape[0] - 1):
        y[i] = softclip(x[i] - x[i + 1]) * x[i]
    return y


def aliased(x):
    """A fresh array whose tangent must not alias its operand's under element writes."""
    z = x * 1.0
    z[0] = z[1] * z[2]
    return z + x


def fd_jacobian(f, x, eps=1e-6):
    cols = []
    for k in range(x.size):
        e = np.zeros_like(x)
        e[k] = eps
        cols.append((f(x + e) - f(x - e)) / (2 * eps))
    return np.stack(cols, axis=-1)


JIT = {}


def jitted(f):
    if f.__name__ not in JIT:
        JIT[f.__name__] = ad.jacfwd(ad.jit(f))
    return JIT[f.__name__]


@pytest.mark.parametrize("n", [1, 5, 16, 17, 40])
def test_chunked_columns_match_finite_differences_and_reverse_mode(n):
    """16 columns or fewer in one call; more in ceil(n / 16) calls, the last padded."""
    x = np.random.default_rng(n).normal(size=n)
    got = jitted(ring)(x)
    assert got.shape == (n, n)
    np.testing.assert_allclose(got, ad.jacrev(ring)(x), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got, fd_jacobian(ring, x), rtol=1e-6, atol=1e-7)


def test_width_and_number_of_calls():
    layered, calls = jitted(ring)._vector_call(
        jacobians._as_transformed(jitted(ring).fun), (np.ones(40),), [0])
    assert layered.width == 14 and len(calls) == 3       # 40 columns: 14 + 14 + 12
    assert all(len(c) == 14 for c in calls)
    assert not np.any(calls[-1][-1]) and calls[-1][11][39] == 1.0


def test_pytree_and_scalar_arguments_with_helpers_and_while_loops():
    params = (np.array([0.7, -0.3]), 0.2)
    t = np.linspace(0.0, 2.0, 9)
    f = ad.jit(with_helpers)
    got = ad.jacfwd(f, argnums=(0, 2))(params, t, 1.3)
    want = ad.jacrev(with_helpers, argnums=(0, 2))(params, t, 1.3)
    (dw, db), dc = got
    (ww, wb), wc = want
    for g, w in ((dw, ww), (db, wb), (dc, wc)):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    assert isinstance(params[1], float) and np.shape(db) == (9,)


def test_custom_jvp_rule_runs_once_per_direction():
    x = np.array([0.3, -1.2, 0.8, 2.0, -0.4])
    got = jitted(uses_custom)(x)
    np.testing.assert_allclose(got, fd_jacobian(uses_custom, x), rtol=1e-6, atol=1e-8)


def test_fresh_arrays_get_fresh_tangents_in_every_direction():
    x = np.array([0.5, -1.5, 2.0, 0.25])
    got = jitted(aliased)(x)
    np.testing.assert_allclose(got, ad.jacrev(aliased)(x), rtol=1e-13)
    np.testing.assert_allclose(got, fd_jacobian(aliased, x), rtol=1e-7, atol=1e-9)


def test_float32_stays_float32():
    x = np.array([0.3, -0.7, 1.1], dtype=np.float32)
    got = jitted(ring)(x)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, ad.jacrev(ring)(x.astype(np.float64)), rtol=1e-5,
                               atol=1e-5)


def test_source_shows_one_primal_for_all_tangents():
    x = np.ones(6)
    src = ad.source(jitted(ring), x)
    assert "vector mode: one JVP carries 6 unit tangents at once" in src
    assert "def jvp_ring(x, dx_0, dx_1, dx_2, dx_3, dx_4, dx_5):" in src
    # the primal and each partial once, whatever the number of tangents:
    # sin and cos, and each as the other's derivative
    code = "\n".join(line for line in src.splitlines() if not line.lstrip().startswith("#"))
    assert code.count("math.sin(") == 2 and code.count("math.cos(") == 2
    assert "return (y, (dy_0, dy_1, dy_2, dy_3, dy_4, dy_5))" in src
