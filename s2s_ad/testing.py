"""Derivative checks against finite differences, for your own functions.

``check_grad`` and ``check_vjp`` compare what s2s_ad computes with central
finite differences along one random direction (the dot-product test)::

    <grad f(x), v>  ~  (f(x + eps v) - f(x - eps v)) / (2 eps)

``check_jvp`` compares forward mode's directional derivative itself, entry
by entry, with the same central difference along the tangent.

One direction costs two extra evaluations of ``f`` whatever the size of
``x``, and a wrong entry anywhere in the gradient shows up in the dot
product with probability one.  Finite differences always run the plain
Python function in float64 (float32 inputs are cast up first), so the
reference is as accurate as central differences allow; the s2s_ad result is
computed in the inputs' own dtype, and the default tolerances follow that
dtype (looser for float32).

All three raise :class:`AssertionError` with both numbers, the
direction and the arguments when the check fails, and also check that each
derivative has the structure, shape and dtype of its argument.

Example::

    import numpy as np
    from s2s_ad.testing import check_grad

    def loss(w, x):
        return np.sum(np.tanh(x @ w) ** 2)

    check_grad(loss, (np.ones(3), np.eye(3)), argnums=(0, 1))
    check_grad(loss, (np.ones(3), np.eye(3)), target="cpu")   # the Numba build
    check_jvp(loss, (np.ones(3), np.eye(3)))                  # forward mode
"""
import weakref

import numpy as np

from .api import core as api
from .api.jacobians import jvp as api_jvp
from .api.vjp_function import vjp as api_vjp
from .ir import pytree

__all__ = ["check_grad", "check_vjp", "check_jvp", "default_tolerances"]

# (rtol, atol) for the s2s_ad side's dtype.  Float32 derivatives carry
# rounding of order 1e-7 per operation; float64 ones are compared against a
# central difference whose truncation error is O(eps**2) = 1e-12.
_TOLERANCES = {np.dtype(np.float64): (1e-6, 1e-9), np.dtype(np.float32): (2e-4, 1e-6)}
# Central differences in float64: a step near cbrt(machine epsilon) ~ 6e-6
# balances truncation (eps**2) against cancellation (machine epsilon / eps).
_EPS = 1e-6

_TRANSFORMED = weakref.WeakKeyDictionary()   # function -> {(kind, argnums, target): Transformed}


def default_tolerances(args):
    """``(rtol, atol)`` for the lowest-precision float among ``args``' leaves."""
    dtypes = {_dtype(leaf) for leaf in pytree.flatten(list(args))[0] if pytree.is_float_leaf(leaf)}
    return _TOLERANCES[np.dtype(np.float32)] if np.dtype(np.float32) in dtypes \
        else _TOLERANCES[np.dtype(np.float64)]


def check_grad(f, args, argnums=0, *, target="python", rtol=None, atol=None, eps=None, seed=0):
    """Check ``ad.grad(f, argnums)(*args)`` against central finite differences.

    ``args`` is the tuple of positional arguments (pytrees of floats and
    arrays; integer arguments are passed through undifferentiated).
    ``target="cpu"`` checks the Numba build, ``ad.jit(ad.grad(f))``.  One
    random direction ``v`` (seeded by ``seed``) is drawn for every leaf of
    the differentiated arguments, and ``<grad, v>`` is compared with the
    directional finite difference of ``f`` in float64 with step ``eps``.
    Returns the gradient.  Raises ``AssertionError`` on a mismatch.
    """
    plain = _plain(f)
    args = tuple(args)
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    nums = tuple(i % len(args) for i in nums)
    rtol, atol, eps = _settings(args, nums, rtol, atol, eps)
    grads = _transformed(f, "grad", argnums, target)(*args)
    per_arg = (grads,) if isinstance(argnums, int) else tuple(grads)
    if len(per_arg) != len(nums):
        raise AssertionError(f"ad.grad({_name(f)}, argnums={argnums!r}) returned "
                             f"{len(per_arg)} gradients for {len(nums)} arguments")
    for i, g in zip(nums, per_arg):
        _check_like(g, args[i], f"the gradient for argument {i}", f)

    rng = np.random.default_rng(seed)
    directions = {i: _random_like(args[i], rng) for i in nums}
    ad_value = sum(_dot(per_arg[k], directions[i]) for k, i in enumerate(nums))
    scale = sum(_abs_dot(per_arg[k], directions[i]) for k, i in enumerate(nums))

    def along(t):
        return _as_scalar(plain(*_shifted(args, directions, t)), f)
    fd, noise = _central(along, eps)
    _compare(ad_value, fd, scale, noise, rtol, atol, eps, what="gradient", f=f, args=args,
             nums=nums, directions=directions, derivs=dict(zip(nums, per_arg)), target=target)
    return grads


