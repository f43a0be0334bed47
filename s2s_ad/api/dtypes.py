"""Which values a transform differentiates, by dtype, as JAX decides it.

* Float and complex values are differentiable (JAX's ``inexact`` dtypes).
  A complex tangent is a direction in the complex plane (the R-linear
  directional derivative); a complex cotangent follows JAX's convention: the
  gradient of a real ``f(z)``, ``z = x + iy``, is ``df/dx - i df/dy``, and
  the VJP of a holomorphic ``f`` is ``g * f'(z)`` (see runtime/fft.py).
* ``grad`` and ``jacrev`` need a real output unless ``holomorphic=True``,
  which needs complex inputs and a complex output (then ``grad`` is
  ``f'(z)``); ``jacfwd`` needs real inputs unless ``holomorphic=True``.
* Integer and boolean values are never differentiated: asking for a
  derivative with respect to one (``argnums``, a nonzero tangent) is a
  TypeError naming the argument.  (JAX asks for ``float0`` tangents there;
  s2s_ad also takes a zero tangent of the argument's own type.)

Every check raises a TypeError that names the argument, never a number.
"""
import inspect

import numpy as np

from ..ir import pytree


def _name(fun, i):
    """``argument i ('name')`` where ``fun``'s signature has one."""
    try:
        names = list(inspect.signature(fun).parameters)
    except (TypeError, ValueError):
        names = []
    return f"argument {i} ('{names[i]}')" if i < len(names) else f"argument {i}"


def _dtype_name(x):
    return str(np.result_type(x)) if isinstance(x, (np.ndarray, np.generic)) else \
        f"a Python {type(x).__name__}"


def any_complex(values):
    """Whether any leaf of ``values`` is complex."""
    return any(map(pytree.is_complex_leaf, pytree.flatten(list(values))[0]))


def kinds_key(values):
    """The dtype kind of every leaf of ``values`` (what a dtype check is kept for)."""
    return tuple(np.result_type(x).kind if pytree.rank(x) is not None else None
                 for x in pytree.flatten(list(values))[0])


def check_inputs(fun, args, argnums, what, holomorphic=False, complex_ok=True):
    """Every leaf of ``args[i]`` for ``i`` in ``argnums`` is differentiable:
    float or complex (only float where ``complex_ok`` is false, as ``jacfwd``
    without ``holomorphic``; only complex with ``holomorphic``)."""
    for i in argnums:
        for leaf in pytree.flatten(args[i])[0]:
            if leaf is None:                             # no leaves, as in JAX
                continue
            if not pytree.is_inexact_leaf(leaf):
                raise TypeError(
                    f"{what}: cannot differentiate {fun.__qualname__} with respect to "
                    f"{_name(fun, i)}: it holds {pytree.describe(leaf)}, and integer and "
                    f"boolean values are never differentiated (only float and complex values "
                    f"are); pass floats, or leave this argument out of argnums")
            if holomorphic and not pytree.is_complex_leaf(leaf):
                raise TypeError(
                    f"{what} with holomorphic=True requires inputs with complex dtype, but "
                    f"{_name(fun, i)} of {fun.__qualname__} holds {_dtype_name(leaf)}")
            if not holomorphic and not complex_ok and pytree.is_complex_leaf(leaf):
                raise TypeError(
                    f"{what} requires real-valued inputs, but {_name(fun, i)} of "
                    f"{fun.__qualname__} holds {_dtype_name(leaf)}; for holomorphic "
                    f"differentiation pass holomorphic=True, and for a non-holomorphic "
                    f"function of complex inputs use ad.jvp directly (as in JAX)")


def check_output(fun, value, what, holomorphic=False):
    """``grad`` / ``jacrev``'s output: real, or complex with ``holomorphic``."""
    for leaf in pytree.flatten(value)[0]:
        if pytree.rank(leaf) is None:
            continue
        if pytree.is_complex_leaf(leaf) and not holomorphic:
            raise TypeError(
                f"{what} requires real-valued outputs, but {fun.__qualname__} returned "
                f"{_dtype_name(leaf)}; for holomorphic differentiation pass holomorphic=True, "
                f"and for a non-holomorphic function with complex outputs use ad.vjp "
                f"directly (as in JAX)")
        if holomorphic and not pytree.is_complex_leaf(leaf):
            raise TypeError(
                f"{what} with holomorphic=True requires outputs with complex dtype, but "
                f"{fun.__qualname__} returned {_dtype_name(leaf)}")


