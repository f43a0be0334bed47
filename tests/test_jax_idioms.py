"""Code written for JAX gives JAX's numbers (issue 38): the functions that
s2s_ad's transforms return, batched and compiled as JAX users do; transformed
objects bound at module level and called inside a differentiated function;
the JAX MLP tutorial, translated mechanically; print inside transformed code;
Jacobians with respect to 0-d array leaves.

Expected values come from live JAX (float64) or central finite differences,
never from s2s_ad itself; each case runs on the NumPy target and under
``ad.jit``.
"""
import numpy as np
import pytest
import scipy.special

import s2s_ad as ad

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

TARGETS = ["python", "jit"]


def on(target, fn):
    """``fn`` as the target runs it: itself, or ``ad.jit(fn)``."""
    return fn if target == "python" else ad.jit(fn)


def assert_tree_close(got, want, rtol=1e-10, atol=1e-12):
    got_leaves, got_tree = jax.tree_util.tree_flatten(got)
    want_leaves, want_tree = jax.tree_util.tree_flatten(want)
    assert got_tree == want_tree, (got_tree, want_tree)
    for g, w in zip(got_leaves, want_leaves):
        assert np.shape(g) == np.shape(w), (np.shape(g), np.shape(w))
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=atol)


# -- 1. the vjp_fn of ad.vjp under vmap and jit ---------------------------------------
def sin2(x):
    return np.sin(x) * 2


def sin2_jax(x):
    return jnp.sin(x) * 2


X3 = np.array([0.3, -1.2, 2.0])


@pytest.mark.parametrize("target", TARGETS)
def test_vmap_of_vjp_fn_is_the_jacobian(target):
    """The autodiff cookbook's Jacobian by ``vmap(vjp_fn)(eye)``."""
    _, vjp_fun = ad.vjp(sin2, X3)
    _, vjp_jax = jax.vjp(sin2_jax, X3)
    want = jax.vmap(vjp_jax)(jnp.eye(3))
    assert_tree_close(on(target, ad.vmap(vjp_fun))(np.eye(3)), want)
    assert_tree_close(ad.vmap(on(target, vjp_fun))(np.eye(3)), want)
    assert_tree_close(on(target, vjp_fun)(np.ones(3)), vjp_jax(jnp.ones(3)))
    assert_tree_close(ad.vmap(vjp_fun, method="loop")(np.eye(3)), want)
    cts = np.arange(6.).reshape(3, 2)             # the batch on axis 1
    assert_tree_close(ad.vmap(vjp_fun, in_axes=1)(cts), jax.vmap(vjp_jax, in_axes=1)(cts))


def test_vmap_of_vjp_fn_is_one_stacked_rows_call():
    """ad.source shows the code the batch ran: the stacked-rows VJP."""
    _, vjp_fun = ad.vjp(sin2, X3)
    text = ad.source(ad.jit(ad.vmap(vjp_fun)), np.eye(3))
    assert "def vjp_rows_sin2(" in text and "every cotangent of the batch in one call" in text


def test_vmap_of_vjp_fn_from_a_lambda_made_inline():
    """The issue's repro: a lambda, its vjp_fn batched by the identity."""
    out, vjp_fun = ad.vjp(lambda x: np.sin(x) * 2, np.arange(3.))
    _, vjp_jax = jax.vjp(lambda x: jnp.sin(x) * 2, jnp.arange(3.))
    assert_tree_close(ad.vmap(vjp_fun)(np.eye(3)), jax.vmap(vjp_jax)(jnp.eye(3)))
    assert_tree_close(ad.jit(vjp_fun)(np.ones(3)), vjp_jax(jnp.ones(3)))


def layer(p, x):
    return {"u": np.tanh(x @ p["W"] + p["b"]), "s": np.sum(p["W"] ** 2)}


def layer_jax(p, x):
    return {"u": jnp.tanh(x @ p["W"] + p["b"]), "s": jnp.sum(p["W"] ** 2)}


P = {"W": np.arange(6.).reshape(3, 2) / 6, "b": np.array(0.5)}
XS = np.linspace(-1, 1, 12).reshape(4, 3)