def check_vjp(f, args, *, target="python", rtol=None, atol=None, eps=None, seed=0):
    """Check ``ad.vjp(f, *args)`` against central finite differences.

    Draws a random cotangent ``u`` shaped like ``f``'s output and a random
    direction ``v`` for every float leaf of ``args``, and compares
    ``<vjp_fn(u), v>`` with the finite difference of ``<u, f(x)>`` along
    ``v`` (in float64).  Also checks the primal output against ``f(*args)``
    and that each cotangent has its argument's structure, shape and dtype.
    ``target="cpu"`` checks the Numba build, ``ad.vjp(ad.jit(f), ...)``.
    Returns the tuple of input cotangents.  Raises ``AssertionError`` on a
    mismatch.
    """
    plain = _plain(f)
    args = tuple(args)
    nums = tuple(i for i, a in enumerate(args) if _is_float_tree(a))
    rtol, atol, eps = _settings(args, nums, rtol, atol, eps)
    fn = f if target == "python" else api.jit(f, target=target)
    out, vjp_fn = api_vjp(fn, *args)
    expected = plain(*_copies(args))
    _check_value(out, expected, rtol, atol, f, args)

    rng = np.random.default_rng(seed)
    u = _random_like(out, rng, keep_dtype=True)
    cts = vjp_fn(u)
    if not isinstance(cts, tuple) or len(cts) != len(args):
        raise AssertionError(f"vjp_fn of {_name(f)} returned {type(cts).__name__} "
                             f"{cts!r}; expected a tuple with one cotangent per argument")
    for i in nums:
        _check_like(cts[i], args[i], f"the cotangent for argument {i}", f)
    directions = {i: _random_like(args[i], rng) for i in nums}
    ad_value = sum(_dot(cts[i], directions[i]) for i in nums)
    scale = sum(_abs_dot(cts[i], directions[i]) for i in nums)
    u64 = _to_float64(u)

    def along(t):
        return _dot(plain(*_shifted(args, directions, t)), u64)
    fd, noise = _central(along, eps)
    _compare(ad_value, fd, scale, noise, rtol, atol, eps, what="vjp", f=f, args=args, nums=nums,
             directions=directions, derivs={i: cts[i] for i in nums}, target=target, cotangent=u)
    return cts