def _is_zero(t):
    try:
        return bool(np.all(np.asarray(t) == 0))
    except (TypeError, ValueError):
        return False


def _is_float0(t):
    dtype = getattr(t, "dtype", None)
    return dtype is not None and dtype.kind == "V" and dtype.names == ("float0",)


def check_tangents(fun, primals, tangents, what="jvp"):
    """Tangents a forward transform can take: a float primal's is real, a
    complex one's real or complex, an integer or boolean one's zero (or JAX's
    ``float0``).  Returns ``tangents`` with complex primals' tangents complex."""
    out = []
    for i, (p, t) in enumerate(zip(primals, tangents)):
        p_leaves, _ = pytree.flatten(p)
        t_leaves, tree = pytree.flatten(t)
        fixed = []
        for a, b in zip(p_leaves, t_leaves):
            if a is None or pytree.rank(a) is None:
                fixed.append(b)
                continue
            if not pytree.is_inexact_leaf(a):
                if not (_is_float0(b) or _is_zero(b)):
                    raise TypeError(
                        f"{what}: {_name(fun, i)} of {fun.__qualname__} holds "
                        f"{pytree.describe(a)}, which is never differentiated, but its tangent "
                        f"is nonzero; integer and boolean primals take a zero tangent (or a "
                        f"float0 one, as in JAX)")
                fixed.append(b)
            elif pytree.is_complex_leaf(b) and not pytree.is_complex_leaf(a):
                raise TypeError(
                    f"{what}: the tangent of {_name(fun, i)} of {fun.__qualname__} is complex "
                    f"({_dtype_name(b)}) but the primal is real ({_dtype_name(a)}); a tangent "
                    f"has its primal's dtype (pass a complex primal to move in the complex "
                    f"plane)")
            elif pytree.is_complex_leaf(a) and not pytree.is_complex_leaf(b):
                fixed.append(np.asarray(b, dtype=np.result_type(a)) if isinstance(b, np.ndarray)
                             else np.result_type(a).type(b) if isinstance(a, np.generic)
                             else complex(b))
            else:
                fixed.append(b)
        out.append(pytree.unflatten(fixed, tree) if t_leaves else t)
    return tuple(out)


def check_cotangent(i, ct, out):
    """A cotangent leaf for output leaf ``out``: a complex one needs a complex output."""
    if pytree.is_complex_leaf(ct) and not pytree.is_complex_leaf(out):
        raise TypeError(f"vjp_fn: cotangent leaf {i} is complex ({_dtype_name(ct)}) but the "
                        f"output leaf is real ({_dtype_name(out)}); a cotangent has its "
                        f"output's dtype")


#: Runtime helpers whose derivative is written for real values only, and the
#: NumPy function each belongs to: generated code that calls one is refused
#: when it differentiates complex arguments (never a silently wrong number).
REAL_ONLY = {
    "rt.cholesky_grad": "np.linalg.cholesky", "rt.cholesky_jvp": "np.linalg.cholesky",
    "rt.eigh_w_grad": "np.linalg.eigh / eigvalsh", "rt.eigh_w_jvp": "np.linalg.eigh / eigvalsh",
    "rt.eigh_v_grad": "np.linalg.eigh", "rt.eigh_v_jvp": "np.linalg.eigh",
    "rt.svd_s_grad": "np.linalg.svd", "rt.svd_s_jvp": "np.linalg.svd",
    "rt.svd_u_grad": "np.linalg.svd", "rt.svd_u_jvp": "np.linalg.svd",
    "rt.svd_vh_grad": "np.linalg.svd", "rt.svd_vh_jvp": "np.linalg.svd",
    "rt.qr_q_grad": "np.linalg.qr", "rt.qr_q_jvp": "np.linalg.qr",
    "rt.qr_r_grad": "np.linalg.qr", "rt.qr_r_jvp": "np.linalg.qr",
    "rt.slogdet_sign": "np.linalg.slogdet (its sign)",
}


def check_real_only(fun, source, args, what):
    """A TypeError where generated ``source`` differentiates complex ``args``
    through a helper of :data:`REAL_ONLY`."""
    used = sorted({name for helper, name in REAL_ONLY.items() if helper + "(" in source})
    if not used:
        return
    i = next(i for i, a in enumerate(args) if any_complex([a]))
    raise TypeError(f"{what}: {_name(fun, i)} of {fun.__qualname__} is complex, and the "
                    f"derivative of {', '.join(used)} in s2s_ad is written for real values "
                    f"only; differentiate with respect to real arguments (the real and "
                    f"imaginary parts) instead")