@pytest.mark.parametrize("target", TARGETS)
def test_vmap_of_vjp_fn_with_pytrees(target):
    """Pytree primals (a dict with a 0-d leaf) and pytree cotangents, batched
    whole or with an unbatched leaf (in_axes a dict prefix)."""
    _, vjp_fun = ad.vjp(layer, P, XS)
    _, vjp_jax = jax.vjp(layer_jax, P, XS)
    rng = np.random.default_rng(0)
    cts = {"u": rng.normal(size=(5, 4, 2)), "s": rng.normal(size=5)}
    assert_tree_close(on(target, ad.vmap(vjp_fun))(cts), jax.vmap(vjp_jax)(cts))
    axes = ({"u": 0, "s": None},)
    partial = {"u": cts["u"], "s": 1.5}
    assert_tree_close(on(target, ad.vmap(vjp_fun, in_axes=axes))(partial),
                      jax.vmap(vjp_jax, in_axes=axes)(partial))
    one = {"u": cts["u"][0], "s": cts["s"][0]}
    assert_tree_close(on(target, vjp_fun)(one), vjp_jax(one))


def test_vmap_of_vjp_fn_keeps_non_float_arguments_and_aux():
    """An integer primal gets zero cotangents per example; has_aux's vjp_fn
    batches like the plain one."""
    def scaled(x, n):
        return np.sin(x) * n, np.cos(x)

    out, vjp_fun, aux = ad.vjp(scaled, X3, 3, has_aux=True)
    np.testing.assert_allclose(aux, np.cos(X3))
    dx, dn = ad.vmap(vjp_fun)(np.eye(3))
    np.testing.assert_allclose(dx, np.diag(3 * np.cos(X3)), rtol=1e-12)
    assert np.shape(dn) == (3,) and not np.any(dn)


def test_vmap_of_vjp_fn_checks_the_cotangent():
    _, vjp_fun = ad.vjp(sin2, X3)
    with pytest.raises(ValueError, match="shape"):
        ad.vmap(vjp_fun)(np.eye(2))
    _, vjp_tree = ad.vjp(layer, P, XS)
    with pytest.raises(ValueError, match="structure"):
        ad.vmap(vjp_tree)(np.ones((2, 4, 2)))


_, OUTER_VJP = ad.vjp(sin2, X3)
_, OUTER_VJP_JAX = jax.vjp(sin2_jax, X3)
_, OUTER_VJP2 = ad.vjp(lambda x, y: np.sin(x) * y, X3, 1.5)
_, OUTER_VJP2_JAX = jax.vjp(lambda x, y: jnp.sin(x) * y, X3, 1.5)


def uses_outer_vjp(c):
    dx, = OUTER_VJP(c * c)
    ex, ey = OUTER_VJP2(c)
    return np.sum(dx * c) + np.sum(ex ** 2) + ey


def uses_outer_vjp_jax(c):
    dx, = OUTER_VJP_JAX(c * c)
    ex, ey = OUTER_VJP2_JAX(c)
    return jnp.sum(dx * c) + jnp.sum(ex ** 2) + ey


@pytest.mark.parametrize("target", TARGETS)
def test_module_level_vjp_fn_inside_a_differentiated_function(target):
    """A vjp_fn made at module level, called in a function that is
    differentiated: linear in the cotangent, its primals constants."""
    c = np.array([1.0, 2.0, 0.5])
    assert_tree_close(on(target, ad.grad(uses_outer_vjp))(c), jax.grad(uses_outer_vjp_jax)(c))


def f_vec(x):
    return np.array([x[0] * x[1], np.sin(x[2]), np.sum(x ** 2)])


def f_vec_jax(x):
    return jnp.array([x[0] * x[1], jnp.sin(x[2]), jnp.sum(x ** 2)])


@pytest.mark.parametrize("target", TARGETS)
def test_other_returned_callables_under_vmap_and_jit(target):
    """``ad.jacfwd(f)``/``ad.jacrev(f)`` results and a lambda around ``ad.jvp``,
    batched and compiled, give JAX's numbers."""
    xs = np.array([[0.1, 0.2, 0.3], [1.0, -2.0, 0.5]])
    for ours, theirs in ((ad.jacfwd, jax.jacfwd), (ad.jacrev, jax.jacrev)):
        assert_tree_close(on(target, ad.vmap(ours(f_vec)))(xs),
                          jax.vmap(theirs(f_vec_jax))(xs))
        assert_tree_close(ad.vmap(on(target, ours(f_vec)))(xs),
                          jax.vmap(theirs(f_vec_jax))(xs))
    x0 = xs[0]
    push = lambda v: ad.jvp(f_vec, (x0,), (v,))[1]           # noqa: E731
    push_jax = lambda v: jax.jvp(f_vec_jax, (x0,), (v,))[1]   # noqa: E731
    want = jax.vmap(push_jax)(jnp.eye(3))
    assert_tree_close(on(target, ad.vmap(push))(np.eye(3)), want)
    assert_tree_close(on(target, push)(np.ones(3)), push_jax(jnp.ones(3)))


