"""The "first hour" features as user code mixes them, for the differential oracle
(tests/test_oracle.py): comprehensions and generator expressions, local lambdas
and nested defs, helpers that write into the arrays they are passed, transforms
called inside differentiated functions, keyword arguments of user helpers, and
the library functions of s2s_ad/library/ and the linalg rules -- mixed with
loops and branches; loops over lists of layers and lists grown by ``.append``;
``astype``; iteration over a dict.

Each entry of ``CORPUS`` is (function, make_args, argnums); every argument is
a float array or a float.  The programs with transforms inside differentiate
their first argument only (the oracle's finite differences and vector-mode
witnesses cost a run of the inner transform per input element).  Samples keep every comparison, ``clip``, ``sort``
and ``max`` well away from a tie (also at the batch examples the oracle makes
by perturbing the first differentiated argument by 0.4%).
"""
import numpy as np

import s2s_ad as ad

C = np.array([0.7, -0.4, 1.3, 0.2])
W2 = np.array([[0.5, -0.2, 0.1], [0.3, 0.8, -0.6]])


# -- comprehensions and generator expressions -------------------------------------------


def comp_list_sum(x):
    """A list comprehension summed, plus a plain read of the argument."""
    return sum([np.sin(v) * v for v in x]) + x[0] * x[-1]


def comp_zip_enumerate(x, w):
    """Generator expressions over enumerate and zip, with a reversed slice."""
    s = sum(w[i] * np.tanh(v) for i, v in enumerate(x))
    return s + sum(a * b * b for a, b in zip(x, w[::-1]))


def comp_nested_pairs(x):
    """A nested generator expression over the upper triangle of index pairs."""
    n = x.shape[0]
    return sum(x[i] * np.cos(x[j]) for i in range(n) for j in range(i + 1, n))


def comp_stack_rows(M, v):
    """Rows of a matrix through a list comprehension, stacked and reduced."""
    Y = np.stack([np.tanh(row * v) for row in M])
    return np.sum(Y ** 2) + np.sum(Y[0] * v)


def comp_vector_out(x):
    """A vector output built by a comprehension over an index range."""
    return np.array([np.sin(x[k]) * x[k + 1] for k in range(x.shape[0] - 1)])


def comp_in_loop_branch(x):
    """A comprehension inside a loop, its value deciding a branch."""
    acc = 0.0
    y = x * 1.0
    for t in range(3):
        s = sum(np.sin(v + t) for v in y)
        if s > 0.0:
            acc = acc + s * y[0]
        else:
            acc = acc - s * y[1]
        y = np.tanh(y * 0.9 + 0.1)
    return acc


def comp_filtered_max(x):
    """A filtered comprehension and max/min of generator expressions."""
    pos = np.array([v * v for v in x if v > 0.1])
    return np.sum(np.sqrt(pos + 1.0)) + max(np.sin(v) for v in x) - min([v * 0.5 for v in x])


def comp_matrix_rows_norm(M, x):
    """A library function (np.linalg.norm) inside a generator expression."""
    return sum(np.linalg.norm(row - x) for row in M) + np.sum(M[0] * x)


# -- local lambdas and nested defs ------------------------------------------------------


def lambda_local_map(x):
    """A local lambda applied to an array and to one element."""
    bump = lambda z: np.exp(-z * z)  # noqa: E731
    return np.sum(bump(x) * x) + bump(x[0]) * x[1]


def lambda_in_comprehension(x, w):
    """A lambda closing over an argument, called in a generator expression."""
    g = lambda v: v * v * w[0] + np.sin(v)  # noqa: E731
    return sum(g(v) for v in x) + np.sum(w * x)


def nested_def_closure(x, a):
    """A nested def closing over a scalar argument, called in a loop."""
    def step(z):
        return np.tanh(a * z) + 0.1 * x[0]
    y = x * 1.0
    for _ in range(3):
        y = step(y)
    return np.sum(y * y) + a * y[-1]


def _apply_twice(fn, v):
    return fn(fn(v))


def def_passed_to_helper(x):
    """A nested def handed to a module-level helper that calls it twice."""
    c = x[1]

    def cubic(z):
        return z - 0.1 * z ** 3 * c
    return np.sum(_apply_twice(cubic, x)) + np.sum(_apply_twice(lambda z: np.sin(z) * c, x))


def _smooth(v, alpha=0.5, power=2.0):
    return alpha * np.sum(np.abs(v) ** power) + (1.0 - alpha) * np.sum(v)


def keyword_calls(x, a):
    """A user helper called with keyword arguments, in either order, and defaults."""
    return _smooth(x, power=3.0, alpha=a) + _smooth(alpha=0.25, v=x * a) + _smooth(x)


