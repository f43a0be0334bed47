"""vmap by batching rules: the whole batch in one call of code built by
``transforms.batch`` (gradients through the per-sample loop instead).
"""
import numpy as np

from ..ir import pytree
from ..runtime.batch_index import RaggedBatch
from .arguments import _type_key
from .core import _as_transformed
from .vmap_common import _count, _has_loops, _name, _plain_function


class Vectorized:
    """The vectorised lowering of a batch, or the reason it is refused."""

    def _vectorized(self, moved, axes, treedefs):
        """The whole batch in one call of code built from batching rules, or None.

        None when the function is a gradient (reverse-mode code is batched by
        the per-sample loop), when its control flow depends on batched
        values, or -- with ``method=None`` under ``ad.jit`` -- when it loops
        (a compiled loop per example beats NumPy over small batched values).
        """
        from ..rules.registry import Unvectorizable
        from .core import Transformed
        t = self.fun
        if not isinstance(t, Transformed):
            if isinstance(t, type(self)) or hasattr(t, "generated_source") or \
                    getattr(t, "__s2s_ad_function__", None) is None and not _plain_function(t):
                return self._refuse("it is itself a batched or Jacobian transform")
            t = _as_transformed(t)
        if t.kind in ("grad", "value_and_grad"):
            return self._vectorized_grad(t, moved, axes, treedefs)
        if t.kind != "primal" or t.units:
            return self._refuse("gradients are batched by the per-sample loop")
        positions = tuple(i for i, a in enumerate(axes) if a is not None)
        key = (positions, tuple(map(_type_key, moved)))
        if self._choices.get(key) == "loop":
            return None
        vec = t.derived("primal", layers=t.layers + (("vmap", positions),), target="python",
                        options={})
        try:
            out = vec(*pytree.unflatten_all(moved, treedefs))
        except (Unvectorizable, RaggedBatch) as exc:    # a per-example mask: ragged
            self._choices[key] = "loop"
            return self._refuse(str(exc))
        if self.method is None and t.target == "cpu" and _has_loops(vec):
            self._choices[key] = "loop"
            return None
        self._choices[key] = "vectorize"
        self._vector = vec
        leaves, tree = pytree.flatten(out)
        return [np.asarray(x) for x in leaves], tree

    def _vectorized_grad(self, t, moved, axes, treedefs):
        """Per-example gradients as one reverse sweep over the batched function.

        Every differentiated argument is made batched (a shared one is
        repeated per example); the examples are then independent, so the
        gradient of the sum of the batched outputs holds each example's
        gradient in its own row.  Used on the NumPy backend (or when forced):
        under ``ad.jit`` the compiled per-sample loop is kept.
        """
        from ..rules.registry import Unvectorizable
        if t.has_aux or t.units or (self.method is None and t.target != "python"):
            return self._refuse("gradients with has_aux or nested gradients are batched by "
                                "the per-sample loop")
        size = next(np.shape(x)[0] for x, a in zip(moved, axes) if a is not None)
        starts = np.cumsum([0] + [_count(tree) for tree in treedefs])
        leaves, axes = list(moved), list(axes)
        for i in t.argnums:
            for k in range(starts[i], starts[i + 1]):
                if axes[k] is None and leaves[k] is not None:   # None: no leaves to batch
                    leaves[k] = np.repeat(np.asarray(leaves[k])[np.newaxis], size, axis=0)
                    axes[k] = 0
        positions = tuple(i for i, a in enumerate(axes) if a is not None)
        key = ("grad", positions, tuple(map(_type_key, leaves)))
        if self._choices.get(key) == "loop":
            return None
        vec = t.derived("vjp", argnums=t.argnums, single=False, target="python", options={},
                        layers=t.layers + (("vmap", positions),))
        args = tuple(pytree.unflatten_all(leaves, treedefs))
        floats = [x for x in leaves if isinstance(x, (np.ndarray, np.floating))
                  and np.result_type(x).kind == "f"]
        ones = np.ones(size, dtype=np.result_type(*floats) if floats else np.float64)
        try:
            entry, flat, post = vec._prepare(args + (ones,))
            raw = entry(*flat)
        except (Unvectorizable, RaggedBatch) as exc:
            self._choices[key] = "loop"
            return self._refuse(str(exc))
        grads = post(raw, batched=True)
        grads = grads[0] if t.single else grads
        result = (raw[0], grads) if t.kind == "value_and_grad" else grads
        self._choices[key] = "vectorize"
        self._vector = vec
        out_leaves, tree = pytree.flatten(result)
        return [np.asarray(x) for x in out_leaves], tree

    def _refuse(self, why):
        if self.method == "vectorize":
            raise ValueError(f"vmap(method='vectorize') cannot batch {_name(self.fun)} with "
                             f"batching rules: {why}; use method='loop' (or method=None to "
                             f"choose)")
        return None
