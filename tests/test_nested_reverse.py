"""Inner reverse transforms run as reverse code (docs/nested_transforms.md).

Every program of tests/programs/nested_reverse.py is differentiated with
its inner transforms as reverse code (the default) and as forward-mode
columns (``S2S_AD_NESTED=columns``, the reference lowering), and both are
checked against central finite differences; compiled code is checked
against both, and the oracle compares the two lowerings with every other
witness it has."""
import pathlib

import numpy as np
import pytest
from conftest import load_program

import s2s_ad as ad
from s2s_ad import oracle

nr = load_program(pathlib.Path(__file__).resolve().parent / "programs" / "nested_reverse.py")

RNG = np.random.default_rng(1)
W = RNG.normal(size=3) * 0.5
X = RNG.normal(size=(5, 3)) * 0.5
NAMES = sorted(nr.PROGRAMS)
#: compiled in the default suite; the others in the slow tier
COMPILED = ("maml", "with_aux", "dict_maml", "level3", "hvp_inside", "inplace_maml")


def gradient_fd(f, x, eps=1e-6):
    """Central differences of the scalar function ``f`` at array ``x``."""
    g = np.zeros_like(x)
    for k in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[k] += eps
        down[k] -= eps
        g[k] = (f(up) - f(down)) / (2 * eps)
    return g


def _args(f):
    return (W,) if f.__code__.co_argcount == 1 else (W, X)


def _case(name):
    f, argnums = nr.PROGRAMS[name]
    args = _args(f)
    return f, tuple(a for a in argnums if a < len(args)), args


def _fd(f, args, argnums):
    return [gradient_fd(lambda v, i=i: f(*args[:i], v, *args[i + 1:]), args[i])
            for i in argnums]


def _close(got, want, rtol, atol):
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", NAMES)
def test_reverse_code_and_columns_agree_with_differences(name, monkeypatch):
    f, argnums, args = _case(name)
    got = ad.grad(f, argnums)(*args)
    _close(got, _fd(f, args, argnums), 1e-5, 1e-7)
    monkeypatch.setenv("S2S_AD_NESTED", "columns")
    _close(ad.grad(f, argnums)(*args), got, 1e-10, 1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_forward_over_inner_reverse(name):
    """jacfwd of a function with an inner gradient: the tangent of a gradient
    is the gradient of the JVP."""
    f, argnums, args = _case(name)
    _close(ad.jacfwd(f, argnums)(*args), _fd(f, args, argnums), 1e-5, 1e-7)


def _compiled(name):
    f, argnums, args = _case(name)
    want = ad.grad(f, argnums)(*args)
    _close(ad.jit(ad.grad(f, argnums))(*args), want, 1e-9, 1e-11)
    np.testing.assert_allclose(ad.jit(f)(*args), f(*args), rtol=1e-12)


@pytest.mark.parametrize("name", COMPILED)
def test_compiled(name):
    _compiled(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in NAMES if n not in COMPILED])
def test_compiled_slow(name):
    _compiled(name)


@pytest.mark.parametrize("jit", [False, True])
def test_per_sample_maml(jit):
    """vmap(grad(maml)): one outer gradient per task."""
    Ws = RNG.normal(size=(4, 3)) * 0.5
    Xs = RNG.normal(size=(4, 5, 3)) * 0.5
    want = np.stack([gradient_fd(lambda v: nr.maml(v, x), w) for w, x in zip(Ws, Xs)])
    f = ad.vmap(ad.grad(nr.maml))
    got = (ad.jit(f) if jit else f)(Ws, Xs)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_update_step_is_one_reverse_pass():
    """JAX's training step under jit: the inner gradient is the reverse sweep
    of the loss, no forward-mode column per parameter."""
    text = ad.source(nr.update, W, X)
    assert "def grad_loss(w, x):" in text
    assert "rt.unit_like" not in text and "rt.check_gradient(" in text
    np.testing.assert_allclose(ad.jit(nr.update)(W, X), W - 0.1 * gradient_fd(
        lambda v: nr.loss(v, X), W), rtol=1e-6)


def test_hvp_inside_jit_is_reverse_over_forward():
    text = ad.source(nr.hvp_inside, W)
    assert "rt.unit_like" not in text
    assert "def dgrad_level1(x, dx_1):" in text     # the reverse sweep of level1's JVP


@pytest.mark.parametrize("fn, message", [
    (nr.not_scalar, "return a scalar"), (nr.integer_argument, "integer")])
@pytest.mark.parametrize("how", ["python", "jit"])
def test_inner_gradient_errors(fn, message, how):
    run = ad.jit(fn) if how == "jit" else ad.grad(fn)
    with pytest.raises(TypeError, match=message):
        run(np.ones(3))


@pytest.mark.parametrize("name", ["maml", "level3", "inplace_maml", "while_maml"])
def test_oracle_compares_the_two_lowerings(name):
    f, argnums, args = _case(name)
    alone = oracle.check(f, args, "grad", argnums, only={"grad[forward columns]"})
    assert alone.checks == 2 and not alone.disagreements    # it ran, and agreed with FD
    report = oracle.check(f, args, "grad", argnums, families=("python",))
    assert not report.disagreements, "\n".join(map(str, report.disagreements))
