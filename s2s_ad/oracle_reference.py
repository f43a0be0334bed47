"""The oracle's independent reference: central finite differences in float64.

:func:`reference` computes what one (unbatched) transform of a function
must return -- its Jacobian, gradient, VJP or JVP -- from the function
alone, by central differences at two steps (:data:`FD_STEP` and four times
it) that must agree, else the function is not smooth there
(:class:`Unsmooth`, and the oracle skips the point).  It never calls
s2s_ad's derivatives (a Hessian differentiates s2s_ad's gradient: the
gradient itself is checked separately).  The flattening and comparison
helpers are shared with :mod:`s2s_ad.oracle`, whose witnesses are compared
against this reference within :data:`FD_TOL`.
"""
import copy

import numpy as np

import s2s_ad as ad

#: (rtol, atol) of a witness against finite differences (float64, step 1e-5:
#: truncation ~1e-10, cancellation ~1e-11 relative to the function's size).
FD_TOL = (1e-5, 1e-6)
#: Finite-difference step (relative to max(1, |x_i|)) and its check step.
FD_STEP = 1e-5


# -- flattening and comparing -------------------------------------------------------


def leaves(x):
    """Float leaves of a result (tuples, lists, dicts by sorted key), as arrays."""
    if isinstance(x, (tuple, list)):
        return [leaf for v in x for leaf in leaves(v)]
    if isinstance(x, dict):
        return [leaf for k in sorted(x) for leaf in leaves(x[k])]
    if x is None:
        return []
    return [np.asarray(x, dtype=np.float64)]


def compare(got, want, tol):
    """None, or (kind, index, got, want, detail) for the first differing element."""
    g, w = leaves(got), leaves(want)
    if len(g) != len(w):
        return ("shape", None, None, None, f"{len(g)} result leaves, expected {len(w)}")
    rtol, atol = tol
    for k, (a, b) in enumerate(zip(g, w)):
        if a.shape != b.shape:
            return ("shape", None, None, None,
                    f"leaf {k} has shape {a.shape}, expected {b.shape}")
        scale = float(np.max(np.abs(b))) if b.size and np.all(np.isfinite(b)) else 0.0
        bad = ~(np.abs(a - b) <= atol * (1.0 + scale) + rtol * np.abs(b))
        bad &= ~((a == b) | (np.isnan(a) & np.isnan(b)))
        if np.any(bad):
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            err = float(np.nanmax(np.abs(a - b)))
            return ("value", (k, idx), float(a[idx]), float(b[idx]),
                    f"max abs error {err:.3g} (rtol {rtol:g}, atol {atol:g})")
    return None


def snapshot(args):
    return copy.deepcopy(args)


def same(a, b):
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.shape == b.shape and \
            np.array_equal(a, b, equal_nan=True)
    return a == b or (a != a and b != b)


# -- finite differences -------------------------------------------------------------


def call_plain(fn, args):
    return fn(*snapshot(args))


def _perturbed(args, i, index, delta):
    new = list(snapshot(args))
    if np.ndim(new[i]) == 0 and not isinstance(new[i], np.ndarray):
        new[i] = float(new[i]) + delta
    else:
        arr = np.array(new[i], dtype=np.float64)
        arr[index] += delta
        new[i] = arr
    return new


def _fd_columns(fn, args, nums, step):
    """For each differentiated argument: array (out leaves..., arg.shape) of
    central differences, as a list over output leaves of lists over ``nums``."""
    base = leaves(call_plain(fn, args))
    per_out = [[None] * len(nums) for _ in base]
    for k, i in enumerate(nums):
        shape = np.shape(args[i])
        cols = [np.zeros(o.shape + shape) for o in base]
        for index in np.ndindex(*shape):
            h = step * max(1.0, abs(float(np.asarray(args[i])[index])))
            up = leaves(call_plain(fn, _perturbed(args, i, index, h)))
            down = leaves(call_plain(fn, _perturbed(args, i, index, -h)))
            for o, (u, d) in enumerate(zip(up, down)):
                cols[o][(Ellipsis,) + index] = (u - d) / (2 * h)
        for o in range(len(base)):
            per_out[o][k] = cols[o]
    return per_out


def _jacobian(fn, args, nums, single):
    """Reference Jacobian structured as ``jacrev(fn, argnums)`` returns it, or None
    where finite differences at two steps disagree (not smooth at ``args``)."""
    a = _fd_columns(fn, args, nums, FD_STEP)
    b = _fd_columns(fn, args, nums, FD_STEP * 4)
    if compare(a, b, (FD_TOL[0] * 10, FD_TOL[1] * 10)) is not None:
        return None
    out = call_plain(fn, args)
    rows = [cols[0] if single else tuple(cols) for cols in a]
    return rows[0] if not isinstance(out, (tuple, list)) else type(out)(rows)


class Unsmooth(Exception):
    pass


def reference(fn, args, transform, nums, single, extra):
    """The independent reference for one (unbatched) transform, or raise Unsmooth."""
    def jac(f, a):
        j = _jacobian(f, a, nums, single)
        if j is None:
            raise Unsmooth()
        return j
    if transform in ("grad", "jacfwd", "jacrev"):
        return jac(fn, args)
    if transform == "value_and_grad":
        return (call_plain(fn, args), jac(fn, args))
    if transform == "hessian":
        g = ad.grad(fn, argnums=nums[0] if single else nums)
        return jac(lambda *a: g(*a), args)
    if transform == "vjp":
        allnums = tuple(range(len(args)))
        j = _fd_columns(fn, args, allnums, FD_STEP)
        j2 = _fd_columns(fn, args, allnums, FD_STEP * 4)
        if compare(j, j2, (FD_TOL[0] * 10, FD_TOL[1] * 10)) is not None:
            raise Unsmooth()
        cot = leaves(extra)
        cts = []
        for k, a in enumerate(args):
            c = sum(np.tensordot(u, j[o][k], axes=u.ndim) for o, u in enumerate(cot))
            cts.append(c)
        return (call_plain(fn, args), tuple(cts))
    if transform == "jvp":
        tangents = extra
        out = []
        for step in (FD_STEP, FD_STEP * 4):
            up = [a + step * t for a, t in zip(args, tangents)]
            down = [a - step * t for a, t in zip(args, tangents)]
            u, d = leaves(call_plain(fn, up)), leaves(call_plain(fn, down))
            out.append([(x - y) / (2 * step) for x, y in zip(u, d)])
        if compare(out[0], out[1], (FD_TOL[0] * 10, FD_TOL[1] * 10)) is not None:
            raise Unsmooth()
        value = call_plain(fn, args)
        t = out[0]
        return (value, t[0] if not isinstance(value, (tuple, list)) else type(value)(t))
    if transform == "vmap":
        return call_plain(fn, args)
    raise ValueError(f"unknown transform {transform!r}")
