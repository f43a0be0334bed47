"""Numba overloads of the shape operations (see shapes.py).

Each overload generates code for its (rank, literal axis) so every index
expression is static: squeeze and stack_grad become integer indexing,
split_grad a slice, transpose_grad a strided view, index_grad loops over
the selected view.  Numba constructs that take seconds to compile
(transpose with axes, broadcasting setitem) are avoided.  Guarantees: same
values, shapes and copy/view behaviour as the NumPy versions, for any
array layout.
"""

from numba import types
from numba.core.errors import TypingError
from numba.extending import overload, register_jitable
from numpy.lib.stride_tricks import as_strided

from . import shapes
from ._nbutil import (
    compile_impl,
    dtype_src,
    grad_dtype,
    is_absent,
    is_scalar,
    loops,
    shape_tuple,
    static_axes,
    static_axis,
)
from ._nbutil import index as index_src


def _require_array(x, fname):
    if not isinstance(x, types.Array):
        raise TypingError(f"s2s_ad.runtime.{fname}: expected an array, "
                          f"got {x}")


def _select(ndim, axes, what):
    """Index source taking `what` on `axes` and everything elsewhere."""
    return ", ".join(what if d in axes else ":" for d in range(ndim))


@overload(shapes.ndim)
def _ndim(a):
    rank = a.ndim if isinstance(a, types.Array) else 0
    return compile_impl(f"def impl(a):\n    return {rank}")


@overload(shapes.squeeze, prefer_literal=True)
def _squeeze(a, axis=None):
    _require_array(a, "squeeze")
    if is_absent(axis):
        # A Numba array's rank is part of its type, but which axes have
        # length 1 is only known at run time.
        raise TypingError(
            "s2s_ad.runtime.squeeze in Numba needs an explicit axis: with "
            "axis=None the result rank depends on run-time shapes")
    axes = static_axes(axis, a.ndim, "squeeze")
    lines = ["def impl(a, axis=None):"]
    for d in axes:
        lines += [f"    if a.shape[{d}] != 1:",
                  ("        raise ValueError('cannot select an axis to "
                   "squeeze out which has size not equal to one')")]
    if not axes:
        lines.append("    return a")
    elif len(axes) == a.ndim:
        # Indexing every axis would give a scalar; NumPy gives a 0-d array.
        lines.append("    return np.ascontiguousarray(a).reshape(())")
    else:
        lines.append(f"    return a[{_select(a.ndim, axes, '0')}]")
    return compile_impl("\n".join(lines))


@register_jitable
def _position(axes, j):
    """Index i with axes[i] == j (mod len(axes)): the inverse permutation."""
    n = len(axes)
    for i in range(n):
        if axes[i] % n == j:
            return i
    raise ValueError("transpose_grad: axes is not a permutation")


def _permuted_view_src(inv):
    """Source of g transposed by `inv` (index expressions) as a view.

    Built with as_strided rather than g.transpose(axes): Numba takes
    seconds to compile the latter (and np.swapaxes/np.moveaxis).
    """
    shape = shape_tuple([f"g.shape[{i}]" for i in inv])
    strides = shape_tuple([f"g.strides[{i}]" for i in inv])
    return f"as_strided(g, shape={shape}, strides={strides})"


@overload(shapes.transpose_grad, prefer_literal=True)
def _transpose_grad(g, axes=None):
    _require_array(g, "transpose_grad")
    if is_absent(axes):
        return compile_impl("def impl(g, axes=None):\n    return g.T")
    if not isinstance(axes, types.BaseTuple) or len(axes) != g.ndim:
        raise TypingError("s2s_ad.runtime.transpose_grad: axes must be a "
                          f"tuple of {g.ndim} ints, got {axes}")
    env = {"as_strided": as_strided, "_position": _position}
    if all(isinstance(t, types.IntegerLiteral) for t in axes):
        perm = [t.literal_value % g.ndim for t in axes]
        if sorted(perm) != list(range(g.ndim)):
            raise TypingError("s2s_ad.runtime.transpose_grad: axes "
                              f"{axes} is not a permutation")
        inv = sorted(range(g.ndim), key=perm.__getitem__)
        return compile_impl("def impl(g, axes=None):\n"
                            f"    return {_permuted_view_src(inv)}", env)
    lines = ["def impl(g, axes=None):"]
    lines += [f"    p{j} = _position(axes, {j})" for j in range(g.ndim)]
    inv = [f"p{j}" for j in range(g.ndim)]
    lines.append(f"    return {_permuted_view_src(inv)}")
    return compile_impl("\n".join(lines), env)


