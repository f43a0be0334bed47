"""JAX 101 and the FAQ: automatic vectorization (docs/automatic-vectorization.md),
just-in-time compilation (docs/jit-compilation.md), key concepts, the FAQ's
gradient questions (docs/faq.rst), vmapped log-probabilities
(docs/notebooks/vmapped_log_probs.md) and the MLP training tutorial
(docs/notebooks/Neural_Network_and_Data_Loading.md, with small layers), as JAX code."""
import numpy as np
import jax
import jax.numpy as jnp
import jax.scipy.stats
import jax.scipy.special
from jax import grad, jit, vmap, value_and_grad
from conformance import case

x5 = np.arange(5.)
w3 = np.array([2., 3., 4.])


def convolve(x, w):
    output = []
    for i in range(1, len(x)-1):
        output.append(jnp.dot(x[i-1:i+2], w))
    return jnp.array(output)


xs = np.stack([x5, x5 * 0.5])
ws = np.stack([w3, w3 - 1.0])


def manually_vectorized_convolve(xs, ws):
    output = []
    for i in range(1, xs.shape[-1] - 1):
        output.append(jnp.sum(xs[:, i-1:i+2] * ws, axis=1))
    return jnp.stack(output, axis=1)


def conv_energy(w, x):
    return jnp.sum(convolve(x, w) ** 2)


def pairwise(f, xs):
    return vmap(lambda x: vmap(lambda y: f(x, y))(xs))(xs)


def sq_dist(x, y):
    return jnp.sum((x - y) ** 2)


def log2(x):
    ln_x = jnp.log(x)
    ln_2 = jnp.log(2.0)
    return ln_x / ln_2


def selu(x, alpha=1.67, lambda_=1.05):
    return lambda_ * jnp.where(x > 0, x, alpha * jnp.exp(x) - alpha)


def f_branch(x):
    if x > 0:
        return x
    else:
        return 2 * x


def g_loop(x, n):
    i = 0
    while i < n:
        i += 1
    return x + i


def my_log(x):
    return jnp.where(x > 0., jnp.log(x), 0.)


def safe_for_grad_log(x):
    return jnp.log(jnp.where(x > 0., x, 1.))


def my_log_or_y(x, y):
    return jnp.where(x > 0., jnp.log(jnp.where(x > 0., x, 1.)), y)


def step(x):
    return (x > 0).astype(float)


def sigmoid_g(x):
    return jax.scipy.special.expit(x)


x_steps = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])
x_sig = np.array([-10.0, -1.0, 0.0, 1.0, 10.0])

lp_rng = np.random.default_rng(10009)
num_features = 5
all_x = lp_rng.normal(size=(30, num_features))
true_beta = lp_rng.normal(size=num_features)
y_lp = (lp_rng.random(30) < 1 / (1 + np.exp(-all_x @ true_beta))).astype(np.int64)
beta0 = lp_rng.normal(size=num_features)
betas = lp_rng.normal(size=(4, num_features))
eps = lp_rng.normal(size=(6, num_features))


def log_joint(beta):
    result = 0.
    result = result + jnp.sum(jax.scipy.stats.norm.logpdf(beta, loc=0., scale=1.))
    result = result + jnp.sum(-jnp.log(1 + jnp.exp(-(2*y_lp-1) * jnp.dot(all_x, beta))))
    return result


def batched_log_joint(beta):
    result = 0.
    result = result + jnp.sum(jax.scipy.stats.norm.logpdf(beta, loc=0., scale=1.), axis=-1)
    result = result + jnp.sum(-jnp.log(1 + jnp.exp(-(2*y_lp-1) * jnp.dot(all_x, beta.T).T)),
                              axis=-1)
    return result


def elbo(beta_loc, beta_log_scale, epsilon):
    beta_sample = beta_loc + jnp.exp(beta_log_scale) * epsilon
    return jnp.mean(batched_log_joint(beta_sample), 0) + jnp.sum(
        beta_log_scale - 0.5 * np.log(2*np.pi))


def normal_logpdf_scaled(x, mu, sigma):
    return jnp.sum(jax.scipy.stats.norm.logpdf(x, loc=mu, scale=sigma))


def normal_cdf_sum(x, mu, sigma):
    return jnp.sum(jax.scipy.stats.norm.cdf(x, mu, sigma) + jax.scipy.stats.norm.pdf(x, mu, sigma))


# The MLP tutorial, with 6-5-3 layers instead of 784-512-512-10.
layer_sizes = [6, 5, 3]
step_size = 0.01
mlp_rng = np.random.default_rng(2)


def random_layer_params(m, n, scale=1e-1):
    return scale * mlp_rng.normal(size=(n, m)), scale * mlp_rng.normal(size=(n,))


params = [random_layer_params(m, n) for m, n in zip(layer_sizes[:-1], layer_sizes[1:])]
images = mlp_rng.normal(size=(8, 6))
labels = np.eye(3)[mlp_rng.integers(0, 3, size=8)]


def relu(x):
    return jnp.maximum(0, x)


def predict(params, image):
    activations = image
    for w, b in params[:-1]:
        outputs = jnp.dot(w, activations) + b
        activations = relu(outputs)
    final_w, final_b = params[-1]
    logits = jnp.dot(final_w, activations) + final_b
    return logits - jax.scipy.special.logsumexp(logits)


batched_predict = vmap(predict, in_axes=(None, 0))