def check_jvp(f, args, tangents=None, *, target="python", rtol=None, atol=None, eps=None,
              seed=0):
    """Check ``ad.jvp(f, args, tangents)`` against central finite differences.

    ``tangents`` has one entry per argument, structured like it; ``None``
    draws a standard-normal tangent (seeded by ``seed``) for every float
    leaf, in the leaf's own dtype, and gives integer and boolean leaves a
    zero of their type.  Checks that the primal output equals ``f(*args)``,
    that the tangent output has the output's structure, shapes and float
    dtypes, and that each of its entries matches

        (f(x + eps t) - f(x - eps t)) / (2 eps)

    computed in float64 by the plain Python function.  ``target="cpu"``
    checks the Numba build, ``ad.jvp(ad.jit(f), ...)``.  Returns
    ``(out, tangent_out)``.  Raises ``AssertionError`` on a mismatch.
    """
    plain = _plain(f)
    args = tuple(args)
    nums = tuple(i for i, a in enumerate(args) if _is_float_tree(a))
    if tangents is None:
        rng = np.random.default_rng(seed)
        tangents = tuple(_random_like(a, rng, keep_dtype=True) if i in nums else _zeros_like(a)
                         for i, a in enumerate(args))
    tangents = tuple(tangents)
    if len(tangents) != len(args):
        raise ValueError(f"check_jvp got {len(args)} arguments but {len(tangents)} tangents")
    rtol, atol, eps = _settings(args, nums, rtol, atol, eps)
    fn = f if target == "python" else _transformed(f, "jit", None, target)
    result = api_jvp(fn, args, tangents)
    if not isinstance(result, tuple) or len(result) != 2:
        raise AssertionError(f"ad.jvp({_name(f)}) returned {_show(result)}; expected "
                             f"(out, tangent_out)")
    out, dout = result
    expected = plain(*_copies(args))
    _check_value(out, expected, rtol, atol, f, args, what="ad.jvp")
    _check_tangent_like(dout, expected, f)

    directions = {i: _to_float64(tangents[i]) for i in nums}
    plus = plain(*_shifted(args, directions, eps))
    minus = plain(*_shifted(args, directions, -eps))
    d_leaves = pytree.flatten(dout)[0]
    p_leaves, m_leaves = pytree.flatten(plus)[0], pytree.flatten(minus)[0]
    for k, (d, p, m) in enumerate(zip(d_leaves, p_leaves, m_leaves)):
        if not pytree.is_float_leaf(p) and not isinstance(p, (int, np.integer)):
            continue
        p64, m64 = np.asarray(p, np.float64), np.asarray(m, np.float64)
        fd = (p64 - m64) / (2 * eps)
        got = np.asarray(d, np.float64)
        noise = 8 * np.finfo(np.float64).eps * (np.abs(p64) + np.abs(m64)) / (2 * eps)
        scale = max(float(np.max(np.abs(fd), initial=0.0)),
                    float(np.max(np.abs(got), initial=0.0)) if np.all(np.isfinite(got)) else 0.0)
        tol = atol + rtol * scale + noise
        bad = ~(np.abs(got - fd) <= tol)
        if np.any(bad):
            where = np.argwhere(np.atleast_1d(bad))[0]
            lines = [(f"s2s_ad jvp of {_name(f)} (target={target!r}) disagrees with central "
                      f"finite differences along the tangent t (output leaf {k}, first at "
                      f"index {tuple(int(w) for w in where)}):"),
                     f"  s2s_ad jvp  = {_show(d)}",
                     f"  finite diff = {_show(fd)}  (float64, eps={eps:g})",
                     (f"  max |difference| = {float(np.max(np.abs(got - fd))):.3e}, tolerance "
                      f"{float(np.max(tol)):.3e} (rtol={rtol:g}, atol={atol:g})")]
            for i in nums:
                lines += [f"  argument {i}: {_show(args[i])}",
                          f"  tangent {i}: {_show(tangents[i])}"]
            raise AssertionError("\n".join(lines))
    return out, dout


# -- pieces ------------------------------------------------------------------

def _plain(f):
    """The user's Python function beneath ``ad.jit`` (finite differences run it)."""
    return f.fun if isinstance(f, api.Transformed) else f


def _name(f):
    return getattr(_plain(f), "__qualname__", repr(f))


def _transformed(f, kind, argnums, target):
    """``ad.grad(f, argnums)`` (``f`` itself for ``kind="jit"``) for ``target``,
    reused across calls.

    Reusing the transformed function means a Numba build is compiled once
    per argument type, however many times a test suite checks it.
    """
    try:
        cache = _TRANSFORMED.setdefault(f, {})
    except TypeError:       # not weak-referenceable
        cache = {}
    key = (kind, argnums, target)
    if key not in cache:
        t = f if kind == "jit" else api.grad(f, argnums)
        cache[key] = t if target == "python" else api.jit(t, target=target)
    return cache[key]


def _settings(args, nums, rtol, atol, eps):
    d_rtol, d_atol = default_tolerances([args[i] for i in nums] or args)
    return (d_rtol if rtol is None else rtol, d_atol if atol is None else atol,
            _EPS if eps is None else eps)


def _dtype(leaf):
    return np.result_type(leaf)


def _is_float_tree(x):
    leaves = pytree.flatten(x)[0]
    return bool(leaves) and all(pytree.is_float_leaf(leaf) for leaf in leaves)


