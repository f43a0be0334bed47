"""Cases from JAX's own tests of its transforms (tests/api_test.py): grad,
value_and_grad, jvp, vjp, jacfwd/jacrev/hessian on arrays and pytrees,
has_aux, nested transforms and bad input, as JAX code."""
from collections import namedtuple

import numpy as np
import jax
import jax.numpy as jnp
from jax import grad, jit, vmap, jacfwd, jacrev, hessian, jvp, vjp, value_and_grad
from conformance import case

rng = np.random.default_rng(1)
A = rng.normal(size=(4, 3))
A4 = rng.normal(size=(4, 4))
x3 = rng.normal(size=3)
x4 = rng.normal(size=4)
x2 = rng.normal(size=2)
y3 = rng.normal(size=3)
M = rng.normal(size=(3, 3))
Point = namedtuple("Point", ["x", "y"])
zs = 0.5j * np.arange(5) + np.arange(5)


def lin3(x, y, z, flag=False):
    assert flag
    return 1.0 * x + 2.0 * y + 3.0 * z


def square(x):
    return x * x


def cubic_with_aux(x):
    return x**3, [x**2]


def quad(x):
    return jnp.dot(x, x)


def quad_sum(x, u):
    return quad(x) + quad(u)


def aux_nested(x):
    g, aux = grad(lambda x: (x**3, [x**3]), has_aux=True)(x)
    return aux[0] * jnp.sin(x)


def jac_aux_nested(x):
    jac, aux = jacrev(lambda x: (x**3, [x**3]), has_aux=True)(x)
    return aux[0] * jnp.sin(x)


def pair_out(x, y):
    return (x, y)


def outer_dict(x, y):
    return {'x': x, 'xy': jnp.outer(x, y)}


def point_norm(p):
    return jnp.sqrt(p.x ** 2 + p.y ** 2)


def softmax(x):
    e = jnp.exp(x - jnp.max(x))
    return e / jnp.sum(e)


def logsumexp(x):
    m = jnp.max(x)
    return m + jnp.log(jnp.sum(jnp.exp(x - m)))


def matrix_fn(X):
    return jnp.sum(jnp.tanh(X @ X.T))


def poly2(x, y):
    return x ** 2 * y + jnp.sin(x * y)


def list_sum(xs):
    return sum(x ** 2 for x in xs)


def where_fn(x):
    return jnp.sum(jnp.where(x > 0, x ** 2, -x))


def loop_fn(x, n):
    for i in range(n):
        x = jnp.sin(x) + x
    return x


