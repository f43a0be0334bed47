"""The public transforms of API.md: grad, value_and_grad, vjp, jit, source.

Programs live in ``programs/api_programs.py``, each with its derivative in
closed form in its docstring; every derivative here is checked against that
formula (computed with plain NumPy) or central finite differences, never
against s2s_ad itself.  Numba builds cost seconds each, so the jitted
functions are built once at module scope and shared.
"""
import ast
import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from numba.core.registry import CPUDispatcher

import s2s_ad as ad

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs"))
import api_programs as A
from passes import fd_grad

X = np.array([0.3, -0.7, 1.1])
Y = np.array([0.5, 0.2, -0.4])
RTOL = 1e-12


def close(got, want, rtol=RTOL):
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * 1e-2)


def compiled(t):
    """The Numba build of the entry a transformed callable last ran.

    (Internal: loop-free code may then run as plain NumPy where the first
    call measured that faster; the Numba build exists, and ran, either way.)
    """
    fn = getattr(t._last.compiled, t._last.entry)
    assert isinstance(fn, CPUDispatcher), fn
    assert fn.nopython_signatures and len(fn.nopython_signatures) == len(fn.signatures)
    return fn


def sech2(z):
    return 1.0 - np.tanh(z) ** 2


# Built once: each Numba compilation costs seconds.
JIT_GRAD_CUBIC = ad.jit(ad.grad(A.cubic))
GRAD_JIT_CUBIC = ad.grad(ad.jit(A.cubic))
GRAD_JITTED_BARE = ad.grad(A.jitted_bare)
JIT_GRAD_TANH_DOT = ad.jit(ad.grad(A.tanh_dot, argnums=(0, 1)))
JIT_GRAD_SCALAR = ad.jit(ad.grad(A.scalar_fn))
JIT_VALUE_AND_GRAD_TREE = ad.jit(ad.value_and_grad(A.tree_loss, argnums=(0, 1)))


# -- pytrees ---------------------------------------------------------------------------


def tree_args():
    return (np.array([1.0, 2.0, -0.5]), (np.array([0.5, 0.5, 0.1]), 2.0)), X


def test_tuple_argument_gradient_mirrors_structure():
    p, x = tree_args()
    w, (b, c) = p
    g = ad.grad(A.tree_loss)(p, x)
    assert isinstance(g, tuple) and len(g) == 2 and isinstance(g[1], tuple) and len(g[1]) == 2
    gw, (gb, gc) = g
    close(gw, c * sech2(x * w) * x)
    close(gb, np.full(3, c))
    assert type(gc) is float
    close(gc, np.sum(np.tanh(x * w) + b))


def test_pytree_and_array_arguments_together():
    p, x = tree_args()
    w, (_, c) = p
    value, (gp, gx) = ad.value_and_grad(A.tree_loss, argnums=(0, 1))(p, x)
    close(value, A.tree_loss(p, x))
    close(gp[0], c * sech2(x * w) * x)
    close(gx, c * sech2(x * w) * w)
    close(gx, fd_grad(lambda xx: A.tree_loss(p, xx), (x,)), rtol=1e-7)


def test_list_argument_gives_list_gradient():
    a, b = X, Y
    ps = [a, b, [0.7, (1.3,)]]
    g = ad.grad(A.list_loss)(ps)
    assert type(g) is list and type(g[2]) is list and type(g[2][1]) is tuple
    close(g[0], b)
    close(g[1], a)
    close(g[2][0], 2 * 0.7 * 1.3)
    close(g[2][1][0], 0.7 ** 2)


def test_same_function_new_structure_is_rebuilt():
    ps = [X, Y, (0.7, [1.3])]                 # tuple and list swapped
    g = ad.grad(A.list_loss)(ps)
    assert type(g) is list and type(g[2]) is tuple and type(g[2][1]) is list
    close(g[2][1][0], 0.49)


def test_vjp_with_pytree_primal():
    p, x = tree_args()
    w, (_, c) = p
    out, back = ad.vjp(A.tree_loss, p, x)
    close(out, A.tree_loss(p, x))
    ct_p, ct_x = back(2.0)
    assert isinstance(ct_p, tuple) and isinstance(ct_p[1], tuple)
    close(ct_p[0], 2.0 * c * sech2(x * w) * x)
    close(ct_x, 2.0 * c * sech2(x * w) * w)