# -- helpers that write into the arrays they are passed ---------------------------------


def _relax(u, w):
    u[1:-1] += 0.3 * w * (u[:-2] - 2.0 * u[1:-1] + u[2:])


def inplace_relax_loop(u0, w):
    """An in-place stencil helper called as a statement in a time loop."""
    u = u0.copy()
    for _ in range(3):
        _relax(u, w)
    return np.sum(u ** 2) + np.sum(np.sin(u) * w[0])


def _fill_scaled(buf, v, weight=1.0):
    for i in range(v.shape[0]):
        buf[i] = np.tanh(v[i]) * weight + buf[i]
    return np.sum(buf)


def inplace_fill_keyword(x, a):
    """A writing helper that also returns a value, called with a keyword argument."""
    buf = np.ones(x.shape[0])
    s = _fill_scaled(buf, x, weight=a)
    t = _fill_scaled(buf, x * x)
    return s * t + np.sum(buf * x)


def _scale_view(v, c):
    v *= c
    v[0] = v[0] + c


def inplace_view(u0):
    """A helper writing through a slice view of the caller's array, in a branch."""
    u = u0 * 1.0
    if u0[0] > 0.0:
        _scale_view(u[1:], u0[0])
    else:
        _scale_view(u[:-1], u0[1])
    return np.sum(u * u0) + u[1] * u[2]


def inplace_then_library(x):
    """A writing helper followed by library functions on the written array."""
    b = np.zeros(x.shape[0])
    _fill_scaled(b, x, weight=0.5)
    return np.var(b) + np.sum(np.cumsum(b) * x)


# -- transforms inside the differentiated function --------------------------------------


def _inner(x):
    return np.sum(np.sin(x) * x)


def grad_penalty(x):
    """The squared norm of an inner gradient (a gradient penalty)."""
    return np.sum(ad.grad(_inner)(x) ** 2) + np.sum(x)


def _loss(w, X):
    return np.mean(np.tanh(X @ w) ** 2)


def maml_lambda(w, X):
    """One inner gradient step on a lambda closing over the data."""
    g = ad.grad(lambda v: _loss(v, X * 0.9))(w)
    return _loss(w - 0.3 * g, X)


def jvp_inside(x, v):
    """A directional derivative through ad.jvp inside."""
    y, t = ad.jvp(_inner, (x,), (v,))
    return y * 0.1 + np.sum(t * x)


def vmap_inside(w, X):
    """ad.vmap of a lambda over the rows of a matrix, inside."""
    out = ad.vmap(lambda row: np.tanh(row @ w))(X)
    return np.sum(out ** 2) + np.sum(w * w)


def _sep(w):
    return np.sum(w ** 4 + np.sin(w))


def hessian_inside(w):
    """A damped Newton step written with ad.hessian and ad.grad inside."""
    H = ad.hessian(_sep)(w)
    g = ad.grad(_sep)(w)
    return _sep(w - 0.2 * g / (np.sum(np.abs(H), axis=1) + 1.0))


def _with_aux(x):
    return np.sum(x ** 3), np.sum(np.cos(x))


def grad_has_aux_inside(x):
    """ad.grad with has_aux inside, the aux used downstream."""
    g, aux = ad.grad(_with_aux, has_aux=True)(x)
    return np.sum(g * x) * aux


def jacobian_trace_inside(x):
    """The trace of an inner Jacobian, through a comprehension over the diagonal."""
    J = ad.jacfwd(lambda z: np.sin(z) * z[0])(x)
    return sum(J[i, i] for i in range(x.shape[0])) + np.sum(x)


def _two_outputs(x):
    return np.sin(x), x * 2.0


def vjp_two_outputs_inside(x):
    """ad.vjp of a function with two outputs, its vjp_fn called with a tuple."""
    out, vjp_fn = ad.vjp(_two_outputs, x)
    (ct,) = vjp_fn((x, x * 0.5))
    return np.sum(ct ** 2) + np.sum(out[0])


# -- library functions --------------------------------------------------------------------


def stats_var_std(x, w):
    """np.var and np.std (keyword ddof), on values computed from both arguments."""
    return np.var(x) + np.std(x * w, ddof=1) + np.mean(w)


def cumulative(x):
    """np.cumsum and np.cumprod in a loop that rescales."""
    y = x * 1.0
    for _ in range(2):
        y = np.cumsum(np.sin(y)) * 0.5
    return np.sum(y ** 2) + np.sum(np.cumprod(1.0 + 0.1 * x))


def solve_norm(A, b):
    """np.linalg.solve on a shifted matrix, then norms."""
    x = np.linalg.solve(A + 3.0 * np.eye(A.shape[0]), b)
    return np.linalg.norm(x) + np.linalg.norm(A) * 0.1


