"""Per-example Jacobians on the GPU: ``ad.jit(ad.vmap(J), target="cuda")``
for ``J`` = ``ad.jacfwd(f)``, ``ad.jacrev(f)`` or ``ad.hessian(f)``.

A Jacobian is many derivatives of one example: columns from JVPs along unit
tangents (``jacfwd``), rows from VJPs with unit cotangents (``jacrev``),
columns of a Hessian from Hessian-vector products (the gradient of the
directional derivative, as the CPU path computes them).  On the device each
(example, column) pair is one thread: the batch of B examples and K columns
is a batch of B*K calls of one generated per-example function -- the JVP,
the VJP or the Hessian-vector product -- compiled by :mod:`s2s_ad.api.cuda` into
one kernel, with example b's arguments and column k's unit (co)tangent.
More threads than examples keep a GPU busy for small batches; the price is
one primal evaluation per column, as on the CPU without vector mode.

The Jacobian is then assembled as on the CPU: shape ``(B,) + out.shape +
in.shape`` per leaf, the output's structure outside, one entry per argnum
inside.
"""
import numpy as np

from ..ir import pytree
from .core import Transformed
from .cuda import CudaBatched
from .jacobian_common import _unit_basis
from .jacobians import Jacobian
from .vmap import PLUGINS, Batched


