"""jax.numpy and jax.scipy functions as JAX's tests and tutorials use them
(tests/lax_numpy_test.py-style), under grad, jacrev, jacfwd and vmap, as JAX code."""
import numpy as np
import jax
import jax.numpy as jnp
import jax.scipy.special
from jax import grad, jit, vmap, jacfwd, jacrev, hessian, jvp, vjp
from conformance import case

rng = np.random.default_rng(7)
v = rng.normal(size=5)
w = rng.normal(size=5)
P = rng.normal(size=(3, 4))
Q = rng.normal(size=(4, 3))
S = rng.normal(size=(3, 3)) + 3 * np.eye(3)
SPD = S @ S.T
B = rng.normal(size=(2, 3, 4))
pos = rng.uniform(0.5, 2.0, size=5)


def norm2(x):
    return jnp.linalg.norm(x)


def fro(A):
    return jnp.linalg.norm(A, 'fro')


def einsum_fn(A, C):
    return jnp.sum(jnp.einsum('ij,jk->ik', A, C) ** 2)


def solve_fn(A, b):
    return jnp.sum(jnp.linalg.solve(A, b))


def inv_fn(A):
    return jnp.sum(jnp.linalg.inv(A) ** 2)


def det_fn(A):
    return jnp.linalg.det(A)


def slogdet_fn(A):
    sign, logdet = jnp.linalg.slogdet(A)
    return logdet


def cholesky_fn(A):
    return jnp.sum(jnp.linalg.cholesky(A))


def cumsum_fn(x):
    return jnp.sum(jnp.cumsum(x) ** 2)


def sort_fn(x):
    return jnp.sum(jnp.sort(x) * jnp.arange(5.))


def clip_fn(x):
    return jnp.sum(jnp.clip(x, -0.5, 0.5) ** 2)


def maximum_fn(x, y):
    return jnp.sum(jnp.maximum(x, y) * x)


def logsumexp_fn(x):
    return jax.scipy.special.logsumexp(x)


def softplus_fn(x):
    return jnp.sum(jnp.logaddexp(x, 0.))


def special_fn(x):
    return jnp.sum(jax.scipy.special.erf(x) + jax.scipy.special.gammaln(x + 3.0)
                   + jax.scipy.special.expit(x))


def stack_fn(x, y):
    return jnp.sum(jnp.stack([x, y * 2, x * y]) ** 2)


def concat_fn(x, y):
    return jnp.concatenate([x, jnp.sin(y)])


def reshape_fn(A):
    return jnp.sum(jnp.reshape(A, (4, 3)) @ A)


def transpose_fn(T):
    return jnp.sum(jnp.transpose(T, (2, 0, 1)) * jnp.arange(4.)[:, None, None])


def mean_var_fn(A):
    return jnp.sum(jnp.mean(A, axis=0) * jnp.var(A, axis=0))


def std_fn(A):
    return jnp.sum(jnp.std(A, axis=1))


def prod_fn(x):
    return jnp.prod(x)


def outer_trace(x, y):
    return jnp.trace(jnp.outer(x, y))


def where_max(x):
    return jnp.sum(jnp.where(x > 0, x, 0.1 * x) * jnp.max(x))


def power_fn(x):
    return jnp.sum(x ** 3 - jnp.sqrt(x) + jnp.log(x) / x)


def tensordot_fn(T, A):
    return jnp.sum(jnp.tensordot(T, A.T, axes=1))


def diff_fn(x):
    return jnp.sum(jnp.diff(x) ** 2)


def polyval_fn(x):
    return jnp.sum(jnp.polyval(jnp.array([1.0, -2.0, 0.5]), x))


def matmul_chain(A, C):
    return jnp.sum(jnp.tanh(A @ C @ A))


def kron_fn(x, y):
    return jnp.sum(jnp.kron(x[:2], y[:3]) ** 2)


CASES = [
    case("norm_grad", "grad(norm2)(v)"),
    case("norm_hessian", "hessian(norm2)(v)", refused=TypeError,
         why="second derivatives of np.linalg.norm: its VJP is a runtime helper with no rule "
         "of its own (ad.NonDifferentiableError, a TypeError, at the user's line)"),
    case("fro_grad", "grad(fro)(P)"),
    case("einsum_grad", "grad(einsum_fn, (0, 1))(P, Q)"),
    case("solve_grad", "grad(solve_fn, (0, 1))(S, v[:3])"),
    case("inv_grad", "grad(inv_fn)(S)"),
    case("det_grad", "grad(det_fn)(S)"),
    case("slogdet_grad", "grad(slogdet_fn)(S)"),
    # NumPy's cholesky reads only the lower triangle, so the derivative of the code
    # that runs is zero above the diagonal; JAX's rule symmetrizes the cotangent.
    case("cholesky_grad", "grad(cholesky_fn)(SPD)",
         reference="grad(lambda A: cholesky_fn(jnp.tril(A) + jnp.tril(A, -1).T))(SPD)"),
    case("cumsum_grad", "grad(cumsum_fn)(v)"),
    case("sort_grad", "grad(sort_fn)(v)"),
    case("clip_grad", "grad(clip_fn)(v)"),
    case("maximum_grad", "grad(maximum_fn, (0, 1))(v, w)"),
    case("logsumexp_grad", "grad(logsumexp_fn)(v)"),
    case("logsumexp_hessian", "hessian(logsumexp_fn)(v)"),
    case("logaddexp_grad", "grad(softplus_fn)(v)"),
    case("special_grad", "grad(special_fn)(v)"),
    case("stack_grad", "grad(stack_fn, (0, 1))(v, w)"),
    case("concat_jacrev", "jacrev(concat_fn, (0, 1))(v, w)"),
    case("concat_jacfwd", "jacfwd(concat_fn)(v, w)"),
    case("reshape_grad", "grad(reshape_fn)(P)"),
    case("transpose_grad", "grad(transpose_fn)(B)"),
    case("mean_var_grad", "grad(mean_var_fn)(P)"),
    case("std_grad", "grad(std_fn)(P)"),
    case("prod_grad", "grad(prod_fn)(v)"),
    case("outer_trace_grad", "grad(outer_trace, (0, 1))(v, w)"),
    case("where_max_grad", "grad(where_max)(v)"),
    case("power_grad", "grad(power_fn)(pos)"),
    case("tensordot_grad", "grad(tensordot_fn, (0, 1))(B, P)"),
    case("diff_grad", "grad(diff_fn)(v)"),
    case("polyval_grad", "grad(polyval_fn)(v)"),
    case("matmul_chain_grad", "grad(matmul_chain, (0, 1))(S, S.T)"),
    case("kron_grad", "grad(kron_fn, (0, 1))(v, w)"),
    case("vmap_norm_grad", "vmap(grad(norm2))(P)"),
    case("vmap_logsumexp", "vmap(logsumexp_fn)(P)"),
    case("vmap_solve", "vmap(lambda b: jnp.linalg.solve(S, b))(P.T)"),
    case("jvp_cumsum", "jvp(lambda x: jnp.cumsum(x) * x, (v,), (w,))"),
    case("vjp_concat", "vjp(concat_fn, v, w)[1](jnp.ones(10))"),
]

#: Functions the differential oracle checks under every transform and witness:
#: (function, arguments, differentiated argnums).
ORACLE = [("einsum_fn", "(P, Q)", (0, 1)), ("solve_fn", "(S, v[:3])", (0, 1)),
          ("mean_var_fn", "(P,)", 0), ("stack_fn", "(v, w)", (0, 1))]
