"""Regressions (issue 15): derivatives that came back as zeros, or effects
that were ignored, instead of an error or the right derivative.

- A call with no derivative rule anywhere on a path from a differentiated
  input to the output raises NonDifferentiableError naming it, whatever
  follows it (another call with no rule, ``@`` with a constant...), in every
  transform; calls with zero derivative stay legal.
- Every rule declared linear is linear (checked on its primal), and
  ``np.prod``/``np.max``/``np.min`` carry their own JVP templates.
- A call to a user function that writes into an array it is passed,
  assigned or not, is seen by the caller and differentiated (issue 18; it
  was refused before, rather than ignored).

The programs are module-level functions of this file.
"""
import math
import operator

import numpy as np
import pytest

import s2s_ad as ad
from s2s_ad import runtime as rt
from s2s_ad.rules import RULES
from s2s_ad.rules.internal import INTERNAL
from s2s_ad.rules.registry import Rule
from s2s_ad.testing import check_grad, check_jvp

# -- programs: a call with no rule on the differentiated path -------------------------

A4 = np.eye(4) * 2.0 + 0.1
A2 = np.eye(2) * 2.0 + 0.1


def vander_matmul(x):
    return np.sum(np.vander(x, 2) @ A2)  # <- vander


def vander_spacing(x):
    return np.sum(np.abs(np.spacing(np.vander(np.diag(x + 3 * np.eye(3))))))  # <- vander diag


def vander_helper(x):
    return np.vander(A4 @ x)  # <- helper vander


def through_helper(x):
    y = vander_helper(x) @ A4
    return np.sum(y * y)


def vander_in_loop(x):
    s = 0.0
    for i in range(3):
        s = s + np.sum(np.vander(x * (i + 1.0), 2) @ A2)  # <- loop vander
    return s


def zero_derivative_calls(x):
    k = np.argmax(x)
    f = np.floor(x)
    n = x.shape[0]
    off = np.sum(ad.stop_gradient(np.vander(x, 2)) @ A2)
    return np.sum(x * f) + x[k] * n + off + np.sum(x > 0.5) + np.sum(x * np.size(x))


def rule_less_off_path(x, c):
    return np.sum(x * np.sum(np.vander(c, 2) @ A2)) + 0.0 * np.sum(x)


def rule_less_dead(x):
    _ = np.sum(np.vander(x, 2))
    return np.sum(x * x)


X4 = np.linspace(0.2, 1.3, 4)
M3 = np.random.default_rng(0).normal(size=(3, 3))

# Functions with no rule (docs/supported.md, "Not supported"); np.vander is
# followed by np.spacing, which has none either.
NO_RULE = [(vander_matmul, X4, "np.vander", "<- vander"),
           (vander_spacing, M3, "np.vander", "<- vander diag"),
           (through_helper, X4, "np.vander", "<- helper vander"),
           (vander_in_loop, X4, "np.vander", "<- loop vander")]

TRANSFORMS = {
    "grad": lambda f, x: ad.grad(f)(x),
    "vjp": lambda f, x: ad.vjp(f, x)[1](np.ones_like(f(x))),
    "jvp": lambda f, x: ad.jvp(f, (x,), (np.ones_like(x),)),
    "jacfwd": lambda f, x: ad.jacfwd(f)(x),
    "jacrev": lambda f, x: ad.jacrev(f)(x),
    "hessian": lambda f, x: ad.hessian(f)(x),
    "jit_grad": lambda f, x: ad.jit(ad.grad(f))(x),
    "vmap_grad": lambda f, x: ad.vmap(ad.grad(f))(np.stack([x, 2.0 * x])),
}


def _line_of(marker):
    with open(__file__) as source:
        for i, line in enumerate(source, 1):
            if line.rstrip().endswith(marker):
                return i
    raise AssertionError(marker)