def accuracy(params, images, targets):
    target_class = jnp.argmax(targets, axis=1)
    predicted_class = jnp.argmax(batched_predict(params, images), axis=1)
    return jnp.mean(predicted_class == target_class)


def loss(params, images, targets):
    preds = batched_predict(params, images)
    return -jnp.mean(preds * targets)


def loss_inline(params, images, targets):
    preds = vmap(predict, in_axes=(None, 0))(params, images)
    return -jnp.mean(preds * targets)


@jit
def update(params, x, y):
    grads = grad(loss)(params, x, y)
    return [(w - step_size * dw, b - step_size * db)
            for (w, b), (dw, db) in zip(params, grads)]


def train(params, steps):
    for _ in range(steps):
        params = update(params, images, labels)
    return params


CASES = [
    case("convolve", "convolve(x5, w3)"),
    case("manually_vectorized", "manually_vectorized_convolve(xs, ws)"),
    case("vmap_convolve", "jax.vmap(convolve)(xs, ws)"),
    case("vmap_convolve_axes_1", "jax.vmap(convolve, in_axes=1, out_axes=1)(xs.T, ws.T)"),
    case("vmap_convolve_in_axes_list", "jax.vmap(convolve, in_axes=[0, None])(xs, w3)"),
    case("jit_vmap_convolve", "jax.jit(jax.vmap(convolve))(xs, ws)"),
    case("grad_convolve", "grad(conv_energy)(w3, x5)"),
    case("vmap_grad_convolve", "vmap(grad(conv_energy), in_axes=(None, 0))(w3, xs)"),
    case("pairwise", "pairwise(sq_dist, xs)"),
    case("grad_log2", "grad(log2)(3.0)"),
    case("jit_log2", "jit(log2)(3.0)"),
    case("selu_jit", "jax.jit(selu)(x5 - 2.0)"),
    case("selu_jit_scalar", "jax.jit(selu)(1.0)"),
    case("selu_grad_sum", "grad(lambda x: jnp.sum(selu(x)))(x5 - 2.0)"),
    case("selu_vmap_grad", "vmap(grad(selu))(x5 - 2.0)"),
    case("vjp_with_defaults", "jax.vjp(selu, x5 - 2.5)[1](jnp.ones(5))"),
    case("jit_value_dependent_if", "jax.jit(f_branch)(10.)", reference="f_branch(10.)"),
    case("jit_value_dependent_if_neg", "jax.jit(f_branch)(-10.)", reference="f_branch(-10.)"),
    case("grad_value_dependent_if", "grad(f_branch)(-3.)"),
    case("jit_static_argnums", "jax.jit(f_branch, static_argnums=0)(10.)"),
    case("jit_while_on_values", "jax.jit(g_loop)(10., 20)", reference="g_loop(10., 20)"),
    case("jit_static_argnames", "jax.jit(g_loop, static_argnames=['n'])(10., 20)"),
    case("grad_while_loop", "grad(g_loop)(10., 20)"),
    case("faq_where_nan", "grad(my_log)(0.)"),
    case("faq_where_safe", "grad(safe_for_grad_log)(0.)"),
    case("faq_where_safe_value", "safe_for_grad_log(0.)"),
    case("faq_log_or_y", "grad(my_log_or_y, (0, 1))(0., 2.)"),
    case("faq_step_zero_grad", "jax.vmap(jax.grad(step))(x_steps)"),
    case("faq_sigmoid_grad", "jax.vmap(jax.grad(sigmoid_g))(x_sig)"),
    case("log_joint", "log_joint(beta0)"),
    case("batched_log_joint", "batched_log_joint(betas)"),
    case("vmap_log_joint", "jax.vmap(log_joint)(betas)"),
    case("jit_vmap_log_joint", "jax.jit(jax.vmap(log_joint))(betas)"),
    case("grad_log_joint", "grad(log_joint)(beta0)"),
    case("elbo_value_and_grad", "jax.jit(jax.value_and_grad(elbo, argnums=(0, 1)))(beta0, 0.1 * beta0, eps)"),
    case("norm_logpdf_grad_all", "grad(normal_logpdf_scaled, (0, 1, 2))(beta0, 0.5, 2.0)"),
    case("norm_cdf_pdf_grad_all", "grad(normal_cdf_sum, (0, 1, 2))(beta0, 0.5, 2.0)"),
    case("mlp_predict", "predict(params, images[0])"),
    case("mlp_batched_predict", "batched_predict(params, images)"),
    case("mlp_loss", "loss(params, images, labels)"),
    case("mlp_grad", "grad(loss)(params, images, labels)"),
    case("mlp_grad_inline_vmap", "grad(loss_inline)(params, images, labels)"),
    case("mlp_jit_grad", "jit(grad(loss))(params, images, labels)"),
    case("mlp_update", "update(params, images, labels)"),
    case("mlp_train_3_steps", "train(params, 3)"),
    case("mlp_per_example_grads", "vmap(grad(loss), in_axes=(None, 0, 0))(params, images[:, None], labels[:, None])"),
]

#: Functions the differential oracle checks under every transform and witness:
#: (function, arguments, differentiated argnums).
ORACLE = [("conv_energy", "(w3, x5)", (0, 1)), ("log_joint", "(beta0,)", 0),
          ("elbo", "(beta0, 0.1 * beta0, eps)", (0, 1)), ("selu", "(x5 - 2.5,)", 0)]
