"""Higher-order derivatives: Hessians, Hessian-vector products, grad of grad,
Jacobians of Jacobians, jacfwd vs jacrev, and ad.jvp inside differentiated code.

Every value is checked against an independent reference: a closed form, or
central finite differences (of the plain function, or of a lower-order
derivative that the other test files check against finite differences).
Hessians of loop-heavy functions (Rosenbrock in loop form, branches per
element, a while loop with a data-dependent trip count) must be symmetric.
Output structures follow JAX: ``jacfwd(f, argnums)`` has the output's
structure, each leaf holding the input's structure (a tuple over the
argnums when ``argnums`` is a tuple), leaves shaped ``out.shape +
in.shape``.  Under ``ad.jit`` a smaller set runs: Numba builds cost seconds
each, so each jitted function is built once at module scope.

Known compiler bugs are marked ``xfail(strict=True)``: when a fix lands the
mark fails loudly and should be removed.
"""
import math
import pathlib
import zlib

import numpy as np
import pytest
from conftest import is_float_tree, load_program

import s2s_ad as ad
from s2s_ad.ir import pytree
from s2s_ad.testing import check_grad, check_jvp

cf = load_program(pathlib.Path(__file__).resolve().parent / "programs" / "control_flow.py")

# -- programs (s2s_ad reads their source from this file) ------------------------------------


def rosenbrock(x):
    """The chained Rosenbrock function, as a loop."""
    s = 0.0
    for i in range(x.shape[0] - 1):
        s = s + 100.0 * (x[i + 1] - x[i] * x[i]) ** 2 + (1.0 - x[i]) ** 2
    return s


def rosenbrock_hessian(x):
    """Closed form of rosenbrock's Hessian."""
    n = x.shape[0]
    H = np.zeros((n, n))
    for i in range(n - 1):
        H[i, i] += 1200.0 * x[i] ** 2 - 400.0 * x[i + 1] + 2.0
        H[i + 1, i + 1] += 200.0
        H[i, i + 1] = H[i + 1, i] = -400.0 * x[i]
    return H


def extended_rosenbrock(x):
    """The extended Rosenbrock function (independent pairs), as a loop."""
    s = 0.0
    for i in range(0, x.shape[0], 2):
        t = x[i + 1] - x[i] * x[i]
        s = s + 100.0 * t * t + (1.0 - x[i]) ** 2
    return s


def extended_rosenbrock_hessian(x):
    H = np.zeros((x.shape[0], x.shape[0]))
    for i in range(0, x.shape[0], 2):
        H[i, i] = 1200.0 * x[i] ** 2 - 400.0 * x[i + 1] + 2.0
        H[i, i + 1] = H[i + 1, i] = -400.0 * x[i]
        H[i + 1, i + 1] = 200.0
    return H


def branches(x):
    """A branch per element: x**3 where positive, sin(x) * x elsewhere."""
    s = 0.0
    for i in range(x.shape[0]):
        if x[i] > 0.0:
            s = s + x[i] ** 3
        else:
            s = s + np.sin(x[i]) * x[i]
    return s


def branches_hessian(x):
    return np.diag(np.where(x > 0.0, 6.0 * x, 2.0 * np.cos(x) - x * np.sin(x)))


def while_vector(x):
    """A while loop with a data-dependent trip count, carrying a vector."""
    v = x * 1.0
    k = 0
    while np.sum(v * v) < 12.0 and k < 40:
        v = np.sin(v) * 1.3 + x * v
        k += 1
    return np.sum(v * x) + np.sum(v * v * v) * 0.1


def coupled(x, y):
    """Two arguments, an array and a scalar, coupled through a loop."""
    s = 0.0
    for i in range(x.shape[0]):
        s = s + np.sin(x[i] * y) * x[i] + y * y * x[i] ** 3
    return s


def poly_exp(x):
    """x**3 exp(-x) + sin(2x): derivatives in closed form below."""
    return x ** 3 * np.exp(-x) + np.sin(2.0 * x)


def poly_exp_d1(x):
    return (3 * x ** 2 - x ** 3) * math.exp(-x) + 2 * math.cos(2 * x)


def poly_exp_d2(x):
    return (x ** 3 - 6 * x ** 2 + 6 * x) * math.exp(-x) - 4 * math.sin(2 * x)


def poly_exp_d3(x):
    return (-x ** 3 + 9 * x ** 2 - 18 * x + 6) * math.exp(-x) - 8 * math.cos(2 * x)


def looped_scalar(a):
    """A scalar through a loop with a branch: a Newton-like recurrence."""
    x = a
    for k in range(4):
        if x > 1.0:
            x = x - (x * x - a) / (2.0 * x)
        else:
            x = x * x + a * 0.5
    return x * x * a


def two_scalars(a, b):
    """a**2 b + sin(a b): mixed partials in closed form."""
    return a * a * b + math.sin(a * b)


