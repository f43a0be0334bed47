"""Helpers for transforms called inside transformed functions.

``ad.grad(f)(x)`` written inside a function that is itself transformed runs
``f``'s reverse sweep (:func:`check_gradient` raises ``ad.grad``'s errors
there); an inner Jacobian, and the reference lowering of a gradient, are
forward-mode JVPs of ``f`` along unit tangents, one per element of ``x``
(see ``s2s_ad/transforms/nested.py``); the other helpers make the unit
tangents and hold the derivatives.  A Jacobian is kept as a 2-D array with
one row per output element and one column per input element while it is
filled, then given the shape ``out.shape + x.shape`` (a scalar when both are
scalars).  Every helper works on Python and NumPy scalars and on arrays, in
plain Python and inside ``numba.njit`` (the overloads below specialise on
scalar vs array at typing time).
"""
import numpy as np
from numba.extending import overload

from ._common import grad_dtype, is_array
from ._nbutil import compile_impl, dtype_src, is_scalar, np_dtype, shape_tuple
from ._nbutil import grad_dtype as nb_grad_dtype

_NOT_SCALAR = ("grad requires its function to return a scalar, but the function given to "
               "ad.grad inside a transformed function returned an array; use ad.jacfwd or "
               "ad.jacrev")
_INTEGER = ("an integer argument cannot be differentiated: the argument that ad.grad (or "
            "ad.jacfwd, ad.jacrev, ad.hessian, ad.vjp) differentiates inside a transformed "
            "function holds integers; pass floats, or choose other argnums")


_COMPLEX = ("a complex argument cannot be differentiated by ad.grad (or ad.jacfwd, "
            "ad.jacrev, ad.hessian, ad.vjp) written inside a transformed function: those "
            "are built from real unit tangents there; take the derivative outside the "
            "transformed function, or with respect to the real and imaginary parts")


_COMPLEX_OUT = ("grad requires real-valued outputs, but the function given to ad.grad "
                "inside a transformed function returned a complex value (as in JAX); take "
                "np.real or np.abs of it, or call ad.jvp / ad.vjp")


def check_gradient(out, x):
    """The TypeErrors of ``ad.grad`` written in a transformed function, for its
    function's output ``out`` and a differentiated argument ``x``: the output
    must be a real scalar, the argument real floats."""
    _check_output(out)
    _check_argument(x)


def _check_output(out):
    if is_array(out) and out.ndim != 0:
        raise TypeError(_NOT_SCALAR)
    if np.iscomplexobj(out):
        raise TypeError(_COMPLEX_OUT)


def _check_argument(x):
    if not np.issubdtype(np.result_type(x), np.inexact):
        raise TypeError(_INTEGER)
    if np.iscomplexobj(x):
        raise TypeError(_COMPLEX)


def flat_size(x):
    """The number of elements of ``x`` (1 for a scalar)."""
    return x.size if is_array(x) else 1


def unit_like(x, j):
    """A tangent for ``x``: zero except for a one at flat position ``j``."""
    _check_argument(x)
    dtype = grad_dtype(x)
    if not is_array(x):
        return dtype.type(1.0) if isinstance(x, np.generic) else 1.0
    u = np.zeros(x.size, dtype=dtype)
    u[j] = 1.0
    return u.reshape(x.shape)


def jac_zeros(out, x):
    """Zeroed storage for the Jacobian of ``out`` w.r.t. ``x``, one row per
    element of ``out`` and one column per element of ``x``."""
    dtype = np.promote_types(grad_dtype(out), grad_dtype(x))
    return np.zeros((flat_size(out), flat_size(x)), dtype=dtype)


def grad_zeros(out, x):
    """:func:`jac_zeros` for a gradient: ``out`` must be a scalar."""
    _check_output(out)
    return jac_zeros(out, x)


def flat(v):
    """The elements of ``v`` as a 1-D array (one element for a scalar)."""
    if is_array(v):
        return v.reshape(v.size)
    return np.full(1, v, dtype=grad_dtype(v))


def jac_shape(J, out, x):
    """Jacobian storage ``J`` given the shape ``out.shape + x.shape``."""
    if not is_array(out) and not is_array(x):
        return J[0, 0]
    return J.reshape(np.shape(out) + np.shape(x))


