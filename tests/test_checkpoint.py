"""``ad.checkpoint`` (JAX's ``jax.checkpoint`` / ``jax.remat``): a wrapped
function's intermediates are not kept for the backward sweep; it runs again
there.  Every derivative equals the unwrapped function's and finite
differences, in every reverse transform, jitted or not, batched both ways; the
backward sweep's memory shrinks (tracemalloc)."""
import functools
import tracemalloc

import numpy as np
import pytest
from conftest import fd_jacobian

import s2s_ad as ad


def cell(W, h, x):
    """A helper with a loop, a branch and in-place writes into its own array."""
    out = np.zeros_like(h)
    for i in range(h.shape[0]):
        out[i] = np.tanh(W[i] @ h + x[i])
    if np.sum(out) > 0.0:
        out = out * 1.5
    else:
        out[0] = out[0] ** 2
    return out


ck_cell = ad.checkpoint(cell)


def rollout(W, h, xs, step):
    for t in range(xs.shape[0]):
        h = step(W, h, xs[t])
    return np.sum(h ** 2) + np.sum(np.sin(h))


def loss_ck(W, h, xs):
    return rollout(W, h, xs, ck_cell)


def loss_plain(W, h, xs):
    return rollout(W, h, xs, cell)


rng = np.random.default_rng(7)
W = rng.normal(size=(4, 4)) * 0.6
H = rng.normal(size=4)
XS = rng.normal(size=(5, 4))


