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
from . import dtypes
from .arguments import (
    _arg_count,
    _check_arity,
    _check_whole,
    _signature,
    _unit_like,
    _with_keywords,
)
from .aux import WithAux, first_output, pair
from .core import _as_transformed
from .jacobian_columns import Columns
from .jacobian_common import (
    _check_jvp_args,
    _describe_tree,
    _dtype_like,
    _is_float_tree,
    _like_out,
    _mapped,
    _output_like,
    _scalarize,
    _with_units,
    _zero_tangent,
    tangent_dtype,
)
from .jacobian_rows import Rows
from .library_functions import as_function
from .static_args import dynamic_only, is_static, remap_argnums


def jvp(fun, primals, tangents, has_aux=False):
    """``(out, tangent_out)``: ``fun`` and its derivative along ``tangents``
    (``(out, tangent_out, aux)`` with ``has_aux``, ``fun`` returning ``(out, aux)``)."""
    if is_static(fun) and isinstance(primals, (tuple, list)) and \
            isinstance(tangents, (tuple, list)):
        # ad.jit(f, static_argnums=...): its specialization (the static arguments'
        # tangents are not read), checked there
        spec, dynamic, fixed = fun.specialize(tuple(primals), {})
        given = dynamic_only(tuple(tangents), fixed)
        return jvp(spec, dynamic, given + tuple(map(_zero_tangent, dynamic[len(given):])),
                   has_aux)
    primals, tangents = _check_jvp_args(fun, primals, tangents)
    if has_aux:
        _, aux = pair(fun, fun(*primals), "jvp")
        return jvp(first_output(fun), primals, tangents) + (aux,)
    if isinstance(fun, Jacobian):
        return fun.jvp(primals, tangents)
    t = _as_transformed(fun)
    primals = _check_arity(t.fun, primals) if not t.units else primals
    tangents = tangents + tuple(_zero_tangent(p) for p in primals[len(tangents):])
    nums = tuple(i for i, p in enumerate(primals) if _is_float_tree(p))
    _check_whole(primals, nums, "jvp")
    given = [tangents[i] for i in nums]
    if not nums:
        out = t(*primals)
        return out, _zero_tangent(out)
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


def jacfwd(fun, argnums=0, has_aux=False, holomorphic=False):
    """Jacobian by forward mode: shape ``out.shape + in.shape`` per leaf
    (``(jacobian, aux)`` with ``has_aux``, ``fun`` returning ``(out, aux)``).

    Complex inputs need ``holomorphic=True`` (then the entries are
    ``f'(z)``), as in JAX; a complex output of real inputs is fine."""
    return _jacobian(fun, argnums, has_aux, holomorphic, "jacfwd")


def jacrev(fun, argnums=0, has_aux=False, holomorphic=False):
    """Jacobian by reverse mode: shape ``out.shape + in.shape`` per leaf
    (``(jacobian, aux)`` with ``has_aux``, ``fun`` returning ``(out, aux)``).

    A complex output needs ``holomorphic=True``, as in JAX; complex inputs of
    a real output get JAX's gradients ``df/dx - i df/dy``."""
    return _jacobian(fun, argnums, has_aux, holomorphic, "jacrev")


def hessian(fun, argnums=0, has_aux=False, holomorphic=False):
    """``jacfwd(jacrev(fun))`` (``(hessian, aux)`` with ``has_aux``)."""
    return _jacobian(fun, argnums, has_aux, holomorphic, "hessian")


def _jacobian(fun, argnums, has_aux, holomorphic, what):
    """``what`` (``"jacfwd"``, ``"jacrev"`` or ``"hessian"``) of ``fun``: of its
    first output with ``has_aux``, of its specialization for a jit with static
    arguments."""
    if has_aux:
        return WithAux(_jacobian(first_output(fun), argnums, False, holomorphic, what), fun,
                       what)
    if is_static(fun):
        remap_argnums(fun, argnums)
        return fun.transform_with(
            lambda g, fixed: _jacobian(g, remap_argnums(fun, argnums, fixed), False, holomorphic,
                                       what), f"ad.{what}")
    if what == "hessian":
        return jacfwd(jacrev(fun, argnums, holomorphic=holomorphic), argnums,
                      holomorphic=holomorphic)
    return Jacobian(fun, argnums, what[3:], holomorphic)