@pytest.mark.parametrize("kind", TRANSFORMS)
@pytest.mark.parametrize("fn,x,name,marker", NO_RULE, ids=[c[0].__name__ for c in NO_RULE])
def test_rule_less_call_on_the_path_is_refused(fn, x, name, marker, kind):
    with pytest.raises(ad.NonDifferentiableError) as info:
        TRANSFORMS[kind](fn, x)
    err = info.value
    assert f"no derivative rule for {name}()" in str(err)
    assert "ad.custom_vjp" in str(err)
    assert err.filename == __file__ and err.lineno == _line_of(marker)


def test_zero_derivative_calls_stay_legal():
    x = np.array([0.2, 0.6, 0.9, 1.3])
    # floor, comparisons, argmax, shapes and stop_gradient contribute nothing.
    expected = np.floor(x) + np.size(x)
    expected[np.argmax(x)] += x.shape[0]
    np.testing.assert_allclose(ad.grad(zero_derivative_calls)(x), expected)
    np.testing.assert_allclose(ad.jit(ad.grad(zero_derivative_calls))(x), expected)
    _, t = ad.jvp(zero_derivative_calls, (x,), (np.ones(4),))
    np.testing.assert_allclose(t, np.sum(expected))


def test_rule_less_calls_off_the_path_stay_legal():
    c = np.array([1.0, -2.0, 0.5, 3.0])
    expected = np.full(4, np.sum(np.vander(c, 2) @ A2))
    np.testing.assert_allclose(ad.grad(rule_less_off_path)(X4, c), expected)
    np.testing.assert_allclose(ad.grad(rule_less_dead)(X4), 2 * X4)
    _, t = ad.jvp(rule_less_dead, (X4,), (np.ones(4),))
    np.testing.assert_allclose(t, np.sum(2 * X4))


# -- rules declared linear are linear ---------------------------------------------------

def _setitem(x, value, index):
    y = np.array(x, copy=True)
    y[index] = value
    return y


_EMITS = {"getitem": operator.getitem, "setitem": _setitem, "identity": lambda x: x}


def _primal(rule):
    """The rule's primal as a Python callable taking ``rule.params`` in order."""
    if rule.emit in _EMITS:
        return _EMITS[rule.emit]
    return eval(rule.emit, {"np": np, "rt": rt, "math": math, "float": float})


