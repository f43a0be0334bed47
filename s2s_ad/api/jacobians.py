"""Forward mode and the transforms built on it: jvp, jacfwd, jacrev, hessian, hvp.

Forward mode is a compiler layer (:mod:`s2s_ad.transforms.forward`): ``jvp(f)`` runs a
generated function that returns ``(out, tangent_out)``.  Compositions are
put in one canonical order before anything is generated -- forward layers
innermost, reverse mode (if any) outermost -- because derivatives commute:

* ``jvp(grad(f))`` (forward-over-reverse) is computed as the gradient of
  ``f``'s directional derivative (reverse-over-forward): the same numbers,
  one generated function, no stack of stacks.
* ``grad(grad(f))`` is the gradient of the directional derivative along the
  inner argument's unit tangent (see :func:`s2s_ad.api.core._grad_of_grad`).
* A Jacobian is assembled column by column from JVPs (``jacfwd``) or row by
  row from VJPs (``jacrev``); a Jacobian of something that is itself a
  gradient is built from Hessian-vector products.
"""

import numpy as np

from ..ir import pytree
from .core import _as_transformed, _check_arity, _check_whole, _signature, _unit_like, fast_key


def jvp(fun, primals, tangents):
    """``(out, tangent_out)``: ``fun`` and its derivative along ``tangents``."""
    primals, tangents = _check_jvp_args(fun, primals, tangents)
    if isinstance(fun, Jacobian):
        return fun.jvp(primals, tangents)
    t = _as_transformed(fun)
    primals = _check_arity(t.fun, primals) if not t.units else primals
    tangents = tangents + tuple(_zero_tangent(p) for p in primals[len(tangents):])
    nums = tuple(i for i, p in enumerate(primals) if _is_float_tree(p))
    _check_whole(primals, nums, "jvp")
    given = [tangents[i] for i in nums]
    if not nums:
        return t(*primals), _zero_tangent(t(*primals))
    if t.kind == "primal":
        layered = t.derived("primal", layers=t.layers + ((nums, "pair"),))
        out, dout = layered(*_with_units(t, primals), *given)
        return out, _like_out(dout, out)
    if t.kind in ("grad", "value_and_grad"):
        if t.has_aux:
            raise TypeError("jvp of a gradient taken with has_aux=True is not defined: the "
                            "auxiliary output has no derivative; drop has_aux or return the "
                            "auxiliary value from a separate function")
        out = t(*primals)
        layered = t.derived(t.kind, layers=t.layers + ((nums, "tangent"),),
                            units=())
        units = [_unit_like(primals[i], t) for i in t.units]
        return out, layered(*primals, *units, *given)
    raise TypeError(f"jvp cannot differentiate {t!r}")


def hvp(fun, primals, tangents):
    """Hessian-vector product of scalar ``fun`` (gradient w.r.t. its first argument)."""
    primals, tangents = _check_jvp_args(fun, primals, tangents)
    t = _as_transformed(fun)
    if t.kind != "primal":
        raise TypeError(f"hvp needs a scalar function, got {t!r}")
    if not t.units:                  # defaults fill in, with zero tangents
        primals = _check_arity(t.fun, primals)
        tangents = tangents + tuple(_zero_tangent(p) for p in primals[len(tangents):])
    if not _is_float_tree(primals[0]):
        raise TypeError(f"hvp differentiates with respect to the first argument, which holds "
                        f"{_describe_tree(primals[0])}; only float64/float32 values are "
                        f"differentiable")
    nums = tuple(i for i, p in enumerate(primals) if _is_float_tree(p))
    _check_whole(primals, nums, "hvp")
    layered = t.derived("grad", argnums=(0,), single=True,
                        layers=t.layers + ((nums, "tangent"),))
    return layered(*_with_units(t, primals), *[tangents[i] for i in nums])


def jacfwd(fun, argnums=0):
    """Jacobian by forward mode: shape ``out.shape + in.shape`` per leaf."""
    return Jacobian(fun, argnums, "fwd")