def vector_valued(x):
    """R^3 -> R^4, through a loop and a branch."""
    out = np.zeros(4)
    s = 0.0
    for i in range(x.shape[0]):
        s = s + x[i] * x[i]
        out[i] = np.sin(x[i]) * s
    out[3] = np.exp(x[0] * x[1]) if x[2] > 0.0 else x[0] * x[2]
    return out


def matrix_in(M, v):
    """A matrix argument and a matrix output: tanh(M @ v) outer v."""
    h = np.tanh(M @ v)
    return np.outer(h, v * v)


def tall(x, y):
    """R^2 x R -> R^5."""
    return np.array([x[0] * y, np.sin(x[1]), x[0] * x[1] * y, np.exp(y) * x[0], x[1] ** 2])


def wide(x, params):
    """R^5 x (R^5, R^2) -> R^2, with a tuple argument."""
    w, b = params
    s = 0.0
    for i in range(x.shape[0]):
        s = s + w[i] * x[i]
    return np.array([s + b[0], np.tanh(np.sum(x * x) * b[1])])


def tuple_out(x, y):
    """A tuple output: (array, (scalar, scalar))."""
    return x * y, (np.sum(x * x), y * y)


def tree_in(p):
    """A tuple argument (array, array) and a scalar output."""
    a, b = p
    return np.sum(a * a * b) + np.sum(np.sin(a)) * b[0]


def uses_jvp(x):
    """ad.jvp inside a function that is itself differentiated."""
    out, t = ad.jvp(poly_exp, (x,), (np.ones_like(x),))
    return np.sum(t * out)


def mixed(x, a):
    return np.sum(np.sin(x * a)) * a + np.sum(x ** 2) * a ** 3


def uses_jvp_two(x, y):
    """ad.jvp of a two-argument function, with a Python-float tangent."""
    out, t = ad.jvp(mixed, (x, y), (x, 1.0))
    return t * out + y


def jvp_in_loop(x):
    """ad.jvp called in a loop, along a tangent that depends on the input."""
    s = 0.0
    for i in range(3):
        o, t = ad.jvp(poly_exp, (x * (i + 1.0),), (x,))
        s = s + np.sum(t * t) + np.sum(o)
    return s


def product(x):
    return np.prod(x) + np.sum(x * x)


def fabs_square(x):
    return math.fabs(x) * x


# -- references ---------------------------------------------------------------------------

X4 = np.array([0.3, -0.7, 1.2, 0.5])
V4 = np.array([1.0, 0.5, -0.3, 2.0])
X3 = np.array([0.4, -0.6, 0.9])
EPS = 1e-5


def _rng(*key):
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def fd_jacobian(f, args, i, eps=EPS):
    """Central-difference Jacobian of ``f`` w.r.t. float leaf-tree ``args[i]``:
    the output's structure, each leaf holding ``args[i]``'s structure, leaves
    shaped ``out.shape + leaf.shape`` (JAX's layout for one argnum)."""
    in_leaves, in_tree = pytree.flatten(args[i])
    out_leaves, out_tree = pytree.flatten(f(*args))
    blocks = [[None] * len(in_leaves) for _ in out_leaves]
    for j, leaf in enumerate(in_leaves):
        base = np.asarray(leaf, np.float64)
        cols = [[] for _ in out_leaves]
        for k in range(base.size):
            e = np.zeros(base.size)
            e[k] = eps
            e = e.reshape(base.shape)

            def at(step):
                leaves = list(in_leaves)
                leaves[j] = base + step if isinstance(leaf, np.ndarray) else float(base + step)
                new = list(args)
                new[i] = pytree.unflatten(leaves, in_tree)
                return pytree.flatten(f(*new))[0]
            plus, minus = at(e), at(-e)
            for o in range(len(out_leaves)):
                cols[o].append((np.asarray(plus[o], np.float64)
                                - np.asarray(minus[o], np.float64)) / (2 * eps))
        for o, ol in enumerate(out_leaves):
            stacked = np.stack(cols[o], axis=-1) if cols[o] else np.zeros(np.shape(ol) + (0,))
            blocks[o][j] = stacked.reshape(np.shape(ol) + base.shape)
    return pytree.unflatten([pytree.unflatten(b, in_tree) for b in blocks], out_tree)


def fd_second(f, x, h=1e-4):
    """Second derivatives of ``f(x)`` (array output) from values of ``f`` alone:
    shape ``out.shape + x.shape + x.shape``."""
    x = np.asarray(x, np.float64)
    n = x.size
    out_shape = np.shape(f(x))
    H = np.zeros(out_shape + (n, n))

    def at(dj, dk, j, k):
        y = x.ravel().copy()
        y[j] += dj
        y[k] += dk
        return np.asarray(f(y.reshape(x.shape)), np.float64)
    for j in range(n):
        for k in range(n):
            H[..., j, k] = (at(h, h, j, k) - at(h, -h, j, k) - at(-h, h, j, k)
                            + at(-h, -h, j, k)) / (4 * h * h)
    return H.reshape(out_shape + x.shape + x.shape)