CASES = [
    case("grad_argnums_default", "grad(lin3)(1.0, 1.0, 1.0, flag=True)"),
    case("grad_argnums_1", "grad(lin3, argnums=1)(1.0, 1.0, 1.0, flag=True)"),
    case("grad_argnums_tuple", "grad(lin3, argnums=(2, 0))(1.0, 1.0, 1.0, flag=True)"),
    case("value_and_grad_default", "value_and_grad(lin3)(1.0, 1.0, 1.0, flag=True)"),
    case("value_and_grad_tuple", "value_and_grad(lin3, argnums=(2, 0))(1.0, 1.0, 1.0, flag=True)"),
    case("grad_of_jit", "grad(jit(square))(2.0)"),
    case("jit_of_grad", "jit(grad(square))(3.0)"),
    case("grad_identity", "grad(lambda x: x)(1.0)"),
    case("jacfwd_identity", "jacfwd(lambda x: x)(1.0)"),
    case("jacrev_identity", "jacrev(lambda x: x)(1.0)"),
    case("grad_tuple_output", "grad(lambda x: (x, x))(1.0)", raises=TypeError),
    case("grad_nonscalar_output", "grad(lambda x: x)(np.zeros(3))", raises=TypeError),
    case("grad_nonscalar_hint", "grad(lambda x: jnp.array([x ** 2]))(1.0)", raises=TypeError),
    case("grad_string_input", "grad(lambda x: x)('foo')", raises=TypeError),
    case("jacobian_linear_fwd", "jacfwd(lambda x: jnp.dot(A, x))(x3)"),
    case("jacobian_linear_rev", "jacrev(lambda x: jnp.dot(A, x))(x3)"),
    case("jacobian_tanh_fwd", "jacfwd(lambda x: jnp.tanh(jnp.dot(A, x)))(x3)"),
    case("jacobian_tanh_rev", "jacrev(lambda x: jnp.tanh(jnp.dot(A, x)))(x3)"),
    case("hessian_quadratic", "hessian(lambda x: jnp.dot(x, jnp.dot(A4, x)))(x4)"),
    case("hessian_aux", "hessian(lambda x: (jnp.dot(x, jnp.dot(A4, x)), x), has_aux=True)(x4)"),
    case("jacfwd_pytree_out", "jacfwd(pair_out)(0., 1.)"),
    case("jacrev_pytree_out", "jacrev(pair_out)(0., 1.)"),
    case("jacfwd_pytree_argnum1", "jacfwd(pair_out, 1)(0., 1.)"),
    case("jacrev_pytree_argnums", "jacrev(pair_out, (0, 1))(0., 1.)"),
    case("jacfwd_tuple_input", "jacfwd(lambda x: x[:2])((1., 2., 3.))"),
    case("jacrev_tuple_input", "jacrev(lambda x: x[:2])((1., 2., 3.))"),
    case("jacfwd_dict_out", "jacfwd(outer_dict)(x2, y3)"),
    case("jacrev_dict_out", "jacrev(outer_dict)(x2, y3)"),
    case("hessian_tuple_input", "hessian(lambda x: jnp.array(x)**2)((1., 2.))",
         refused=TypeError, why="a Hessian (a Jacobian of a Jacobian) is taken with respect "
         "to one array or float per level; pass jnp.array((1., 2.))"),
    case("rev_rev_diag", "jacrev(jacrev(quad_sum, 0), 0)(x4, x2)"),
    case("rev_fwd_diag", "jacrev(jacfwd(quad_sum, 1), 1)(x4, x2)"),
    case("fwd_rev_offdiag", "jacfwd(jacrev(quad_sum, 1), 0)(x4, x2)"),
    case("fwd_fwd_offdiag", "jacfwd(jacfwd(quad_sum, 0), 1)(x4, x2)"),
    case("rev_fwd_offdiag", "jacrev(jacfwd(quad_sum, 0), 1)(x4, x2)"),
    case("grad_has_aux", "grad(cubic_with_aux, has_aux=True)(3.)"),
    case("grad_has_aux_constant", "grad(lambda x: (x**3, [4.]), has_aux=True)(4.)"),
    case("grad_has_aux_dict", "grad(lambda x: (x ** 2, dict(identity=x, p1=x + 1)), has_aux=True)(3.)"),
    case("grad_has_aux_not_pair", "grad(lambda x: (x,), has_aux=True)(1.)", raises=TypeError),
    case("grad_aux_nested", "grad(aux_nested)(4.)"),
    case("jit_grad_aux_nested", "jit(grad(aux_nested))(4.)"),
    case("jacrev_aux_nested", "jacrev(jac_aux_nested)(4.)"),
    case("jacfwd_has_aux", "jacfwd(cubic_with_aux, has_aux=True)(3.)"),
    case("jacrev_has_aux", "jacrev(cubic_with_aux, has_aux=True)(3.)"),
    case("jvp_has_aux", "jvp(cubic_with_aux, (3.,), (4.,), has_aux=True)"),
    case("jvp_mismatched_structure", "jvp(lambda x, y: x * y, (2.,), ())", raises=TypeError),
    case("jvp_non_tuple", "jvp(lambda x: -x, 1., 1.)", raises=TypeError),
    case("vjp_bad_cotangent_shape", "vjp(lambda x: x * 2, np.ones(3))[1](np.ones(4))",
         raises=ValueError),
    case("vjp_tuple_out", "vjp(pair_out, 2., 3.)[1]((1., -1.))"),
    case("vjp_two_args", "vjp(lambda x, W: x @ W, np.ones((4, 4)), A4)[1](np.ones((4, 4)))"),
    case("grad_namedtuple", "grad(point_norm)(Point(3., 4.))"),
    case("jacrev_softmax", "jacrev(softmax)(x4)"),
    case("jacfwd_softmax", "jacfwd(softmax)(x4)"),
    case("grad_logsumexp", "grad(logsumexp)(x4)"),
    case("hessian_logsumexp", "hessian(logsumexp)(x4)"),
    case("grad_matrix", "grad(matrix_fn)(M)"),
    case("hessian_matrix", "hessian(matrix_fn)(M)"),
    case("grad_poly2_both", "grad(poly2, (0, 1))(1.5, -0.5)"),
    case("hessian_poly2", "hessian(poly2, (0, 1))(1.5, -0.5)"),
    case("grad_list_input", "grad(list_sum)([1., 2., 3.])"),
    case("grad_where", "grad(where_fn)(np.array([1.0, -2.0, 3.0]))"),
    case("grad_python_loop", "grad(loop_fn)(0.5, 3)"),
    case("jvp_vector", "jvp(softmax, (x4,), (np.ones(4),))"),
    case("vmap_grad_rows", "vmap(grad(logsumexp))(M)"),
    case("vmap_in_axes_none", "vmap(lambda x, y: x * y, in_axes=(0, None))(x3, 2.0)"),
    case("vmap_in_axes_1", "vmap(jnp.sum, in_axes=1)(M)"),
    case("vmap_out_axes_1", "vmap(lambda x: x * 2, out_axes=1)(M)"),
    case("vmap_in_axes_list", "vmap(lambda x, y: x + y, in_axes=[0, None])(M, x3)"),
    case("vmap_structured_in_axes", "vmap(lambda p: p['a'] * p['b'], in_axes=({'a': 0, 'b': None},))({'a': x3, 'b': 2.0})"),
    case("vmap_nested", "vmap(vmap(lambda x, y: x * y, in_axes=(0, None)), in_axes=(None, 0))(x3, x2)"),
    case("vmap_size_mismatch", "vmap(lambda x, y: x + y)(x3, x4)", raises=ValueError),
    case("vmap_scalar_out", "vmap(lambda x: jnp.dot(x, x))(M)"),
    case("vmap_jacfwd", "vmap(jacfwd(softmax))(M)"),
    case("vmap_hessian", "vmap(hessian(logsumexp))(M)"),
    case("grad_of_int", "grad(lambda x: x ** 2)(3)", raises=TypeError),
    case("grad_complex_result", "grad(lambda x: x ** 2 + 1j)(3.)", raises=TypeError),
    case("holomorphic_grad_of_float", "grad(lambda x: x ** 2, holomorphic=True)(3.)",
         raises=TypeError),
    case("holomorphic_jacrev_of_float", "jacrev(lambda x: x ** 2, holomorphic=True)(3.)",
         raises=TypeError),
    case("holomorphic_jacfwd_of_float", "jacfwd(lambda x: x ** 2, holomorphic=True)(3.)",
         raises=TypeError),
    case("jacfwd_of_complex", "jacfwd(lambda x: x ** 2)(3. + 1j)", raises=TypeError),
    case("complex_grad_holomorphic_output", "grad(lambda x: jnp.sin(x))(1 + 2j)",
         raises=TypeError),
    case("holomorphic_grad_sin", "grad(lambda x: jnp.sin(x), holomorphic=True)(1 + 2j)"),
    case("nonholomorphic_grad", "grad(lambda z: jnp.sum(jnp.cos(jnp.abs(z))))(zs)"),
    case("complex_output_jacrev", "jacrev(lambda x: jnp.sin(x))(1 + 2j)", raises=TypeError),
    case("jvp_int_primal", "jvp(lambda n: n * 2, (3,), (1,))", raises=TypeError),
]

#: Functions the differential oracle checks under every transform and witness:
#: (function, arguments, differentiated argnums).
ORACLE = [("logsumexp", "(x4,)", 0), ("softmax", "(x4,)", 0), ("matrix_fn", "(M,)", 0),
          ("poly2", "(1.5, -0.5)", (0, 1)), ("quad_sum", "(x4, x2)", (0, 1))]