def jacrev(fun, argnums=0):
    """Jacobian by reverse mode: shape ``out.shape + in.shape`` per leaf."""
    return Jacobian(fun, argnums, "rev")


def hessian(fun, argnums=0):
    """``jacfwd(jacrev(fun))``."""
    return jacfwd(jacrev(fun, argnums), argnums)


class Jacobian:
    """The Jacobian of ``fun`` with respect to ``args[argnums]``.

    Columns come from JVPs along unit tangents (``fwd``), rows from VJPs
    with unit cotangents (``rev``).  The Jacobian of a scalar function by
    reverse mode is its gradient, which is what ``jacrev`` computes then (one
    VJP); ``jvp`` of a Jacobian differentiates each column or row again.
    """

    # Read by the front end (which never imports the API) and by ad.jit.
    __s2s_ad_object__ = "jacobian"

    def __init__(self, fun, argnums, mode):
        if not callable(fun):
            raise TypeError(f"expected a function, got {fun!r}")
        self.fun = fun
        self.mode = mode
        self.single = isinstance(argnums, int) and not isinstance(argnums, bool)
        self.argnums = (argnums,) if self.single else tuple(argnums)
        if not self.argnums or not all(isinstance(i, int) and not isinstance(i, bool)
                                       for i in self.argnums):
            raise TypeError(f"argnums must be an int or a non-empty tuple of ints, got "
                            f"{argnums!r}")
        if not isinstance(fun, Jacobian):
            _as_transformed(fun)           # fences the source now, at the user's line
        self.__wrapped__ = fun
        self._layered = None          # the last vector-mode JVP (see _vector_columns)
        self._plans = {}              # argument leaf shapes -> its vector-mode calls
        self._fast = {}               # argument signatures -> {shapes: compiled rows call}
        self.__name__ = f"jac{mode}_{getattr(fun, '__name__', 'f')}"
        self.__qualname__ = self.__name__

    def with_target(self, target, options):
        from .core import jit
        inner = jit(self.fun, target=target, cache=options.get("cache", True),
                    fastmath=options.get("fastmath", False),
                    compile=options.get("compile"))
        return Jacobian(inner, self.argnums[0] if self.single else self.argnums, self.mode)

    def generated_source(self, *example_args):
        """The generated function the Jacobian is assembled from, with a note on how."""
        from .core import source
        inner, how = self._generator()
        t = _as_transformed(self.fun) if not isinstance(self.fun, Jacobian) else None
        if (example_args and self.mode == "rev" and t is not None and t.kind == "primal"
                and t.target == "cpu"):
            pull, rows, _, _ = self._rows_plan(t, example_args, self._nums(example_args),
                                               t(*example_args))
            text = source(pull, *example_args, rows)
            width = pull._last.module.rows_width
            how = ("one adjoint sweep per unit cotangent of the output" if width == 1
                   else f"adjoint sweeps that carry {width} unit cotangents of the output each")
            return (f"# {self.__qualname__}: every row in one call: one primal sweep, then "
                    f"{how} (below)\n{text}")
        if self.mode == "fwd" and t is not None and t.kind == "primal" and t.target == "cpu":
            if example_args:
                layered, calls, _, _ = self._vector_plan(t, example_args,
                                                         self._nums(example_args))
                text = source(layered, *_with_units(t, example_args), *calls[0])
            else:
                layered = self._layered
                text = source(layered) if layered is not None else source(inner)
            if layered is not None:
                return (f"# {self.__qualname__}: every column in vector mode: one JVP carries "
                        f"{layered.width} unit tangents at once, so the primal runs once per "
                        f"{layered.width} columns (below)\n{text}")
        text = source(inner, *example_args)
        return f"# {self.__qualname__}: {how}\n{text}"

    def _generator(self):
        fun, nums = self.fun, self.argnums
        if isinstance(fun, Jacobian):
            if fun.mode == "rev" and not isinstance(fun.fun, Jacobian):
                t = _as_transformed(fun.fun)
                if t.kind == "primal":
                    hvp = t.derived("grad", argnums=fun.argnums, single=fun.single,
                                    layers=t.layers + ((nums, "tangent"),))
                    return hvp, ("one column per unit tangent, each a Hessian-vector product "
                                 "(the gradient of the directional derivative, below)")
            inner, how = fun._generator()
            return inner, f"differentiated column by column; the inner Jacobian is {how}"
        t = _as_transformed(fun)
        if self.mode == "rev" and t.kind == "primal":
            return (t.derived("vjp", argnums=nums),
                    "one row per unit cotangent of the output, each a VJP (below)")
        if t.kind == "primal":
            return (t.derived("primal", layers=t.layers + ((nums, "pair"),)),
                    "one column per unit tangent of the input, each a JVP (below)")
        return (t.derived(t.kind, layers=t.layers + ((nums, "tangent"),), units=()),
                "one column per unit tangent, each the derivative of the gradient along it "
                "(below)")

    def __repr__(self):
        return f"<s2s_ad jac{self.mode} of {self.fun!r}, argnums={self.argnums}>"

    @property
    def target(self):
        inner = self.fun
        while isinstance(inner, Jacobian):
            inner = inner.fun
        return getattr(inner, "target", "python")

    def _nums(self, args):
        n = len(args)
        nums = []
        for i in self.argnums:
            if not -n <= i < n:
                raise ValueError(f"argnums={self.argnums} is out of range for {n} arguments")
            nums.append(i % n)
            if not _is_float_tree(args[i]):
                raise TypeError(f"cannot differentiate with respect to argument {i}: it holds "
                                f"{_describe_tree(args[i])}, and only float64/float32 values "
                                f"are differentiable")
        return nums

    def __call__(self, *args):
        by_shape = self._fast.get(tuple(map(_signature, args)))
        if by_shape is not None:
            run = by_shape.get(tuple(map(np.shape, args)))
            if run is not None:
                result = run(args)
                if result is not None:
                    return result
        return self._evaluate(args, None)

    def jvp(self, primals, tangents):
        return self._evaluate(primals, tangents)

    def _evaluate(self, args, direction):
        """The Jacobian at ``args`` (with its JVP along ``direction`` if given)."""
        nums = self._nums(args)
        if direction is None:
            batched = self._batched(args, nums)
            if batched is not None:
                return batched
            return self._nested(args, None)
        return self(*args), self._nested(args, direction)

    def _nested(self, args, direction):
        """Jacobians of Jacobians (and their JVPs) as directional derivatives.

        Entry ``[..., k1, ..., kd]`` of a Jacobian nested ``d`` deep is the
        d-th directional derivative of the innermost function along unit
        tangents ``e_k1, ..., e_kd``: a function with ``d`` forward layers,
        mapped over every combination of unit tangents in one batched call
        (the JVP of a Jacobian adds one layer along the given direction).
        """
        levels, base = [], self
        while isinstance(base, Jacobian):
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
            leaf = np.asarray(args[n], dtype=np.result_type(args[n], np.float32))
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
        if isinstance(inner, Jacobian):
            if inner.mode != "rev" or isinstance(inner.fun, Jacobian):
                return None
            t = _as_transformed(inner.fun)
            if t.kind != "primal":
                return None
            out = t(*args)
            if pytree.flatten(out)[1] is not None or np.ndim(out) != 0:
                return None
            # The Hessian of a scalar function: one Hessian-vector product
            # (gradient of the directional derivative) per unit tangent.
            grad_of = t.derived("grad", argnums=tuple(inner._nums(args)), single=inner.single,
                                layers=t.layers + ((order, "tangent"),))
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

        def run(args):
            columns = []
            for tangents in calls:
                _, douts = st.function(*args, *tangents) if st is not None else \
                    layered(*args, *tangents)
                columns += [douts] if width == 1 else douts
            if getattr(columns[0], "shape", ()) != out_shape:
                return None          # a shape the plan did not see: the checked path
            stacked = np.array(columns[:total]).transpose(columns_last).copy()
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

    def _rows(self, t, args, nums):
        """Map the VJP over unit cotangents of the output; assemble the Jacobian."""
        if t.target == "cpu":
            out, grads, blocks = self._compiled_rows(t, args, nums)
        else:
            out, grads = t(*args), None
            basis, blocks = _unit_basis([out])
        if sum(size for _, size in blocks[0]) == 0:
            return self._empty(args, nums)
        if grads is None:
            pull = t.derived("vjp", argnums=tuple(nums), single=False)
            grads = _mapped(pull, (None,) * len(args) + (0,))(*args, basis[0])
        out_leaves, out_tree = pytree.flatten(out)
        by_arg = {i: pytree.flatten(g)[0] for i, g in zip(nums, grads)}
        rows = dict(enumerate(blocks[0]))

        def block(o, ol, i, j, il):
            start, size = rows[o]
            return np.asarray(by_arg[i][j])[start:start + size].reshape(
                np.shape(ol) + np.shape(il))
        return self._structure(out_leaves, out_tree, args, nums, block)

    def _compiled_rows(self, t, args, nums):
        """Compiled code: every row in one call (``kind="vjp_rows"``): one primal
        sweep, then adjoint sweeps that carry up to :data:`WIDTH` rows each.

        Returns the output, the stacked gradients (rows past the last output
        element are padding) and the rows' blocks.  The unit cotangents and
        the output's structure are kept per argument shapes; the output the
        call returns is checked against them.
        """
        key = (tuple(nums),) + tuple(_leaf_key(leaf) for a in args
                                     for leaf in pytree.flatten(a)[0])
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = self._rows_plan(t, args, nums, t(*args))
        out, grads = _call_rows(plan, args)
        if [np.shape(x) for x in pytree.flatten(out)[0]] != plan[3]:
            plan = self._plans[key] = self._rows_plan(t, args, nums, out)
            out, grads = _call_rows(plan, args)
        self._remember_rows(t, args, nums, plan, out)
        return out, grads, plan[2]

    def _remember_rows(self, t, args, nums, plan, out):
        """After a call with plain float64 arrays and numbers returning one array
        or number, later calls with the same signature and shapes go straight
        to the compiled rows function (the checks above hold for them too)."""
        key = fast_key(args, nums)
        if key is None or t.units or t._cells or pytree.flatten(out)[1] is not None or \
                np.ndim(out) and np.result_type(out) != np.float64:
            return
        pull, rows, _, shapes = plan
        pull.entry(tuple(args) + (rows,))
        st = pull._last          # its entry point is read at each call (see tiers)
        size, out_shape = int(np.prod(shapes[0])), shapes[0]
        pieces = [(i, out_shape + np.shape(args[i])) for i in nums]
        single = self.single

        def run(args):
            out, grads = st.function(*args, rows)
            if np.shape(out) != out_shape:
                return None          # a shape the plan did not see: the checked path
            blocks = tuple(_scalarize(g[:size].reshape(shape))
                           for g, (_, shape) in zip(grads, pieces))
            return blocks[0] if single else blocks
        self._remember(key, args, run)

    def _rows_plan(self, t, args, nums, out):
        """(rows function, unit cotangent rows padded to a multiple of its width,
        blocks, output leaf shapes) for an output like ``out``."""
        basis, blocks = _unit_basis([out])
        count, width = _chunks(max(1, sum(size for _, size in blocks[0])))
        leaves, tree = pytree.flatten(basis[0])
        padded = [np.concatenate([e, np.zeros((count * width - e.shape[0],) + e.shape[1:],
                                              e.dtype)]) for e in leaves]
        pull = _rows_pull(t, nums, width)
        shapes = [np.shape(x) for x in pytree.flatten(out)[0]]
        return pull, pytree.unflatten(padded, tree), blocks, shapes

    def over_batch(self, args, axes, size, method=None):
        """The Jacobian of every example of a batch (``vmap`` of this Jacobian).

        ``args`` hold a leading batch axis where ``axes`` is 0.  Instead of a
        Jacobian per example, each unit (co)tangent of one example's input
        (output) runs over the whole batch at once: a batched JVP per input
        element (``jacfwd``) or a batched VJP per output element (``jacrev``),
        each one compiled loop over the examples under ``ad.jit``.  Returns
        None where this does not apply (nested Jacobians, gradients).
        """
        if isinstance(self.fun, Jacobian) or size == 0:
            return None
        t = _as_transformed(self.fun)
        if t.kind != "primal" or t.units:
            return None
        example = [a[0] if ax == 0 else a for a, ax in zip(args, axes)]
        nums = self._nums(example)
        order = tuple(sorted(nums))
        in_axes = tuple(axes)

        def unit(value, k, total, start):
            """Per leaf of ``value``: zeros with 1 at flat position k of the stack."""
            leaves, tree = pytree.flatten(value)
            out, at = [], start
            for leaf in leaves:
                n = int(np.size(leaf))
                dtype = np.result_type(leaf, np.float32)
                e = np.zeros((size, n), dtype=dtype)
                if at <= k < at + n:
                    e[:, k - at] = 1.0
                out.append(e.reshape((size,) + np.shape(leaf)))
                at += n
            return pytree.unflatten(out, tree), at

        if self.mode == "rev":
            out_ex = t(*example)          # one example gives the output's structure
            out_leaves, out_tree = pytree.flatten(out_ex)
            total = sum(int(np.size(o)) for o in out_leaves)
            pull = _mapped(t.derived("vjp", argnums=tuple(nums), single=False), in_axes + (0,),
                           "loop" if method == "vectorize" else method)
            rows = [pull(*args, unit(out_ex, m, total, 0)[0]) for m in range(total)]
            starts = np.cumsum([0] + [int(np.size(o)) for o in out_leaves])

            def block(o, ol, i, j, il):
                n = nums.index(i)
                stacked = np.stack([np.asarray(pytree.flatten(rows[m][n])[0][j])
                                    for m in range(starts[o], starts[o + 1])], axis=1)
                return stacked.reshape((size,) + np.shape(ol) + np.shape(il))
            return self._structure(out_leaves, out_tree, example, nums, block)
        layered = _mapped(t.derived("primal", layers=t.layers + ((order, "pair"),)),
                          in_axes + (0,) * len(order), method)
        sizes = [sum(int(np.size(x)) for x in pytree.flatten(example[i])[0]) for i in order]
        total = sum(sizes)
        cols = []
        for k in range(total):
            tangents, at = [], 0
            for i in order:
                tangent, at = unit(example[i], k, total, at)
                tangents.append(tangent)
            cols.append(layered(*args, *tangents)[1])
        out_leaves_b, out_tree = pytree.flatten(cols[0]) if cols else ([], None)
        out_leaves = [o[0] for o in out_leaves_b]
        firsts = dict(zip(order, np.cumsum([0] + sizes)))

        def block(o, ol, i, j, il):
            start = firsts[i] + sum(int(np.size(x)) for x in pytree.flatten(example[i])[0][:j])
            stacked = np.stack([np.asarray(pytree.flatten(cols[k])[0][o])
                                for k in range(start, start + int(np.size(il)))], axis=-1)
            return stacked.reshape((size,) + np.shape(ol) + np.shape(il))
        return self._structure(out_leaves, out_tree, example, nums, block)

    def _structure(self, out_leaves, out_tree, args, nums, block):
        """JAX's layout: the output's structure outside, one entry per argnum inside,
        each the argument's structure with blocks of shape ``out.shape + in.shape``."""
        per_out = []
        for o, ol in enumerate(out_leaves):
            per_arg = []
            for i in nums:
                in_leaves, in_tree = pytree.flatten(args[i])
                per_arg.append(pytree.unflatten(
                    [_scalarize(_dtype_like(block(o, ol, i, j, il), il))
                     for j, il in enumerate(in_leaves)], in_tree))
            per_out.append(per_arg[0] if self.single else tuple(per_arg))
        return pytree.unflatten(per_out, out_tree)

    def _empty(self, args, nums):
        """A Jacobian with no entries (an empty input or output)."""
        out = _as_transformed(self.fun)(*args) if not isinstance(self.fun, Jacobian) \
            else self.fun(*args)
        out_leaves, out_tree = pytree.flatten(out)
        return self._structure(out_leaves, out_tree, args, nums,
                               lambda o, ol, i, j, il: np.zeros(np.shape(ol) + np.shape(il)))

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


