"""Regressions the differential oracle found in the "first hour" corpus
(programs/first_hour.py) and the fuzzer's first-hour statements.

* f4: a list used as an index (``x[[2, 0]]``, ``idx = [2, 0]; x[idx]``, a list
  passed to a helper that indexes with it, and ``np.take(x, [2, 0])``, whose
  library implementation indexes with its ``indices`` argument) was lowered
  as the tuple index ``x[2, 0]``: an IndexError in every transform.
* f5: the second derivative of ``np.cumprod`` (``ad.hessian``,
  ``ad.jacfwd(ad.grad(f))``, ``ad.jacrev(ad.grad(f))``) was silently zero
  off the diagonal: batching ``rt.cumprod_jvp`` for the Hessian's columns
  (``rt.map_rule``) dropped the mark that it has no derivative of its own,
  so reverse mode took it as constant.  It is now refused, as the unbatched
  path already did.
* f6: any derivative of a function calling ``ad.vjp`` of a function with two
  outputs, then ``vjp_fn((ct1, ct2))``, crashed in the compiler: the
  contract function took the cotangent as one leaf, not the output's
  structure (fixed in ``transforms/nested.py``; a dict output too).
* f7 (fuzz seed 7, program 180): ``ad.jit(ad.jacrev(ad.vmap(f)))`` of an
  ``f`` with one number per example returned zeros for every example but the
  first under ``compile="tiered"``: the widened adjoint read an element of
  its lanes array as ``lanes[b, ..., q]``, a 0-d view in NumPy (the tier that
  answers first), which the next statement zeroed.  Now ``lanes[b, q]``.
* f8: a Jacobian or Hessian of a function with a parameter left at its
  default (``def f(x, scale=2.0)``, ``ad.hessian(f)(x)``) called the
  generated code without the default (a TypeError naming a generated
  function), and ``ad.source`` of it failed; ``grad`` and ``jvp`` already
  filled defaults in.  Now every Jacobian does, before anything else.
* f9: keyword arguments (API.md: they pass through every transform and are
  never differentiated) were a TypeError for every Jacobian, Hessian and
  ``vmap`` (``ad.vmap(ad.grad(f))(X, scale=3.0)``), and an
  UnsupportedSyntaxError for a transformed function called with one inside
  differentiated code.  A keyword argument to ``vmap`` is not batched.
* f10: ``ad.vmap`` of a transform of a function with a parameter left at its
  default (``ad.vmap(ad.grad(f))(X)`` of ``def f(x, scale=2.0)``) called the
  generated code without it (a TypeError naming a generated function).
* f11: ``if opt is None:`` on an argument passed as None (or left at its
  default None), in the function transformed or in a helper it calls, took
  the other branch: the lowering folded ``v is None`` to False for every
  argument.  Silently wrong when that branch does not read the argument (the
  derivative of ``np.sum(x ** 3)`` for that of ``np.sum(x ** 2)``; the
  compiled primal too), a TypeError on ``x * None`` when it does.  A None
  argument is now the constant None in the body (the build is specialised
  on which arguments are None), and a helper called with None is lowered in
  place.
* f12: a loop over a tuple or list of arrays (``for W in params``,
  ``for W, b in zip(Ws, bs)``, ``for i in range(len(params)): params[i]``)
  was refused ("a tuple can only be indexed by a constant integer"), and
  ``xs = []; xs.append(v)`` was refused as an unknown *array* method.  Such
  loops are now unrolled (their bounds are constants), and a list the
  function builds grows by ``.append``/``.extend``/``.pop``; a list grown in
  a loop whose trip count is known only at run time is refused at the
  user's line, naming the alternatives.
  A list appended to once per iteration of a loop over a run-time count
  (``for t in range(xs.shape[0]): ...; hs.append(h)``, an RNN's states) is
  an array of its elements, as a comprehension's list is; a loop that runs
  no iteration is an error at run time.
* f13: ``a.astype(np.float64)`` (and any dtype) was refused as an unknown
  array method.  A cast to a float dtype is differentiated (the cotangent
  is cast back to the argument's dtype); to an integer or boolean dtype it
  has no derivative.
* f14: ``params.items()``, ``.values()``, ``.keys()`` and ``for k in params``
  on a dict were refused (an unknown array method; "a dict argument can only
  be indexed by one of its keys").  They iterate, unrolled, in Python's
  order: a dict argument's keys sorted (as JAX rebuilds a dict argument), a
  dict the function builds in insertion order.
* f15: ``assert x.ndim == 1, "..."`` was refused.  An assert whose test is
  known before the run (ranks, lengths of tuples, constants) is checked when
  the function is transformed and raises the user's AssertionError at its
  line; one on run-time values is still refused.

Derivatives are checked against central differences of the plain function.
"""
import numpy as np
import pytest
from conftest import fd_jacobian