class Jacobian(Columns, Rows):
    """The Jacobian of ``fun`` with respect to ``args[argnums]``.

    Columns come from JVPs along unit tangents (``fwd``), rows from VJPs
    with unit cotangents (``rev``).  The Jacobian of a scalar function by
    reverse mode is its gradient, which is what ``jacrev`` computes then (one
    VJP); ``jvp`` of a Jacobian differentiates each column or row again.
    """

    __s2s_ad_object__ = "jacobian"

    def __init__(self, fun, argnums, mode, holomorphic=False):
        if not callable(fun):
            raise TypeError(f"expected a function, got {fun!r}")
        self.fun = as_function(fun, "ad.jacfwd" if mode == "fwd" else "ad.jacrev")
        self.mode = mode
        self.holomorphic = bool(holomorphic)
        self._dtypes_seen = set()     # argument dtype kinds whose output was checked
        self.single = isinstance(argnums, int) and not isinstance(argnums, bool)
        self.argnums = (argnums,) if self.single else tuple(argnums)
        if not self.argnums or not all(isinstance(i, int) and not isinstance(i, bool)
                                       for i in self.argnums):
            raise TypeError(f"argnums must be an int or a non-empty tuple of ints, got "
                            f"{argnums!r}")
        if not isinstance(fun, Jacobian):
            _as_transformed(fun)           # fences the source now, at the user's line
        self.__wrapped__ = fun
        self._positional = None       # see _innermost
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
        return Jacobian(inner, self.argnums[0] if self.single else self.argnums, self.mode,
                        self.holomorphic)

    def generated_source(self, *example_args):
        """The generated function the Jacobian is assembled from, with a note on how."""
        from .core import source
        example_args = self._completed(example_args) if example_args else example_args
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
                                    layers=t.layers + ((nums, "tangent"),),
                                    holomorphic=fun.holomorphic)
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
                                f"{_describe_tree(args[i])}, and only float and complex values "
                                f"are differentiable")
        if self.mode == "rev" or self.holomorphic or dtypes.any_complex(args[i] for i in nums):
            self._check_complex(args, nums)
        return nums

    def _check_complex(self, args, nums):
        """JAX's rules for complex values (see :mod:`.dtypes`), the output's
        checked once per dtype kinds of the arguments."""
        inner = self._innermost()[1]
        dtypes.check_inputs(inner, args, nums, f"jac{self.mode}", self.holomorphic,
                            complex_ok=self.mode == "rev")
        levels = [self]
        while isinstance(levels[-1].fun, Jacobian):
            levels.append(levels[-1].fun)
        if len(levels) > 1 and not all(j.holomorphic for j in levels) and \
                dtypes.any_complex(args[i] for i in nums):
            raise TypeError("a Jacobian of a Jacobian with respect to complex arguments needs "
                            "holomorphic=True at every level (ad.hessian(f, holomorphic=True)); "
                            "for a non-holomorphic function use ad.jvp and ad.vjp directly")
        key = dtypes.kinds_key(args)
        if key in self._dtypes_seen:
            return
        out = _output_like(_as_transformed(levels[-1].fun), args)
        if self.mode == "rev" or self.holomorphic:
            dtypes.check_output(inner, out, f"jac{self.mode}", self.holomorphic)
        self._dtypes_seen.add(key)

    def _innermost(self):
        """(the number of positional parameters of the innermost function,
        None where the transform adds parameters of its own; that function)."""
        if self._positional is None:
            inner = self.fun
            while isinstance(inner, Jacobian):
                inner = inner.fun
            t = _as_transformed(inner)
            self._positional = (None if t.units else _arg_count(t.fun), t.fun)
        return self._positional

    def _completed(self, args):
        """``args`` with the innermost function's parameter defaults after them
        (as ``grad`` and ``jvp`` fill them in), or a TypeError for a wrong count."""
        count, fun = self._innermost()
        if count is None or len(args) == count:
            return args
        return _check_arity(fun, args)

    def __call__(self, *args, **kwargs):
        if kwargs:        # in their parameters' places, never differentiated (as in JAX)
            args = _with_keywords(self._innermost()[1], args, kwargs, self.argnums)
        args = self._completed(args)
        by_shape = self._fast.get(tuple(map(_signature, args)))
        if by_shape is not None:
            run = by_shape.get(tuple(map(np.shape, args)))
            if run is not None:
                result = run(args)
                if result is not None:
                    return result
        return self._evaluate(args, None)

    def jvp(self, primals, tangents):
        primals = self._completed(tuple(primals))
        tangents = tuple(tangents) + tuple(_zero_tangent(p) for p in primals[len(tangents):])
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
                dtype = tangent_dtype(leaf)
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