def jac_flat(g, out, x):
    """The cotangent of :func:`jac_shape`: ``g`` back to one row per element
    of ``out`` and one column per element of ``x``."""
    if not is_array(g):
        return np.full((1, 1), g, dtype=grad_dtype(g))
    # a copy: the reverse sweep zeroes its entries (bJ[i, j] = 0.0), not the caller's cotangent
    return np.array(g, copy=True).reshape(flat_size(out), flat_size(x))


# -- Numba versions ----------------------------------------------------------------
@overload(check_gradient)
def _check_gradient(out, x):
    if not is_scalar(out) and out.ndim != 0:
        message = _NOT_SCALAR
    elif np.issubdtype(np_dtype(out), np.complexfloating):
        message = _COMPLEX_OUT
    elif not np.issubdtype(np_dtype(x), np.inexact):
        message = _INTEGER
    elif np.issubdtype(np_dtype(x), np.complexfloating):
        message = _COMPLEX
    else:
        return lambda out, x: None
    return compile_impl(f"def impl(out, x):\n    raise TypeError({message!r})")


@overload(flat_size)
def _flat_size(x):
    if is_scalar(x):
        return lambda x: 1
    return lambda x: x.size


@overload(unit_like)
def _unit_like(x, j):
    if not np.issubdtype(np_dtype(x), np.inexact):
        return compile_impl(f"def impl(x, j):\n    raise TypeError({_INTEGER!r})")
    if np.issubdtype(np_dtype(x), np.complexfloating):
        # raised when run (j >= 0 always), so that the caller still types
        one = "x * 0.0 + 1.0" if is_scalar(x) else "np.ones_like(x)"
        return compile_impl(f"def impl(x, j):\n    if j >= 0:\n"
                            f"        raise TypeError({_COMPLEX!r})\n    return {one}")
    dt = dtype_src(nb_grad_dtype(x))
    if is_scalar(x):
        return compile_impl(f"def impl(x, j):\n    return {dt}(1.0)")
    return compile_impl(
        "def impl(x, j):\n"
        f"    u = np.zeros(x.size, dtype={dt})\n"
        "    u[j] = 1.0\n"
        "    return u.reshape(x.shape)")


def _jac_zeros_src(out, x, check=""):
    dt = dtype_src(np.promote_types(nb_grad_dtype(out), nb_grad_dtype(x)))
    m = "1" if is_scalar(out) else "out.size"
    n = "1" if is_scalar(x) else "x.size"
    return compile_impl(f"def impl(out, x):\n{check}    return np.zeros(({m}, {n}), dtype={dt})")


@overload(jac_zeros)
def _jac_zeros(out, x):
    return _jac_zeros_src(out, x)


@overload(grad_zeros)
def _grad_zeros(out, x):
    check = "" if is_scalar(out) or out.ndim == 0 else f"    raise TypeError({_NOT_SCALAR!r})\n"
    if np.issubdtype(np_dtype(out), np.complexfloating):
        check = f"    if x is not None:\n        raise TypeError({_COMPLEX_OUT!r})\n"
    return _jac_zeros_src(out, x, check)


@overload(flat)
def _flat(v):
    if is_scalar(v):
        dt = dtype_src(nb_grad_dtype(v))
        return compile_impl(f"def impl(v):\n    return np.full(1, v, dtype={dt})")
    return lambda v: np.ascontiguousarray(v).reshape(v.size)


@overload(jac_shape)
def _jac_shape(J, out, x):
    if is_scalar(out) and is_scalar(x):
        return lambda J, out, x: J[0, 0]
    dims = [f"out.shape[{k}]" for k in range(0 if is_scalar(out) else out.ndim)]
    dims += [f"x.shape[{k}]" for k in range(0 if is_scalar(x) else x.ndim)]
    return compile_impl(f"def impl(J, out, x):\n"
                        f"    return np.ascontiguousarray(J).reshape({shape_tuple(dims)})")


@overload(jac_flat)
def _jac_flat(g, out, x):
    m = "1" if is_scalar(out) else "out.size"
    n = "1" if is_scalar(x) else "x.size"
    if is_scalar(g):
        dt = dtype_src(nb_grad_dtype(g))
        return compile_impl(f"def impl(g, out, x):\n    return np.full((1, 1), g, dtype={dt})")
    return compile_impl(f"def impl(g, out, x):\n"
                        f"    return np.copy(g).reshape(({m}, {n}))")