def assert_tree_close(got, want, rtol=1e-6, atol=1e-7, structure=True):
    gl, gt = pytree.flatten(got)
    wl, wt = pytree.flatten(want)
    if structure:
        assert pytree.structure(gt) == pytree.structure(wt), (_shape_tree(got), _shape_tree(want))
    assert len(gl) == len(wl), (_shape_tree(got), _shape_tree(want))
    for a, b in zip(gl, wl):
        assert np.shape(a) == np.shape(b), (_shape_tree(got), _shape_tree(want))
        b = np.asarray(b, np.float64)
        scale = float(np.max(np.abs(b), initial=0.0))
        np.testing.assert_allclose(np.asarray(a, np.float64), b, rtol=rtol,
                                   atol=atol + rtol * scale)


def _shape_tree(x):
    if isinstance(x, (tuple, list)):
        return type(x)(_shape_tree(v) for v in x)
    return np.shape(x)


# Built once: each Numba compilation costs seconds.
JIT = {}


def jitted(key, make):
    if key not in JIT:
        JIT[key] = make()
    return JIT[key]


# -- Hessians of loop-heavy scalar functions ----------------------------------------------

SCALAR_FUNCTIONS = {
    "rosenbrock": (rosenbrock, lambda: np.array([0.3, -0.7, 1.2, 0.5, 0.9]), rosenbrock_hessian),
    "extended_rosenbrock": (extended_rosenbrock, lambda: np.array([0.3, -0.7, 1.2, 0.5, -0.9, 1.1]),
                            extended_rosenbrock_hessian),
    "branches": (branches, lambda: np.array([0.3, -0.7, 1.2, -0.2]), branches_hessian),
    "while_vector": (while_vector, lambda: np.array([0.5, -0.4, 0.8]), None),
}