# -- 2. transformed objects bound at module level, called inside a loss ---------------
# The JAX MLP tutorial ("Training a simple neural network", docs/notebooks/
# Neural_Network_and_Data_Loading), translated mechanically: jnp -> np, jax -> ad,
# the random initialisation by NumPy, logsumexp from scipy.special; 20-16-10
# layers instead of 784-512-512-10 so the test is fast.
def random_layer_params(m, n, rng, scale=1e-1):
    return scale * rng.normal(size=(n, m)), scale * rng.normal(size=(n,))


def init_network_params(sizes, rng):
    return [random_layer_params(m, n, rng) for m, n in zip(sizes[:-1], sizes[1:])]


layer_sizes = [20, 16, 10]
step_size = 0.5
n_targets = 10


def relu(x):
    return np.maximum(0, x)


def predict(params, image):
    # per-example predictions
    activations = image
    for w, b in params[:-1]:
        outputs = np.dot(w, activations) + b
        activations = relu(outputs)
    final_w, final_b = params[-1]
    logits = np.dot(final_w, activations) + final_b
    return logits - scipy.special.logsumexp(logits)


batched_predict = ad.vmap(predict, in_axes=(None, 0))


def loss(params, images, targets):
    preds = batched_predict(params, images)
    return -np.mean(preds * targets)


@ad.jit
def update(params, x, y):
    grads = ad.grad(loss)(params, x, y)
    return [(w - step_size * dw, b - step_size * db)
            for (w, b), (dw, db) in zip(params, grads)]


def update_python(params, x, y):
    grads = ad.grad(loss)(params, x, y)
    return [(w - step_size * dw, b - step_size * db)
            for (w, b), (dw, db) in zip(params, grads)]


def predict_jax(params, image):
    activations = image
    for w, b in params[:-1]:
        activations = jnp.maximum(0, jnp.dot(w, activations) + b)
    final_w, final_b = params[-1]
    logits = jnp.dot(final_w, activations) + final_b
    return logits - jax.scipy.special.logsumexp(logits)


batched_predict_jax = jax.vmap(predict_jax, in_axes=(None, 0))


def loss_jax(params, images, targets):
    return -jnp.mean(batched_predict_jax(params, images) * targets)


@jax.jit
def update_jax(params, x, y):
    grads = jax.grad(loss_jax)(params, x, y)
    return [(w - step_size * dw, b - step_size * db)
            for (w, b), (dw, db) in zip(params, grads)]


def one_hot(x, k, dtype=np.float64):
    return np.array(x[:, None] == np.arange(k), dtype)


def batches(steps, size=8):
    rng = np.random.default_rng(1)
    for _ in range(steps):
        images = rng.normal(size=(size, layer_sizes[0]))
        labels = rng.integers(0, n_targets, size=size)
        yield images, one_hot(labels, n_targets)


@pytest.mark.parametrize("step", [update, update_python], ids=["jit", "python"])
def test_mlp_tutorial_sgd_steps_match_jax(step):
    """Each SGD step's parameters equal JAX's (float64) for the tutorial's
    ``update``: ``ad.grad`` of a loss that calls a module-level
    ``batched_predict = ad.vmap(predict, in_axes=(None, 0))``."""
    params = init_network_params(layer_sizes, np.random.default_rng(0))
    params_jax = [(jnp.asarray(w), jnp.asarray(b)) for w, b in params]
    for images, targets in batches(4):
        params = step(params, images, targets)
        params_jax = update_jax(params_jax, images, targets)
        assert_tree_close(params, [tuple(p) for p in params_jax], rtol=1e-9, atol=1e-12)
    images, targets = next(batches(1))
    np.testing.assert_allclose(loss(params, images, targets),
                               loss_jax(params_jax, images, targets), rtol=1e-10)
    predicted = np.argmax(batched_predict(params, images), axis=1)
    np.testing.assert_array_equal(predicted, np.argmax(
        batched_predict_jax(params_jax, images), axis=1))


def tanh_net(params, x):
    w, b = params
    return np.tanh(x @ w + b)


jitted_net = ad.jit(tanh_net)
batched_jitted = ad.jit(ad.vmap(tanh_net, in_axes=(None, 0)))
per_example_grad = ad.vmap(ad.grad(lambda p, x: np.sum(tanh_net(p, x))), in_axes=(None, 0))


def square_sin(x):
    return np.sum(x ** 2 * np.sin(x))


grad_square_sin = ad.grad(square_sin)