def _random_like(x, rng, keep_dtype=False):
    """A standard-normal pytree shaped like ``x`` (float64 unless ``keep_dtype``)."""
    leaves, tree = pytree.flatten(x)
    out = []
    for leaf in leaves:
        if not pytree.is_float_leaf(leaf):
            out.append(None)
            continue
        r = rng.standard_normal(np.shape(leaf))
        if keep_dtype:
            r = r.astype(_dtype(leaf))
            r = r if np.ndim(leaf) else (float(r) if isinstance(leaf, float) else r[()])
        out.append(r)
    return pytree.unflatten(out, tree)


def _zeros_like(x):
    """Zeros shaped and typed like every leaf of ``x`` (the tangent of an integer argument)."""
    return pytree.map_leaves(
        lambda v: np.zeros_like(v) if isinstance(v, np.ndarray) else type(v)(0), x)


def _copies(args):
    """``args`` with every array copied: the plain function may write into
    its arguments (NumPy code does), and the checks go on using them."""
    return [pytree.map_leaves(lambda v: np.copy(v) if isinstance(v, np.ndarray) else v, a)
            for a in args]


def _to_float64(x):
    return pytree.map_leaves(
        lambda v: np.asarray(v, dtype=np.float64) if pytree.is_float_leaf(v) else v, x)


def _shifted(args, directions, t):
    """``args`` in float64, with ``t * v`` added to the differentiated ones."""
    out = []
    for i, a in enumerate(args):
        leaves, tree = pytree.flatten(a)
        dirs = pytree.flatten(directions[i])[0] if i in directions else [None] * len(leaves)
        out.append(pytree.unflatten([_shift(leaf, v, t) for leaf, v in zip(leaves, dirs)], tree))
    return out


def _shift(leaf, v, t):
    """A float leaf in float64 (arrays stay arrays, scalars become floats), plus ``t * v``."""
    if not pytree.is_float_leaf(leaf):
        return leaf
    if isinstance(leaf, np.ndarray):
        return np.asarray(leaf.astype(np.float64) + (0.0 if v is None else t * v))
    return float(leaf) + (0.0 if v is None else t * float(v))


def _dot(a, b):
    """Sum over matching float leaves of ``a * b``, in float64."""
    la, lb = pytree.flatten(a)[0], pytree.flatten(b)[0]
    return float(sum(np.sum(np.asarray(x, np.float64) * np.asarray(y, np.float64))
                     for x, y in zip(la, lb) if y is not None and x is not None))


def _abs_dot(a, b):
    la, lb = pytree.flatten(a)[0], pytree.flatten(b)[0]
    return float(sum(np.sum(np.abs(np.asarray(x, np.float64) * np.asarray(y, np.float64)))
                     for x, y in zip(la, lb) if y is not None and x is not None))


def _as_scalar(value, f):
    if np.ndim(value) != 0:
        raise AssertionError(f"{_name(f)} must return a scalar for check_grad, but it returned "
                             f"shape {np.shape(value)}; use check_vjp")
    return float(value)


def _central(along, eps):
    """The central difference and an estimate of its rounding error."""
    plus, minus = along(eps), along(-eps)
    fd = (plus - minus) / (2 * eps)
    noise = 8 * np.finfo(np.float64).eps * (abs(plus) + abs(minus)) / (2 * eps)
    return fd, noise


def _compare(ad_value, fd, scale, noise, rtol, atol, eps, *, what, f, args, nums, directions,
             derivs, target, cotangent=None):
    # Errors in the derivative scale with the terms of the dot product, not
    # with their (possibly cancelling) sum; finite differences add their own
    # rounding noise.
    tol = atol + rtol * max(scale, abs(fd)) + noise
    if np.isfinite(ad_value) and abs(ad_value - fd) <= tol:
        return
    lines = [(f"s2s_ad {what} of {_name(f)} (target={target!r}) disagrees with central finite "
             f"differences along a random direction v:"),
             f"  <{what}, v>  = {ad_value!r}  (s2s_ad)",
             f"  finite diff = {fd!r}  (float64, eps={eps:g})",
             (f"  |difference| = {abs(ad_value - fd):.3e} > tolerance {tol:.3e} "
             f"(rtol={rtol:g}, atol={atol:g})")]
    for i in nums:
        lines += [f"  argument {i}: {_show(args[i])}",
                  f"  direction v for argument {i}: {_show(directions[i])}",
                  f"  s2s_ad {what} for argument {i}: {_show(derivs[i])}"]
    if cotangent is not None:
        lines.append(f"  cotangent u: {_show(cotangent)}")
    raise AssertionError("\n".join(lines))


