"""Jacobian rows by reverse mode: VJPs with unit cotangents, several rows per
adjoint sweep under ``jit`` (see ``transforms.widen``).
"""
import numpy as np

from ..ir import pytree
from .arguments import fast_key
from .jacobian_common import _chunks, _leaf_key, _mapped, _output_like, _scalarize, _unit_basis


def _call_rows(plan, args):
    """(output, stacked gradients) from a rows plan (see Jacobian._rows_plan)."""
    pull, rows = plan[:2]
    entry, leaves, post = pull._prepare(tuple(args) + (rows,))
    raw = entry(*leaves)
    return pull._output_containers()(raw[0]), post(raw, batched=True)


def _rows_pull(t, nums, width=1):
    """The VJP of ``t`` over stacked cotangent rows (``kind="vjp_rows"``),
    ``width`` rows per adjoint sweep."""
    return t.derived("vjp_rows", argnums=tuple(nums), single=False, width=width)


class Rows:
    """Rows of a Jacobian from VJPs (``jacrev``)."""

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
            plan = self._plans[key] = self._rows_plan(t, args, nums, _output_like(t, args))
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
