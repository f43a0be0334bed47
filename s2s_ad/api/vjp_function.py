"""``ad.vjp`` and the ``vjp_fn`` it returns: the pullback of the output's
cotangent at the primals, a function users call, batch and compile.

``vjp_fn(ct)`` runs the generated VJP (kind ``"vjp"``) on the primals it
was made at.  ``ad.vmap(vjp_fn)(cts)`` is one call of the stacked-rows VJP
(kind ``"vjp_rows"``, as ``jacrev`` uses): one primal sweep, then one
adjoint sweep per cotangent row (several rows per sweep under ``ad.jit``),
so the JAX cookbook's ``jax.vmap(vjp_fn)(jnp.eye(n))`` is the Jacobian at
``jacrev``'s cost.  ``ad.jit(vjp_fn)`` is the same pullback compiled.
"""
import numpy as np

from ..ir import pytree
from . import dtypes
from .arguments import _check_arity, _check_whole, _like_arg
from .core import (
    Transformed,
    _choose_execution,
    _numpy_floats,
    _own_copies,
    _plain,
    _run_primal,
    _tree_text,
    _zeros_like_tree,
)
from .jacobian_common import _chunks
from .library_functions import as_function


def vjp(fun, *primals, has_aux=False):
    """``(out, vjp_fn)`` (``(out, vjp_fn, aux)`` with ``has_aux``)."""
    f, target, options = _plain(as_function(fun, "ad.vjp"))
    given = len(primals)          # one cotangent each, as JAX (defaults filled in get none)
    primals = _check_arity(f, primals)
    argnums = tuple(i for i, p in enumerate(primals[:given])
                    if all(pytree.is_inexact_leaf(x) or x is None for x in pytree.flatten(p)[0])
                    and any(map(pytree.is_inexact_leaf, pytree.flatten(p)[0])))
    _check_whole(primals[:given], argnums, "vjp")
    t = Transformed(f, "vjp", argnums=argnums, has_aux=has_aux, target=target, options=options)
    _, leaves, treedefs = t.entry(primals)
    st = t._last
    try:
        out = _run_primal(f, target, options, _own_copies(st, primals))
    except ArithmeticError:          # 1.0 / 0.0 of a Python float: NumPy's inf, as JAX
        out = _run_primal(f, target, options, _numpy_floats(_own_copies(st, primals)))
    value = out[0] if has_aux else out
    vjp_fn = VjpFunction(t, primals, value, (st, leaves, treedefs), given)
    return (value, vjp_fn, out[1]) if has_aux else (value, vjp_fn)