def test_pytrees_under_jit():
    p, x = tree_args()
    w, (b, c) = p
    value, (gp, gx) = JIT_VALUE_AND_GRAD_TREE(p, x)
    compiled(JIT_VALUE_AND_GRAD_TREE)
    assert isinstance(gp, tuple) and isinstance(gp[1], tuple) and type(gp[1][1]) is float
    close(value, A.tree_loss(p, x))
    close(gp[0], c * sech2(x * w) * x)
    close(gp[1][0], np.full(3, c))
    close(gp[1][1], np.sum(np.tanh(x * w) + b))
    close(gx, c * sech2(x * w) * w)


# -- argnums --------------------------------------------------------------------------------


def test_argnums_int_tuple_negative():
    a, b, c = X, Y, 1.5
    want = (b + c * c, a, 2 * c * np.sum(a))
    close(ad.grad(A.three)(a, b, c), want[0])
    close(ad.grad(A.three, argnums=1)(a, b, c), want[1])
    g = ad.grad(A.three, argnums=(0, 2))(a, b, c)
    assert isinstance(g, tuple) and len(g) == 2
    close(g[0], want[0])
    close(g[1], want[2])
    single = ad.grad(A.three, argnums=(1,))(a, b, c)
    assert isinstance(single, tuple) and len(single) == 1
    close(single[0], want[1])
    close(ad.grad(A.three, argnums=-1)(a, b, c), want[2])
    g = ad.grad(A.three, argnums=(-3, -2))(a, b, c)
    close(g[0], want[0])
    close(g[1], want[1])
    close(ad.grad(A.three, argnums=-3)(a, b, c), fd_grad(A.three, (a, b, c), 0), rtol=1e-7)


def test_default_argument_may_be_left_out():
    close(ad.grad(A.with_default)(X), 4.0 * X)


def test_default_argument_passed_explicitly():
    close(ad.grad(A.with_default)(X, 3.0), 6.0 * X)
    close(ad.grad(A.with_default, argnums=1)(X, 3.0), np.sum(X * X))


# -- has_aux -----------------------------------------------------------------------------------


def test_grad_has_aux():
    g, aux = ad.grad(A.with_aux, has_aux=True)(X)
    close(g, 2 * X)
    assert isinstance(aux, tuple) and len(aux) == 2
    close(aux[0], 2 * X)
    close(aux[1], np.sum(X ** 2) + 1.0)


def test_value_and_grad_has_aux():
    (value, aux), g = ad.value_and_grad(A.with_aux, has_aux=True)(X)
    close(value, np.sum(X ** 2))
    close(aux[0], 2 * X)
    close(aux[1], np.sum(X ** 2) + 1.0)
    close(g, 2 * X)


# -- vjp -----------------------------------------------------------------------------------------


def test_vjp_tuple_outputs():
    out, back = ad.vjp(A.pair_out, X, Y)
    close(out[0], X * Y)
    close(out[1][0], np.sin(X))
    close(out[1][1], Y ** 2)
    u, v, z = np.array([1.0, -2.0, 0.5]), np.array([0.3, 0.3, 2.0]), np.array([1.0, 0.0, -1.0])
    ct = back((u, (v, z)))
    assert isinstance(ct, tuple) and len(ct) == 2
    assert ct[0].shape == X.shape and ct[1].shape == Y.shape
    close(ct[0], u * Y + v * np.cos(X))
    close(ct[1], u * X + 2 * Y * z)
    again = back((u, (v, z)))                 # vjp_fn can be called again
    close(again[0], ct[0])


def test_vjp_has_aux():
    out, back, aux = ad.vjp(A.exp_aux, X, has_aux=True)
    close(out, np.exp(X))
    close(aux, np.sum(X))
    u = np.array([1.0, -2.0, 0.5])
    (ct,) = back(u)
    close(ct, u * np.exp(X))


def test_vjp_cotangent_structure_is_checked():
    _, back = ad.vjp(A.pair_out, X, Y)
    with pytest.raises(ValueError, match="structure"):
        back((np.ones(3), np.ones(3)))
    with pytest.raises(ValueError, match="shape"):
        back((np.ones(2), (np.ones(3), np.ones(3))))


# -- jit ---------------------------------------------------------------------------------------------



def test_jit_bare_decorator():
    assert isinstance(A.jitted_bare, ad.Transformed)
    close(A.jitted_bare(X), np.sum(np.sin(X) * X))
    close(compiled(A.jitted_bare)(X), np.sum(np.sin(X) * X))
    assert "Target: cpu" in ad.source(A.jitted_bare)
    assert "def jitted_bare(x):" in ad.source(A.jitted_bare)