import s2s_ad as ad

X = np.array([0.6, -0.35, 1.1, 0.2])
JITS = {"python": lambda f: f, "jit": ad.jit}


def list_literal_index(x):
    return np.sum(x[[2, 0]] * x[1])


def list_name_index(x):
    idx = [3, 0, 3]
    return np.sum(np.sin(x[idx]))


def _pick(v, i):
    return v[i]


def list_to_helper(x):
    return np.sum(_pick(x, [2, 0]) ** 2)


def take_list(x):
    return np.sum(np.take(x, [2, 0]) * np.flip(x)[:2])


def list_in_tuple_index(M):
    return np.sum(M[[0, 2], 1] ** 2)


def list_index_write(x):
    y = x * 1.0
    y[[0, 2]] = x[[1, 3]] * 2.0
    return np.sum(y * x)


def list_index_vector(x):
    return x[[3, 1]] * x[0]


def tuple_argument_still_a_tuple(x):
    return _pick(x, 1) * np.sum(x)


@pytest.mark.parametrize("target", list(JITS))
@pytest.mark.parametrize("fn", [list_literal_index, list_name_index, list_to_helper, take_list,
                                list_index_write, tuple_argument_still_a_tuple])
def test_list_as_index_grad(fn, target):
    got = JITS[target](ad.grad(fn))(X.copy())
    np.testing.assert_allclose(got, fd_jacobian(fn, X), rtol=1e-6, atol=1e-8)