class VjpFunction:
    """``vjp_fn(cotangent)`` -> one cotangent per primal, as a tuple (see module)."""

    __s2s_ad_object__ = "vjp_fn"
    batches_trees = True          # vmap hands over_batch pytree cotangents too

    def __init__(self, transformed, primals, value, built=None, given=None):
        self.transformed = transformed          # what ad.source shows
        self.primals = tuple(primals)
        self.given = len(self.primals) if given is None else given   # those passed to ad.vjp
        self.argnums = transformed.argnums
        self.value_leaves, self.value_def = pytree.flatten(value)
        self._value = value
        self._built = built       # (state, primal leaves, treedefs), on the first call
        self._rows = None         # the stacked-rows VJP a batched call ran (see over_batch)
        name = getattr(transformed.fun, "__name__", "f")
        self.__name__ = self.__qualname__ = f"vjp_fn_of_{name}"

    def __repr__(self):
        return f"<s2s_ad vjp_fn of {self.transformed.fun.__qualname__} " \
               f"(target={self.target})>"

    @property
    def target(self):
        return self.transformed.target

    def with_target(self, target, options):
        """This pullback compiled for ``target`` (``ad.jit(vjp_fn)``)."""
        if target == "cuda":
            raise ValueError("target='cuda' compiles batched functions; compile the vjp_fn "
                             "with target='cpu'")
        options = {k: v for k, v in options.items() if k != "parallel_request"}
        t = self.transformed.derived(target=target, options=options)
        return VjpFunction(t, self.primals, self._value, given=self.given)

    def generated_source(self, *example_args):
        from .core import source
        if example_args:             # the cotangent
            return source(self.transformed, *self.primals, *example_args)
        return source(self.transformed)

    def batched_source(self):
        """What ``ad.source(ad.vmap(vjp_fn), cts)`` shows: the stacked-rows VJP
        the batch ran (None before a batched call)."""
        from .core import source
        if self._rows is None:
            return None
        return (f"# vmap of {self!r}: every cotangent of the batch in one call: one primal "
                f"sweep, then the adjoint sweeps over the stacked rows (below)\n"
                + source(self._rows))

    def _state(self):
        if self._built is None:
            _, leaves, treedefs = self.transformed.entry(self.primals)
            self._built = (self.transformed._last, leaves, treedefs)
        return self._built

    def _check(self, cotangent, batched=False):
        """The cotangent's leaves, or a ValueError for a structure or shape that
        is not the output's (per example when ``batched``)."""
        ct_leaves, ct_def = pytree.flatten(cotangent)
        return self._check_leaves(ct_leaves, ct_def, batched)

    def _check_leaves(self, ct_leaves, ct_def, batched):
        if ct_def != self.value_def or len(ct_leaves) != len(self.value_leaves):
            raise ValueError(f"the cotangent's structure {_tree_text(ct_def)} does not match "
                             f"the output's {_tree_text(self.value_def)}")
        for i, (c, v) in enumerate(zip(ct_leaves, self.value_leaves)):
            shape = np.shape(c)[1:] if batched else np.shape(c)
            if shape != np.shape(v):
                each = " per example" if batched else ""
                raise ValueError(f"cotangent leaf {i} has shape {shape}{each}, but the output "
                                 f"leaf has shape {np.shape(v)}")
            dtypes.check_cotangent(i, c, v)
        return ct_leaves

    def __call__(self, cotangent):
        ct_leaves = self._check(cotangent)
        st, leaves, treedefs = self._state()
        if st.tier is not None and not st.tier.started:
            st.tier.first_call(st, [*leaves, *ct_leaves])
        if st.alternative is not None and not st.execution and (
                st.tier is None or not st.tier.deferred):
            _choose_execution(st, [*leaves, *ct_leaves])
        _, grads = st.function(*leaves, *ct_leaves)
        by_arg = dict(zip(self.argnums, grads))
        return tuple(_like_arg(pytree.rebuild(by_arg[i], treedefs[i]), p) if i in by_arg
                     else _zeros_like_tree(p) for i, p in enumerate(self.primals[:self.given]))

    def over_batch(self, args, axes, size, method=None):
        """``vmap(vjp_fn)``: the pullback of every cotangent of a batch in one call
        of the stacked-rows VJP, or None for ``method="loop"`` and for a
        ``has_aux`` VJP, whose rows function would want the aux's cotangents too
        (a Python loop of ``vjp_fn`` calls then).  ``args`` hold the batch axis first where
        ``axes`` (one per cotangent leaf) is 0; an unbatched leaf is repeated."""
        if method == "loop" or len(args) != 1 or self.transformed.has_aux:
            return None
        leaves, tree = pytree.flatten(args[0])
        rows = [np.broadcast_to(x, (size,) + np.shape(x)) if a is None else np.asarray(x)
                for x, a in zip(leaves, axes)]
        rows = [r if r.dtype.kind in "fc" else r.astype(np.float64) for r in rows]
        self._check_leaves(rows, tree, batched=True)
        if size == 0:
            return tuple(_batch_of_zeros(p, 0) for p in self.primals[:self.given])
        t = self.transformed
        count, width = _chunks(size) if t.target == "cpu" else (1, 1)
        padded = [np.concatenate([r, np.zeros((count * width - size,) + r.shape[1:], r.dtype)])
                  if count * width > size else np.ascontiguousarray(r) for r in rows]
        pull = self._rows = t.derived("vjp_rows", argnums=self.argnums, single=False,
                                      width=width)
        entry, flat, post = pull._prepare(self.primals + (
            pytree.unflatten(padded, self.value_def),))
        grads = post(entry(*flat), batched=True)
        by_arg = dict(zip(self.argnums, grads))
        return tuple(_first_rows(by_arg[i], size) if i in by_arg else _batch_of_zeros(p, size)
                     for i, p in enumerate(self.primals[:self.given]))


def _first_rows(tree, size):
    """Each leaf's first ``size`` rows (the padding rows dropped)."""
    leaves, treedef = pytree.flatten(tree)
    return pytree.unflatten([None if x is None else np.asarray(x)[:size] for x in leaves],
                            treedef)


def _batch_of_zeros(primal, size):
    """The zero cotangent of a primal that is not differentiated, per example."""
    leaves, treedef = pytree.flatten(primal)
    return pytree.unflatten([None if x is None else np.zeros((size,) + np.shape(x),
                                                             np.result_type(x))
                             for x in leaves], treedef)