@pytest.mark.parametrize("name", SCALAR_FUNCTIONS)
def test_hessian_symmetric_and_matches_finite_differences_of_gradient(name):
    f, make, closed = SCALAR_FUNCTIONS[name]
    x = make()
    H = ad.hessian(f)(x)
    assert isinstance(H, np.ndarray) and H.shape == (x.size, x.size)
    np.testing.assert_allclose(H, H.T, rtol=1e-12, atol=1e-12)
    assert_tree_close(H, fd_jacobian(ad.grad(f), (x,), 0), rtol=1e-6, atol=1e-6)
    if closed is not None:
        np.testing.assert_allclose(H, closed(x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", SCALAR_FUNCTIONS)
def test_hessian_matches_second_differences_of_the_function(name):
    """Independent of s2s_ad altogether: second differences of f's values."""
    f, make, _ = SCALAR_FUNCTIONS[name]
    x = make()
    np.testing.assert_allclose(ad.hessian(f)(x), fd_second(f, x), rtol=1e-5, atol=1e-5)


def _while_trips(x):
    """How many times while_vector's loop runs (the same loop in plain Python)."""
    v = x * 1.0
    k = 0
    while np.sum(v * v) < 12.0 and k < 40:
        v = np.sin(v) * 1.3 + x * v
        k += 1
    return k


def test_while_loop_trip_count_is_stable_under_the_steps():
    """The finite differences above see one trip count: the loop runs several
    times, and the same number of times at every point they evaluate."""
    x = SCALAR_FUNCTIONS["while_vector"][1]()
    trips = _while_trips(x)
    assert 3 <= trips < 40
    for j in range(3):
        for k in range(3):
            for sj in (-1e-4, 1e-4):
                for sk in (-1e-4, 1e-4):
                    y = x.copy()
                    y[j] += sj
                    y[k] += sk
                    assert _while_trips(y) == trips


@pytest.mark.parametrize("name", SCALAR_FUNCTIONS)
def test_hvp_equals_hessian_times_vector(name):
    f, make, _ = SCALAR_FUNCTIONS[name]
    x = make()
    v = _rng("hvp", name).standard_normal(x.shape)
    H = ad.hessian(f)(x)
    np.testing.assert_allclose(ad.hvp(f, (x,), (v,)), H @ v, rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("name", SCALAR_FUNCTIONS)
def test_jvp_of_grad_is_grad_and_hvp(name):
    f, make, _ = SCALAR_FUNCTIONS[name]
    x = make()
    v = _rng("jvp-grad", name).standard_normal(x.shape)
    g, hv = ad.jvp(ad.grad(f), (x,), (v,))
    np.testing.assert_allclose(g, ad.grad(f)(x), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(hv, ad.hessian(f)(x) @ v, rtol=1e-11, atol=1e-11)
    fd = (ad.grad(f)(x + EPS * v) - ad.grad(f)(x - EPS * v)) / (2 * EPS)
    np.testing.assert_allclose(hv, fd, rtol=1e-6, atol=1e-6)


def test_hessian_with_two_arguments():
    """argnums=(0, 1): ((H_xx, H_xy), (H_yx, H_yy)) as JAX nests them."""
    x, y = X3, 0.7
    H = ad.hessian(coupled, (0, 1))(x, y)
    assert _shape_tree(H) == (((3, 3), (3,)), ((3,), ()))
    g = ad.grad(coupled, (0, 1))
    want = (fd_jacobian(lambda *a: g(*a), (x, y), 0), fd_jacobian(lambda *a: g(*a), (x, y), 1))
    # fd_jacobian of a tuple-valued gradient is (per gradient leaf) -> per argument; transpose.
    want = ((want[0][0], want[1][0]), (want[0][1], want[1][1]))
    assert_tree_close(H, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(H[0][1], H[1][0], rtol=1e-12)
    np.testing.assert_allclose(H[0][0], H[0][0].T, rtol=1e-12)


def test_hvp_with_two_primals():
    """hvp's gradient is w.r.t. the first argument; tangents has one entry per primal."""
    x, y = X3, 0.7
    v, dy = np.array([1.0, -0.5, 0.25]), 0.3
    got = ad.hvp(coupled, (x, y), (v, dy))
    H = ad.hessian(coupled, (0, 1))(x, y)
    np.testing.assert_allclose(got, H[0][0] @ v + H[0][1] * dy, rtol=1e-11)


def test_hessian_of_tuple_argument():
    """A pytree argument: ((H_aa, H_ab), (H_ba, H_bb))."""
    p = (X3, np.array([1.5, -0.5, 0.8]))
    H = ad.hessian(tree_in)(p)
    assert _shape_tree(H) == (((3, 3), (3, 3)), ((3, 3), (3, 3)))
    a, b = p
    Haa = np.diag(2 * b - np.sin(a) * b[0])
    Hab = np.diag(2 * a)
    Hab[:, 0] += np.cos(a)
    want = ((Haa, Hab), (Hab.T, np.zeros((3, 3))))
    assert_tree_close(H, want, rtol=1e-12, atol=1e-12)


def test_hessian_float32():
    x = np.array([0.3, -0.7, 1.2, 0.5], np.float32)
    H = ad.hessian(rosenbrock)(x)
    assert H.dtype == np.float32
    np.testing.assert_allclose(H, rosenbrock_hessian(x.astype(np.float64)), rtol=1e-5, atol=1e-3)
    hv = ad.hvp(rosenbrock, (x,), (np.ones(4, np.float32),))
    assert hv.dtype == np.float32


# -- grad of grad, third derivatives --------------------------------------------------------


@pytest.mark.parametrize("x", [0.7, -1.3, 2.5])
def test_grad_of_grad_closed_form(x):
    np.testing.assert_allclose(ad.grad(poly_exp)(x), poly_exp_d1(x), rtol=1e-13)
    np.testing.assert_allclose(ad.grad(ad.grad(poly_exp))(x), poly_exp_d2(x), rtol=1e-12)
    np.testing.assert_allclose(ad.grad(ad.grad(ad.grad(poly_exp)))(x), poly_exp_d3(x),
                               rtol=1e-12)


def test_fourth_derivative_by_finite_differences():
    g3 = ad.grad(ad.grad(ad.grad(poly_exp)))
    g4 = ad.grad(g3)(0.7)
    np.testing.assert_allclose(g4, (poly_exp_d3(0.7 + EPS) - poly_exp_d3(0.7 - EPS)) / (2 * EPS),
                               rtol=1e-7)


@pytest.mark.parametrize("a", [0.4, 1.7])
def test_grad_of_grad_through_loop_and_branch(a):
    g = ad.grad(looped_scalar)
    gg = ad.grad(g)
    ggg = ad.grad(gg)
    np.testing.assert_allclose(g(a), (looped_scalar(a + EPS) - looped_scalar(a - EPS)) / (2 * EPS),
                               rtol=1e-7)
    np.testing.assert_allclose(gg(a), (g(a + EPS) - g(a - EPS)) / (2 * EPS), rtol=1e-7,
                               atol=1e-7 * abs(g(a)))
    np.testing.assert_allclose(ggg(a), (gg(a + EPS) - gg(a - EPS)) / (2 * EPS), rtol=1e-6,
                               atol=1e-6 * abs(gg(a)))


def test_grad_of_grad_mixed_partials():
    a, b = 0.3, 0.8
    ab = a * b
    d_aa = 2 * b - b * b * math.sin(ab)
    d_ab = 2 * a + math.cos(ab) - ab * math.sin(ab)
    d_bb = -a * a * math.sin(ab)
    np.testing.assert_allclose(ad.grad(ad.grad(two_scalars))(a, b), d_aa, rtol=1e-13)
    np.testing.assert_allclose(ad.grad(ad.grad(two_scalars), 1)(a, b), d_ab, rtol=1e-13)
    np.testing.assert_allclose(ad.grad(ad.grad(two_scalars, 1), 0)(a, b), d_ab, rtol=1e-13)
    np.testing.assert_allclose(ad.grad(ad.grad(two_scalars, 1), 1)(a, b), d_bb, rtol=1e-13)
    both = ad.grad(ad.grad(two_scalars), (0, 1))(a, b)
    assert isinstance(both, tuple) and len(both) == 2
    np.testing.assert_allclose(both, (d_aa, d_ab), rtol=1e-13)
    np.testing.assert_allclose(ad.grad(ad.grad(ad.grad(two_scalars)))(a, b), -b ** 3 * math.cos(ab),
                               rtol=1e-12)
    value, second = ad.value_and_grad(ad.grad(two_scalars, 1), 1)(a, b)
    np.testing.assert_allclose((value, second), (a * a + a * math.cos(ab), d_bb), rtol=1e-13)


def test_grad_of_grad_array_outer():
    """Inner gradient w.r.t. the scalar, outer w.r.t. the array."""
    x, a = X3, 0.7
    got = ad.grad(ad.grad(mixed, 1), 0)(x, a)
    inner = ad.grad(mixed, 1)
    assert_tree_close(got, fd_jacobian(inner, (x, a), 0), rtol=1e-6, atol=1e-7)


def test_grad_of_grad_float32_scalar():
    g = ad.grad(ad.grad(poly_exp))(np.float32(0.7))
    assert isinstance(g, np.float32)
    np.testing.assert_allclose(g, poly_exp_d2(0.7), rtol=1e-5)


def test_grad_of_grad_wrt_array_is_type_error():
    with pytest.raises(TypeError, match="jacfwd or ad.hessian"):
        ad.grad(ad.grad(rosenbrock))(X4)


# -- Jacobians of Jacobians -------------------------------------------------------------------

V3 = np.array([0.5, -1.0, 0.3])
# name: (function s2s_ad transforms, example arguments); argument 0 is differentiated.
VECTOR_FUNCTIONS = {
    "vector_valued": (vector_valued, lambda: (np.array([0.4, -0.6, 0.9]),)),
    "vector_valued_other_branch": (vector_valued, lambda: (np.array([0.4, -0.6, -0.9]),)),
    "matrix_in": (matrix_in, lambda: (np.array([[0.3, -0.2, 0.5], [1.0, 0.4, -0.6]]), V3)),
}
SECOND_ORDER = {
    "jacfwd_jacrev": lambda f: ad.jacfwd(ad.jacrev(f)),
    "jacrev_jacfwd": lambda f: ad.jacrev(ad.jacfwd(f)),
    "jacfwd_jacfwd": lambda f: ad.jacfwd(ad.jacfwd(f)),
    "jacrev_jacrev": lambda f: ad.jacrev(ad.jacrev(f)),
    "hessian": ad.hessian,
}


@pytest.mark.parametrize("how", SECOND_ORDER)
@pytest.mark.parametrize("name", VECTOR_FUNCTIONS)
def test_second_derivatives_of_vector_function(name, how):
    """Shape out.shape + in.shape + in.shape, equal to second differences of f."""
    f, make = VECTOR_FUNCTIONS[name]
    args = make()
    got = SECOND_ORDER[how](f)(*args)
    want = fd_second(lambda x: f(x, *args[1:]), args[0])
    assert isinstance(got, np.ndarray) and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_second_order_symmetric_in_the_input_axes():
    (x,) = VECTOR_FUNCTIONS["vector_valued"][1]()
    H = ad.hessian(vector_valued)(x)
    np.testing.assert_allclose(H, np.swapaxes(H, 1, 2), rtol=1e-12, atol=1e-12)


def test_third_order_jacobian_of_hessian():
    x = np.array([0.3, -0.7, 1.2])
    T = ad.jacfwd(ad.hessian(rosenbrock))(x)
    want = fd_jacobian(lambda y: rosenbrock_hessian(y), (x,), 0)
    np.testing.assert_allclose(T, want, rtol=1e-6, atol=1e-6)


def test_jvp_of_hessian():
    x = np.array([0.3, -0.7, 1.2])
    v = np.array([1.0, 0.5, -0.2])
    H, dH = ad.jvp(ad.hessian(rosenbrock), (x,), (v,))
    want = (rosenbrock_hessian(x + EPS * v) - rosenbrock_hessian(x - EPS * v)) / (2 * EPS)
    np.testing.assert_allclose(dH, want, rtol=1e-6, atol=1e-6)


def test_third_order_forward_jacobians():
    x = X3
    T = ad.jacfwd(ad.jacfwd(ad.jacfwd(vector_valued)))(x)
    want = fd_jacobian(lambda y: fd_second(vector_valued, y), (x,), 0)
    np.testing.assert_allclose(T, want, rtol=1e-3, atol=1e-3)


def test_third_order_by_jacobians_of_gradient():
    x = np.array([0.3, -0.7, 1.2])
    T = ad.jacfwd(ad.jacfwd(ad.grad(rosenbrock)))(x)
    want = fd_jacobian(lambda y: rosenbrock_hessian(y), (x,), 0)
    np.testing.assert_allclose(T, want, rtol=1e-6, atol=1e-6)


# -- jacfwd vs jacrev: shapes and structures (JAX's), values (finite differences) -------------

JAC_CASES = {
    # name: (function, args, argnums)
    "tall-0": (tall, (np.array([0.3, -0.7]), 0.9), 0),
    "tall-1": (tall, (np.array([0.3, -0.7]), 0.9), 1),
    "tall-(0,)": (tall, (np.array([0.3, -0.7]), 0.9), (0,)),
    "tall-(0,1)": (tall, (np.array([0.3, -0.7]), 0.9), (0, 1)),
    "tall-(1,0)": (tall, (np.array([0.3, -0.7]), 0.9), (1, 0)),
    "tall-negative": (tall, (np.array([0.3, -0.7]), 0.9), -1),
    "wide-0": (wide, (np.linspace(-0.5, 0.7, 5), (np.linspace(1.0, -1.0, 5), np.array([0.1, 0.2]))),
               0),
    "wide-tree": (wide, (np.linspace(-0.5, 0.7, 5),
                         (np.linspace(1.0, -1.0, 5), np.array([0.1, 0.2]))), 1),
    "wide-(0,1)": (wide, (np.linspace(-0.5, 0.7, 5),
                          (np.linspace(1.0, -1.0, 5), np.array([0.1, 0.2]))), (0, 1)),
    "matrix_in-0": (matrix_in, (np.array([[0.3, -0.2, 0.5], [1.0, 0.4, -0.6]]),
                                np.array([0.5, -1.0, 0.3])), 0),
    "tuple_out-0": (tuple_out, (X3, 0.5), 0),
    "tuple_out-1": (tuple_out, (X3, 0.5), 1),
    "tuple_out-(0,1)": (tuple_out, (X3, 0.5), (0, 1)),
    "tree_in-0": (tree_in, ((X3, np.array([1.5, -0.5, 0.8])),), 0),
    "two_scalars-(0,1)": (two_scalars, (0.3, 0.8), (0, 1)),
    "two_scalars-(1,0)": (two_scalars, (0.3, 0.8), (1, 0)),
}

# (case, mode or None for both) -> reason
JAC_BUGS = {}


def _jac_params(modes):
    out = []
    for name in JAC_CASES:
        for mode in modes:
            reason = JAC_BUGS.get((name, mode)) or JAC_BUGS.get((name, None))
            if mode is None:        # jacfwd vs jacrev: only a bug in one mode shows
                reason = next((r for (n, m), r in JAC_BUGS.items() if n == name and m), None)
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            out.append(pytest.param(name, mode, marks=marks,
                                    id=name if mode is None else f"{name}-{mode}"))
    return out


def jax_layout_reference(f, args, argnums):
    """The finite-difference Jacobian in JAX's layout: the output structure
    outermost; per output leaf a tuple over argnums when argnums is a tuple."""
    n = len(args)
    if isinstance(argnums, int):
        return fd_jacobian(f, args, argnums % n)
    per_arg = [fd_jacobian(f, args, i % n) for i in argnums]
    out_leaves, out_tree = pytree.flatten(f(*args))
    per_leaf = [tuple(_block(j, out_tree)[o] for j in per_arg) for o in range(len(out_leaves))]
    return pytree.unflatten(per_leaf, out_tree)


def _block(jac, out_tree):
    """A Jacobian laid out in ``out_tree``, as a list with one block per output leaf
    (a block has the input's structure, so it is not flattened further)."""
    if out_tree is None:
        return [jac]
    return [b for j, t in zip(jac, out_tree[1]) for b in _block(j, t)]


@pytest.mark.parametrize("name, mode", _jac_params(["jacfwd", "jacrev"]))
def test_jacobian_structure_and_values(name, mode):
    f, args, argnums = JAC_CASES[name]
    got = getattr(ad, mode)(f, argnums)(*args)
    want = jax_layout_reference(f, args, argnums)
    assert_tree_close(got, want, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name, mode", _jac_params([None]))
def test_jacfwd_equals_jacrev(name, mode):
    f, args, argnums = JAC_CASES[name]
    assert_tree_close(ad.jacfwd(f, argnums)(*args), ad.jacrev(f, argnums)(*args), rtol=1e-12,
                      atol=1e-13)


def test_hessian_unsorted_argnums():
    """hessian(f, (1, 0)): ((H_bb, H_ba), (H_ab, H_aa))."""
    a, b = 0.3, 0.8
    ab = a * b
    d_aa = 2 * b - b * b * math.sin(ab)
    d_ab = 2 * a + math.cos(ab) - ab * math.sin(ab)
    d_bb = -a * a * math.sin(ab)
    H = ad.hessian(two_scalars, (1, 0))(a, b)
    np.testing.assert_allclose(np.array(H, dtype=float), [[d_bb, d_ab], [d_ab, d_aa]], rtol=1e-12)


# (function, argnums, mode, backend) -> reason
F32_BUGS = {}


def vector_f32(x):
    """R^3 -> R^3 that stays in float32."""
    return np.array([x[0] * x[1], np.sin(x[1]) * x[2], x[0] ** 3])


F32_FUNCTIONS = {"rosenbrock": (rosenbrock, lambda: (np.array([0.3, -0.7, 1.2], np.float32),)),
                 "tall": (tall, lambda: (np.array([0.3, -0.7], np.float32), np.float32(0.9))),
                 "vector_f32": (vector_f32, lambda: (np.array([0.3, -0.7, 1.2], np.float32),))}


def _f32_params():
    out = []
    cases = [(n, a, m, "python") for n, a in (("rosenbrock", 0), ("tall", 0), ("tall", 1),
                                               ("vector_f32", 0))
             for m in ("jacfwd", "jacrev", "hessian")]
    cases += [("tall", 1, "jacfwd", "numba"), ("tall", 1, "hessian", "numba"),
              ("vector_f32", 0, "hessian", "numba"), ("rosenbrock", 0, "jacfwd", "numba")]
    for key in cases:
        reason = F32_BUGS.get(key)
        out.append(pytest.param(*key, id="-".join(map(str, key)),
                                marks=[pytest.mark.xfail(strict=True, reason=reason)]
                                if reason else []))
    return out


@pytest.mark.parametrize("name, argnum, mode, backend", _f32_params())
def test_jacobian_float32(name, argnum, mode, backend):
    """float32 in, float32 out: the Jacobian (and Hessian) is float32 too."""
    f, make = F32_FUNCTIONS[name]
    args = make()
    assert np.result_type(f(*args)) == np.float32
    if backend == "numba":
        f = jitted(f.__name__, lambda: ad.jit(f))
    J = getattr(ad, mode)(f, argnum)(*args)
    assert np.result_type(J) == np.float32
    want = fd_jacobian(F32_FUNCTIONS[name][0], tuple(
        np.asarray(a, np.float64) if np.ndim(a) else float(a) for a in args), argnum)
    if mode != "hessian":
        np.testing.assert_allclose(np.asarray(J, np.float64), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["jacfwd", "jacrev"])
def test_jacobian_of_empty_input(mode):
    J = getattr(ad, mode)(scaled)(np.zeros(0))
    assert J.shape == (0, 0)


def scaled(x):
    return x * 2.0


def test_jacobian_argument_errors():
    with pytest.raises(TypeError, match="argument 1"):
        ad.jacfwd(cf.int_bound, 1)(np.array([0.3, -0.6]), 3)
    with pytest.raises(ValueError, match="out of range"):
        ad.jacrev(tall, 2)(np.array([0.3, -0.7]), 0.9)


# -- ad.jvp inside a differentiated function ----------------------------------------------------

JVP_INSIDE = {
    "uses_jvp": (uses_jvp, lambda: (np.array([0.3, -0.7, 1.2]),), 0),
    "uses_jvp_two": (uses_jvp_two, lambda: (np.array([0.3, -0.7, 1.2]), 0.7), (0, 1)),
    "jvp_in_loop": (jvp_in_loop, lambda: (np.array([0.3, -0.7, 1.2]),), 0),
}


@pytest.mark.parametrize("name", JVP_INSIDE)
def test_grad_of_function_calling_jvp(name):
    f, make, argnums = JVP_INSIDE[name]
    check_grad(f, make(), argnums)


def test_function_calling_jvp_value():
    x = np.array([0.3, -0.7, 1.2])
    want = sum(poly_exp_d1(v) * poly_exp(v) for v in x)
    np.testing.assert_allclose(uses_jvp(x), want, rtol=1e-13)
    np.testing.assert_allclose(ad.jit(uses_jvp)(x), want, rtol=1e-13)


@pytest.mark.parametrize("name", JVP_INSIDE)
def test_jvp_of_function_calling_jvp(name):
    f, make, _ = JVP_INSIDE[name]
    check_jvp(f, make())


def test_hessian_of_function_calling_jvp():
    x = np.array([0.3, -0.7, 1.2])
    H = ad.hessian(uses_jvp)(x)
    np.testing.assert_allclose(H, fd_jacobian(ad.grad(uses_jvp), (x,), 0), rtol=1e-6, atol=1e-6)


# -- second order over the control-flow corpus ----------------------------------------------------

CORPUS = {fn.__name__: (fn, make) for fn, make, _ in cf.CORPUS}


def _random_like(x, rng):
    if isinstance(x, (tuple, list)):
        return type(x)(_random_like(v, rng) for v in x)
    if isinstance(x, np.ndarray):
        return rng.standard_normal(x.shape)
    return float(rng.standard_normal())


def _shift(x, t, s):
    if isinstance(x, (tuple, list)):
        return type(x)(_shift(a, b, s) for a, b in zip(x, t))
    return x + s * t


@pytest.mark.parametrize("name", CORPUS)
def test_corpus_hessian_vector_product(name):
    """d/ds grad(f)(x + s t) at s=0, by forward-over-reverse, against central
    differences of the gradient; ad.hvp agrees with it for the first argument."""
    fn, make = CORPUS[name]
    args = make()
    nums = tuple(i for i, a in enumerate(args) if is_float_tree(a))
    rng = _rng("corpus-hvp", name)
    tangents = tuple(_random_like(a, rng) if i in nums else 0 for i, a in enumerate(args))
    g = ad.grad(fn, nums)
    grads, hv = ad.jvp(g, args, tangents)
    assert_tree_close(grads, g(*args), rtol=1e-13, atol=1e-14)

    def moved(s):
        return g(*[_shift(a, t, s) if i in nums else a
                   for i, (a, t) in enumerate(zip(args, tangents))])
    plus, minus = moved(EPS), moved(-EPS)
    fd = pytree.unflatten([(np.asarray(p) - np.asarray(m)) / (2 * EPS) for p, m in
                           zip(pytree.flatten(plus)[0], pytree.flatten(minus)[0])],
                          pytree.flatten(plus)[1])
    assert_tree_close(hv, fd, rtol=1e-6, atol=1e-7, structure=False)
    if nums[0] == 0:
        first = ad.hvp(fn, args, tangents)
        assert_tree_close(first, pytree.flatten(hv)[0][0] if not isinstance(args[0], tuple)
                          else hv[0], rtol=1e-12, atol=1e-13, structure=False)


# -- math.fabs and np.prod at second order ------------------------------------------------------------------------------------


@pytest.mark.xfail(strict=True, reason="second derivatives of np.prod raise "
                   "NonDifferentiableError: rt.prod_grad has no derivative")
def test_hessian_of_prod():
    x = np.array([0.5, -1.2, 0.8])
    H = ad.hessian(product)(x)
    want = np.array([[2.0, x[2], x[1]], [x[2], 2.0, x[0]], [x[1], x[0], 2.0]])
    np.testing.assert_allclose(H, want, rtol=1e-12)


@pytest.mark.parametrize("x", [-0.5, 0.7])
def test_grad_of_grad_of_fabs(x):
    """d2/dx2 |x| x = 2 sign(x)."""
    assert ad.grad(ad.grad(fabs_square))(x) == pytest.approx(2.0 * np.sign(x), rel=1e-14)


# -- under ad.jit ---------------------------------------------------------------------------------


def test_jit_hessian_of_loops():
    x = SCALAR_FUNCTIONS["rosenbrock"][1]()
    H = jitted("hessian-rosenbrock", lambda: ad.jit(ad.hessian(rosenbrock)))(x)
    np.testing.assert_allclose(H, rosenbrock_hessian(x), rtol=1e-12, atol=1e-12)
    xb = SCALAR_FUNCTIONS["branches"][1]()
    Hb = ad.hessian(jitted("branches", lambda: ad.jit(branches)))(xb)
    np.testing.assert_allclose(Hb, branches_hessian(xb), rtol=1e-12, atol=1e-12)


def test_jit_hvp_and_jvp_of_grad():
    x = SCALAR_FUNCTIONS["while_vector"][1]()
    v = np.array([0.3, 1.0, -0.5])
    H = ad.hessian(while_vector)(x)
    f = jitted("while_vector", lambda: ad.jit(while_vector))
    np.testing.assert_allclose(ad.hvp(f, (x,), (v,)), H @ v, rtol=1e-11, atol=1e-11)
    g, hv = ad.jvp(jitted("grad-while_vector", lambda: ad.jit(ad.grad(while_vector))), (x,), (v,))
    np.testing.assert_allclose(g, ad.grad(while_vector)(x), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(hv, H @ v, rtol=1e-11, atol=1e-11)


def test_jit_third_derivative():
    ggg = jitted("ggg-poly_exp", lambda: ad.jit(ad.grad(ad.grad(ad.grad(poly_exp)))))
    np.testing.assert_allclose(ggg(0.7), poly_exp_d3(0.7), rtol=1e-12)
    gg = ad.grad(ad.grad(jitted("looped_scalar", lambda: ad.jit(looped_scalar))))
    g = ad.grad(looped_scalar)
    np.testing.assert_allclose(gg(1.7), (g(1.7 + EPS) - g(1.7 - EPS)) / (2 * EPS), rtol=1e-7)


@pytest.mark.parametrize("how", ["jacfwd_jacrev", "jacrev_jacfwd"])
def test_jit_second_derivatives_of_vector_function(how):
    (x,) = VECTOR_FUNCTIONS["vector_valued"][1]()
    got = jitted(how, lambda: ad.jit(SECOND_ORDER[how](vector_valued)))(x)
    np.testing.assert_allclose(got, fd_second(vector_valued, x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["tall-(0,1)", "wide-tree"])
@pytest.mark.parametrize("mode", ["jacfwd", "jacrev"])
def test_jit_jacobians(name, mode):
    f, args, argnums = JAC_CASES[name]
    got = getattr(ad, mode)(jitted(f.__name__, lambda: ad.jit(f)), argnums)(*args)
    assert_tree_close(got, jax_layout_reference(f, args, argnums), rtol=1e-6, atol=1e-8)


def test_jit_grad_of_function_calling_jvp():
    f, make, argnums = JVP_INSIDE["uses_jvp"]
    check_grad(f, make(), argnums, target="cpu")