# Arguments (in ``rule.params`` order) for each rule, from a function of a
# random-array maker ``r(*shape)`` (no shape: a float).
SAMPLES = {
    "np.sum": [lambda r: (r(3, 4), 1, False), lambda r: (r(3, 4), None, True)],
    "np.mean": [lambda r: (r(3, 4), 0, False)],
    "np.prod": [lambda r: (r(3, 4), 1, False), lambda r: (r(4), None, False)],
    "np.max": [lambda r: (r(3, 4), 0, True), lambda r: (r(5), None, False)],
    "np.min": [lambda r: (r(3, 4), -1, False), lambda r: (r(5), None, False)],
    "np.dot": [lambda r: (r(3, 4), r(4)), lambda r: (r(4), r(4))],
    "np.matmul": [lambda r: (r(3, 4), r(4, 2))],
    "np.inner": [lambda r: (r(3, 4), r(2, 4))],
    "np.outer": [lambda r: (r(3), r(2))],
    "np.reshape": [lambda r: (r(3, 4), (4, 3))],
    "np.ravel": [lambda r: (r(3, 4),)],
    "np.squeeze": [lambda r: (r(3, 1, 4), None)],
    "np.expand_dims": [lambda r: (r(3), 0)],
    "np.transpose": [lambda r: (r(2, 3, 4), (1, 0, 2))],
    "np.copy": [lambda r: (r(4),)],
    "np.asarray": [lambda r: (r(4),)],
    "float": [lambda r: (r(),)],
    "np.astype": [lambda r: (r(3, 4), np.float64)],
    "np.concatenate": [lambda r: ((r(2, 4), r(3, 4)), 0)],
    "np.stack": [lambda r: ((r(4), r(4)), 1)],
    "np.array": [lambda r: ((r(), r(), r()),)],
    "getitem": [lambda r: (r(5), slice(1, 3)), lambda r: (r(3, 4), (1, 2))],
    "setitem": [lambda r: (r(5), r(2), slice(1, 3))],
    "copy": [lambda r: (r(3),)],
    "np.full": [lambda r: ((3, 4), r(), None)],
    "np.full_like": [lambda r: (r(3, 4), r(), None)],
    "rt.broadcast_like": [lambda r: (r(4), r(3, 4))],
    "rt.minmax_grad": [lambda r: (lambda a: (r(3), a, a.max(1), 1, False))(r(3, 4))],
    "rt.prod_grad": [lambda r: (r(3), r(3, 4), 1, False)],
    "rt.lift": [lambda r: (r(2, 3), 2)],
    "rt.broadcast_batch": [lambda r: (r(3), r(2, 3))],
    "rt.take": [lambda r: (r(2, 3), np.array([0, 2]))],
    "rt.bdot": [lambda r: (r(2, 3), r(3), True, False)],
    "rt.bmatmul": [lambda r: (r(2, 3, 4), r(4), True, False)],
    "rt.binner": [lambda r: (r(2, 3), r(2, 3), True, True)],
    "rt.bouter": [lambda r: (r(2, 3), r(2), True, False)],
    "rt.batch_broadcast_like": [lambda r: (r(2, 3), r(2, 4, 3), True)],
    # Linear algebra, scans and gathers (rules/linalg.py, rules/scans.py); products of
    # two operands are linear in each (np.dot's kind).
    "np.trace": [lambda r: (r(3, 4), 0, 0, 1), lambda r: (r(2, 3, 4), 1, 2, 1)],
    "np.diagonal": [lambda r: (r(3, 4), -1, 0, 1), lambda r: (r(2, 3, 4), 1, 0, 2)],
    "np.diag": [lambda r: (r(4), 0), lambda r: (r(3), -1), lambda r: (r(3, 4), 1)],
    "np.tril": [lambda r: (r(3, 4), 0), lambda r: (r(4, 4), -1)],
    "np.triu": [lambda r: (r(3, 4), 1), lambda r: (r(2, 3, 3), 0)],
    "np.kron": [lambda r: (r(3), r(2)), lambda r: (r(2, 2), r(2, 3))],
    "np.cross": [lambda r: (r(3), r(3)), lambda r: (r(4, 3), r(3))],
    "np.vdot": [lambda r: (r(4), r(4)), lambda r: (r(3, 4), r(3, 4))],
    "np.tensordot": [lambda r: (r(3, 4), r(4, 2), 1), lambda r: (r(2, 3, 4), r(3, 4), 2),
                     lambda r: (r(3, 4), r(3, 2), ([0], [0]))],
    "np.cumsum": [lambda r: (r(3, 4), 1), lambda r: (r(3, 4), None)],
    "rt.cumsum_grad": [lambda r: (r(3, 4), r(3, 4), 0), lambda r: (r(12), r(3, 4), None)],
    "np.take_along_axis": [lambda r: (r(3, 4), np.array([[0, 2, 2, 1], [1, 1, 0, 2]]), 0),
                           lambda r: (r(3, 4), np.array([5, 5, 0, 11]), None)],
    "rt.take_along_axis_grad": [
        lambda r: (r(2, 4), r(3, 4), np.array([[0, 2, 2, 1], [1, 1, 0, 2]]), 0),
        lambda r: (r(4), r(3, 4), np.array([5, 5, 0, 11]), None)],
    # np.fft and the complex plumbing (rules/fft.py); the scatters' gathers (rules/extras.py).
    "np.fft.fft": [lambda r: (r(3, 4), None, -1, None), lambda r: (r(3, 4), 5, 0, "ortho")],
    "np.fft.ifft": [lambda r: (r(5), 3, -1, "forward")],
    "np.fft.rfft": [lambda r: (r(3, 4), 6, 0, None)],
    "np.fft.irfft": [lambda r: (r(3, 4), None, -1, None), lambda r: (r(4), 5, 0, "ortho")],
    "np.fft.hfft": [lambda r: (r(3, 4), None, -1, None), lambda r: (r(4), 5, 0, "ortho")],
    "np.fft.ihfft": [lambda r: (r(3, 4), 6, 0, "forward")],
    "np.fft.fftn": [lambda r: (r(2, 3, 4), None, None, None)],
    "np.fft.ifftn": [lambda r: (r(2, 3, 4), (3, 2), (0, 2), "ortho")],
    "np.fft.rfftn": [lambda r: (r(2, 3, 4), None, (1, 2), None)],
    "np.fft.irfftn": [lambda r: (r(3, 4), (3, 5), (0, 1), "forward")],
    "np.fft.fft2": [lambda r: (r(2, 3, 4), None, (-2, -1), None)],
    "np.fft.ifft2": [lambda r: (r(3, 4), (4, 4), (-2, -1), None)],
    "np.fft.rfft2": [lambda r: (r(3, 4), None, (-2, -1), "ortho")],
    "np.fft.irfft2": [lambda r: (r(3, 4), None, (-2, -1), None)],
    "np.fft.fftshift": [lambda r: (r(3, 5), None), lambda r: (r(3, 5), (1,))],
    "np.fft.ifftshift": [lambda r: (r(3, 5), (0,))],
    "np.real": [lambda r: (r(3, 4),)],
    "np.imag": [lambda r: (r(3, 4),)],
    "np.conj": [lambda r: (r(3, 4),)],
    "rt.fft_grad": [lambda r: (r(3, 5), r(3, 4), 5, -1, None)],
    "rt.ifft_grad": [lambda r: (r(4), r(4), None, -1, "ortho")],
    "rt.rfft_grad": [lambda r: (r(3), r(4), None, -1, None)],
    "rt.irfft_grad": [lambda r: (r(6), r(4), None, -1, None)],
    "rt.hfft_grad": [lambda r: (r(6), r(4), None, -1, None), lambda r: (r(5), r(4), 5, -1, "ortho")],
    "rt.ihfft_grad": [lambda r: (r(3), r(4), None, -1, None), lambda r: (r(3, 4), r(5, 4), 5, 0,
                                                                       "forward")],
    "rt.fftn_grad": [lambda r: (r(2, 3, 4), r(2, 3, 4), None, None, None)],
    "rt.ifftn_grad": [lambda r: (r(3, 2), r(3, 4), (3, 2), (0, 1), None)],
    "rt.rfftn_grad": [lambda r: (r(3, 3), r(3, 4), None, None, None)],
    "rt.irfftn_grad": [lambda r: (r(3, 4), r(3, 3), None, None, "forward")],
    "rt.fftshift_grad": [lambda r: (r(3, 5), r(3, 5), None)],
    "rt.ifftshift_grad": [lambda r: (r(3, 5), r(3, 5), (1,))],
    "rt.real_grad": [lambda r: (r(3, 4), r(3, 4))],
    "rt.imag_grad": [lambda r: (r(3, 4), r(3, 4))],
    "rt.conj_grad": [lambda r: (r(3, 4), r(3, 4))],
    "rt.take_at": [lambda r: (r(5), np.array([0, 2, 2, 4])),
                   lambda r: (r(3, 4), (np.array([0, 2, 0]), np.array([1, 1, 3])))],
    "rt.put_grad": [lambda r: (r(3, 4), np.array([0, 5, 5, 11]), r(3), "raise")],
    "rt.flat": [lambda r: (r(3, 4),), lambda r: (r(),)],
    "rt.batch_reshape": [lambda r: (r(2, 6), (3, 2)), lambda r: (r(3, 4), (4,))],
    "rt.index_take": [lambda r: (r(3, 4), np.array([[0, 2], [2, 1]])),
                      lambda r: (r(3, 4), np.array([[True, False, True, True],
                                                    [False, False, True, False],
                                                    [True, True, False, False]]))],
    "rt.index_take_grad": [lambda r: (r(2, 2, 4), r(3, 4), np.array([[0, 2], [2, 1]]))],
    "rt.index_written": [lambda r: (r(3, 4), np.array([[0, 2], [2, 1]])),
                         lambda r: (r(3), np.array([[0, 2], [2, 1]]))],
    "rt.jac_shape": [lambda r: (r(6, 4), r(2, 3), r(4)), lambda r: (r(1, 1), r(), r())],
}