def einsum_vector(M, x):
    """A vector output from np.einsum, plus an einsum inner product."""
    return np.einsum("ij,j->i", M, np.tanh(x)) + np.einsum("i,i->", x, x)


def logaddexp_sum(x, w):
    """np.logaddexp elementwise and against a scalar."""
    return np.sum(np.logaddexp(x, 0.5 * w)) + np.logaddexp(x[0], w[1])


def sort_flip_take(x):
    """np.sort, np.flip and np.take with constant indices."""
    s = np.sort(x)
    return np.sum(s * C[: x.shape[0]]) + np.sum(np.take(x, [2, 0]) * np.flip(x)[:2])


def trapezoid(y, t):
    """The trapezoid rule written with np.diff (np.trapz-like)."""
    return np.sum(0.5 * (y[1:] + y[:-1]) * np.diff(t)) + np.sum(np.diff(y, n=2) ** 2)


def determinants(A):
    """np.linalg.det, slogdet and inv of matrices made from the argument."""
    S = A @ A.T + np.eye(A.shape[0])
    sign, logdet = np.linalg.slogdet(S)
    return np.linalg.det(A) + sign * logdet + np.sum(np.linalg.inv(A + 2.0 * np.eye(A.shape[0])))


def outer_kron(x, w):
    """np.outer and np.kron."""
    P = np.outer(x, w)
    K = np.kron(P[:2, :2], np.array([[1.0, 0.5], [-0.5, 1.0]]))
    return np.sum(K * K) + np.sum(P)


def tile_repeat_clip(x, w):
    """np.tile, np.repeat and np.clip."""
    z = np.tile(x, 2) * np.repeat(w, 2)
    return np.sum(np.clip(z, -0.5, 0.5) ** 2) + np.sum(z)


def library_vector_out(x):
    """A vector output from library functions: cumsum, flip and a matrix product."""
    return W2 @ np.cumsum(np.flip(np.tanh(x)))


# -- everything together ------------------------------------------------------------------


def mixed_pipeline(x, A):
    """A comprehension of lambdas' values, an in-place helper, an inner gradient,
    library functions and a while loop, in one function."""
    sq = lambda v: v * v  # noqa: E731
    feats = np.array([sq(v) + np.sin(v) for v in x])
    buf = np.zeros(x.shape[0])
    _fill_scaled(buf, feats, weight=0.5)
    g = ad.grad(_inner)(buf)
    y = np.linalg.solve(A @ A.T + np.eye(x.shape[0]), g)
    k = 0
    s = np.std(y)
    while k < 3:
        s = np.tanh(0.5 * s + np.sum(y) * 0.1)
        k += 1
    return s + np.var(y) + np.sum(np.cumsum(y) * x)


def mixed_vector_out(x, w):
    """A vector output: a comprehension inside, a nested def, library functions."""
    def scale(v, by=1.0):
        return np.tanh(v * by)
    rows = np.stack([scale(x, by=c) for c in (0.5, 1.0, 1.5)])
    return np.sum(rows, axis=0) * np.var(w) + np.logaddexp(x, w)


_X3 = [0.6, -0.35, 1.1]
_W3 = [0.4, 0.75, -0.5]
_M = [[0.3, -0.2, 0.5], [0.1, 0.6, -0.4], [-0.7, 0.2, 0.25]]
_A = [[0.9, 0.2, -0.1], [0.3, 1.1, 0.4], [-0.2, 0.1, 0.8]]


def static_loops(x, w):
    """Loops over a list of layers (enumerate with a pair target, range(len(...)),
    zip) and a list grown by .append and .pop: each loop unrolled."""
    layers = [(W2, w[:2]), (W2.T, x)]
    h = x
    energies = []
    for i, (W, b) in enumerate(layers):
        h = np.tanh(W @ h + b) * (i + 1.0)
        energies.append(np.sum(h ** 2))
    scales = (0.5, 2.0)
    for k in range(len(scales)):
        h = h * scales[k] + x[k]
    for a, s in zip((h[0], h[2]), scales):
        energies.append(a * s)
    last = energies.pop()
    return sum(energies) + last * np.sum(h)


def casts(x, w):
    """astype to float64 (differentiated, an array and a number) and int (no derivative)."""
    scaled = (x * 3.0).astype(int)
    a = (x * w).astype(np.float64)
    return np.sum(a ** 2) + np.sum(scaled) * w[0] + float(x[1].astype(np.float64)) * 2.0