def test_jit_with_options():
    close(A.jitted_options(X), np.sum(np.exp(-X * X)))
    fn = compiled(A.jitted_options)
    assert fn.targetoptions["fastmath"] is False and fn.targetoptions["nopython"] is True
    assert "cache=False" in ad.source(A.jitted_options)


def test_jit_of_grad_and_grad_of_jit_are_compiled_and_equal():
    a, b = JIT_GRAD_CUBIC(X), GRAD_JIT_CUBIC(X)
    close(a, 3 * X ** 2 - 2)
    np.testing.assert_array_equal(a, b)
    # the Numba builds themselves, whichever the first call chose to run
    _, (a_numba,) = compiled(JIT_GRAD_CUBIC)(X)
    _, (b_numba,) = compiled(GRAD_JIT_CUBIC)(X)
    close(a_numba, 3 * X ** 2 - 2)
    np.testing.assert_array_equal(a_numba, b_numba)


def test_grad_of_decorated_function_is_compiled():
    close(GRAD_JITTED_BARE(X), np.cos(X) * X + np.sin(X))
    _, (g,) = compiled(GRAD_JITTED_BARE)(X)
    close(g, np.cos(X) * X + np.sin(X))


# -- dtypes ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["python", "numba"])
def test_float32_inputs_give_float32_gradients(backend):
    x, w = X.astype(np.float32), Y.astype(np.float32)
    g = ad.grad(A.tanh_dot, argnums=(0, 1)) if backend == "python" else JIT_GRAD_TANH_DOT
    results = [g(x, w)]
    if backend == "numba":
        results.append(compiled(g)(x, w)[1])     # the Numba build itself
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    for gx, gw in results:
        assert gx.dtype == np.float32 and gw.dtype == np.float32
        close(gx, sech2(x64 * w64) * w64, rtol=1e-5)
        close(gw, sech2(x64 * w64) * x64, rtol=1e-5)


@pytest.mark.parametrize("backend", ["python", "numba"])
def test_python_float_argument_gives_float_gradient(backend):
    g = ad.grad(A.scalar_fn) if backend == "python" else JIT_GRAD_SCALAR
    t = 0.7
    got = g(t)
    assert type(got) is float
    close(got, math.cos(t) * t + math.sin(t) + 2 * t)
    close(got, fd_grad(A.scalar_fn, (t,)), rtol=1e-8)
    if backend == "numba":
        (raw,) = compiled(g)(t)[1]
        close(raw, got)


def test_python_float_among_array_arguments():
    got = ad.grad(A.three, argnums=2)(X, Y, 1.5)
    assert type(got) is float
    close(got, 3.0 * np.sum(X))


# -- source --------------------------------------------------------------------------------------------


def test_source_is_the_code_that_runs():
    g = ad.grad(A.cubic)
    g(X)
    source = ad.source(g)
    assert "def grad_cubic(x):" in source
    assert Path(g._last.compiled.__file__).read_text() == source
    namespace = {}
    exec(compile(source, "<source>", "exec"), namespace)  # noqa: S102
    _, (grad,) = namespace["grad_cubic"](X)
    close(grad, 3 * X ** 2 - 2)


def test_source_with_example_arguments_before_any_call():
    source = ad.source(ad.grad(A.tree_loss), *tree_args())
    compile(source, "<source>", "exec")
    assert "def grad_tree_loss(p_0, p_1_0, p_1_1, x):" in source


def test_source_of_jit_and_vjp():
    JIT_GRAD_CUBIC(X)
    source = ad.source(JIT_GRAD_CUBIC)
    assert "def grad_cubic(x):" in source and "Target: cpu" in source
    # the file Numba compiled holds the same code (ad.source may add a comment on top)
    text = Path(JIT_GRAD_CUBIC._last.compiled.__file__).read_text()
    assert text in source and ast.dump(ast.parse(text)) == ast.dump(ast.parse(source))
    _, back, _ = ad.vjp(A.exp_aux, X, has_aux=True)
    source = ad.source(back)
    assert "def vjp_exp_aux(" in source
    compile(source, "<source>", "exec")


def test_source_of_plain_function_is_its_primal():
    source = ad.source(A.cubic)
    assert "def cubic(x):" in source
    namespace = {}
    exec(compile(source, "<source>", "exec"), namespace)  # noqa: S102
    close(namespace["cubic"](X), A.cubic(X))
