"""Linear matrix functions, einsum and norms, and their derivatives.

trace, diagonal, diag, vdot, kron, cross and tensordot (each linear in each
operand, so the adjoints are the transposed maps), einsum (its VJP is an
einsum per operand) and np.linalg.norm for every order/axis/keepdims.
Plain NumPy; ``_nb_linsolve``, ``_nb_matfun`` and ``_nb_einsum`` give the
Numba versions.  Generated code reaches them as ``rt.NAME`` through
:mod:`runtime.linalg`, which re-exports every name.
"""

import numpy as np

from .linalg_matrix import _c
from .plumbing import unbroadcast

# -- linear matrix functions -------------------------------------------------------

def _to_end(a, axis1, axis2):
    return np.moveaxis(a, (axis1, axis2), (-2, -1))


def _diagonal_index(n, m, offset):
    size = max(0, min(n + min(offset, 0), m - max(offset, 0)))
    i = np.arange(size)
    return i - min(offset, 0), i + max(offset, 0)


def trace(a, offset=0, axis1=0, axis2=1):
    return np.trace(a, offset, axis1, axis2)


def diagonal(a, offset=0, axis1=0, axis2=1):
    return np.diagonal(a, offset, axis1, axis2).copy()


def diagonal_grad(g, a, offset=0, axis1=0, axis2=1):
    """Cotangent of np.diagonal: g on the diagonal of a zero array shaped like a."""
    moved = np.zeros(_to_end(a, axis1, axis2).shape, dtype=np.result_type(g, a, 0.0))
    rows, cols = _diagonal_index(moved.shape[-2], moved.shape[-1], offset)
    moved[..., rows, cols] = g
    return np.moveaxis(moved, (-2, -1), (axis1, axis2))


def trace_grad(g, a, offset=0, axis1=0, axis2=1):
    ones = np.ones(np.diagonal(a, offset, axis1, axis2).shape)
    return diagonal_grad(np.asarray(g)[..., None] * ones, a, offset, axis1, axis2)


def diag(v, k=0):
    return np.diag(v, k)


def diag_grad(g, v, k=0):
    if np.ndim(v) == 1:
        return np.diagonal(g, k).copy()
    return diagonal_grad(g, v, k)


def vdot(a, b):
    """np.vdot: conjugates its first operand."""
    return np.dot(np.conj(np.ravel(a)), np.ravel(b))


def _as2d(x):
    return x.reshape(1, -1) if x.ndim == 1 else x


def _kron_check(a, b):
    if a.ndim != b.ndim or a.ndim > 2:
        raise ValueError("s2s_ad: np.kron is differentiated for two vectors or two matrices")


def kron(a, b):
    _kron_check(a, b)
    return np.kron(a, b)


def _kron_blocks(g, a, b):
    a2, b2 = _as2d(a), _as2d(b)
    ma, na = a2.shape
    mb, nb = b2.shape
    blocks = _c(_c(g).reshape(ma, mb, na, nb).transpose(0, 2, 1, 3))
    return blocks.reshape(ma * na, mb * nb)


def kron_grad_a(g, a, b):
    return (_kron_blocks(g, a, b) @ _c(b).ravel()).reshape(a.shape)


def kron_grad_b(g, a, b):
    return (_c(a).ravel() @ _kron_blocks(g, a, b)).reshape(b.shape)


def _cross_check(a, b):
    if np.shape(a)[-1] != 3 or np.shape(b)[-1] != 3:
        raise ValueError("s2s_ad: np.cross is differentiated for 3-vectors")


def cross(a, b):
    _cross_check(a, b)
    return np.cross(a, b)


def cross_grad_a(g, a, b):
    return unbroadcast(np.cross(b, g), a)


def cross_grad_b(g, a, b):
    return unbroadcast(np.cross(g, a), b)


def _tensordot_axes(a, b, axes):
    if isinstance(axes, int):
        return list(range(a.ndim - axes, a.ndim)), list(range(axes))
    ax_a, ax_b = axes
    ax_a = [ax_a] if isinstance(ax_a, int) else list(ax_a)
    ax_b = [ax_b] if isinstance(ax_b, int) else list(ax_b)
    return [x % a.ndim for x in ax_a], [x % b.ndim for x in ax_b]