def _direction(basis, arg, k):
    """Unit tangent ``k`` of ``_unit_basis`` (zeros past the last) for ``arg``."""
    leaves, tree = pytree.flatten(basis)
    own = pytree.flatten(arg)[0]
    out = []
    for e, a in zip(leaves, own):
        row = e[k] if k < e.shape[0] else np.zeros_like(e[0])
        out.append(row if isinstance(a, np.ndarray) else type(a)(row))
    return pytree.unflatten(out, tree)


def _call_rows(plan, args):
    """(output, stacked gradients) from a rows plan (see Jacobian._rows_plan)."""
    pull, rows = plan[:2]
    entry, leaves, post = pull._prepare(tuple(args) + (rows,))
    raw = entry(*leaves)
    return raw[0], post(raw, batched=True)


def _rows_pull(t, nums, width=1):
    """The VJP of ``t`` over stacked cotangent rows (``kind="vjp_rows"``),
    ``width`` rows per adjoint sweep."""
    return t.derived("vjp_rows", argnums=tuple(nums), single=False, width=width)


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
            dtype = leaf.dtype if isinstance(leaf, np.ndarray) and leaf.dtype.kind == "f" else (
                np.dtype(type(leaf)) if isinstance(leaf, np.floating) else np.float64)
            e = np.zeros((total, size), dtype=dtype)
            e[start:start + size] = np.eye(size, dtype=dtype)
            stacked.append(e.reshape((total,) + np.shape(leaf)))
            where.append((start, size))
            start += size
        basis.append(pytree.unflatten(stacked, tree))
        blocks.append(where)
    return basis, blocks


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
    leaves, _ = pytree.flatten(x)
    return bool(leaves) and all(pytree.is_float_leaf(v) for v in leaves)


def _describe_tree(x):
    leaves, _ = pytree.flatten(x)
    bad = [v for v in leaves if not pytree.is_float_leaf(v)]
    return pytree.describe(bad[0]) if bad else "no values"


def _zero_tangent(x):
    leaves, tree = pytree.flatten(x)
    return pytree.unflatten([np.zeros_like(v) if isinstance(v, np.ndarray)
                             else (0.0 * v if isinstance(v, (float, np.floating)) else v)
                             for v in leaves], tree)


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
        raise ValueError(f"jvp got {len(primals)} primals but {len(tangents)} tangents; pass "
                         f"one tangent per primal")
    for i, (p, t) in enumerate(zip(primals, tangents)):
        pl, pt = pytree.flatten(p)
        tl, tt = pytree.flatten(t)
        if pytree.structure(pt) != pytree.structure(tt) or len(pl) != len(tl):
            raise ValueError(f"tangent {i} has a different structure from primal {i}")
        for a, b in zip(pl, tl):
            if np.shape(a) != np.shape(b):
                raise ValueError(f"tangent {i} has shape {np.shape(b)}, but primal {i} has "
                                 f"shape {np.shape(a)}")
    return tuple(primals), tuple(tangents)