def dict_loops(x, w):
    """A dict built in the function, grown, and iterated by items(), values() and
    keys() in insertion order (the order changes the result)."""
    steps = {"w": w, "b": x * 0.5}
    steps["a"] = np.cos(x)
    for name, v in steps.items():
        x = np.sin(x * v) + len(name) * x
    total = sum(np.sum(v ** 2) for v in steps.values())
    for name in steps:
        total = total + np.sum(steps[name] * x)
    return total + np.sum(x ** 2)


def appended_states(x, w):
    """A list grown by .append in a loop over a run-time count (an RNN's states),
    then stacked, indexed and summed."""
    h = w * 0.5
    states = []
    for t in range(x.shape[0]):
        h = np.tanh(h * x[t] + w)
        states.append(h)
    return np.sum(np.stack(states) ** 2) + np.sum(states[-1] * w) + sum(states)[0]


def _f(v):
    return np.array(v, dtype=np.float64)


CORPUS = [
    (comp_list_sum, lambda: (_f(_X3),), 0),
    (comp_zip_enumerate, lambda: (_f(_X3), _f(_W3)), (0, 1)),
    (comp_nested_pairs, lambda: (_f([0.6, -0.35, 1.1, 0.2]),), 0),
    (comp_stack_rows, lambda: (_f(_M), _f(_W3)), (0, 1)),
    (comp_vector_out, lambda: (_f([0.6, -0.35, 1.1, 0.2]),), 0),
    (comp_in_loop_branch, lambda: (_f(_X3),), 0),
    (comp_filtered_max, lambda: (_f([0.6, -0.35, 1.1, 0.3]),), 0),
    (comp_matrix_rows_norm, lambda: (_f(_M), _f(_X3)), (0, 1)),
    (lambda_local_map, lambda: (_f(_X3),), 0),
    (lambda_in_comprehension, lambda: (_f(_X3), _f(_W3)), (0, 1)),
    (nested_def_closure, lambda: (_f(_X3), 0.8), (0, 1)),
    (def_passed_to_helper, lambda: (_f(_X3),), 0),
    (keyword_calls, lambda: (_f(_X3), 0.7), (0, 1)),
    (inplace_relax_loop, lambda: (_f([0.6, -0.35, 1.1, 0.2, -0.8]), _f(_W3)), (0, 1)),
    (inplace_fill_keyword, lambda: (_f(_X3), 0.7), (0, 1)),
    (inplace_view, lambda: (_f([0.6, -0.35, 1.1, 0.2]),), 0),
    (inplace_view, lambda: (_f([-0.6, -0.35, 1.1, 0.2]),), 0),
    (inplace_then_library, lambda: (_f(_X3),), 0),
    (grad_penalty, lambda: (_f(_X3),), 0),
    (maml_lambda, lambda: (_f(_W3), _f(_M)), 0),
    (jvp_inside, lambda: (_f(_X3), _f(_W3)), (0, 1)),
    (vmap_inside, lambda: (_f(_W3), _f(_M)), 0),
    (hessian_inside, lambda: (_f([0.6, -0.35]),), 0),
    (grad_has_aux_inside, lambda: (_f(_X3),), 0),
    (jacobian_trace_inside, lambda: (_f(_X3),), 0),
    (stats_var_std, lambda: (_f(_X3), _f(_W3)), (0, 1)),
    (cumulative, lambda: (_f(_X3),), 0),
    (solve_norm, lambda: (_f(_A), _f(_W3)), (0, 1)),
    (einsum_vector, lambda: (_f(_M), _f(_X3)), (0, 1)),
    (logaddexp_sum, lambda: (_f(_X3), _f(_W3)), (0, 1)),
    (sort_flip_take, lambda: (_f([0.6, -0.35, 1.1, 0.2]),), 0),
    (trapezoid, lambda: (_f([0.6, -0.35, 1.1, 0.2]), _f([0.0, 0.3, 0.75, 1.2])), (0, 1)),
    (determinants, lambda: (_f(_A),), 0),
    (outer_kron, lambda: (_f(_X3), _f(_W3)), (0, 1)),
    (tile_repeat_clip, lambda: (_f(_X3), _f(_W3)), (0, 1)),
    (library_vector_out, lambda: (_f(_X3),), 0),
    (mixed_pipeline, lambda: (_f(_X3), _f(_A)), 0),
    (mixed_vector_out, lambda: (_f(_X3), _f(_W3)), (0, 1)),
    (vjp_two_outputs_inside, lambda: (_f(_X3),), 0),
    (static_loops, lambda: (_f(_X3), _f(_W3)), (0, 1)),
    (casts, lambda: (_f(_X3), _f(_W3)), (0, 1)),
    (dict_loops, lambda: (_f(_X3), _f(_W3)), (0, 1)),
    (appended_states, lambda: (_f(_X3), _f(_W3)), (0, 1)),
]