def tensordot(a, b, axes=2):
    return np.tensordot(a, b, axes)


def tensordot_grad_a(g, a, b, axes=2):
    g = np.asarray(g)          # a number when every axis is contracted
    ax_a, ax_b = _tensordot_axes(a, b, axes)
    free_a = [i for i in range(a.ndim) if i not in ax_a]
    free_b = [i for i in range(b.ndim) if i not in ax_b]
    # g has axes free_a + free_b: contract free_b with b's free axes.
    out = np.tensordot(g, b, (list(range(len(free_a), g.ndim)), free_b))
    # out has axes free_a, then b's contracted axes in b's order: name them by a's.
    order = free_a + [ax_a[ax_b.index(k)] for k in sorted(ax_b)]
    return np.transpose(out, np.argsort(order))


def tensordot_grad_b(g, a, b, axes=2):
    g = np.asarray(g)
    ax_a, ax_b = _tensordot_axes(a, b, axes)
    free_a = [i for i in range(a.ndim) if i not in ax_a]
    free_b = [i for i in range(b.ndim) if i not in ax_b]
    out = np.tensordot(a, g, (free_a, list(range(len(free_a)))))
    # out has a's contracted axes in a's order (named by b's), then free_b.
    order = [ax_b[ax_a.index(k)] for k in sorted(ax_a)] + free_b
    return np.transpose(out, np.argsort(order))


# -- einsum ----------------------------------------------------------------------

def einsum_parse(subscripts, n):
    text = subscripts.replace(" ", "")
    if "." in text:
        raise ValueError("s2s_ad: np.einsum subscripts with an ellipsis are not differentiated")
    if "->" in text:
        ins, out = text.split("->")
    else:
        ins = text
        counts = {}
        for ch in ins.replace(",", ""):
            counts[ch] = counts.get(ch, 0) + 1
        out = "".join(sorted(ch for ch, c in counts.items() if c == 1))
    ins = ins.split(",")
    if len(ins) != n:
        raise ValueError(f"np.einsum: {len(ins)} operands in the subscripts, {n} given")
    return ins, out


def einsum(subscripts, operands):
    """np.einsum(subscripts, *operands), contracting in the optimised order."""
    return np.einsum(subscripts, *operands, optimize=len(operands) > 2)


def einsum_grad_spec(subscripts, n, i):
    """(spec, extras) of the cotangent of operand ``i`` of an einsum of ``n``
    operands: ``spec`` contracts g, the other operands in order, then one added
    operand per entry of ``extras``, ("eye" | "ones", axis of operand i).

    Letters of operand i found nowhere else enter as ones; a letter repeated
    in it (a diagonal) enters as an identity matrix.  Shared by
    :func:`einsum_grad` and its Numba version (``_nb_einsum``).
    """
    ins, out = einsum_parse(subscripts, n)
    mine = ins[i]
    terms = [out] + [s for j, s in enumerate(ins) if j != i]
    seen = set("".join(terms))
    free = iter(ch for ch in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                if ch not in subscripts)
    target, first, extras = [], set(), []
    for k, ch in enumerate(mine):
        if ch in first:              # a repeated letter: an identity ties it to the first
            new = next(free)
            terms.append(ch + new)
            extras.append(("eye", k))
            target.append(new)
            continue
        first.add(ch)
        target.append(ch)
        if ch not in seen:
            terms.append(ch)
            extras.append(("ones", k))
            seen.add(ch)
    return ",".join(terms) + "->" + "".join(target), extras


def einsum_grad(g, subscripts, operands, i):
    """Cotangent of operand ``i``: an einsum of g and the other operands (see
    :func:`einsum_grad_spec`)."""
    spec, extras = einsum_grad_spec(subscripts, len(operands), i)
    shape = np.shape(operands[i])
    arrays = [g] + [x for j, x in enumerate(operands) if j != i] + [
        np.eye(shape[k]) if kind == "eye" else np.ones(shape[k]) for kind, k in extras]
    dtype = np.result_type(g, operands[i], 0.0)
    return np.asarray(np.einsum(spec, *arrays, optimize=len(arrays) > 2), dtype=dtype)


