"""Shared by the Jacobian modules: unit bases, chunks of columns, the vmap a
Jacobian is built from, argument checks.
"""
import numbers

import numpy as np

from ..errors import StructureError
from ..ir import pytree
from . import dtypes
from .arguments import _unit_like

_MAPPED = {}


def _mapped(fun, axes, method=None):
    """``vmap(fun, in_axes=axes)``, built once (its compiled loop is kept)."""
    from .vmap import vmap
    key = (fun, axes, method)
    if key not in _MAPPED:
        _MAPPED[key] = vmap(fun, in_axes=axes, method=method)
    return _MAPPED[key]


#: The most tangents one vector-mode JVP carries (see Jacobian._vector_columns);
#: each is a local per active name, so this bounds the generated code's size.
WIDTH = 16


def _chunks(total):
    """(calls, width): ``total`` directions in the fewest calls of at most
    :data:`WIDTH`, as evenly as possible (the last padded with zeros)."""
    count = -(-total // WIDTH)
    return count, -(-total // count)


def _leaf_key(leaf):
    return (type(leaf), np.shape(leaf), getattr(leaf, "dtype", None))


def _output_like(t, args):
    """``t(*args)``, for the structure and shapes of the output only: run by
    the NumPy backend when ``t`` is compiled, so that a Jacobian's first call
    does not start compiling a primal it never runs compiled (its own
    generated function computes the output), which on a 2-core machine
    shares the CPU and the interpreter lock with that first call."""
    if t.target == "cpu":
        t = t.derived(target="python", options={})
    return t(*args)


def _direction(basis, arg, k):
    """Unit tangent ``k`` of ``_unit_basis`` (zeros past the last) for ``arg``."""
    leaves, tree = pytree.flatten(basis)
    own = pytree.flatten(arg)[0]
    out = []
    for e, a in zip(leaves, own):
        row = e[k] if k < e.shape[0] else np.zeros_like(e[0])
        out.append(row if isinstance(a, np.ndarray) else type(a)(row))
    return pytree.unflatten(out, tree)


def _unit_basis(values):
    """Unit tangents of all leaves of ``values`` together, stacked on a new axis 0.

    Returns one pytree per value (leaves shaped ``(N,) + leaf.shape`` where
    N counts every element of every leaf) and, per value, each leaf's
    (first row, size) in that stack.
    """
    sizes = [[int(np.size(x)) for x in pytree.flatten(v)[0]] for v in values]
    total = sum(map(sum, sizes))
    start, basis, blocks = 0, [], []
    for v, leaf_sizes in zip(values, sizes):
        leaves, tree = pytree.flatten(v)
        stacked, where = [], []
        for leaf, size in zip(leaves, leaf_sizes):
            dtype = tangent_dtype(leaf)
            e = np.zeros((total, size), dtype=dtype)
            e[start:start + size] = np.eye(size, dtype=dtype)
            stacked.append(e.reshape((total,) + np.shape(leaf)))
            where.append((start, size))
            start += size
        basis.append(pytree.unflatten(stacked, tree))
        blocks.append(where)
    return basis, blocks


def tangent_dtype(leaf):
    """The dtype of a unit tangent of ``leaf``: its own float or complex dtype,
    float64 for a Python float or int (a Python float is a float64 -- not the
    "weak" scalar NumPy would let a float32 tangent demote it to) and
    complex128 for a Python complex."""
    if isinstance(leaf, np.ndarray) and leaf.dtype.kind in "fc":
        return leaf.dtype
    if isinstance(leaf, np.inexact):
        return np.dtype(type(leaf))
    return np.dtype(np.complex128 if isinstance(leaf, complex) else np.float64)


def _with_units(t, args):
    return tuple(args) + tuple(_unit_like(args[i], t) for i in t.units)


def _dtype_like(block, leaf):
    """Float32 inputs give float32 Jacobians."""
    dt = np.result_type(leaf)
    if isinstance(block, np.ndarray) and dt.kind == "f" and block.dtype != dt and \
            block.dtype.kind == "f" and dt.itemsize < block.dtype.itemsize:
        return block.astype(dt)
    return block


def _scalarize(x):
    if isinstance(x, np.ndarray) and x.ndim == 0:
        return x[()]
    return x


def _is_float_tree(x):
    """Whether ``x`` has leaves, each differentiable (float or complex)."""
    leaves, _ = pytree.flatten(x)
    return bool(leaves) and all(pytree.is_inexact_leaf(v) for v in leaves)


def _describe_tree(x):
    leaves, _ = pytree.flatten(x)
    bad = [v for v in leaves if not pytree.is_inexact_leaf(v)]
    return pytree.describe(bad[0]) if bad else "no values"


def _zero_tangent(x):
    """Zeros shaped like ``x``'s leaves (an integer or boolean one's a zero of
    its type: such a value is never differentiated)."""
    leaves, tree = pytree.flatten(x)
    return pytree.unflatten([np.zeros_like(v) if isinstance(v, np.ndarray)
                             else type(v)(0) if isinstance(v, (numbers.Number, np.number, np.bool_))
                             else v for v in leaves], tree)


def _like_out(dout, out):
    """Tangents in the output's container types and float dtypes."""
    d_leaves, _ = pytree.flatten(dout)
    o_leaves, tree = pytree.flatten(out)
    fixed = []
    for d, o in zip(d_leaves, o_leaves):
        if isinstance(o, np.ndarray) and isinstance(d, np.ndarray) and o.dtype.kind == "f" \
                and d.dtype != o.dtype:
            d = d.astype(o.dtype)
        elif isinstance(o, np.ndarray) and not isinstance(d, np.ndarray) and d is not None:
            d = np.full(o.shape, d, dtype=o.dtype if o.dtype.kind == "f" else float)
        elif isinstance(o, np.floating) and d is not None:
            d = type(o)(d)
        fixed.append(d)
    return pytree.unflatten(fixed, tree) if len(fixed) == len(o_leaves) else dout


def _check_jvp_args(fun, primals, tangents):
    if not isinstance(primals, (tuple, list)):
        raise TypeError(f"primals must be a tuple of arguments, got {type(primals).__name__}")
    if not isinstance(tangents, (tuple, list)):
        raise TypeError(f"tangents must be a tuple with one entry per primal, got "
                        f"{type(tangents).__name__}")
    if len(primals) != len(tangents):
        raise StructureError(f"jvp got {len(primals)} primals but {len(tangents)} tangents; pass "
                         f"one tangent per primal")
    for i, (p, t) in enumerate(zip(primals, tangents)):
        pl, pt = pytree.flatten(p)
        tl, tt = pytree.flatten(t)
        if pytree.structure(pt) != pytree.structure(tt) or len(pl) != len(tl):
            raise StructureError(f"tangent {i} has a different structure from primal {i}")
        for a, b in zip(pl, tl):
            if np.shape(a) != np.shape(b):
                raise ValueError(f"tangent {i} has shape {np.shape(b)}, but primal {i} has "
                                 f"shape {np.shape(a)}")
    return tuple(primals), dtypes.check_tangents(_plain_function(fun), primals, tangents)


def _plain_function(fun):
    """The user's function beneath transforms (whose parameters name the arguments)."""
    while getattr(fun, "__code__", None) is None and hasattr(fun, "fun"):
        fun = fun.fun
    return fun if hasattr(fun, "__qualname__") else type(fun)