def loss_with_jitted(params, x):
    return np.sum(jitted_net(params, x) ** 2)


def loss_with_batched_jitted(params, xs):
    return np.sum(batched_jitted(params, xs) ** 2)


def loss_with_per_example_grads(params, xs):
    dw, db = per_example_grad(params, xs)
    return np.sum(dw ** 2) + np.sum(db)


def uses_grad_object(x):
    return np.sum(grad_square_sin(x) * x)


def net_jax(params, x):
    w, b = params
    return jnp.tanh(x @ w + b)


NET = (np.linspace(-1, 1, 6).reshape(3, 2), np.array([0.1, -0.2]))
NET_XS = np.linspace(-2, 2, 12).reshape(4, 3)


@pytest.mark.parametrize("target", TARGETS)
def test_module_level_objects_inside_a_differentiated_loss(target):
    """``ad.jit(f)``, ``ad.jit(ad.vmap(f))``, ``ad.vmap(ad.grad(f))`` and
    ``ad.grad(f)`` bound at module level, called in a loss that is
    differentiated: the same numbers as the inline forms (JAX's)."""
    net_sum = lambda p, x: jnp.sum(net_jax(p, x))                    # noqa: E731
    cases = [
        (loss_with_jitted, lambda p, x: jnp.sum(net_jax(p, x) ** 2), NET_XS[0]),
        (loss_with_batched_jitted,
         lambda p, xs: jnp.sum(jax.vmap(net_jax, in_axes=(None, 0))(p, xs) ** 2), NET_XS),
        (loss_with_per_example_grads,
         lambda p, xs: (lambda g: jnp.sum(g[0] ** 2) + jnp.sum(g[1]))(
             jax.vmap(jax.grad(net_sum), in_axes=(None, 0))(p, xs)), NET_XS),
    ]
    for ours, theirs, x in cases:
        assert_tree_close(on(target, ad.grad(ours))(NET, x), jax.grad(theirs)(NET, x))
    x = np.array([0.5, -1.0, 2.0])
    want = jax.grad(lambda x: jnp.sum(jax.grad(
        lambda y: jnp.sum(y ** 2 * jnp.sin(y)))(x) * x))(x)
    assert_tree_close(on(target, ad.grad(uses_grad_object))(x), want)


def test_module_level_vmap_given_to_a_transform_inside():
    """A module-level vmap object given to ``ad.jacrev`` inside a function."""
    def jac_sum(p, xs):
        w, b = ad.jacrev(batched_jitted)(p, xs)
        return np.sum(w) + np.sum(b)

    want = jax.jacrev(jax.vmap(net_jax, in_axes=(None, 0)))(NET, NET_XS)
    np.testing.assert_allclose(jac_sum(NET, NET_XS), float(jnp.sum(want[0]) + jnp.sum(want[1])),
                               rtol=1e-12)


# -- 3. print inside transformed code ---------------------------------------------------
def printing(x):
    y = np.sin(x)
    print("y is", y)
    return np.sum(y ** 2)


def printing_loop(x):
    s = 0.0
    for i in range(3):
        s = s + x[i] * s + x[i]
        print("step", i, s, sep=", ")
    return s


def printing_jax(x):
    return jnp.sum(jnp.sin(x) ** 2)


def printing_loop_jax(x):
    s = 0.0
    for i in range(3):
        s = s + x[i] * s + x[i]
    return s


X_PRINT = np.array([0.1, 0.2, 0.3])


def printed(capsys, fn, *args):
    """(fn(*args), what that call printed), after a first call (which may run the
    function once more to check its output) and a read that clears the capture."""
    fn(*args)
    capsys.readouterr()
    result = fn(*args)
    return result, capsys.readouterr().out


@pytest.mark.parametrize("target", TARGETS)
def test_print_prints_the_primal_values_each_call(target, capsys):
    """print is a statement with no derivative: the gradient is JAX's, and
    each call of the generated code prints the values once (the primal's)."""
    line = f"y is {np.sin(X_PRINT)}\n"
    got, out = printed(capsys, on(target, ad.grad(printing)), X_PRINT)
    assert_tree_close(got, jax.grad(printing_jax)(X_PRINT))
    assert out == line
    got, out = printed(capsys, on(target, printing), X_PRINT)
    np.testing.assert_allclose(got, printing_jax(X_PRINT), rtol=1e-14)
    assert out == line
    (value, tangent), out = printed(capsys, ad.jvp, printing, (X_PRINT,), (np.ones(3),))
    assert_tree_close(tangent, jax.jvp(printing_jax, (X_PRINT,), (jnp.ones(3),))[1])
    assert out == line
    got, out = printed(capsys, on(target, ad.grad(printing_loop)), X_PRINT)
    assert_tree_close(got, jax.grad(printing_loop_jax)(X_PRINT))
    s, want = 0.0, ""
    for i in range(3):
        s = s + X_PRINT[i] * s + X_PRINT[i]
        want += f"step, {i}, {s}\n"
    assert out == want