ALL_RULES = {**RULES, **{r.name: r for r in INTERNAL.values()}}
LINEAR = sorted(name for name, r in ALL_RULES.items() if r.linear)


def _maker(seed):
    rng = np.random.default_rng(seed)
    return lambda *shape: rng.normal(size=shape) if shape else float(rng.normal())


def _combine(a, x, b, y):
    if isinstance(x, tuple):
        return tuple(_combine(a, xi, b, yi) for xi, yi in zip(x, y))
    return a * x + b * y


def _nonlinear_operands(rule, sample):
    """The differentiated operands in which the rule's primal is not linear,
    on random arguments from ``sample``: each operand with the others held
    fixed (forward mode sums the rule applied to one tangent at a time), or
    all together for an element write (forward mode writes the value's
    tangent into the array's)."""
    f = _primal(rule)
    args, xs, ys = sample(_maker(1)), sample(_maker(2)), sample(_maker(3))
    groups = [rule.diff_operands] if rule.mutates else [(p,) for p in rule.diff_operands]
    a, b = 1.7, -0.6
    bad = []
    for group in groups:
        slots = [rule.params.index(p) for p in group]

        def at(values):
            return np.asarray(f(*[values[i] if i in slots else v for i, v in enumerate(args)]))
        mixed = {i: _combine(a, xs[i], b, ys[i]) for i in slots}
        if not np.allclose(at(mixed), a * at(xs) + b * at(ys), rtol=1e-10, atol=1e-12):
            bad += group
    return bad