class CudaJacobian:
    """``ad.jit(ad.vmap(jacfwd / jacrev / hessian of f), target="cuda")``."""

    target = "cuda"

    def __init__(self, batched, options):
        levels, base = [], batched.fun
        while isinstance(base, Jacobian):
            levels.append(base)
            base = base.fun
        t = base if isinstance(base, Transformed) else Transformed(base, "primal")
        if t.kind != "primal" or t.layers or t._cells:
            raise TypeError(f"target='cuda' computes Jacobians of def functions of arrays and "
                            f"floats; got a Jacobian of {t!r} (use target='cpu')")
        if len(levels) == 1:
            self.mode = levels[0].mode
        elif len(levels) == 2 and levels[0].argnums == levels[1].argnums and \
                levels[0].single and levels[1].single:
            self.mode = "hessian"          # of a scalar function, whatever the two modes
        else:
            raise TypeError("target='cuda' computes jacfwd, jacrev and hessian (a Jacobian "
                            "of a Jacobian with one argnum) per example; use target='cpu' "
                            "for deeper nests")
        if batched.out_axes != 0:
            raise ValueError("target='cuda' returns Jacobians batched along axis 0: use "
                             "out_axes=0")
        self.levels, self.t, self.options = levels, t, options
        self.in_axes = batched.in_axes
        self.stream = options.get("stream", 0)
        self._kernels = {}
        self._last = None
        self.__wrapped__ = batched
        self.__name__ = batched.__name__

    def __repr__(self):
        return f"<s2s_ad CUDA kernel of {self.__wrapped__!r}>"

    def _layout(self, args):
        """(the batch size, args with the batch on axis 0, their axes, example 0)."""
        probe = Batched(self.t, self.in_axes, 0, "loop")
        leaves, treedefs, axes, size = probe._batch(args)
        if any(tree is not None for tree in treedefs):
            raise TypeError("target='cuda' Jacobians take arrays and floats as arguments "
                            "(no tuples, lists or dicts); use target='cpu'")
        if size == 0:
            raise ValueError("vmap over an empty batch")
        moved = [np.moveaxis(np.asarray(x), a, 0) if a not in (None, 0) else x
                 for x, a in zip(leaves, axes)]
        axes = [None if a is None else 0 for a in axes]
        example = [x[0] if a == 0 else x for x, a in zip(moved, axes)]
        return size, moved, axes, example

    def _gpu(self, fun, axes):
        from .core import jit
        from .vmap import vmap
        key = (id(fun), tuple(axes))
        if key not in self._kernels:
            self._kernels[key] = jit(vmap(fun, in_axes=tuple(axes)), target="cuda",
                                     **{k: v for k, v in self.options.items()
                                        if k in ("cache", "fastmath", "threads_per_block")})
        self._last = self._kernels[key]
        return self._last

    def __call__(self, *args, stream=None):
        device = [hasattr(x, "__cuda_array_interface__") or hasattr(x, "copy_to_host")
                  for x in args]
        if any(device):
            from .cuda import _as_device, numba_cuda
            args = [_as_device(numba_cuda(), x).copy_to_host() if d else x
                    for x, d in zip(args, device)]
        size, args, axes, example = self._layout(args)
        nums = self.levels[-1]._nums(example)
        if self.mode == "rev":
            result = self._rows(size, args, axes, example, nums, stream)
        else:
            result = self._columns(size, args, axes, example, nums, stream)
        if any(device):
            from .cuda import numba_cuda
            cuda = numba_cuda()
            leaves, tree = pytree.flatten(result)
            result = pytree.unflatten([cuda.to_device(np.ascontiguousarray(x))
                                       for x in leaves], tree)
        return result

    def _columns(self, size, args, axes, example, nums, stream):
        """jacfwd (JVP columns) and hessian (Hessian-vector product columns)."""
        t, order = self.t, tuple(sorted(nums))
        basis, blocks = _unit_basis([example[i] for i in order])
        total = sum(n for b in blocks for _, n in b)
        if self.mode == "hessian":
            layered = t.derived("grad", argnums=tuple(nums), single=True,
                                layers=((order, "tangent"),))
        else:
            layered = t.derived("primal", layers=((order, "pair"),))
        gpu = self._gpu(layered, list(axes) + [0] * len(order))
        rep = [_repeat(x, total) if a == 0 else x for x, a in zip(args, axes)]
        tangents = [_tile(e, size) for e in basis]
        result = gpu(*rep, *tangents, stream=stream)
        if self.mode == "hessian":
            # one gradient per (example, column): H[b, :, k]
            g = np.asarray(result).reshape((size, total) + np.shape(example[nums[0]]))
            h = np.moveaxis(g, 1, -1).reshape((size,) + 2 * np.shape(example[nums[0]]))
            return h.astype(np.result_type(example[nums[0]], np.float32), copy=False)
        out, dout = result
        where = dict(zip(order, blocks))
        out_leaves, out_tree = pytree.flatten(dout)
        per_example = [np.asarray(x)[0] for x in out_leaves]

        def block(o, ol, i, j, il):
            start, n = where[i][j]
            cols = np.asarray(out_leaves[o]).reshape((size, total) + np.shape(ol))
            cols = np.moveaxis(cols[:, start:start + n], 1, -1)
            return cols.reshape((size,) + np.shape(ol) + np.shape(il))
        return self.levels[0]._structure(per_example, out_tree, example, nums, block)

    def _rows(self, size, args, axes, example, nums, stream):
        """jacrev: one VJP per (example, unit cotangent of the output)."""
        t = self.t
        out = t(*example)
        basis, blocks = _unit_basis([out])
        total = sum(n for _, n in blocks[0])
        pull = t.derived("vjp", argnums=tuple(nums), single=False)
        gpu = self._gpu(pull, list(axes) + [0])
        rep = [_repeat(x, total) if a == 0 else x for x, a in zip(args, axes)]
        leaves, tree = pytree.flatten(basis[0])
        cotangent = pytree.unflatten([_tile(e, size) for e in leaves], tree)
        grads = gpu(*rep, cotangent, stream=stream)
        out_leaves, out_tree = pytree.flatten(out)
        rows = dict(enumerate(blocks[0]))

        def block(o, ol, i, j, il):
            start, n = rows[o]
            g = np.asarray(grads[nums.index(i)]).reshape((size, total) + np.shape(il))
            return g[:, start:start + n].reshape((size,) + np.shape(ol) + np.shape(il))
        return self.levels[0]._structure(out_leaves, out_tree, example, nums, block)

    def generated_source(self, *example_args):
        """The kernel of the per-example derivative the Jacobian is built from
        (generated for ``example_args`` if given, not run)."""
        if example_args:
            gpu, call = self._prepared(example_args)
            gpu.build(*call)
        what = {"fwd": "one thread per (example, column): a JVP along a unit tangent",
                "rev": "one thread per (example, row): a VJP with a unit cotangent",
                "hessian": "one thread per (example, column): a Hessian-vector product "
                           "along a unit tangent"}[self.mode]
        head = f"# {self.levels[0].__qualname__} per example on the GPU, {what}:\n"
        if self._last is None:
            return head + "# (the kernel is generated on the first call; pass example " \
                          "arguments to ad.source)\n"
        return head + self._last.generated_source()

    def compile_ptx(self, *args, cc=(8, 0)):
        """The PTX of the kernel for arguments like ``args`` (built, not launched)."""
        gpu, call = self._prepared(args)
        return gpu.compile_ptx(*call, cc=cc)

    def _prepared(self, args):
        """(the batched kernel, arguments like one launch's) for ``args``."""
        size, args, axes, example = self._layout(args)
        nums = self.levels[-1]._nums(example)
        t, order = self.t, tuple(sorted(nums))
        if self.mode == "rev":
            basis, _ = _unit_basis([t(*example)])
            pull = t.derived("vjp", argnums=tuple(nums), single=False)
            leaves, tree = pytree.flatten(basis[0])
            return self._gpu(pull, list(axes) + [0]), list(args) + [
                pytree.unflatten([_tile(e, size)[:size] for e in leaves], tree)]
        basis, _ = _unit_basis([example[i] for i in order])
        layered = t.derived("grad", argnums=tuple(nums), single=True,
                            layers=((order, "tangent"),)) if self.mode == "hessian" else \
            t.derived("primal", layers=((order, "pair"),))
        return self._gpu(layered, list(axes) + [0] * len(order)), \
            list(args) + [_tile(e, size)[:size] for e in basis]


def _repeat(x, k):
    """Each example of ``x`` (batched on axis 0) ``k`` times in a row."""
    return np.repeat(np.asarray(x), k, axis=0)


def _tile(e, size):
    """The unit (co)tangents ``e`` (one per column, axis 0) for each of ``size`` examples."""
    e = np.asarray(e)
    return np.tile(e, (size,) + (1,) * (e.ndim - 1))


def cuda_target(batched, options):
    """``ad.jit(ad.vmap(F), target="cuda")``: one thread per (example, column) for a
    Jacobian F (jacfwd, jacrev, hessian), else one thread per example."""
    if isinstance(batched.fun, Jacobian):
        return CudaJacobian(batched, options)
    return CudaBatched(batched, options)


PLUGINS["cuda"] = cuda_target