def einsum_jvp(subscripts, operands, tangents):
    """The sum over operands of einsum with that operand replaced by its tangent."""
    total = None
    for i in range(len(operands)):
        ops = list(operands)
        ops[i] = tangents[i]
        term = einsum(subscripts, tuple(ops))
        total = term if total is None else total + term
    return total


# -- norms -------------------------------------------------------------------------

def norm(x, ord=None, axis=None, keepdims=False):
    return np.linalg.norm(x, ord, axis, keepdims)


def _norm_axes(x, axis):
    if axis is None:
        return tuple(range(x.ndim))
    return tuple(a % x.ndim for a in ((axis,) if isinstance(axis, int) else axis))


def _ties(mask, axes):
    return mask / np.sum(mask, axis=axes, keepdims=True)


def norm_grad(g, x, out, ord=None, axis=None, keepdims=False):
    """Cotangent of np.linalg.norm (ties among maxima share; zero at a zero 2-norm is nan).

    A complex ``x`` gets JAX's cotangent, ``Re(g)`` times the derivative in
    ``conj(x)`` (conj(x) / |x| for the 2-norm)."""
    x = np.asarray(x)
    axes = _norm_axes(x, axis)
    if len(axes) > 2 or (axis is None and x.ndim > 2 and ord is not None):
        raise ValueError("np.linalg.norm: improper number of dimensions to norm")
    g = np.asarray(g)
    out = np.asarray(out)
    if np.iscomplexobj(x):
        # JAX's convention: d|z| pairs with Re(g), and its cotangent is conj(z)/|z|
        g, x = np.real(g), np.conj(x)
        if len(axes) == 2 and ord not in (None, "fro"):
            raise TypeError(f"np.linalg.norm(ord={ord!r}) of a complex matrix has no "
                            f"derivative rule in s2s_ad (vector norms and 'fro' have one)")
    if not keepdims and axis is not None:
        g, out = np.expand_dims(g, axes), np.expand_dims(out, axes)
    elif not keepdims:
        g, out = np.reshape(g, (1,) * x.ndim), np.reshape(out, (1,) * x.ndim)
    if len(axes) == 1 or (axis is None and ord is None):     # vector norms (and Frobenius)
        if ord is None or ord == 2 or ord == "fro":
            return g * x / out
        if ord == np.inf or ord == -np.inf:
            return g * np.sign(x) * _ties(np.abs(x) == out, axes)
        if ord == 0:
            return np.zeros_like(x * g)
        if ord == 1:
            return g * np.sign(x)
        return g * np.sign(x) * (np.abs(x) / out) ** (ord - 1)
    if ord == "fro":
        return g * x / out
    moved = np.moveaxis(x, axes, (-2, -1))
    gm = np.moveaxis(g, axes, (-2, -1))
    if ord in ("nuc", 2, -2):
        u, s, vh = np.linalg.svd(moved, full_matrices=False)
        if ord == "nuc":
            part = u @ vh
        else:
            k = 0 if ord == 2 else -1
            part = u[..., :, k:k + 1 if k == 0 else None] @ vh[..., k:k + 1 if k == 0 else None, :]
        return np.moveaxis(gm * part, (-2, -1), axes)
    sums_over = -2 if abs(ord) == 1 else -1       # 1: column sums; inf: row sums
    sums = np.sum(np.abs(moved), axis=sums_over, keepdims=True)
    best = np.max(sums, axis=-1 if sums_over == -2 else -2, keepdims=True) if ord > 0 else \
        np.min(sums, axis=-1 if sums_over == -2 else -2, keepdims=True)
    picked = _ties(sums == best, (-1, -2))
    return np.moveaxis(gm * np.sign(moved) * picked, (-2, -1), axes)