def _check_like(d, x, what, f):
    """``d`` has the pytree structure, shapes and dtypes of ``x``."""
    dl, dt = pytree.flatten(d)
    xl, xt = pytree.flatten(x)
    if dt != xt or len(dl) != len(xl):
        raise AssertionError(f"{what} of {_name(f)} does not have its argument's structure: "
                             f"got {_show(d)} for argument {_show(x)}")
    for k, (a, b) in enumerate(zip(dl, xl)):
        if not pytree.is_float_leaf(b):
            continue
        where = f"{what} of {_name(f)} (leaf {k})"
        if np.shape(a) != np.shape(b):
            raise AssertionError(f"{where} has shape {np.shape(a)}, but the argument has "
                                 f"shape {np.shape(b)}")
        if isinstance(b, np.ndarray) and not (isinstance(a, np.ndarray) and a.dtype == b.dtype):
            raise AssertionError(f"{where} is {_describe(a)}, but the argument is "
                                 f"{_describe(b)}")
        if isinstance(b, np.floating) and _dtype(a) != b.dtype:
            raise AssertionError(f"{where} is {_describe(a)}, but the argument is "
                                 f"{_describe(b)}")


def _check_tangent_like(dout, out, f):
    """The tangent output has the structure, shapes and float dtypes of ``out``
    (the output of the plain function, so float32 stays float32)."""
    dl, dt = pytree.flatten(dout)
    ol, ot = pytree.flatten(out)
    if pytree.structure(dt) != pytree.structure(ot) or len(dl) != len(ol):
        raise AssertionError(f"the tangent output of {_name(f)} does not have the output's "
                             f"structure: got {_show(dout)} for output {_show(out)}")
    for k, (d, o) in enumerate(zip(dl, ol)):
        if not pytree.is_float_leaf(o):
            continue
        where = f"the tangent output of {_name(f)} (leaf {k})"
        if np.shape(d) != np.shape(o):
            raise AssertionError(f"{where} has shape {np.shape(d)}, but the output has shape "
                                 f"{np.shape(o)}")
        if isinstance(o, (np.ndarray, np.floating)) and _dtype(d) != _dtype(o):
            raise AssertionError(f"{where} is {_describe(d)} of dtype {_dtype(d)}, but the "
                                 f"output is {_describe(o)} of dtype {_dtype(o)}")


def _check_value(out, expected, rtol, atol, f, args, what="ad.vjp"):
    ol, ot = pytree.flatten(out)
    el, et = pytree.flatten(expected)
    ok = ot == et and len(ol) == len(el)
    for a, b in zip(ol, el) if ok else ():
        if np.shape(a) != np.shape(b):
            ok = False
            break
        b64 = np.asarray(b, np.float64)
        scale = max(1.0, float(np.max(np.abs(b64)))) if b64.size else 1.0
        if not np.allclose(np.asarray(a, np.float64), b64, rtol=rtol, atol=atol * scale,
                           equal_nan=True):
            ok = False
    if not ok:
        raise AssertionError(f"the primal output of {_name(f)} from {what} differs from calling "
                             f"it directly:\n  {what}: {_show(out)}\n  direct: {_show(expected)}"
                             f"\n  arguments: {_show(args)}")


def _describe(a):
    if isinstance(a, np.ndarray):
        return f"an array of dtype {a.dtype}"
    return f"a {type(a).__name__}"


def _show(x):
    if isinstance(x, np.ndarray):
        text = np.array2string(x, precision=6, threshold=40, separator=", ")
        return f"array({text}, dtype={x.dtype})" if x.dtype != np.float64 else f"array({text})"
    if isinstance(x, (tuple, list)):
        inner = ", ".join(_show(v) for v in x)
        return f"({inner}{',' if len(x) == 1 else ''})" if isinstance(x, tuple) else f"[{inner}]"
    if isinstance(x, np.generic):
        return f"{type(x).__name__}({x!r})"
    return repr(x)