def test_print_under_vmap(capsys):
    """Batched by rules, the statement prints the batch once; the per-sample
    loop prints once per example."""
    xs = np.stack([X_PRINT, 2 * X_PRINT])
    got, out = printed(capsys, ad.vmap(printing, method="vectorize"), xs)
    np.testing.assert_allclose(got, jax.vmap(printing_jax)(xs), rtol=1e-14)
    assert out == f"y is {np.sin(xs)}\n"
    got, out = printed(capsys, ad.vmap(printing, method="loop"), xs)
    np.testing.assert_allclose(got, jax.vmap(printing_jax)(xs), rtol=1e-14)
    assert out == "".join(f"y is {np.sin(x)}\n" for x in xs)
    got, out = printed(capsys, ad.jit(ad.vmap(ad.grad(printing))), xs)
    assert_tree_close(got, jax.vmap(jax.grad(printing_jax))(xs))
    assert out == "".join(f"y is {np.sin(x)}\n" for x in xs)


# -- 4. Jacobians with respect to 0-d array leaves ---------------------------------------
def tanh_loss(p, x):
    return np.sum(np.tanh(x @ p["W"] + p["b"]))


def tanh_layer(p, x):
    return np.tanh(x @ p["W"] + p["b"])


def scaled_tanh(b, x):
    return np.tanh(x * b)


def tanh_loss_jax(p, x):
    return jnp.sum(jnp.tanh(x @ p["W"] + p["b"]))


def tanh_layer_jax(p, x):
    return jnp.tanh(x @ p["W"] + p["b"])


def scaled_tanh_jax(b, x):
    return jnp.tanh(x * b)


P0D = {"W": np.linspace(-1, 1, 6).reshape(3, 2), "b": np.array(0.5)}
X0D = np.linspace(-1, 2, 12).reshape(4, 3)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("ours, theirs", [(tanh_loss, tanh_loss_jax),
                                          (tanh_layer, tanh_layer_jax)],
                         ids=["scalar", "vector"])
def test_jacobians_with_respect_to_a_0d_array_leaf(target, ours, theirs):
    """The reported ad.jit(ad.jacrev(loss)) with b a 0-d array, and its variants."""
    for mine, jaxs in ((ad.jacrev, jax.jacrev), (ad.jacfwd, jax.jacfwd)):
        assert_tree_close(on(target, mine(ours))(P0D, X0D), jaxs(theirs)(P0D, X0D))
    xs = np.stack([X0D, 0.5 * X0D])
    assert_tree_close(on(target, ad.vmap(ad.jacrev(ours), in_axes=(None, 0)))(P0D, xs),
                      jax.vmap(jax.jacrev(theirs), in_axes=(None, 0))(P0D, xs))
    if ours is tanh_loss:
        assert_tree_close(on(target, ad.hessian(ours))(P0D, X0D), jax.hessian(theirs)(P0D, X0D))


@pytest.mark.parametrize("target", TARGETS)
def test_jacobians_of_a_bare_0d_array_argument(target):
    b, x = np.array(0.5), np.linspace(-1, 1, 4)
    for mine, jaxs in ((ad.jacrev, jax.jacrev), (ad.jacfwd, jax.jacfwd),
                       (ad.hessian, jax.hessian)):
        assert_tree_close(on(target, mine(scaled_tanh))(b, x), jaxs(scaled_tanh_jax)(b, x))
    bs = np.array([0.5, 1.0])
    assert_tree_close(on(target, ad.vmap(ad.jacrev(scaled_tanh), in_axes=(0, None)))(bs, x),
                      jax.vmap(jax.jacrev(scaled_tanh_jax), in_axes=(0, None))(bs, x))


def printing_inside(x):
    unused = print("x is", x)            # noqa: F841  (print inside an expression)
    return np.sum(x ** 2)


def test_print_inside_an_expression_prints_too(capsys):
    got, out = printed(capsys, ad.jit(ad.grad(printing_inside)), X_PRINT)
    np.testing.assert_allclose(got, 2 * X_PRINT, rtol=1e-15)
    assert out == f"x is {X_PRINT}\n"
