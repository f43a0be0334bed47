"""Jacobian columns by forward mode: JVPs along unit tangents, batched by vmap
or carried several at once (vector mode), and assembled per output leaf.
"""
import numpy as np

from ..ir import pytree
from .arguments import fast_key
from .core import _as_transformed
from .jacobian_common import (
    _chunks,
    _direction,
    _dtype_like,
    _is_float_tree,
    _leaf_key,
    _mapped,
    _output_like,
    _scalarize,
    _unit_basis,
    _with_units,
    tangent_dtype,
)


class Columns:
    """Columns of a Jacobian from JVPs (``jacfwd``, and ``jvp`` of a Jacobian)."""

    def _nested(self, args, direction):
        """Jacobians of Jacobians (and their JVPs) as directional derivatives.

        Entry ``[..., k1, ..., kd]`` of a Jacobian nested ``d`` deep is the
        d-th directional derivative of the innermost function along unit
        tangents ``e_k1, ..., e_kd``: a function with ``d`` forward layers,
        mapped over every combination of unit tangents in one batched call
        (the JVP of a Jacobian adds one layer along the given direction).
        """
        levels, base = [], self
        while _is_jacobian(base):
            levels.append(base)
            base = base.fun
        levels.reverse()                          # innermost first
        for level in levels:
            if not level.single or pytree.flatten(args[level.argnums[0]])[1] is not None:
                raise TypeError("Jacobians nested more than two deep (or their JVPs) take a "
                                "single argnum holding one array or float at each level")
        t = _as_transformed(base)
        nums = [level._nums(args)[0] for level in levels]
        layers = [((n,), "tangent") for n in nums]
        extra = []
        if direction is not None:
            floats = tuple(i for i, a in enumerate(args) if _is_float_tree(a))
            layers.append((floats, "tangent"))
            extra = [direction[i] for i in floats]
        if t.kind == "primal":
            layered = t.derived("primal", layers=t.layers + tuple(layers))
        else:
            layered = t.derived(t.kind, layers=t.layers + tuple(layers), units=())
        head = list(_with_units(t, args))
        sizes = [int(np.size(args[n])) for n in nums]
        combos = int(np.prod(sizes))
        grids = np.indices(sizes).reshape(len(sizes), -1)
        tangents = []
        for n, k in zip(nums, grids):
            leaf = np.asarray(args[n], dtype=tangent_dtype(args[n]))
            e = np.zeros((combos, leaf.size), dtype=leaf.dtype)
            e[np.arange(combos), k] = 1.0
            tangents.append(e.reshape((combos,) + np.shape(args[n])))
        axes = (None,) * len(head) + (0,) * len(tangents) + (None,) * len(extra)
        result = _mapped(layered, axes)(*head, *tangents, *extra)
        out_leaves, out_tree = pytree.flatten(result)
        shaped = []
        for ol in out_leaves:
            ol = np.asarray(ol).reshape(tuple(sizes) + np.shape(ol)[1:])
            ol = np.moveaxis(ol, tuple(range(len(sizes))),
                             tuple(range(ol.ndim - len(sizes), ol.ndim)))
            in_shape = sum((np.shape(args[n]) for n in nums), ())
            block = ol.reshape(ol.shape[:ol.ndim - len(sizes)] + in_shape)
            shaped.append(_scalarize(_dtype_like(block, np.result_type(*[args[n]
                                                                          for n in nums]))))
        return pytree.unflatten(shaped, out_tree)

    def _batched(self, args, nums):
        """All columns (or rows) in one batched call of one generated function.

        The JVP (or VJP) is mapped over the unit tangents (cotangents) with
        :func:`~s2s_ad.vmap`, so one compiled loop (or one vectorized call)
        computes the whole Jacobian.  None where this does not apply (a
        Jacobian of a Jacobian of a vector function), which then goes column
        by column.  Tangents are passed in argument order; the result lists
        the arguments in ``argnums`` order.
        """
        order = tuple(sorted(nums))
        inner = self.fun
        if _is_jacobian(inner):
            if inner.mode != "rev" or _is_jacobian(inner.fun):
                return None
            t = _as_transformed(inner.fun)
            if t.kind != "primal":
                return None
            key = ("scalar output",) + tuple(_leaf_key(leaf) for a in args
                                             for leaf in pytree.flatten(a)[0])
            scalar = self._plans.get(key)
            if scalar is None:
                out = _output_like(t, args)
                scalar = self._plans[key] = pytree.flatten(out)[1] is None and np.ndim(out) == 0
            if not scalar:
                return None
            # The Hessian of a scalar function: one Hessian-vector product
            # (gradient of the directional derivative) per unit tangent.
            grad_of = t.derived("grad", argnums=tuple(inner._nums(args)), single=inner.single,
                                layers=t.layers + ((order, "tangent"),),
                                holomorphic=inner.holomorphic)
            return self._columns(grad_of, _with_units(t, args), nums, order, lambda r: r)
        t = _as_transformed(inner)
        if self.mode == "rev" and t.kind == "primal":
            return self._rows(t, args, nums)
        if t.kind == "primal":
            if t.target == "cpu":
                return self._vector_columns(t, args, nums, order)
            layered = t.derived("primal", layers=t.layers + ((order, "pair"),))
            return self._columns(layered, _with_units(t, args), nums, order, lambda r: r[1])
        if t.has_aux:
            return None
        layered = t.derived(t.kind, layers=t.layers + ((order, "tangent"),), units=())
        return self._columns(layered, _with_units(t, args), nums, order, lambda r: r)

    def _columns(self, layered, args, nums, order, tangent_of):
        """Map ``layered(*args, *tangents)`` over unit tangents; assemble the Jacobian."""
        basis, blocks = _unit_basis([args[i] for i in order])
        axes = (None,) * len(args) + (0,) * len(order)
        if blocks and sum(size for b in blocks for _, size in b) == 0:
            return self._empty(args, nums)
        result = tangent_of(_mapped(layered, axes)(*args, *basis))
        return self._assemble(result, args, nums, order, blocks)

    def _vector_columns(self, t, args, nums, order):
        """Compiled code: the columns in vector mode, up to :data:`WIDTH` per call.

        One generated JVP carries K tangents at once (``forward.jvp_function``
        with ``width=K``): the primal and every partial are computed once per
        call, not once per column.
        """
        key = tuple(_leaf_key(leaf) for i in order for leaf in pytree.flatten(args[i])[0])
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = self._vector_plan(t, args, nums)
        layered, calls, blocks, total = plan
        if total == 0:
            return self._empty(args, nums)
        head = _with_units(t, args)
        columns = []
        for tangents in calls:
            _, douts = layered(*head, *tangents)
            columns += [douts] if layered.width == 1 else list(douts)
        stacked = [np.stack(leaves, axis=-1) for leaves in zip(
            *(pytree.flatten(d)[0] for d in columns[:total]))]
        result = pytree.unflatten(stacked, pytree.flatten(columns[0])[1])
        if pytree.flatten(result)[1] is None and not t.units:
            self._remember_columns(args, nums, order, plan, np.shape(columns[0]))
        return self._assemble(result, args, nums, order, blocks, axis=-1)

    def _remember_columns(self, args, nums, order, plan, out_shape):
        """Like :meth:`_remember_rows`, for the vector-mode columns."""
        key = fast_key(args, nums)
        if key is None:
            return
        layered, calls, blocks, total = plan
        where = {i: b[0] for i, b in zip(order, blocks)}
        pieces = [(where[i], out_shape + np.shape(args[i])) for i in nums]
        single, width = self.single, layered.width
        # The build the calls above used, whose entry point is called directly
        # (its current one: see Transformed.entry); the Jacobian's own key
        # above covers the checks the layered function's fast path makes.
        st = layered._last if not layered._cells else None
        columns_last = tuple(range(1, len(out_shape) + 1)) + (0,)
        padded = total < width * len(calls)          # the last call's zero tangents
        # One argument whose block is every column, already in its shape (a
        # vector's Jacobian): no slicing or reshaping per call.
        whole = single and len(pieces) == 1 and pieces[0] == ((0, total),
                                                               out_shape + (total,))

        def run(args):
            columns = []
            for tangents in calls:
                _, douts = st.function(*args, *tangents) if st is not None else \
                    layered(*args, *tangents)
                columns += [douts] if width == 1 else douts
            if getattr(columns[0], "shape", ()) != out_shape:
                return None          # a shape the plan did not see: the checked path
            stacked = np.array(columns[:total] if padded else columns).transpose(
                columns_last).copy()
            if whole:
                return stacked
            blocks = tuple(_scalarize(stacked[..., start:start + size].reshape(shape))
                           for (start, size), shape in pieces)
            return blocks[0] if single else blocks
        self._remember(key, args, run)

    def _remember(self, key, args, run):
        self._fast.setdefault(key, {})[tuple(map(np.shape, args))] = run

    def _vector_plan(self, t, args, nums):
        """(vector-mode JVP, the tangents of each of its calls, blocks, columns).

        N columns take ceil(N / WIDTH) calls of K = ceil(N / calls) tangents
        each (``_chunks``); a last call with fewer columns left pads with zero
        tangents.
        """
        order = tuple(sorted(nums))
        stack, blocks = _unit_basis([args[i] for i in order])
        total = sum(size for b in blocks for _, size in b)
        count, width = _chunks(max(1, total))
        layered = t.derived("primal", layers=t.layers + ((order, "pair"),), width=width)
        self._layered = layered
        calls = [[_direction(b, args[i], k) for k in range(c * width, (c + 1) * width)
                  for b, i in zip(stack, order)] for c in range(count)]
        return layered, calls, blocks, total

    def _assemble(self, result, args, nums, order, blocks, axis=0):
        """The Jacobian from ``result``: the output's tangents stacked on ``axis``
        (0 or -1), one per unit tangent of ``_unit_basis``."""
        out_leaves, out_tree = pytree.flatten(result)
        where = dict(zip(order, blocks))

        def block(o, ol, i, j, il):
            start, size = where[i][j]
            ol = np.asarray(ol)
            if axis == 0:
                cols, shape = np.moveaxis(ol[start:start + size], 0, -1), ol.shape[1:]
            else:
                cols, shape = ol[..., start:start + size], ol.shape[:-1]
            return cols.reshape(shape + np.shape(il))
        return self._structure(out_leaves, out_tree, args, nums, block)


def _is_jacobian(x):
    """Whether ``x`` is a :class:`~s2s_ad.api.jacobians.Jacobian` (by its class marker:
    this module is below the one defining it)."""
    return getattr(type(x), "__s2s_ad_object__", None) == "jacobian"
