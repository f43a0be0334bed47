"""The examples run, and their gradients match closed-form derivatives.

Each example's ``main()`` is run as a user would run the script; what it
returns is checked against gradients derived by hand and computed here with
plain NumPy, never against s2s_ad itself.
"""
import importlib.util
import pathlib

import numpy as np
import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def load(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


@pytest.fixture(scope="module")
def linear_bce():
    return load("linear_bce")


@pytest.fixture(scope="module")
def linear_bce_run(linear_bce):
    return linear_bce.main()


def bce_reference(x, y, w, b):
    """Loss, dloss/dw and dloss/db of mean BCE-with-logits, by hand.

    With p = sigmoid(z), d/dz of -y log p - (1 - y) log(1 - p) is p - y, so
    dloss/dz = (p - y) / n, dloss/db = that, and dloss/dw = outer(x, that).
    """
    z = x @ w + b
    p = sigmoid(z)
    loss = np.mean(-y * np.log(p) - (1.0 - y) * np.log(1.0 - p))
    dz = (p - y) / z.size
    return loss, np.outer(x, dz), dz, z


def assert_pair_close(got, want_w, want_b):
    got_w, got_b = got
    assert got_w.shape == want_w.shape and got_b.shape == want_b.shape
    np.testing.assert_allclose(got_w, want_w, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got_b, want_b, rtol=1e-12, atol=1e-14)


def test_linear_bce_inputs_are_the_tutorials(linear_bce_run):
    x, y, w, b = linear_bce_run["inputs"]
    assert np.array_equal(x, np.ones(5)) and np.array_equal(y, np.zeros(3))
    assert w.shape == (5, 3) and b.shape == (3,)


@pytest.mark.parametrize("key", ["grad", "aux_grad", "stop_gradient_grad", "value_and_grad",
                                 "jit_grad"])
def test_linear_bce_gradients(linear_bce_run, key):
    _, want_w, want_b, _ = bce_reference(*linear_bce_run["inputs"])
    assert_pair_close(linear_bce_run[key], want_w, want_b)


def test_linear_bce_value_and_aux(linear_bce_run):
    loss, _, _, z = bce_reference(*linear_bce_run["inputs"])
    assert linear_bce_run["value"] == pytest.approx(loss, rel=1e-12)
    np.testing.assert_allclose(linear_bce_run["z"], z, rtol=1e-12)


def test_linear_bce_both_outputs_pulled_back(linear_bce_run):
    # Pulling (1, ones) back through (loss, z) differentiates loss + sum(z):
    # d(sum z)/db = 1 and d(sum z)/dw = outer(x, 1).
    x, _, _, _ = linear_bce_run["inputs"]
    _, want_w, want_b, _ = bce_reference(*linear_bce_run["inputs"])
    assert_pair_close(linear_bce_run["both_outputs_grad"],
                      want_w + np.outer(x, np.ones(3)), want_b + 1.0)


def test_linear_bce_loss_is_stable_for_large_logits(linear_bce):
    # The naive log(sigmoid(z)) form gives inf/nan here; the example's does not.
    z = np.array([-800.0, 0.0, 800.0])
    y = np.array([1.0, 0.5, 0.0])
    want = np.mean([800.0, np.log(2.0), 800.0])
    assert linear_bce.bce_with_logits(z, y) == pytest.approx(want, rel=1e-12)


def test_linear_bce_prints(capsys, linear_bce):
    linear_bce.main()
    out = capsys.readouterr().out
    assert "dloss/dw" in out and "dloss/db" in out
    assert "equal to step 1: True" in out
    assert "False" not in out


def td_reference(theta, s_t, r_tp1, s_tp1):
    """grad of (const(r + theta.s_tp1) - theta.s_t)**2 = -2 * TD error * s_t."""
    td_error = r_tp1 + theta @ s_tp1 - theta @ s_t
    return -2.0 * td_error * s_t


def test_td0_update(capsys):
    result = load("td0_update").main()
    theta, s_t, r_tp1, s_tp1 = result["inputs"]
    want = td_reference(theta, s_t, r_tp1, s_tp1)
    np.testing.assert_allclose(want, [-7.2, -3.6, 7.2], rtol=1e-12)  # API.md's numbers
    for key in ("grad", "jit_grad"):
        np.testing.assert_allclose(result[key], want, rtol=1e-12)
    lr = result["learning_rate"]
    for key in ("theta", "jit_theta"):
        np.testing.assert_allclose(result[key], theta - lr * want, rtol=1e-12)
    out = capsys.readouterr().out
    assert "-7.2" in out and "-3.6" in out


# -- shared by the examples below ---------------------------------------------


def run_capturing(module):
    """``module.main()``'s result and what it printed (for module-scoped fixtures)."""
    import contextlib
    import io
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        result = module.main()
    return result, buffer.getvalue()


def central_jacobian(f, x, eps=1e-6):
    """d f / d x by central differences, shaped f(x).shape + x.shape."""
    x = np.asarray(x, dtype=float)
    cols = []
    for i in range(x.size):
        e = np.zeros(x.size)
        e[i] = eps
        e = e.reshape(x.shape)
        cols.append((np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2.0 * eps))
    out_shape = np.shape(f(x))
    return np.stack(cols, axis=-1).reshape(out_shape + x.shape)


def assert_tree_close(got, want, rtol=1e-10, atol=1e-12):
    assert isinstance(got, tuple) and len(got) == len(want)
    for g, w in zip(got, want):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


# -- autodiff_walkthrough ------------------------------------------------------


def tanh_derivatives(x):
    """tanh' = 1 - t^2, tanh'' = -2 t (1 - t^2), tanh''' = (1 - t^2)(6 t^2 - 2)."""
    t = np.tanh(x)
    s = 1.0 - t * t
    return s, -2.0 * t * s, s * (6.0 * t * t - 2.0)


def logreg_reference(inputs, targets, W, b):
    """Loss -sum(t log p + (1 - t) log(1 - p)), p = sigmoid(inputs @ W + b); its gradient.

    d/dz of each term is p - t, so dloss/dW = inputs.T @ (p - t), dloss/db = sum(p - t).
    """
    p = sigmoid(inputs @ W + b)
    value = -np.sum(targets * np.log(p) + (1.0 - targets) * np.log(1.0 - p))
    return value, inputs.T @ (p - targets), np.sum(p - targets)


def chain_reference(x):
    """Gradient and Hessian of sum_i tanh(x_i x_{i+1}) + 0.1 sum_i x_i^3.

    With u_i = x_i x_{i+1}, s_i = 1 - tanh(u_i)^2 and s'_i = -2 tanh(u_i) s_i:
    g_i = 0.3 x_i^2 + s_i x_{i+1} + s_{i-1} x_{i-1};
    H_ii = 0.6 x_i + s'_i x_{i+1}^2 + s'_{i-1} x_{i-1}^2;
    H_{i,i+1} = H_{i+1,i} = s'_i x_i x_{i+1} + s_i.
    """
    n = x.size
    t = np.tanh(x[:-1] * x[1:])
    s = 1.0 - t * t
    ds = -2.0 * t * s
    g = 0.3 * x * x
    g[:-1] += s * x[1:]
    g[1:] += s * x[:-1]
    H = np.diag(0.6 * x)
    H[np.arange(n - 1), np.arange(n - 1)] += ds * x[1:] ** 2
    H[np.arange(1, n), np.arange(1, n)] += ds * x[:-1] ** 2
    off = ds * x[:-1] * x[1:] + s
    H[np.arange(n - 1), np.arange(1, n)] = off
    H[np.arange(1, n), np.arange(n - 1)] = off
    return g, H


def chain_value(x):
    return np.sum(np.tanh(x[:-1] * x[1:])) + 0.1 * np.sum(x ** 3)


def tall_value(x):
    t = 0.25 * np.arange(8)
    return np.sin(t * x[0] + x[1]) * np.exp(-t * x[2])


def tall_jacobian(x):
    """Columns d/dx0 = t cos(a) e, d/dx1 = cos(a) e, d/dx2 = -t sin(a) e; a = t x0 + x1, e = exp(-t x2)."""
    t = 0.25 * np.arange(8)
    a = t * x[0] + x[1]
    e = np.exp(-t * x[2])
    return np.stack([t * np.cos(a) * e, np.cos(a) * e, -t * np.sin(a) * e], axis=1)


def wide_value(x):
    s = np.sum(x * x)
    q = np.sum(np.arange(1, x.size + 1) * np.tanh(x))
    return np.array([np.log1p(s), q * s])


def wide_jacobian(x):
    """Row 0: 2x / (1 + s); row 1: s (i + 1)(1 - tanh^2 x_i) + 2 q x_i."""
    s = np.sum(x * x)
    k = np.arange(1, x.size + 1)
    q = np.sum(k * np.tanh(x))
    return np.stack([2.0 * x / (1.0 + s), s * k * (1.0 - np.tanh(x) ** 2) + 2.0 * q * x])


def test_walkthrough_references_match_finite_differences():
    """The hand-derived references above, checked without s2s_ad."""
    for x0 in (2.0, -0.7):
        d1, d2, d3 = tanh_derivatives(x0)
        eps = 1e-5
        assert (np.tanh(x0 + eps) - np.tanh(x0 - eps)) / (2 * eps) == pytest.approx(d1, rel=1e-8)
        assert (tanh_derivatives(x0 + eps)[0] - tanh_derivatives(x0 - eps)[0]) / (2 * eps) == \
            pytest.approx(d2, rel=1e-8)
        assert (tanh_derivatives(x0 + eps)[1] - tanh_derivatives(x0 - eps)[1]) / (2 * eps) == \
            pytest.approx(d3, rel=1e-7)
    rng = np.random.default_rng(3)
    inputs, targets = rng.standard_normal((4, 3)), np.array([1.0, 1.0, 0.0, 1.0])
    W, b = rng.standard_normal(3), 0.3
    _, dW, db = logreg_reference(inputs, targets, W, b)
    np.testing.assert_allclose(
        central_jacobian(lambda w: logreg_reference(inputs, targets, w, b)[0], W), dW, rtol=1e-7)
    assert central_jacobian(lambda c: logreg_reference(inputs, targets, W, c)[0],
                            np.array(b)) == pytest.approx(db, rel=1e-7)
    x = rng.standard_normal(5)
    g, H = chain_reference(x)
    np.testing.assert_allclose(central_jacobian(chain_value, x), g, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(central_jacobian(lambda z: chain_reference(z)[0], x), H,
                               rtol=1e-7, atol=1e-9)
    xt = rng.standard_normal(3)
    np.testing.assert_allclose(central_jacobian(tall_value, xt), tall_jacobian(xt),
                               rtol=1e-7, atol=1e-9)
    xw = rng.standard_normal(8)
    np.testing.assert_allclose(central_jacobian(wide_value, xw), wide_jacobian(xw),
                               rtol=1e-7, atol=1e-9)


@pytest.fixture(scope="module")
def walkthrough():
    return load("autodiff_walkthrough")


@pytest.fixture(scope="module")
def walkthrough_run(walkthrough):
    return run_capturing(walkthrough)


def test_walkthrough_user_functions_are_the_references(walkthrough):
    """The example's plain-NumPy functions compute what the references differentiate."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal(5)
    assert walkthrough.chain(x) == pytest.approx(chain_value(x), rel=1e-13)
    xt, xw = rng.standard_normal(3), rng.standard_normal(8)
    np.testing.assert_allclose(walkthrough.tall(xt), tall_value(xt), rtol=1e-13)
    np.testing.assert_allclose(walkthrough.wide(xw), wide_value(xw), rtol=1e-13)
    assert walkthrough.tanh(0.8) == pytest.approx(np.tanh(0.8), rel=1e-13)
    W, b = rng.standard_normal(3), -0.2
    want, _, _ = logreg_reference(walkthrough.INPUTS, walkthrough.TARGETS, W, b)
    assert walkthrough.loss(W, b) == pytest.approx(want, rel=1e-13)


def test_walkthrough_higher_derivatives(walkthrough_run):
    r, _ = walkthrough_run
    want = tanh_derivatives(r["tanh_x"])
    for got, w in zip(r["tanh_derivatives"], want):
        assert got == pytest.approx(w, rel=1e-10, abs=1e-14)
    assert r["tanh_fd"] == pytest.approx(want[0], rel=1e-7)


def test_walkthrough_logistic_regression(walkthrough, walkthrough_run):
    r, _ = walkthrough_run
    W, b = r["logreg_params"]
    value, dW, db = logreg_reference(walkthrough.INPUTS, walkthrough.TARGETS, W, b)
    np.testing.assert_allclose(r["grad_W"], dW, rtol=1e-12)
    np.testing.assert_allclose(r["grad_Wb"][0], dW, rtol=1e-12)
    assert r["grad_Wb"][1] == pytest.approx(db, rel=1e-12)
    assert r["value"] == pytest.approx(value, rel=1e-12)
    np.testing.assert_allclose(r["value_and_grad"][0], dW, rtol=1e-12)
    assert r["value_and_grad"][1] == pytest.approx(db, rel=1e-12)
    # the finite differences the example prints agree with the closed form
    u = r["direction"]
    assert np.sum(u * u) == pytest.approx(1.0)
    assert r["b_fd"] == pytest.approx(db, rel=1e-7)
    assert r["W_fd"] == pytest.approx(np.dot(dW, u), rel=1e-6)
    assert r["W_ad"] == pytest.approx(np.dot(dW, u), rel=1e-12)


@pytest.mark.parametrize("key", ["hvp", "hvp_jvp", "hvp_rev_fwd"])
def test_walkthrough_hessian_vector_products(walkthrough_run, key):
    r, _ = walkthrough_run
    g, H = chain_reference(r["hvp_x"])
    assert np.shape(r[key]) == (5,)
    np.testing.assert_allclose(r[key], H @ r["hvp_v"], rtol=1e-11, atol=1e-13)
    if key == "hvp_jvp":
        np.testing.assert_allclose(r["hvp_jvp_primal"], g, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", ["tall", "wide"])
@pytest.mark.parametrize("mode", ["jacfwd", "jacrev"])
def test_walkthrough_jacobians(walkthrough_run, name, mode):
    r, _ = walkthrough_run
    want = {"tall": tall_jacobian, "wide": wide_jacobian}[name](r[f"{name}_x"])
    assert want.shape == {"tall": (8, 3), "wide": (2, 8)}[name]
    got = r[f"{name}_{mode}"]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("key", ["hessian_fwd_rev", "hessian"])
def test_walkthrough_dense_hessian(walkthrough_run, key):
    r, _ = walkthrough_run
    _, H = chain_reference(r["hvp_x"])
    assert r[key].shape == (5, 5)
    np.testing.assert_allclose(r[key], H, rtol=1e-11, atol=1e-13)


def test_walkthrough_prints(walkthrough_run):
    _, out = walkthrough_run
    for text in ("ad.grad(ad.grad(tanh))(2)", "finite difference", "ad.hvp(chain, (x,), (v,))",
                 "reverse-over-forward", "ad.jacfwd(tall)(x)", "ad.jacrev(wide)(x)",
                 "ad.jacfwd(ad.jacrev(chain))(x)", "(8, 3)", "(2, 8)"):
        assert text in out
    assert "True" in out and "False" not in out


# -- per_sample_td0 ------------------------------------------------------------


@pytest.fixture(scope="module")
def per_sample_td0_run():
    return run_capturing(load("per_sample_td0"))


@pytest.mark.parametrize("key", ["vmap_batched_theta", "vmap_shared_theta", "jit_vmap"])
def test_per_sample_td0_tutorial_batch(per_sample_td0_run, key):
    r, _ = per_sample_td0_run
    want = td_reference(*r["inputs"])
    np.testing.assert_allclose(r["grad"], want, rtol=1e-12)
    assert r[key].shape == (2, 3)
    np.testing.assert_allclose(r[key], [[-7.2, -3.6, 7.2]] * 2, rtol=1e-12)  # API.md's numbers


def test_per_sample_td0_different_transitions(per_sample_td0_run):
    r, _ = per_sample_td0_run
    theta = r["inputs"][0]
    states, rewards, next_states = r["batch"]
    want = np.stack([td_reference(theta, s, rw, s1)
                     for s, rw, s1 in zip(states, rewards, next_states)])
    assert r["batch_grads"].shape == want.shape == (5, 3)
    np.testing.assert_allclose(r["batch_grads"], want, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(r["theta"], theta - r["learning_rate"] * want.mean(axis=0),
                               rtol=1e-12)


def test_per_sample_td0_prints(per_sample_td0_run):
    _, out = per_sample_td0_run
    assert "in_axes=(None, 0, 0, 0)" in out and "ad.jit(ad.vmap" in out
    assert out.count("-7.2") >= 7 and out.count("-3.6") >= 7


# -- per_example_policy_gradients -----------------------------------------------


def policy_reference(params, obs, action):
    """Gradients of -log softmax(tanh(obs @ W1 + b1) @ W2 + b2)[action], by hand.

    dL/dz = softmax(z) - onehot(action); dW2 = outer(h, dz), db2 = dz;
    dh = W2 @ dz, du = dh * (1 - h^2); dW1 = outer(obs, du), db1 = du.
    """
    W1, b1, W2, b2 = params
    h = np.tanh(obs @ W1 + b1)
    z = h @ W2 + b2
    p = np.exp(z - z.max())
    p /= p.sum()
    dz = p.copy()
    dz[action] -= 1.0
    du = (W2 @ dz) * (1.0 - h * h)
    return np.outer(obs, du), du, np.outer(h, dz), dz


def test_policy_reference_matches_finite_differences():
    rng = np.random.default_rng(7)
    params = (rng.standard_normal((4, 8)), rng.standard_normal(8),
              rng.standard_normal((8, 3)), rng.standard_normal(3))
    obs, action = rng.standard_normal(4), 2

    def nll(*ps):
        W1, b1, W2, b2 = ps
        z = np.tanh(obs @ W1 + b1) @ W2 + b2
        return -(z[action] - np.log(np.sum(np.exp(z))))

    want = policy_reference(params, obs, action)
    for i in range(4):
        def along(p, i=i):
            ps = list(params)
            ps[i] = p
            return nll(*ps)
        np.testing.assert_allclose(central_jacobian(along, params[i]), want[i],
                                   rtol=1e-7, atol=1e-9)


@pytest.fixture(scope="module")
def policy_run():
    return run_capturing(load("per_example_policy_gradients"))


def policy_references(r):
    per = [policy_reference(r["params"], o, a) for o, a in zip(r["obs"], r["actions"])]
    return tuple(np.stack(leaf) for leaf in zip(*per))


@pytest.mark.parametrize("key", ["grads", "jit_grads"])
def test_policy_per_instance_gradients(policy_run, key):
    r, _ = policy_run
    assert np.issubdtype(r["actions"].dtype, np.integer)
    want = policy_references(r)
    assert [w.shape for w in want] == [(6, 4, 8), (6, 8), (6, 8, 3), (6, 3)]
    assert isinstance(r[key], tuple)          # argnums=(0, 1, 2, 3): one gradient each
    assert_tree_close(r[key], want)


@pytest.mark.parametrize("key", ["update", "batch_grad"])
def test_policy_weighted_update(policy_run, key):
    r, _ = policy_run
    returns = r["returns"]
    want = tuple(np.mean(returns.reshape((-1,) + (1,) * (g.ndim - 1)) * g, axis=0)
                 for g in policy_references(r))
    assert_tree_close(tuple(r[key]), want)
    if key == "update":
        lr = r["learning_rate"]
        assert_tree_close(tuple(r["new_params"]),
                          tuple(p - lr * u for p, u in zip(r["params"], want)))


def test_policy_prints(policy_run):
    _, out = policy_run
    assert "in_axes=(None, None, None, None, 0, 0)" in out
    assert "(6, 4, 8)" in out and "True" in out and "False" not in out


# -- dp_sgd_clipping -----------------------------------------------------------


def mlp_reference(params, x, y):
    """Gradient of log(1 + exp(-y z)), z = tanh(x @ W1 + b1) . w2 + b2, by hand.

    dL/dz = -y / (1 + exp(y z)); dw2 = dz h, db2 = dz; du = dz w2 (1 - h^2);
    dW1 = outer(x, du), db1 = du.
    """
    W1, b1, w2, b2 = params
    h = np.tanh(x @ W1 + b1)
    z = h @ w2 + b2
    dz = -y / (1.0 + np.exp(y * z))
    du = dz * w2 * (1.0 - h * h)
    return np.outer(x, du), du, dz * h, dz


def dp_sgd_reference(params, x, y, clip_norm, noise_multiplier, learning_rate, noise_seed):
    """The DP-SGD step written out, one example at a time."""
    total = [np.zeros(np.shape(p)) for p in params]
    norms, grads = [], []
    for xi, yi in zip(x, y):
        g = mlp_reference(params, xi, yi)
        norm = np.sqrt(sum(np.sum(np.square(leaf)) for leaf in g))
        factor = min(1.0, clip_norm / norm)
        for k, leaf in enumerate(g):
            total[k] = total[k] + factor * leaf
        norms.append(norm)
        grads.append(g)
    rng = np.random.default_rng(noise_seed)   # one draw per parameter, in order
    noise = [noise_multiplier * clip_norm * rng.standard_normal(np.shape(p)) for p in params]
    mean = tuple((t + n) / len(x) for t, n in zip(total, noise))
    new = tuple(p - learning_rate * m for p, m in zip(params, mean))
    stacked = tuple(np.stack(leaf) for leaf in zip(*grads))
    return stacked, np.array(norms), mean, new


def test_mlp_reference_matches_finite_differences():
    rng = np.random.default_rng(11)
    params = (rng.standard_normal((4, 5)), rng.standard_normal(5), rng.standard_normal(5), 0.2)
    x = rng.standard_normal(4)
    for y in (-1.0, 1.0):
        def value(*ps):
            W1, b1, w2, b2 = ps
            return np.log1p(np.exp(-y * (np.tanh(x @ W1 + b1) @ w2 + b2)))
        want = mlp_reference(params, x, y)
        for i in range(4):
            def along(p, i=i):
                ps = list(params)
                ps[i] = p
                return value(*ps)
            np.testing.assert_allclose(central_jacobian(along, params[i]), want[i],
                                       rtol=1e-7, atol=1e-9)


@pytest.fixture(scope="module")
def dp_sgd_run():
    return run_capturing(load("dp_sgd_clipping"))


DP_NAMES = ("W1", "b1", "w2", "b2")


def dp_tuple(tree):
    """The example's dict params (or gradients) as the reference's tuple."""
    assert isinstance(tree, dict) and sorted(tree) == sorted(DP_NAMES)
    return tuple(tree[k] for k in DP_NAMES)


def dp_reference_of(r):
    return dp_sgd_reference(dp_tuple(r["params"]), r["x"], r["y"], r["clip_norm"],
                            r["noise_multiplier"], r["learning_rate"], r["noise_seed"])


def test_dp_sgd_per_sample_gradients(dp_sgd_run):
    r, _ = dp_sgd_run
    grads, norms, _, _ = dp_reference_of(r)
    assert [np.shape(g) for g in grads] == [(8, 4, 5), (8, 5), (8, 5), (8,)]
    assert isinstance(r["grads"], dict)       # the structure of params, batched leaves
    assert_tree_close(dp_tuple(r["grads"]), grads)
    np.testing.assert_allclose(r["norms"], norms, rtol=1e-12)


def test_dp_sgd_clipping(dp_sgd_run):
    r, _ = dp_sgd_run
    _, norms, _, _ = dp_reference_of(r)
    c = r["clip_norm"]
    # the example's data clip some examples and leave others, so both paths run
    assert 0 < np.sum(norms > c) < norms.size
    np.testing.assert_allclose(r["clipped_norms"], np.minimum(norms, c), rtol=1e-12)


def test_dp_sgd_step(dp_sgd_run):
    r, _ = dp_sgd_run
    _, _, mean, new = dp_reference_of(r)
    assert_tree_close(dp_tuple(r["noisy_mean"]), mean)
    assert_tree_close(dp_tuple(r["new_params"]), new)


def test_dp_sgd_non_private_gradient_of_a_lambda(dp_sgd_run):
    r, out = dp_sgd_run
    grads, _, _, _ = dp_reference_of(r)
    assert_tree_close(dp_tuple(r["mean_grad"]), tuple(np.mean(g, axis=0) for g in grads))
    assert "ad.grad of a lambda" in out


def test_dp_sgd_prints(dp_sgd_run):
    _, out = dp_sgd_run
    assert "per-sample gradient norms" in out and "clipped norms" in out
    assert "in_axes=(None, 0, 0)" in out