def test_list_in_tuple_index():
    M = np.arange(9.0).reshape(3, 3) * 0.1 + 0.3
    np.testing.assert_allclose(ad.grad(list_in_tuple_index)(M),
                               fd_jacobian(list_in_tuple_index, M), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("transform", ["jacfwd", "jacrev"])
def test_list_index_jacobian(transform):
    got = getattr(ad, transform)(list_index_vector)(X)
    np.testing.assert_allclose(got, fd_jacobian(list_index_vector, X), rtol=1e-6, atol=1e-8)


def cumprod_sum(x):
    return np.sum(np.cumprod(x))


def cumprod_vector(x):
    return np.cumprod(x) * x[0]


@pytest.mark.parametrize("second", [ad.hessian, lambda f: ad.jacfwd(ad.grad(f)),
                                    lambda f: ad.jacrev(ad.grad(f))],
                         ids=["hessian", "jacfwd(grad)", "jacrev(grad)"])
def test_cumprod_second_derivative_is_refused_not_zero(second):
    with pytest.raises(ad.NonDifferentiableError, match="cumprod_jvp"):
        second(cumprod_sum)(X)


def test_cumprod_first_derivatives_still_exact():
    np.testing.assert_allclose(ad.grad(cumprod_sum)(X), fd_jacobian(cumprod_sum, X),
                               rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(ad.jacfwd(cumprod_vector)(X), fd_jacobian(cumprod_vector, X),
                               rtol=1e-6, atol=1e-8)


def per_example_square_sum(x):
    return np.sum(x * x)


@pytest.mark.parametrize("compile", ["eager", "tiered"])
def test_jit_jacrev_of_vmap_with_one_number_per_example(compile):
    xs = np.array([[0.3, -0.4], [1.2, 0.2], [-1.1, 0.7]])
    want = fd_jacobian(lambda z: np.sum(z * z, axis=1), xs)
    np.testing.assert_allclose(ad.jacrev(ad.vmap(per_example_square_sum))(xs), want,
                               rtol=1e-6, atol=1e-8)
    jitted = ad.jit(ad.jacrev(ad.vmap(per_example_square_sum)), compile=compile)
    np.testing.assert_allclose(jitted(xs), want, rtol=1e-6, atol=1e-8)


def _two_outputs(x):
    return np.sin(x), x * 2.0


def vjp_of_two_outputs(x):
    out, vjp_fn = ad.vjp(_two_outputs, x)
    (ct,) = vjp_fn((x, x * 0.5))
    return np.sum(ct ** 2) + np.sum(out[0])


def _dict_outputs(x):
    return {"a": np.sin(x), "b": x * 2.0}


def vjp_of_dict_outputs(x):
    out, vjp_fn = ad.vjp(_dict_outputs, x)
    (ct,) = vjp_fn({"a": x, "b": x * 0.5})
    return np.sum(ct ** 2) + np.sum(out["a"])


@pytest.mark.parametrize("f", [vjp_of_two_outputs, vjp_of_dict_outputs])
def test_derivatives_through_vjp_of_several_outputs(f):
    x = np.array([0.3, -0.7, 1.1])
    want = fd_jacobian(f, x)
    np.testing.assert_allclose(ad.grad(f)(x), want, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(ad.jit(ad.grad(f))(x), want, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(ad.jacfwd(f)(x), want, rtol=1e-6, atol=1e-8)


def with_default(x, scale=2.0):
    return scale * np.sum(x ** 3) + np.sin(x[0] * scale)


def _hessian_at_default(x):
    """The closed form: ``diag(12 x)``, and ``-4 sin(2 x0)`` more at (0, 0)."""
    want = np.diag(12.0 * x)
    want[0, 0] -= 4.0 * np.sin(2.0 * x[0])
    return want


@pytest.mark.parametrize("target", sorted(JITS))
@pytest.mark.parametrize("transform", ["hessian", "jacfwd_grad", "jacrev_jacrev"])
def test_second_derivatives_fill_in_defaults(transform, target):
    make = {"hessian": ad.hessian, "jacfwd_grad": lambda f: ad.jacfwd(ad.grad(f)),
            "jacrev_jacrev": lambda f: ad.jacrev(ad.jacrev(f))}[transform]
    x = np.array([0.3, -0.7, 1.1])
    want = _hessian_at_default(x)
    h = JITS[target](make(with_default))
    np.testing.assert_allclose(h(x), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(h(x, 2.0), want, rtol=1e-12, atol=1e-12)
    with pytest.raises(TypeError, match="takes from 1 to 2 positional arguments"):
        h(x, 2.0, 3.0)


def test_jacobians_of_defaults_in_jvp_vmap_and_source():
    x = np.array([0.3, -0.7, 1.1])
    hess = _hessian_at_default(x)
    _, tangent = ad.jvp(ad.jacrev(with_default), (x,), (np.array([1.0, 0.0, 0.0]),))
    np.testing.assert_allclose(tangent, hess[0], rtol=1e-12, atol=1e-12)
    batched = ad.vmap(ad.hessian(with_default))(np.stack([x, 2.0 * x]))
    np.testing.assert_allclose(batched[0], hess, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(batched[1], _hessian_at_default(2.0 * x), rtol=1e-12,
                               atol=1e-12)
    assert "def grad_jvp_with_default(" in ad.source(ad.hessian(with_default), x)


def _cubes(x, scale=2.0):
    return scale * x ** 3


@pytest.mark.parametrize("target", sorted(JITS))
def test_keyword_arguments_pass_through_jacobians_and_vmap(target):
    x = np.array([0.3, -0.7, 1.1])
    jit = JITS[target]
    grad3, jac3, hess3 = 9.0 * x ** 2, np.diag(9.0 * x ** 2), np.diag(18.0 * x)
    hess3[0, 0] -= 9.0 * np.sin(3.0 * x[0])
    for transform in (ad.jacrev, ad.jacfwd):
        np.testing.assert_allclose(jit(transform(_cubes))(x, scale=3.0), jac3, rtol=1e-12)
    np.testing.assert_allclose(jit(ad.hessian(with_default))(x, scale=3.0), hess3, rtol=1e-12)
    batch = np.stack([x, 2.0 * x])
    got = jit(ad.vmap(ad.grad(with_default)))(batch, scale=3.0)
    np.testing.assert_allclose(got[0], grad3 + [3.0 * np.cos(3.0 * x[0]), 0, 0], rtol=1e-12)
    got = jit(ad.vmap(ad.jacrev(_cubes), in_axes=(0,)))(batch, scale=3.0)
    np.testing.assert_allclose(got[1], np.diag(36.0 * x ** 2), rtol=1e-12)
    with pytest.raises(TypeError, match="argnums"):
        ad.jacrev(_cubes, argnums=1)(x, scale=3.0)        # a keyword is never differentiated


def _grad_by_keyword(v, scale=2.0):
    return ad.grad(with_default)(v, scale=scale)[1] + np.sum(ad.jacrev(_cubes)(v, scale=scale))


@pytest.mark.parametrize("target", sorted(JITS))
def test_keyword_arguments_to_transforms_inside_differentiated_code(target):
    x = np.array([0.3, -0.7, 1.1])
    # d/dv of 3 scale v1^2 + 3 scale sum(v^2): 6 scale (v1 e1 + v)
    want = 6.0 * 3.0 * (x + np.array([0.0, x[1], 0.0]))
    np.testing.assert_allclose(JITS[target](ad.grad(_grad_by_keyword))(x, scale=3.0), want,
                               rtol=1e-12)


def _keyword_for_argnums(v):
    return ad.grad(with_default, argnums=1)(v, scale=3.0)


def test_a_keyword_argument_is_not_differentiated_inside_either():
    with pytest.raises(ad.UnsupportedSyntaxError, match="never differentiated"):
        ad.grad(_keyword_for_argnums)(np.array([0.3, -0.7]))


@pytest.mark.parametrize("target", sorted(JITS))
def test_vmap_of_transforms_fills_in_defaults(target):
    batch = np.stack([X, 2.0 * X])
    want = _default_grad(batch)
    jit = JITS[target]
    np.testing.assert_allclose(jit(ad.vmap(ad.grad(with_default)))(batch), want, rtol=1e-12)
    np.testing.assert_allclose(jit(ad.vmap(ad.jacrev(with_default)))(batch), want, rtol=1e-12)
    np.testing.assert_allclose(jit(ad.vmap(ad.grad(with_default), in_axes=(0,)))(batch), want,
                               rtol=1e-12)


def _default_grad(batch):
    """The gradient of ``with_default`` at scale 2, per row of ``batch``."""
    want = 6.0 * batch ** 2
    want[:, 0] += 2.0 * np.cos(2.0 * batch[:, 0])
    return want


def optional_scale(x, opt=None):
    if opt is None:
        return np.sum(np.sin(x) * 2.0)
    return np.sum(x * opt)


def optional_in_dict(x, cfg):
    s = np.sum(x ** 2)
    if cfg["scale"] is not None:
        s = s * cfg["scale"]
    return s


@pytest.mark.parametrize("target", sorted(JITS))
def test_a_none_argument_takes_its_branch(target):
    jit = JITS[target]
    want = 2.0 * np.cos(X)
    np.testing.assert_allclose(jit(ad.grad(optional_scale))(X), want, rtol=1e-12)
    np.testing.assert_allclose(jit(ad.grad(optional_scale))(X, None), want, rtol=1e-12)
    np.testing.assert_allclose(jit(ad.grad(optional_scale))(X, 3.0 * X), 3.0 * X, rtol=1e-12)
    np.testing.assert_allclose(jit(ad.jacrev(optional_scale))(X, None), want, rtol=1e-12)
    np.testing.assert_allclose(jit(ad.hessian(optional_scale))(X), np.diag(-2.0 * np.sin(X)),
                               rtol=1e-12)
    batch = np.stack([X, -X])
    got = jit(ad.vmap(ad.grad(optional_scale), in_axes=(0, None)))(batch, None)
    np.testing.assert_allclose(got, 2.0 * np.cos(batch), rtol=1e-12)
    np.testing.assert_allclose(jit(ad.grad(optional_in_dict))(X, {"scale": None}), 2.0 * X,
                               rtol=1e-12)
    np.testing.assert_allclose(jit(ad.grad(optional_in_dict))(X, {"scale": 3.0}), 6.0 * X,
                               rtol=1e-12)


def other_branch_unread(x, w=None):
    if w is None:
        return np.sum(x ** 2)
    return np.sum(x ** 3)


def calls_with_none(x):
    return other_branch_unread(x) + other_branch_unread(x, None) + other_branch_unread(x, x)


@pytest.mark.parametrize("target", sorted(JITS))
def test_a_none_argument_is_never_taken_for_an_array(target):
    jit = JITS[target]
    np.testing.assert_allclose(jit(other_branch_unread)(X), np.sum(X ** 2), rtol=1e-12)
    np.testing.assert_allclose(jit(ad.grad(other_branch_unread))(X), 2.0 * X, rtol=1e-12)
    np.testing.assert_allclose(jit(ad.grad(other_branch_unread))(X, X), 3.0 * X ** 2,
                               rtol=1e-12)
    np.testing.assert_allclose(jit(ad.grad(other_branch_unread))(X, None), 2.0 * X, rtol=1e-12)
    np.testing.assert_allclose(jit(ad.grad(calls_with_none))(X), 4.0 * X + 3.0 * X ** 2,
                               rtol=1e-12)


def test_source_without_examples_shows_the_default_none_branch():
    text = ad.source(ad.grad(other_branch_unread))       # as `s2s-ad show` prints it
    assert "x ** 2" in text and "x ** 3" not in text


RNG = np.random.default_rng(12)
W_A, W_B = RNG.standard_normal((3, 2)), RNG.standard_normal((2, 3))
B_A, B_B = RNG.standard_normal(3), RNG.standard_normal(2)
X2 = np.array([0.4, -0.9])


def layers_tuple(params, x):
    for W in params:
        x = np.tanh(W @ x)
    return np.sum(x ** 2)


def layers_pairs(params, x):
    for W, b in params:
        x = np.tanh(W @ x + b)
    return np.sum(x ** 2)


def layers_zip(Ws, bs, x):
    for i, (W, b) in enumerate(zip(Ws, bs)):
        x = np.tanh(W @ x + b) * (i + 1.0)
    return np.sum(x ** 2)


def layers_indexed(params, x):
    for i in range(len(params)):
        x = np.sin(params[i] @ x) + params[i][0, 0]
    return np.sum(x)


def rnn_appends(W, xs):
    h = np.zeros(2)
    hs = []
    for t in range(3):
        h = np.tanh(W @ h + xs[t])
        hs.append(h)
    hs.extend([h * 2.0])
    last = hs.pop()
    return np.sum(np.array(hs) ** 2) + np.sum(last) + len(hs) * hs[-1][0] + sum(hs)[1]


def _fd_of_last(f, args):
    return fd_jacobian(lambda v: f(*args[:-1], v), args[-1])


STATIC_LOOPS = [
    (layers_tuple, ((W_A, W_B), X2)),
    (layers_pairs, (((W_A, B_A), (W_B, B_B)), X2)),
    (layers_zip, ([W_A, W_B], [B_A, B_B], X2)),
    (layers_indexed, ((W_A, W_B), X2)),
    (rnn_appends, (np.eye(2) * 0.5 + 0.1, RNG.standard_normal((3, 2)))),
]


@pytest.mark.parametrize("target", sorted(JITS))
@pytest.mark.parametrize("f, args", STATIC_LOOPS, ids=[f.__name__ for f, _ in STATIC_LOOPS])
def test_loops_over_lists_of_arrays_are_unrolled(f, args, target):
    got = JITS[target](ad.grad(f, argnums=len(args) - 1))(*args)
    np.testing.assert_allclose(got, _fd_of_last(f, args), rtol=1e-6, atol=1e-8)


def test_gradient_with_respect_to_a_list_of_layers():
    params, x = (W_A, W_B), X2
    got = ad.jit(ad.grad(layers_tuple))(params, x)
    assert isinstance(got, tuple) and len(got) == 2
    for k, W in enumerate(params):
        def of_layer(v, k=k, shape=W.shape):
            ps = list(params)
            ps[k] = v.reshape(shape)
            return layers_tuple(tuple(ps), x)
        np.testing.assert_allclose(got[k].ravel(), fd_jacobian(of_layer, W.ravel()),
                                   rtol=1e-6, atol=1e-8)


def test_batched_loops_over_lists_of_layers():
    xs = RNG.standard_normal((4, 2))
    per_example = ad.jit(ad.vmap(ad.grad(layers_tuple, argnums=1), in_axes=(None, 0)))
    got = per_example((W_A, W_B), xs)
    want = np.stack([_fd_of_last(layers_tuple, ((W_A, W_B), v)) for v in xs])
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


def grows_in_a_branch(W, xs):
    h, hs = np.zeros(2), []
    for t in range(xs.shape[0]):
        h = np.tanh(W @ h + xs[t])
        if t > 0:
            hs.append(h)
    return np.sum(np.array(hs))


def reads_while_growing(W, xs):
    h, hs = np.zeros(2), [np.zeros(2)]
    for t in range(xs.shape[0]):
        h = np.tanh(W @ h + xs[t]) + hs[-1]
        hs.append(h)
    return np.sum(np.array(hs))


def indexes_by_a_run_time_count(params, x, n):
    for i in range(n):
        x = params[i] @ x
    return np.sum(x)


def appends_in_two_loops(W, xs):
    hs = []
    for e in range(2):
        h = np.zeros(2)
        for t in range(xs.shape[0]):
            h = np.tanh(W @ h + xs[t])
            hs.append(h)
    return np.sum(np.stack(hs))


def appends_to_its_argument(xs, x):
    xs.append(x)
    return np.sum(xs[-1])


@pytest.mark.parametrize("f, args, match", [
    (grows_in_a_branch, (np.eye(2), np.ones((3, 2))), "'hs.append\\(\\)' in a loop"),
    (reads_while_growing, (np.eye(2), np.ones((3, 2))), "'hs.append\\(\\)' in a loop"),
    (appends_in_two_loops, (np.eye(2), np.ones((3, 2))), "cannot .append\\(\\) again"),
    (indexes_by_a_run_time_count, ((np.eye(2), np.eye(2)), X2, 2), "known before the run"),
    (appends_to_its_argument, ([X2], X2), "list the caller passed in"),
])
def test_lists_that_cannot_be_unrolled_are_refused_at_the_line(f, args, match):
    with pytest.raises(ad.UnsupportedSyntaxError, match=match) as info:
        ad.grad(f, argnums=1)(*args)
    assert info.value.filename.endswith("test_regress_first_hour.py")
    assert info.value.lineno > f.__code__.co_firstlineno


def casts(x):
    a = x.astype(np.float64)
    k = (x * 3.0).astype(int)
    return float(np.sum(a ** 2)) + np.sum(k) * x[0] + x[1].astype(np.float64) * 2.0


@pytest.mark.parametrize("target", sorted(JITS))
def test_astype(target):
    got = JITS[target](ad.grad(casts))(X)
    np.testing.assert_allclose(got, fd_jacobian(casts, X), rtol=1e-6, atol=1e-6)
    x32 = X.astype(np.float32)
    got32 = JITS[target](ad.grad(lambda v: np.sum(v.astype(np.float64) ** 2)))(x32)
    assert got32.dtype == np.float32
    np.testing.assert_allclose(got32, 2.0 * x32, rtol=1e-6)
    batched = JITS[target](ad.vmap(ad.grad(casts)))(np.stack([X, X * 0.5]))
    np.testing.assert_allclose(batched[1], fd_jacobian(casts, X * 0.5), rtol=1e-6, atol=1e-6)


def cast_to_own_dtype(v):
    return np.sum(v.astype(v.dtype) ** 2)


@pytest.mark.parametrize("target", sorted(JITS))
def test_astype_to_the_arguments_own_dtype(target):
    np.testing.assert_allclose(JITS[target](ad.grad(cast_to_own_dtype))(X), 2.0 * X,
                               rtol=1e-12)
    assert JITS[target](ad.jacfwd(lambda v: (v * 3.0).astype(int) * 1.0))(X).any() == 0


def l2_penalty(params, x):
    loss = np.sum(x ** 2)
    for W in params.values():
        loss += 0.01 * np.sum(W ** 2)
    for name, W in params.items():
        loss += np.sum(np.sin(W) * x) * len(name)
    for name in params:
        loss += np.sum(params[name] * x ** 3)
    return loss


def insertion_order(x):
    steps = {"w": 2.0, "b": 0.5}
    steps["a"] = 3.0
    for name, scale in steps.items():
        x = np.sin(x * scale) + len(name) * x     # the order changes the result
    return np.sum(x ** 2)


@pytest.mark.parametrize("target", sorted(JITS))
def test_iterating_over_a_dict(target):
    params = {"w": np.array([0.3, -0.2, 0.5]), "bias": np.array([0.1, 0.4, -0.3])}
    got = JITS[target](ad.grad(l2_penalty))(params, X[:3])
    for k in params:
        def of_item(v, k=k):
            return l2_penalty({**params, k: v}, X[:3])
        np.testing.assert_allclose(got[k], fd_jacobian(of_item, params[k]), rtol=1e-6,
                                   atol=1e-8)
    got_x = JITS[target](ad.grad(l2_penalty, argnums=1))(params, X[:3])
    np.testing.assert_allclose(got_x, fd_jacobian(lambda v: l2_penalty(params, v), X[:3]),
                               rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(JITS[target](ad.grad(insertion_order))(X),
                               fd_jacobian(insertion_order, X), rtol=1e-6, atol=1e-8)


def checks_its_rank(x, layers=(0.5, 2.0)):
    assert x.ndim == 1, "x must be a vector"
    assert len(layers) == 2
    return np.sum(x ** 2) * layers[1]


@pytest.mark.parametrize("target", sorted(JITS))
def test_asserts_known_before_the_run(target):
    np.testing.assert_allclose(JITS[target](ad.grad(checks_its_rank))(X), 4.0 * X, rtol=1e-12)
    with pytest.raises(AssertionError, match="x must be a vector .*test_regress_first_hour.py"):
        JITS[target](ad.grad(checks_its_rank))(np.ones((2, 2)))


def unpack_layer(p):
    if len(p) != 2:
        raise TypeError(f"a layer is (w, b), got {len(p)} arrays")
    return p[0], p[1]


def validates_its_inputs(p, x):
    if x.ndim != 2:
        raise ValueError("x must be a matrix")
    elif x.ndim == 0:
        raise NotImplementedError
    w, b = unpack_layer(p)
    return np.sum(np.tanh(x @ w + b) ** 2)


def formats_its_message(x):
    if x.ndim != 1:
        raise ValueError("rank {} given".format(x.ndim))
    return np.sum(x)


def introspects(x):
    trap = getattr(np, "trapezoid") if hasattr(np, "trapezoid") else getattr(np, "trapz")
    act = getattr(np, "tanh")
    return trap(act(x)) if callable(act) else 0.0


def optional_offset(p, x):
    shift = 0.0 if p["offset"] is None else np.sum(p["offset"])
    return np.sum(np.tanh(x * p["w"]) ** 2) + shift


def weighs_by_lists(x):
    return np.sum(x * [1.0, 2.0, 3.0, 4.0]) + np.sum([2.0, 1.0, 0.5, 0.1] * x ** 2) + \
        np.sum(x[:2] * (3.0, 4.0))


def raises_on_values(x):
    if np.sum(x) > 100.0:
        raise ValueError("too large")
    return np.sum(x ** 2)


@pytest.mark.parametrize("target", sorted(JITS))
def test_raise_known_before_the_run(target):
    w, b = RNG.standard_normal((3, 2)), RNG.standard_normal(2)
    xs = RNG.standard_normal((4, 3))
    f = JITS[target](ad.grad(validates_its_inputs))
    got = f((w, b), xs)
    np.testing.assert_allclose(got[0], fd_jacobian(lambda v: validates_its_inputs((v, b), xs), w),
                               rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(got[1], fd_jacobian(lambda v: validates_its_inputs((w, v), xs), b),
                               rtol=1e-6, atol=1e-8)
    # the user's exception and message, at the user's line; each call with those ranks
    for _ in range(2):
        with pytest.raises(ValueError, match=r"x must be a matrix \(.*test_regress_first_hour.py, "
                                             r"line \d+\)"):
            f((w, b), xs[0])
    with pytest.raises(TypeError, match="a layer is \\(w, b\\), got 3 arrays"):
        f((w, b, b), xs)
    np.testing.assert_allclose(f((w, b), xs)[1], got[1], rtol=1e-12)   # still fine after them
    batched = JITS[target](ad.vmap(ad.grad(validates_its_inputs, argnums=1),
                                   in_axes=(None, 0)))((w, b), np.stack([xs, 2 * xs]))
    np.testing.assert_allclose(batched[0], ad.grad(validates_its_inputs, argnums=1)((w, b), xs),
                               rtol=1e-10)


def reduced(x, how="sum", scale=1.0):
    if how == "sum":
        r = np.sum(x ** 2)
    elif how == "max":
        r = np.max(x ** 2)
    else:
        raise ValueError(f"unknown reduction {how!r}")
    return r * scale


@pytest.mark.parametrize("target", sorted(JITS))
def test_string_options_are_known_before_the_run(target):
    """A string argument is an option, as JAX's static arguments: code is built
    for each value, its tests fold and a raise under them works."""
    g = JITS[target](ad.grad(reduced))
    np.testing.assert_allclose(g(X), 2.0 * X, rtol=1e-12)
    want_max = np.where(np.abs(X) == np.max(np.abs(X)), 2.0 * X, 0.0)
    np.testing.assert_allclose(g(X, "max"), want_max, rtol=1e-12)
    np.testing.assert_allclose(g(X, how="max", scale=3.0), 3.0 * want_max, rtol=1e-12)
    np.testing.assert_allclose(g(X, "sum"), 2.0 * X, rtol=1e-12)     # each value its own code
    with pytest.raises(ValueError, match="unknown reduction 'min' \\(.*line \\d+\\)"):
        g(X, "min")
    batched = JITS[target](ad.vmap(ad.grad(reduced), in_axes=(0, None)))(np.stack([X, -X]), "max")
    np.testing.assert_allclose(batched, np.stack([want_max, -want_max]), rtol=1e-12)
    text = ad.source(g, X, "max")
    assert "'sum'" not in text and "rt.amax" in text       # the test folded: no compare runs


def test_a_raised_message_not_known_before_the_run_is_the_line():
    with pytest.raises(ValueError, match=r'raise ValueError\("rank \{\} given"\.format\(x\.ndim\)\) '
                                         r'\(.*test_regress_first_hour.py, line \d+\)'):
        ad.grad(formats_its_message)(np.ones((2, 2)))
    np.testing.assert_allclose(ad.grad(formats_its_message)(X), np.ones_like(X))


@pytest.mark.parametrize("target", sorted(JITS))
def test_hasattr_getattr_and_callable_of_constants_fold(target):
    np.testing.assert_allclose(JITS[target](ad.grad(introspects))(X), fd_jacobian(introspects, X),
                               rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("target", sorted(JITS))
def test_none_in_a_differentiated_pytree_holds_no_leaves(target):
    """API.md: None is a pytree node (as JAX's): no leaves, so no gradient."""
    w = X[:2]
    params = {"w": w, "offset": None}
    got = JITS[target](ad.grad(optional_offset))(params, X[2:])
    assert got["offset"] is None and set(got) == {"w", "offset"}
    np.testing.assert_allclose(got["w"], fd_jacobian(lambda v: optional_offset(
        {"w": v, "offset": None}, X[2:]), w), rtol=1e-6, atol=1e-8)
    value, grads = JITS[target](ad.value_and_grad(optional_offset))(params, X[2:])
    assert value == pytest.approx(optional_offset(params, X[2:])) and grads["offset"] is None
    batched = JITS[target](ad.vmap(ad.grad(optional_offset), in_axes=(None, 0)))(
        params, np.stack([X[2:], -X[2:]]))
    assert batched["offset"] is None
    np.testing.assert_allclose(batched["w"][0], got["w"], rtol=1e-10)
    out, vjp_fn = ad.vjp(lambda p: p[0] * 2.0, (w, None))
    (cot,) = vjp_fn(np.ones(2))
    assert cot[1] is None
    np.testing.assert_allclose(cot[0], 2.0 * np.ones(2))


@pytest.mark.parametrize("target", sorted(JITS))
def test_an_array_times_a_list_is_elementwise(target):
    np.testing.assert_allclose(JITS[target](ad.grad(weighs_by_lists))(X),
                               fd_jacobian(weighs_by_lists, X), rtol=1e-6, atol=1e-8)


def test_raise_under_a_test_of_run_time_values_is_refused_at_its_line():
    with pytest.raises(ad.UnsupportedSyntaxError, match="raise under a test of values computed "
                       "at run time") as info:
        ad.grad(raises_on_values)(X)
    assert info.value.filename.endswith("test_regress_first_hour.py")


def rnn_states(W, xs):
    h = np.zeros(2)
    hs = []
    for t in range(xs.shape[0]):
        h = np.tanh(W @ h + xs[t])
        hs.append(h)
    return np.sum(np.stack(hs) ** 2) + np.sum(hs[-1]) + len(hs) * 0.1


def rnn_outputs(W, xs):
    h, outs = np.zeros(2), []
    for x in xs:
        h = np.tanh(W @ h + x)
        outs.append(np.sum(h * x))
    return sum(outs) + np.max(np.array(outs))


W_RNN = RNG.standard_normal((2, 2)) * 0.5
XS_RNN = RNG.standard_normal((5, 2))


@pytest.mark.parametrize("target", sorted(JITS))
@pytest.mark.parametrize("f", [rnn_states, rnn_outputs])
def test_lists_grown_over_a_run_time_count(f, target):
    got = JITS[target](ad.grad(f, argnums=(0, 1)))(W_RNN, XS_RNN)
    np.testing.assert_allclose(got[1], _fd_of_last(f, (W_RNN, XS_RNN)), rtol=1e-6, atol=1e-8)
    want_w = fd_jacobian(lambda w: f(w.reshape(2, 2), XS_RNN), W_RNN.ravel()).reshape(2, 2)
    np.testing.assert_allclose(got[0], want_w, rtol=1e-6, atol=1e-8)
    xs3 = RNG.standard_normal((3, 4, 2))
    batched = JITS[target](ad.vmap(ad.grad(f, argnums=1), in_axes=(None, 0)))(W_RNN, xs3)
    np.testing.assert_allclose(batched[2], _fd_of_last(f, (W_RNN, xs3[2])), rtol=1e-6,
                               atol=1e-8)
    np.testing.assert_allclose(JITS[target](ad.jacfwd(f, argnums=1))(W_RNN, XS_RNN),
                               _fd_of_last(f, (W_RNN, XS_RNN)), rtol=1e-6, atol=1e-8)


def test_a_loop_that_appends_nothing_is_an_error():
    with pytest.raises(ValueError, match="ran no iteration"):
        ad.jit(rnn_states, compile="eager")(W_RNN, np.zeros((0, 2)))


def copies_of_lists(x):
    layers = [x, x * 2.0]
    frozen = tuple(layers)
    more = list(frozen)
    more.append(x ** 2)
    return sum(np.sum(v) for v in more) + len(frozen) * np.sum(frozen[1])


@pytest.mark.parametrize("target", sorted(JITS))
def test_tuple_and_list_of_a_list(target):
    np.testing.assert_allclose(JITS[target](ad.grad(copies_of_lists))(X),
                               fd_jacobian(copies_of_lists, X), rtol=1e-6, atol=1e-8)