def test_grad_equals_the_unwrapped_gradient_and_finite_differences():
    gW, gh = ad.grad(loss_ck, argnums=(0, 1))(W, H, XS)
    pW, ph = ad.grad(loss_plain, argnums=(0, 1))(W, H, XS)
    np.testing.assert_allclose(gW, pW, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(gh, ph, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(gW, fd_jacobian(lambda w: loss_plain(w, H, XS), W), atol=1e-7)
    np.testing.assert_allclose(gh, fd_jacobian(lambda v: loss_plain(W, v, XS), H), atol=1e-7)


def test_the_backward_sweep_runs_the_checkpointed_helper_again():
    text = ad.source(ad.grad(loss_ck), W, H, XS)
    assert "cell is checkpointed (ad.checkpoint): run again here" in text
    plain = ad.source(ad.grad(loss_plain), W, H, XS)
    assert "checkpointed" not in plain


@pytest.mark.parametrize("jit", [False, True])
def test_every_reverse_transform(jit):
    wrap = ad.jit if jit else (lambda f: f)

    def vec(W, h):
        return rollout_vec(W, h)

    def rollout_vec(W, h):
        for t in range(3):
            h = ck_cell(W, h, XS[t])
        return h

    def vec_plain(W, h):
        for t in range(3):
            h = cell(W, h, XS[t])
        return h

    v, g = wrap(ad.value_and_grad(loss_ck, 1))(W, H, XS)
    v0, g0 = ad.value_and_grad(loss_plain, 1)(W, H, XS)
    np.testing.assert_allclose(v, v0, rtol=1e-14)
    np.testing.assert_allclose(g, g0, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(wrap(ad.jacrev(vec, 1))(W, H), ad.jacfwd(vec_plain, 1)(W, H),
                               rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(wrap(ad.hessian(loss_ck, 1))(W, H, XS),
                               ad.hessian(loss_plain, 1)(W, H, XS), rtol=1e-9, atol=1e-10)
    t = np.linspace(-1.0, 1.0, 4)
    hvp = wrap(lambda h, t: ad.hvp(lambda v: loss_ck(W, v, XS), (h,), (t,)))
    np.testing.assert_allclose(hvp(H, t), ad.hessian(loss_plain, 1)(W, H, XS) @ t,
                               rtol=1e-9, atol=1e-10)
    out, pull = ad.vjp(vec, W, H)
    ct = np.array([0.3, -1.0, 2.0, 0.5])
    bW, bh = pull(ct)
    jW = ad.jacfwd(vec_plain, 0)(W, H)
    np.testing.assert_allclose(bW, np.tensordot(ct, jW, 1), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ad.jvp(vec, (W, H), (np.zeros_like(W), t))[1],
                               ad.jacfwd(vec_plain, 1)(W, H) @ t, rtol=1e-10, atol=1e-12)


def smooth_cell(W, h, x):
    """A loop and in-place writes, no branch on a value (batching rules take it)."""
    out = np.zeros_like(h)
    for i in range(h.shape[0]):
        out[i] = np.tanh(W[i] @ h + x[i])
    out[0] = out[0] ** 2
    return out


ck_smooth = ad.checkpoint(smooth_cell)


def smooth_ck(W, h, xs):
    return rollout(W, h, xs, ck_smooth)


def smooth_plain(W, h, xs):
    return rollout(W, h, xs, smooth_cell)


@pytest.mark.parametrize("method", ["loop", "vectorize"])
@pytest.mark.parametrize("jit", [False, True])
def test_per_example_gradients(method, jit):
    hs = np.stack([H, -H, 0.5 * H])
    grad = ad.vmap(ad.grad(smooth_ck, 1), in_axes=(None, 0, None), method=method)
    got = (ad.jit(grad) if jit else grad)(W, hs, XS)
    assert "checkpointed" in ad.source(grad, W, hs, XS)
    for b in range(3):
        want = ad.grad(smooth_plain, 1)(W, hs[b], XS)
        np.testing.assert_allclose(got[b], want, rtol=1e-11, atol=1e-13)
        np.testing.assert_allclose(want, fd_jacobian(lambda v: smooth_plain(W, v, XS), hs[b]),
                                   atol=1e-7)


def test_the_entry_itself_checkpointed():
    f = ad.checkpoint(lambda W, h: loss_plain(W, h, XS))
    np.testing.assert_allclose(ad.grad(f, 1)(W, H), ad.grad(loss_plain, 1)(W, H, XS),
                               rtol=1e-13)
    np.testing.assert_allclose(f(W, H), loss_plain(W, H, XS))


def test_a_custom_rule_and_a_nested_gradient_inside():
    @ad.custom_vjp
    def clip(x):
        return np.clip(x, -1.0, 1.0)
    clip.defvjp(lambda x: (np.clip(x, -1.0, 1.0), x),
                lambda x, g: (g * (np.abs(x) <= 1.0) * 0.5,))     # a deliberate rule

    @ad.checkpoint
    def inner(w, x):
        step = ad.grad(lambda v: np.sum(np.tanh(v * x) ** 2))(w)
        return clip(w - 0.1 * step) * x

    def outer(w, x):
        return np.sum(inner(inner(w, x), x) ** 2)

    def outer_plain(w, x):
        def inner_plain(w, x):
            step = ad.grad(lambda v: np.sum(np.tanh(v * x) ** 2))(w)
            return clip(w - 0.1 * step) * x
        return np.sum(inner_plain(inner_plain(w, x), x) ** 2)

    w, x = np.array([0.3, -0.8, 1.4]), np.array([1.1, 0.4, -0.7])
    np.testing.assert_allclose(ad.grad(outer)(w, x), ad.grad(outer_plain)(w, x), rtol=1e-12)
    np.testing.assert_allclose(ad.jit(ad.grad(outer))(w, x), ad.grad(outer_plain)(w, x),
                               rtol=1e-12)


def test_the_same_function_called_plainly_too():
    def both(W, h, xs):
        return np.sum(ck_cell(W, h, xs[0]) * cell(W, h, xs[1]))

    def neither(W, h, xs):
        return np.sum(cell(W, h, xs[0]) * cell(W, h, xs[1]))
    np.testing.assert_allclose(ad.grad(both, 1)(W, H, XS), ad.grad(neither, 1)(W, H, XS),
                               rtol=1e-13)
    text = ad.source(ad.grad(both, 1), W, H, XS)
    assert text.count("is checkpointed (ad.checkpoint)") == 1


def test_policies():
    keep = ad.checkpoint(cell, policy=ad.checkpoint_policies.everything_saveable)
    named = ad.checkpoint(cell, policy="nothing_saveable")
    partial = functools.partial(ad.checkpoint, policy="everything_saveable")(cell)
    def two_steps(fn):
        def loss(W, h):
            return np.sum(fn(W, fn(W, h, XS[0]), XS[1]) ** 2)
        return loss

    for fn, recomputed in ((keep, False), (named, True), (partial, False)):
        loss = two_steps(fn)
        text = ad.source(ad.grad(loss, 1), W, H)
        assert ("is checkpointed" in text) == recomputed
        np.testing.assert_allclose(ad.grad(loss, 1)(W, H),
                                   fd_jacobian(lambda v: loss(W, v), H), atol=1e-7)
    assert ad.remat is ad.checkpoint
    deco = ad.checkpoint(policy="everything_saveable")(cell)
    assert deco.policy == "everything_saveable" and deco(W, H, XS[0]).shape == (4,)


def test_bad_policy_and_a_helper_that_writes_into_its_argument():
    with pytest.raises(TypeError, match="the policy must be one of ad.checkpoint_policies"):
        ad.checkpoint(cell, policy="dots_saveable_typo")

    @ad.checkpoint
    def scale_in_place(h):
        h[0] = 2.0 * h[0]
        return h

    def uses(h):
        return np.sum(scale_in_place(h * 1.0))
    with pytest.raises(ad.UnsupportedSyntaxError) as info:
        ad.grad(uses)(H)
    message = str(info.value)
    assert "scale_in_place() writes into an array it is passed" in message
    assert "h[0] = 2.0 * h[0]" in message and "test_checkpoint.py" in message


def _segment(u, k, steps):
    for _ in range(steps):
        u = u + k * np.tanh(u)
    return u


def _chain(u, k, step):
    for _ in range(20):
        u = step(u, k, 25)
    return np.sum(u ** 2)


def _peak(fn, *args):
    tracemalloc.start()
    try:
        fn(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_checkpointed_segments_keep_less_for_the_backward_sweep():
    """20 segments of 25 steps on 20,000 cells: the plain gradient keeps every
    step's state (about 500 arrays); the checkpointed one keeps the 20
    segment inputs and, while one segment is differentiated, its 25 steps."""
    u, k = np.linspace(-1.0, 1.0, 20_000), 0.01
    ck = ad.checkpoint(_segment, static_argnums=(2,))

    def plain(u, k):
        return _chain(u, k, _segment)

    def checkpointed(u, k):
        return _chain(u, k, ck)
    g_plain, g_ck = ad.grad(plain)(u, k), ad.grad(checkpointed)(u, k)
    np.testing.assert_allclose(g_ck, g_plain, rtol=1e-13)
    peak_plain, peak_ck = _peak(ad.grad(plain), u, k), _peak(ad.grad(checkpointed), u, k)
    state = u.nbytes
    assert peak_plain > 400 * state
    assert peak_ck < 80 * state, (peak_ck / state, peak_plain / state)


def test_agrees_with_jax_checkpoint():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def block_np(W, h):
        return np.tanh(W @ h) + 0.1 * h

    def block_jnp(W, h):
        return jnp.tanh(W @ h) + 0.1 * h

    def make(block, xp, ck):
        step = ck(block)

        def loss(W, h):
            for _ in range(4):
                h = step(W, h)
            return xp.sum(xp.sin(h))
        return loss

    ours = ad.grad(make(block_np, np, ad.checkpoint), argnums=(0, 1))(W, H)
    theirs = jax.grad(make(block_jnp, jnp, jax.checkpoint), argnums=(0, 1))(W, H)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-12, atol=1e-14)