def test_every_linear_rule_has_samples():
    missing = sorted(set(LINEAR) - set(SAMPLES))
    assert not missing, f"rules declared linear with no SAMPLES entry: {missing}"


@pytest.mark.parametrize("name", LINEAR)
def test_rules_declared_linear_are_linear(name):
    rule = ALL_RULES[name]
    for sample in SAMPLES[name]:
        assert not _nonlinear_operands(rule, sample), \
            f"{name} is declared linear but is not linear in {_nonlinear_operands(rule, sample)}"


@pytest.mark.parametrize("name", ["np.prod", "np.max", "np.min"])
def test_nonlinear_reductions_declare_their_jvp(name):
    rule = RULES[name]
    assert not rule.linear and set(rule.jvp) == {"a"}
    # The linearity check tells them apart: had one been declared linear, it would fail.
    for sample in SAMPLES[name]:
        assert _nonlinear_operands(rule, sample) == ["a"]


def test_rule_by_vjp_must_be_linear_or_give_a_jvp():
    with pytest.raises(ValueError, match="linear or give a JVP"):
        Rule(name="np.cube_sum", params=("a",), operands=("a",), vjp={"a": "3 * g * a * a"})


def prod_rows(x):
    return np.prod(x, axis=1)


def max_keep(x):
    return np.max(x, axis=0, keepdims=True) * np.prod(x)


def min_all(x):
    return np.min(x) + x.prod(axis=0).sum() + x.max()


ZERO_COLUMN = np.array([1.0, 0.0, 2.0, 1.0])


def prod_with_zero(x):
    return np.prod(x * ZERO_COLUMN, axis=1)


@pytest.mark.parametrize("fn", [prod_rows, max_keep, min_all, prod_with_zero],
                         ids=lambda f: f.__name__)
def test_reduction_jvps(fn):
    x = np.random.default_rng(5).normal(size=(3, 4))
    check_jvp(fn, (x,))
    v = np.random.default_rng(6).normal(size=(3, 4))
    out, t = ad.jvp(fn, (x,), (v,))
    h = 1e-6
    np.testing.assert_allclose(t, (fn(x + h * v) - fn(x - h * v)) / (2 * h), rtol=1e-6,
                               atol=1e-8)
    np.testing.assert_allclose(ad.jacfwd(fn)(x), ad.jacrev(fn)(x), rtol=1e-10, atol=1e-12)


def test_reduction_jvp_compiled():
    x = np.random.default_rng(7).normal(size=(3, 4))
    check_jvp(min_all, (x,), target="cpu")


# -- helpers that write into an array they are passed -------------------------------------