@overload(shapes.split_grad, prefer_literal=True)
def _split_grad(g, offset, size, axis):
    _require_array(g, "split_grad")
    ax = static_axis(axis, g.ndim, "split_grad")
    sel = _select(g.ndim, (ax,), "offset:offset + size")
    return compile_impl(
        f"def impl(g, offset, size, axis):\n    return g[{sel}].copy()")


@overload(shapes.stack_grad, prefer_literal=True)
def _stack_grad(g, i, axis):
    _require_array(g, "stack_grad")
    ax = static_axis(axis, g.ndim, "stack_grad")
    if g.ndim == 1:
        body = "g[i]"
    else:
        body = f"g[{_select(g.ndim, (ax,), 'i')}].copy()"
    return compile_impl(f"def impl(g, i, axis):\n    return {body}")


def _basic_index(index):
    """True for a basic index: int/slice/None/... or a tuple of those.

    Integer-array indices are refused: `z[index] += g` would not
    accumulate repeated positions, so the result would be silently wrong.
    """
    parts = index.types if isinstance(index, types.BaseTuple) else (index,)
    return all(isinstance(p, (types.Integer, types.SliceType, types.NoneType,
                              types.EllipsisType)) for p in parts)


def _index_grad_src(g, x, index):
    """Source of index_grad: a view of the zeros at `index`, then g added.

    The view's rank is known while typing (ints drop an axis, None adds
    one); g is broadcast against it by loops with index multipliers m_j
    (0 where g has length 1).  `z[index] += g` would be shorter, but a
    broadcasting setitem takes Numba seconds to compile.
    """
    parts = index.types if isinstance(index, types.BaseTuple) else (index,)
    vnd = (x.ndim - sum(isinstance(p, types.Integer) for p in parts)
           + sum(isinstance(p, types.NoneType) for p in parts))
    gnd = 0 if is_scalar(g) else g.ndim
    if gnd > vnd:
        raise TypingError(f"s2s_ad.runtime.index_grad: a {gnd}-d g cannot "
                          f"be added to a {vnd}-d selection")
    lines = ["def impl(g, x, index):",
             f"    z = np.zeros(x.shape, {dtype_src(grad_dtype(x))})"]
    gsel = "g" if is_scalar(g) else "g[()]"
    if vnd == 0:
        return "\n".join(lines + [f"    z[index] += {gsel}", "    return z"])
    lines.append("    v = z[index]")
    names = [f"i{d}" for d in range(vnd)]
    lead = vnd - gnd
    for j in range(gnd):
        lines += [f"    m{j} = 1",
                  f"    if g.shape[{j}] == 1:",
                  f"        m{j} = 0",
                  f"    elif g.shape[{j}] != v.shape[{lead + j}]:",
                  "        raise ValueError('index_grad: g does not fit')"]
    if gnd:
        gsel = "g[" + index_src([f"{names[lead + j]} * m{j}"
                                 for j in range(gnd)]) + "]"
    lines += loops(names, [f"v.shape[{d}]" for d in range(vnd)],
                   [f"v[{index_src(names)}] += {gsel}"])
    lines.append("    return z")
    return "\n".join(lines)


@overload(shapes.index_grad, prefer_literal=True)
def _index_grad(g, x, index):
    _require_array(x, "index_grad")
    if not _basic_index(index):
        raise TypingError(
            "s2s_ad.runtime.index_grad in Numba supports basic indices "
            f"(ints, slices, None, ... and tuples of them) only, got {index}")
    return compile_impl(_index_grad_src(g, x, index))