def smooth(u):
    u[1:-1] = 0.5 * (u[:-2] + u[2:])


def energy(u0):
    u = u0.copy()
    _ = smooth(u)  # <- assigned call
    return np.sum(u ** 2)


def energy_bare(u0):
    u = u0.copy()
    smooth(u)  # <- bare call
    return np.sum(u ** 2)


def smooth_alias(u):
    v = u
    v[0] += 1.0
    return v


def calls_smooth(u):
    w = smooth_alias(u)  # <- nested call
    return w


def energy_nested(u0):
    u = u0 * 1.0
    w = calls_smooth(u)
    return np.sum(u * w)


def bump(u):
    u += 1.0


def energy_augmented(u0):
    u = u0 * 1.0
    _ = bump(u)  # <- augmented
    return np.sum(u * u)


def smooth_if(u, c):
    if c > 0.0:
        u[1:-1] = 0.5 * (u[:-2] + u[2:])
    return u


def energy_branch(u0):
    u = u0.copy()
    v = smooth_if(u, 1.0)  # <- branch helper
    return np.sum(u * v)


def double_first(u):
    for i in range(2):
        u[i] = 2.0 * u[i]
    return u


def energy_loop(u0):
    u = u0 * 1.0
    for k in range(2):
        v = double_first(u)  # <- loop helper
    return np.sum(v * u)


def copy_into(u, v):
    _ = np.copyto(u, v)  # <- copyto
    return u


def energy_copyto(u0):
    u = u0 * 1.0
    return np.sum(copy_into(u, u0 * u0))


def multiply_at(u0):
    u = u0 * 1.0
    _ = np.multiply.at(u, np.array([0, 0]), u0[1])  # <- multiply.at
    return np.sum(u)


def smooth_copy(u):
    u = u.copy()
    u[1:-1] = 0.5 * (u[:-2] + u[2:])
    return u


def energy_fixed(u0):
    u = smooth_copy(u0)
    return np.sum(u ** 2)


def scalar_step(t, dt):
    t = t + dt
    t += dt
    return t


def energy_writes_own_argument(u0):
    u0[0] = 2.0 * u0[1]
    return np.sum(u0 ** 2) + scalar_step(u0[2], 0.5)


WRITERS = [(energy, "smooth", "<- assigned call"),
           (energy_bare, "smooth", "<- bare call"),
           (energy_nested, "smooth_alias", "<- nested call"),
           (energy_augmented, "bump", "<- augmented"),
           (energy_branch, "smooth_if", "<- branch helper"),
           (energy_loop, "double_first", "<- loop helper")]

U0 = np.linspace(0, 1, 6) ** 2


@pytest.mark.parametrize("fn,helper,marker", WRITERS, ids=[w[0].__name__ for w in WRITERS])
def test_helper_writing_into_its_argument_is_seen_and_differentiated(fn, helper, marker):
    """The write lands in the caller's array, as in NumPy, in every transform
    (it used to be refused); the caller's own array is never changed."""
    u = U0.copy()
    check_grad(fn, (u,))
    check_jvp(fn, (u,))
    np.testing.assert_allclose(ad.jit(fn)(u), fn(U0.copy()), rtol=1e-12)
    assert np.array_equal(u, U0)


@pytest.mark.parametrize("fn,marker", [(energy_copyto, "<- copyto"),
                                       (multiply_at, "<- multiply.at")],
                         ids=["copyto", "ufunc_at"])
def test_numpy_writes_in_place_are_refused(fn, marker):
    with pytest.raises(ad.UnsupportedSyntaxError, match="in place") as info:
        ad.grad(fn)(U0.copy())
    assert info.value.lineno == _line_of(marker)


def test_returning_the_updated_array_is_differentiated():
    expected = [0.08, 0.2, 0.48, 0.88, 0.4, 2.68]
    np.testing.assert_allclose(ad.grad(energy_fixed)(U0), expected, atol=1e-12)
    check_grad(energy_fixed, (U0,))
    u = U0.copy()
    check_grad(energy_writes_own_argument, (u,))
    np.testing.assert_array_equal(u, U0)
