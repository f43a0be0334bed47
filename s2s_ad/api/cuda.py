"""The CUDA target: ``ad.jit(ad.vmap(F, in_axes), target="cuda")``.

One GPU thread per example (a grid-stride loop over the batch).  What runs
on the device is the per-example module the CPU path compiles -- the same
A-normal-form source, after ``scalarize`` turned small arrays of static
length into scalars -- rewritten for device code and compiled with
``numba.cuda.jit(device=True)``, plus a generated kernel that calls its
entry point for each example and writes the outputs in place:

* scalar NumPy math (``np.exp``) becomes ``math`` calls, which device code has;
* each stack a reverse sweep allocates (``rt.float_stack(n)``, and the
  lists it keeps for ``while`` loops, branches taken and integers) becomes
  a slice of the thread's row of a float64 *tape*, a device buffer of one
  row per thread sized for each launch (see ``runtime/device.py``): a
  launch whose rows were too short says how long they must be and runs
  again, and the length is kept for the next call;
* shared (``in_axes=None``) arguments stay whole in global memory, read by
  every thread; batched ones are indexed by the example.

A per-example body a thread cannot run -- one that allocates arrays or
calls NumPy on arrays -- is an error at the first call that names the
user's line.  Per-example Jacobians are in :mod:`s2s_ad.api.cuda_jacobians`.
"""
import ast
import builtins
import os
import re
import textwrap

import numpy as np
from numba.core.errors import NumbaError

from .. import backends
from ..errors import UnsupportedSyntaxError
from ..ir import pytree
from .core import Transformed
from .cuda_float32 import float32_constants
from .cuda_launch import FALLBACK, choose
from .cuda_local import (
    SimulatorCuda,
    StaticShapes,
    array_slots,
    augassign,
    pop_local,
    push_local,
    rewrite_assign,
    rewrite_return,
)
from .vmap import Batched
from .vmap_common import _element_paths, _float_dtype, _raw_leaves, _rebuild_raw

#: The tapes of one launch use at most this many bytes (fewer threads, each
#: looping over more examples, when a thread's reverse sweep needs much).
TAPE_BUDGET = 512 * 2 ** 20
#: Most threads per launch: enough to fill any current GPU several times.
MAX_THREADS = 2 ** 20

#: NumPy functions of one scalar and their device (``math``) equivalents.
MATH = {"exp": "exp", "log": "log", "sin": "sin", "cos": "cos", "tan": "tan",
        "tanh": "tanh", "sinh": "sinh", "cosh": "cosh", "sqrt": "sqrt", "log1p": "log1p",
        "expm1": "expm1", "arctan": "atan", "arcsin": "asin", "arccos": "acos",
        "arctanh": "atanh", "arcsinh": "asinh", "arccosh": "acosh", "floor": "floor",
        "ceil": "ceil", "fabs": "fabs", "arctan2": "atan2", "hypot": "hypot",
        "isnan": "isnan", "isinf": "isinf", "isfinite": "isfinite", "log10": "log10",
        "log2": "log2", "exp2": None, "abs": None, "absolute": None}
#: NumPy names device code may use as they are (scalar casts).
KEPT = {"float64", "float32", "int64", "int32", "bool_"}

_INSTALL = ("target='cuda' needs numba's CUDA support: pip install 's2s_ad[cuda]' "
            "(numba-cuda) and an NVIDIA driver, or set NUMBA_ENABLE_CUDASIM=1 to run "
            "kernels in Numba's CUDA simulator")


def numba_cuda():
    """``numba.cuda``, or an ImportError that says how to install it."""
    try:
        from numba import cuda
    except ImportError as error:         # pragma: no cover  (numba without CUDA)
        raise ImportError(_INSTALL) from error
    return cuda


def usable_cuda():
    """``numba.cuda`` where kernels can run (a GPU and its driver, or the
    simulator); otherwise a RuntimeError that says what is missing."""
    cuda = numba_cuda()
    if not simulated() and not cuda.is_available():
        raise RuntimeError(f"target='cuda' found no usable NVIDIA GPU (numba.cuda.is_available() "
                           f"is False: no GPU, no driver, or no CUDA toolkit). {_INSTALL}; "
                           f"or use target='cpu'")
    return cuda


def simulated():
    """Whether kernels run in Numba's CUDA simulator."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


class CudaBatched:
    """``ad.jit(ad.vmap(F, ...), target="cuda")``: a kernel per argument layout."""

    target = "cuda"

    def __init__(self, batched, options):
        fun = batched.fun
        if isinstance(fun, Batched):
            raise TypeError("target='cuda' compiles one vmap level (one thread per example); "
                            "a nested ad.vmap inside it is not supported: merge the batch "
                            "axes with reshape, or use target='cpu'")
        if not isinstance(fun, Transformed):
            if not callable(fun) or hasattr(fun, "generated_source"):
                raise TypeError(f"target='cuda' batches ad.grad, ad.value_and_grad and "
                                f"plain functions per example; got {fun!r} (use target='cpu')")
            fun = Transformed(fun, "primal")
        if fun.kind not in ("primal", "grad", "value_and_grad", "vjp"):
            raise TypeError(f"target='cuda' cannot batch a {fun.kind} transform; use "
                            f"target='cpu'")
        opts = {k: v for k, v in options.items()
                if k in ("cache", "fastmath")}
        self.per_example = fun.with_target("cuda", opts)
        if fun.kind != "primal":
            self.per_example = self.per_example.derived(
                options={**self.per_example.options, "element_grads": True})
        self.batched = Batched(self.per_example, batched.in_axes, batched.out_axes, "loop")
        #: None: from the kernel's occupancy (s2s_ad/api/cuda_launch.py); a number overrides
        self.threads_per_block = options.get("threads_per_block")
        self.stream = options.get("stream", 0)
        self._kernels = {}
        self.source = None
        self.__wrapped__ = batched
        self.__name__ = batched.__name__

    def __repr__(self):
        return f"<s2s_ad CUDA kernel of {self.batched!r}>"

    # -- calls ---------------------------------------------------------------
    def __call__(self, *args, stream=None):
        cuda = usable_cuda()
        b = self.batched
        leaves, treedefs, axes, size = b._batch(args)
        if size == 0:
            raise ValueError("vmap over an empty batch")
        on_device = [_on_device(x) for x in leaves]
        host = [_host_example(x, a, d) for x, a, d in zip(leaves, axes, on_device)]
        kernel, post, raw, elements, raw_leaves = self._kernel(host, axes, treedefs)
        stream = self.stream if stream is None else stream
        inputs = [_to_device(cuda, x, a, d, stream) for x, a, d in zip(leaves, axes, on_device)]
        inputs = _single_floats(inputs, kernel)
        floats = _float_dtype(host)
        outs = [cuda.device_array((size, int(np.size(v))), stream=stream,
                                  dtype=floats if type(v) is float or ndim == "elements"
                                  else np.result_type(v))
                for v, (_, ndim) in zip(raw_leaves, kernel.raw_paths)]
        kernel.launch(cuda, inputs, outs, size, self.threads_per_block, stream)
        keep = any(on_device)
        batched = [o.reshape((size,) + np.shape(v)) if keep else
                   o.copy_to_host(stream=stream).reshape((size,) + np.shape(v))
                   for o, v in zip(outs, raw_leaves)]
        result = post(_rebuild_raw(raw, iter(batched), elements=elements), batched=True)
        out_leaves, tree = pytree.flatten(result)
        if keep:
            if b.out_axes != 0:
                raise ValueError("target='cuda' with device arrays returns device arrays "
                                 "batched along axis 0: use out_axes=0")
            return result
        return b._place([np.asarray(x) for x in out_leaves], tree, size)

    def _kernel(self, host, axes, treedefs):
        """The kernel for this layout (built on the first call that has it)."""
        b = self.batched
        sample = [x[0] if a is not None else x for x, a in zip(host, axes)]
        t = self.per_example
        entry, leaves0, post = t.compiled_call(pytree.unflatten_all(sample, treedefs))
        if getattr(t, "_cells", ()):
            raise TypeError("target='cuda' batches def functions; a lambda or closure "
                            "reading outer variables is not supported: pass them as "
                            "arguments (in_axes=None)")
        raw = entry(*leaves0)                 # one example on the host: the result layout
        elements = _element_paths(t)
        raw_leaves, raw_paths = _raw_leaves(raw, elements=elements)
        st = t._last
        key = (id(st), tuple(a is None for a in axes), tuple(map(_type_key, leaves0)),
               tuple(raw_paths))
        kernel = self._kernels.get(key)
        if kernel is None:
            kernel = self._kernels[key] = Kernel(st, axes, raw_paths, raw, elements,
                                                      leaves0)
        self.source = kernel.text
        b._per_example = t
        return kernel, post, raw, elements, raw_leaves

    def compile_ptx(self, *args, cc=(8, 0)):
        """The PTX of the kernel (and the device functions it calls) for
        arguments like ``args`` (NumPy), for compute capability ``cc``.

        Compiles only: nothing is launched, so no GPU is needed beyond what
        Numba's own ``cuda.compile_ptx`` needs (libNVVM).
        """
        from numba import typeof, types
        host, kernel, raw_leaves = self.build(*args)
        floats = _float_dtype(host)
        sig = [typeof(np.ascontiguousarray(x)) if isinstance(x, np.ndarray) else typeof(x)
               for x in _single_floats(host, kernel)]
        sig += [types.Array(typeof(np.empty(0, floats if type(v) is float or nd == "elements"
                                            else np.result_type(v))).dtype, 2, "C")
                for v, (_, nd) in zip(raw_leaves, kernel.raw_paths)]
        sig += [types.Array(typeof(np.empty(0, kernel.tape_dtype)).dtype, 2, "C"),
                types.Array(types.int64, 2, "C")]
        ptx, _ = numba_cuda().compile_ptx(kernel.kernel.py_func, tuple(sig), cc=cc)
        return ptx

    def build(self, *args):
        """Generate the kernel and device functions for arguments like ``args``
        (NumPy), without compiling or launching them: (example 0's host
        arguments, the kernel, the result leaves of example 0)."""
        leaves, treedefs, axes, size = self.batched._batch(args)
        host = [_host_example(x, a, False) for x, a in zip(leaves, axes)]
        kernel, _, _, _, raw_leaves = self._kernel(host, axes, treedefs)
        return host, kernel, raw_leaves

    # -- reading ---------------------------------------------------------------
    def generated_source(self, *example_args):
        """The kernel and the device functions it calls (after a call, or
        with example arguments, for their layout: generated, not run)."""
        if example_args:
            self.build(*example_args)
        head = (f"# vmap on the GPU (one CUDA thread per example, grid-stride loop; in_axes="
                f"{self.batched.in_axes!r}, out_axes={self.batched.out_axes!r}):\n")
        if self.source is None:
            return head + ("# (the kernel is generated on the first call, for the argument "
                           "layout it sees; pass example arguments to ad.source)\n")
        return head + self.source


def _single_floats(args, kernel):
    """Python floats (shared scalars such as a step size) as float32 in a float32
    kernel: Numba would type them float64 and compute in float64 with them."""
    if kernel.floats != np.float32:
        return args
    return [np.float32(x) if type(x) is float else x for x in args]


def _type_key(x):
    from .arguments import _type_key as key
    return key(x)


def _on_device(x):
    """Whether ``x`` is a GPU array (the simulator's arrays count)."""
    return hasattr(x, "__cuda_array_interface__") or type(x).__name__ == "FakeCUDAArray"


def _host_example(x, axis, on_device):
    """A host copy of what the host needs of an argument: example 0 when batched."""
    if on_device:
        arr = _as_device(numba_cuda(), x)
        if axis is None:
            return arr.copy_to_host()
        if axis != 0:
            raise ValueError("target='cuda' takes device arrays batched along axis 0 (in_axes "
                             "0 or None)")
        return arr[0:1].copy_to_host()
    x = np.moveaxis(np.asarray(x), axis, 0) if axis not in (None, 0) else x
    return x


def _as_device(cuda, x):
    """A numba view of a GPU array (CuPy, PyTorch, ...), without a copy."""
    if hasattr(x, "copy_to_host"):
        return x
    return cuda.as_cuda_array(x)


def _to_device(cuda, x, axis, on_device, stream):
    if on_device:
        return _as_device(cuda, x)
    if isinstance(x, np.ndarray) or axis is not None:
        x = np.asarray(x)
        if axis not in (None, 0):
            x = np.moveaxis(x, axis, 0)
        return cuda.to_device(np.ascontiguousarray(x), stream=stream)
    return x


# -- the device module -------------------------------------------------------------
class _DeviceRewrite(ast.NodeTransformer):
    """The generated module rewritten for device code (see the module docstring)."""

    def __init__(self, source):
        self.lines = source.split("\n")
        self.taped = set()        # functions that take a tape (their own stacks or callees')
        self.keeping, self.tape_params = set(), {}
        self.stacks = set()

    def refuse(self, node, what, instead):
        text, line = _user_line(self.lines, node.lineno)
        if text and re.search(r"\bad\.(grad|value_and_grad|vjp|jacfwd|jacrev|hessian|hvp)\(",
                              text):
            instead = ("a transform written inside the per-example function runs on the "
                       "device when what it differentiates is scalars or 1-d arrays of "
                       "static length (kept in per-thread arrays); otherwise batch the "
                       "transform itself, as in ad.vmap(ad.hessian(f)) or ad.vmap(ad.grad(f))")
        raise UnsupportedSyntaxError(
            f"target='cuda': a GPU thread cannot run this line: {what}; {instead}, or use "
            f"target='cpu'", self.filename, line, 1, text)

    def visit_Module(self, node):
        functions = {f.name: f for f in node.body if isinstance(f, ast.FunctionDef)}
        own = {n for n, f in functions.items() if any(
            _is_call(c, "rt.float_stack") or _empty_list(c) for c in ast.walk(f))
            or set(_list_stacks(f)) & {a.arg for a in f.args.args}}
        calls = {n: {c.func.id for c in ast.walk(f) if isinstance(c, ast.Call)
                     and isinstance(c.func, ast.Name) and c.func.id in functions}
                 for n, f in functions.items()}
        self.taped = set(own)
        self.keeping, self.tape_params = _tape_params(functions)
        while True:
            more = {n for n, callees in calls.items() if callees & self.taped} - self.taped
            if not more:
                break
            self.taped |= more
        self.generic_visit(node)
        return node

    def _array_zeros(self, function, node):
        """Whether ``node`` is the zero adjoint of an array argument of the entry."""
        return function == self.entry and _is_call(node, "rt.zeros_like") and \
            isinstance(node.args[0], ast.Name) and node.args[0].id in self.arrays

    def visit_FunctionDef(self, node):
        self.function = node.name
        if self.local.problem and self.local.problem[0] is node:
            self.refuse(node, self.local.problem[1], "call it with arrays of one shape")
        self.lists = _list_stacks(node, returned=node.name != self.entry)
        # slices of the tape a forward function returned to this reverse sweep
        self.stacks = self.tape_params.get(node.name, set()) - set(self.lists)
        used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        self.used = used
        self.rets = [] if node.name == self.entry else [
            _fresh(f"ret{k}", used) for k in range(len(array_slots(self.local, node.name)))]
        # how often each name is assigned (an output row's name assigned again is copied)
        self.rebound = {}
        for n in ast.walk(node):
            for t in n.targets if isinstance(n, ast.Assign) else ():
                for m in ast.walk(t):
                    if isinstance(m, ast.Name) and isinstance(m.ctx, ast.Store):
                        self.rebound[m.id] = self.rebound.get(m.id, 0) + 1
        self.generic_visit(node)
        # a stack the forward function filled: popped from its end
        node.body[:0] = [ast.Assign([ast.Name(count, ast.Store())],
                                    _attr(f"{name}.shape[0]"), lineno=node.lineno)
                         for name, count in self.lists.items()
                         if name in {a.arg for a in node.args.args}]
        if node.name in self.taped:
            node.args.args += [ast.arg("tape"), ast.arg("tape_top"), ast.arg("need")]
        node.args.args += [ast.arg(r) for r in self.rets]
        if node.name == self.entry:
            node.args.args += [ast.arg(v) for v in self.outputs.values()]
        return node

    def visit_Assign(self, node):
        value = node.value
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
                value.func.id in self.keeping and isinstance(node.targets[0], ast.Tuple):
            # its stacks stay taken until the reverse sweep: the tape taken past them
            node.targets[0].elts.append(ast.Name("tape_top", ast.Store()))
        if _empty_list(node) and node.targets[0].id in self.lists:
            # a stack the CPU code keeps as a list: slots of the tape (see runtime/device.py)
            name = node.targets[0].id
            take = ast.Call(_attr("rtd.list_take"), [ast.Name(n, ast.Load()) for n in
                                                     ("tape", "tape_top", "need")], [])
            return [ast.Assign([ast.Tuple([ast.Name(name, ast.Store()),
                                           ast.Name("tape_top", ast.Store())], ast.Store())],
                               take, lineno=node.lineno),
                    ast.Assign([ast.Name(self.lists[name], ast.Store())], ast.Constant(0),
                               lineno=node.lineno)]
        if self.nested and isinstance(value, ast.Constant) and value.value is None and \
                isinstance(node.targets[0], ast.Name) and self.lists:
            # a forward function's last column (e = None before its loop): no None on
            # the device, the loop defines it
            return []
        if isinstance(value, ast.List) and not value.elts:
            if self.nested:
                self.refuse(node, "reverse mode over a transform written inside the "
                            "per-example function keeps a list of arrays, one per column",
                            "differentiate that function in forward mode (ad.jacfwd, ad.jvp "
                            "of it), or batch the inner transform itself")
            self.refuse(node, "it keeps a list whose length is known only while it runs",
                        "write it with scalars and loops")
        stack = _stack_call(value, "pop", self.lists)
        if stack is not None and len(node.targets) == 1:
            count = self.lists[stack]
            array = pop_local(self, node, stack, count)       # an array: element by element
            if array is not None:
                return array
            like = self.visit(_load(node.targets[0]))
            pop = ast.Call(_attr("rtd.pop_as"), [ast.Name(stack, ast.Load()),
                                                 ast.Name(count, ast.Load()), like,
                                                 ast.Name("need", ast.Load())], [])
            return [ast.AugAssign(ast.Name(count, ast.Store()), ast.Sub(), ast.Constant(1)),
                    ast.Assign(node.targets, pop, lineno=node.lineno)]
        if _is_call(value, "rt.float_stack") and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            self.stacks.add(name)
            node.targets = [ast.Tuple([ast.Name(name, ast.Store()),
                                       ast.Name("tape_top", ast.Store())], ast.Store())]
            node.value = ast.Call(_attr("rtd.tape_take"),
                                  [ast.Name("tape", ast.Load()), ast.Name("tape_top", ast.Load()),
                                   self.visit(value.args[0]), ast.Name("need", ast.Load())], [])
            return node
        if self._array_zeros(self.function, value) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name):
            array, name = value.args[0].id, node.targets[0].id
            if self.arrays[array] != 1:
                self.refuse(node, f"the gradient of the {self.arrays[array]}-d array "
                            f"{array} is an array a thread would allocate",
                            f"pass {array} flattened to 1-d (index it as {array}[i * n + j])")
            # accumulated straight into the kernel's output row for it
            self.outputs[name] = f"{name}_out"
            return [ast.Expr(ast.Call(_attr("rtd.zero_fill"),
                                      [ast.Name(f"{name}_out", ast.Load())], [])),
                    ast.Assign([node.targets[0]], ast.Name(f"{name}_out", ast.Load()),
                               lineno=node.lineno)]
        local = rewrite_assign(self, node)       # arrays of static shape: per-thread arrays
        if local is not None:
            return local
        return self.generic_visit(node)

    def visit_Expr(self, node):
        call = node.value
        if isinstance(call, ast.Call) and ast.unparse(call.func) == "rt.add_into" \
                and len(call.args) == 2:
            # a cotangent added into a slice in place: ``out += value``, which
            # the per-thread array lowering writes element by element
            target = call.args[0]
            target.ctx = ast.Store()
            return self.visit_AugAssign(ast.AugAssign(target, ast.Add(), call.args[1],
                                                      lineno=node.lineno))
        stack = _stack_call(node.value, "append", self.lists)
        if stack is None:
            return self.generic_visit(node)
        count = self.lists[stack]
        array = push_local(self, stack, count, node.value.args[0])
        if array is not None:
            return array
        push = ast.Call(_attr("rtd.push"), [ast.Name(stack, ast.Load()),
                                            ast.Name(count, ast.Load()),
                                            self.visit(node.value.args[0]),
                                            ast.Name("need", ast.Load())], [])
        return ast.Assign([ast.Name(count, ast.Store())], push, lineno=node.lineno)

    def visit_AugAssign(self, node):
        array = augassign(self, node)       # on a local array: element by element
        return array if array is not None else self.generic_visit(node)

    def visit_Return(self, node):
        self.generic_visit(node)
        if isinstance(node.value, ast.Tuple):
            # a stack returned to the reverse sweep: the slots it filled
            node.value.elts = [_attr(f"{e.id}[0:{self.lists[e.id]}]")
                               if isinstance(e, ast.Name) and e.id in self.lists else e
                               for e in node.value.elts]
            if self.function in self.keeping:
                node.value.elts.append(ast.Name("tape_top", ast.Load()))
        if self.rets:
            return rewrite_return(self, node, self.rets)
        copies = []
        if self.function == self.entry:
            # arrays of static shape returned: copied into the kernel's output rows for them
            def local(value, path):
                if isinstance(value, ast.Tuple):
                    value.elts = [local(v, path + (k,)) for k, v in enumerate(value.elts)]
                    return value
                if _is_call(value, "rt.like") and isinstance(value.args[0], ast.Name) and \
                        value.args[0].id not in self.outputs and \
                        self.local.shapes.get(self.entry, {}).get(value.args[0].id):
                    value = value.args[0]          # a local array of the argument's shape
                if isinstance(value, ast.Name) and value.id in \
                        self.local.shapes.get(self.entry, {}) and value.id not in self.arrays \
                        and value.id not in self.outputs:
                    out = self.outputs[value.id] = f"{value.id}_out"
                    copies.append(ast.Expr(ast.Call(_attr("rtd.copy_into"), [
                        ast.Name(out, ast.Load()), value, ast.Constant(1.0)], [])))
                    return ast.Call(_attr("rt.like"), [ast.Name(value.id, ast.Load())], [])
                return value
            node.value = local(node.value, ())
        if self.function == self.entry and self.outputs:
            self.returned = {}

            def strip(value, path):
                if isinstance(value, ast.Tuple):
                    value.elts = [strip(v, path + (k,)) for k, v in enumerate(value.elts)]
                    return value
                if _is_call(value, "rt.like") and isinstance(value.args[0], ast.Name) and \
                        value.args[0].id in self.outputs:
                    name = value.args[0].id
                    self.returned[path] = name
                    if self.rebound.get(name, 0) > 1:
                        # assigned a new (per-thread) array after its output row: copied
                        copies.append(ast.Expr(ast.Call(_attr("rtd.copy_into"), [
                            ast.Name(self.outputs[name], ast.Load()), ast.Name(name, ast.Load()),
                            ast.Constant(1.0)], [])))
                    return ast.Constant(None)
                return value
            node.value = strip(node.value, ())
        return copies + [node] if copies else node

    def visit_Subscript(self, node):
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id in self.stacks:
            node.slice = ast.Call(_attr("rtd.slot"), [ast.Name(node.value.id, ast.Load()),
                                                      node.slice], [])
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        func = node.func
        if isinstance(func, ast.Name) and func.id in self.taped:
            node.args += [ast.Name(n, ast.Load()) for n in ("tape", "tape_top", "need")]
        if isinstance(func, ast.Name) and func.id in ("max", "min") and len(node.args) >= 2 \
                and not node.keywords:
            # Python's max/min of scalars, two at a time: rtd.max2(rtd.max2(a, b), c)
            folded = node.args[0]
            for arg in node.args[1:]:
                folded = ast.Call(_attr(f"rtd.{func.id}2"), [folded, arg], [])
            return folded
        if isinstance(func, ast.Attribute) and func.attr in ("append", "pop"):
            self.refuse(node, "its reverse sweep keeps a list of values whose length is "
                        "known only while the loop runs",
                        "write the loop as `for i in range(n)` with n known before it")
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
                func.value.id == "np":
            name = func.attr
            if name in KEPT:
                return node
            if MATH.get(name):
                node.func = _attr(f"math.{MATH[name]}")
                return node
            if name in ("abs", "absolute") and len(node.args) == 1:
                node.func = ast.Name("abs", ast.Load())
                return node
            if name == "shape" and len(node.args) == 1:
                return ast.Attribute(node.args[0], "shape", ast.Load())   # a tuple, no array
            if name == "square" and len(node.args) == 1:
                return ast.BinOp(node.args[0], ast.Mult(), node.args[0])
            if name in ("maximum", "minimum", "fmax", "fmin") and len(node.args) == 2:
                node.func = _attr(f"rtd.{name}")      # NumPy's NaN rules, on scalars
                return node
            if name in ("zeros", "ones", "empty", "full"):
                self.refuse(node, f"np.{name} makes an array whose length is known only from "
                            f"the data, while the kernel runs",
                            "give it a length known when the kernel is built (a constant, or "
                            "an argument's shape such as x.shape[0]; 1-d arrays become "
                            "per-thread arrays), or pass the array in as an argument")
            self.refuse(node, f"it calls np.{name}, which needs arrays a thread would "
                        f"allocate (only arrays of small static length become scalars)",
                        "write it with scalars and loops, with the arrays as arguments")
        return node


def _empty_list(node):
    """Whether ``node`` is ``name = []``."""
    return isinstance(node, ast.Assign) and isinstance(node.value, ast.List) and \
        not node.value.elts and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)


def _stack_call(node, method, stacks):
    """The stack of ``node`` when it is ``stack.append(x)`` or ``stack.pop()``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr == method and isinstance(node.func.value, ast.Name) and \
            node.func.value.id in stacks and len(node.args) == (method == "append") and \
            not node.keywords:
        return node.func.value.id
    return None


def _list_stacks(function, returned=True):
    """The lists of ``function`` that are stacks -- created empty, then only
    pushed (``s.append(x)`` statements) and popped (``x = s.pop()``), or
    returned (``returned``: a forward function's, to its reverse sweep), or
    parameters only popped (that reverse sweep's) -- each with a fresh name
    for its count."""
    created = {n.targets[0].id for n in ast.walk(function) if _empty_list(n)}
    # a reverse sweep's stack given by the forward function (popped only)
    created |= {a.arg for a in function.args.args}
    allowed = set()
    for n in ast.walk(function):
        if _empty_list(n):
            allowed.add(id(n.targets[0]))
        elif returned and isinstance(n, ast.Return) and isinstance(n.value, ast.Tuple):
            # a forward function's stack, returned to its reverse sweep (not the entry's)
            allowed |= {id(e) for e in n.value.elts if isinstance(e, ast.Name)}
        elif isinstance(n, ast.Expr) and _stack_call(n.value, "append", created):
            allowed.add(id(n.value.func.value))
        elif isinstance(n, ast.Assign) and len(n.targets) == 1 and \
                _stack_call(n.value, "pop", created):
            allowed.add(id(n.value.func.value))
    used = {n.id for n in ast.walk(function) if isinstance(n, ast.Name)}
    stacks = {}
    params = {a.arg for a in function.args.args}
    for name in sorted(created):
        uses = [n for n in ast.walk(function) if isinstance(n, ast.Name) and n.id == name]
        if name in params and not any(_stack_call(n.value, "pop", {name}) for n in
                                      ast.walk(function) if isinstance(n, ast.Assign)):
            continue
        if all(id(n) in allowed for n in uses):
            count = f"{name}_len"
            while count in used:
                count += "_"
            stacks[name] = count
            used.add(count)
    return stacks


def _tape_params(functions):
    """The functions returning stacks (slices of the tape, which stay taken
    until the reverse sweep: they return their ``tape_top`` too), and, for
    each function, its parameters given such stacks (the reverse sweep's,
    passed on by the caller).  A stack may pass through several functions
    (a forward function returning its callee's stacks)."""
    held = {name: {n.targets[0].id for n in ast.walk(f) if _empty_list(n) or (
        isinstance(n, ast.Assign) and len(n.targets) == 1 and
        isinstance(n.targets[0], ast.Name) and _is_call(n.value, "rt.float_stack"))}
        for name, f in functions.items()}
    returned, params = {}, {}
    while True:
        before = (sum(map(len, held.values())), sum(map(len, returned.values())),
                  sum(map(len, params.values())))
        for name, f in functions.items():
            held[name] |= params.get(name, set())
            for n in ast.walk(f):
                if isinstance(n, ast.Return) and isinstance(n.value, ast.Tuple):
                    returned[name] = {k for k, e in enumerate(n.value.elts)
                                      if isinstance(e, ast.Name) and e.id in held[name]}
                if isinstance(n, ast.Assign) and len(n.targets) == 1 and \
                        isinstance(n.targets[0], ast.Tuple) and isinstance(n.value, ast.Call) \
                        and isinstance(n.value.func, ast.Name):
                    elts = n.targets[0].elts
                    held[name] |= {elts[k].id for k in returned.get(n.value.func.id, ())
                                   if k < len(elts) and isinstance(elts[k], ast.Name)}
            for n in ast.walk(f):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and \
                        n.func.id in functions:
                    callee = [a.arg for a in functions[n.func.id].args.args]
                    params.setdefault(n.func.id, set()).update(
                        p for p, a in zip(callee, n.args)
                        if isinstance(a, ast.Name) and a.id in held[name])
        if before == (sum(map(len, held.values())), sum(map(len, returned.values())),
                      sum(map(len, params.values()))):
            return {name for name, slots in returned.items() if slots}, params


def _fresh(name, used):
    """``name``, or with underscores after it, not in ``used`` (then added)."""
    while name in used:
        name += "_"
    used.add(name)
    return name


def _load(target):
    """A copy of an assignment target, read."""
    node = ast.parse(ast.unparse(target), mode="eval").body
    return node


def _is_call(node, dotted):
    return isinstance(node, ast.Call) and ast.unparse(node.func) == dotted


def _attr(dotted):
    return ast.parse(dotted, mode="eval").body


_COMMENT = re.compile(r"^\s*# (?:adjoint of: |restore: )?(.*?)  \[line (\d+)\]$")


def _user_line(lines, lineno):
    for k in range(min(lineno, len(lines)) - 1, -1, -1):
        m = _COMMENT.match(lines[k])
        if m:
            return m.group(1), int(m.group(2))
    return None, None


def device_source(source, entry, arrays=None, shapes=None, floats="float64", float_args=()):
    """The generated per-example module rewritten as device code, and whether
    its entry takes a tape.  ``arrays``: the entry's array arguments and
    their ranks; ``shapes``: their shapes; ``floats``: the dtype of the
    per-thread arrays (see :mod:`s2s_ad.api.cuda_local`); ``float_args``: the
    entry's float arguments (for float32 constants, :mod:`s2s_ad.api.cuda_float32`)."""
    tree = ast.parse(source)
    rewrite = _DeviceRewrite(source)
    rewrite.entry, rewrite.arrays = entry, dict(arrays or {})
    rewrite.local, rewrite.floats = StaticShapes(tree, entry, dict(shapes or {})), floats
    rewrite.nested = "rt.unit_like(" in source       # transforms written inside it
    rewrite.outputs, rewrite.returned = {}, {}
    m = re.search(r"\(([^()]*):\d+\)\.$", source.split("\n", 1)[0])
    rewrite.filename = m.group(1) if m else None
    tree = rewrite.visit(tree)
    if floats == "float32":
        tree = float32_constants(tree, entry, [a for a in float_args if a not in rewrite.arrays],
                                 [a for a in float_args if a in rewrite.arrays])
    body = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            node.decorator_list = [_attr("cuda.jit(device=True)")]
            body.append(node)
    head = [line for line in source.split("\n")[:3] if line.startswith("#")]
    text = "\n\n\n".join(ast.unparse(f) for f in body)
    text = _with_comments(text, source)
    return ("\n".join(head) + "\n# Device functions: numba.cuda.jit(device=True).\n"
            "import math\n\nimport numpy as np\nfrom numba import cuda\n\n"
            "from s2s_ad import runtime as rt\nfrom s2s_ad.runtime import device as rtd\n\n\n"
            + text + "\n"), entry in rewrite.taped, {
                path: name for name in rewrite.outputs
                for path, returned in rewrite.returned.items() if returned == name}


def _with_comments(text, source):
    """The user's-line comments of ``source`` put back before the statements
    they introduce (``ast.unparse`` drops comments)."""
    original = source.split("\n")
    comments, pending = {}, []
    for line in original:
        stripped = line.strip()
        if stripped.startswith("#") and _COMMENT.match(line):
            pending.append(stripped)
        elif stripped and pending:
            comments.setdefault(_key(stripped), []).append(pending)
            pending = []
    out = []
    for line in text.split("\n"):
        stripped = line.strip()
        queue = comments.get(_key(stripped))
        if queue:
            indent = line[:len(line) - len(line.lstrip())]
            out += [indent + c for c in queue.pop(0)]
        out.append(line)
    return "\n".join(out)


def _key(line):
    """A statement's text, normalised across the rewrite (stack and call changes)."""
    return re.sub(r"\W", "", line.split("=")[0] if "rt.float_stack" in line else line)[:60]


class Kernel:
    """The device module and kernel for one argument and result layout."""

    def __init__(self, st, axes, raw_paths, raw, elements, leaves0):
        self.raw_paths = raw_paths
        params = getattr(st.compiled, st.entry).__code__.co_varnames
        arrays = {p: np.ndim(x) for p, x in zip(params, leaves0) if isinstance(x, np.ndarray)}
        shapes = {p: np.shape(x) for p, x in zip(params, leaves0) if isinstance(x, np.ndarray)}
        self.floats = _float_dtype(leaves0)
        float_args = [p for p, x in zip(params, leaves0)
                      if isinstance(x, (float, np.floating)) or
                      isinstance(x, np.ndarray) and x.dtype.kind == "f"]
        device, taped, self.in_place = device_source(st.source, st.entry, arrays, shapes,
                                                     self.floats.name, float_args)
        # Python's max/min/abs called in the user's code are Numba's builtins on the device
        consts = {k: v for k, v in st.program.consts.items()
                  if not (k in ("max", "min", "abs") and v is getattr(builtins, k))}
        path = backends.write_module(device, consts, f"cuda_{st.entry}")
        name = f"s2s_ad_generated.{backends.module_name(device, consts, 'cuda_' + st.entry)}"
        self.device = backends.import_file(path, name, consts, device, reuse=True)
        if simulated():
            self.device.cuda = SimulatorCuda()    # see cuda_local.SimulatorCuda
        self.device_text = device
        self.taped = taped
        self.scratch = 1
        self.kernel_text = self._kernel_source(st.entry, axes, raw_paths, raw, elements)
        self.text = (self.kernel_text + "\n# the device functions it calls:\n" + device)
        scope = {"cuda": numba_cuda(), "entry": getattr(self.device, st.entry)}
        exec(compile(self.kernel_text, f"<s2s_ad CUDA kernel for {st.entry}>", "exec"), scope)
        self.kernel = scope["vmap_kernel"]
        self.cap = self.scratch              # tape slots per thread (see runtime/device.py)
        # float32 kernels keep float32 tapes, unless a stack the CPU code keeps as a list
        # stores integers there too (exact in float64 up to 2**53, in float32 only to 2**24)
        self.tape_dtype = np.float32 if self.floats == np.float32 and \
            "rtd.list_take(" not in device else np.float64
        self.block = FALLBACK                # threads per block of the last launch
        self.list_cap = 1                    # slots per stack the CPU code keeps as a list

    def _kernel_source(self, entry, axes, raw_paths, raw, elements):
        args = [f"a{i}" for i in range(len(axes))]
        outs = [f"out{k}" for k in range(len(raw_paths))]
        sample = [f"{a}[b]" if ax is not None else a for a, ax in zip(args, axes)]
        if self.taped:
            sample += ["tape_t", str(self.scratch), "need_t"]
        first = next(a for a, ax in zip(args, axes) if ax is not None)
        rows = {path: out for out, (path, _) in zip(outs, raw_paths)}
        sample += [f"{rows[path]}[b]" for path in self.in_place]
        body = [f"r = entry({', '.join(sample)})"]
        for out, (path, ndim), leaf in zip(outs, raw_paths, _raw_leaves(raw, elements=elements)[0]):
            value = "r" + "".join(f"[{k}]" for k in path)
            if path in self.in_place:
                continue                       # the entry wrote it in place
            if ndim == 0:
                body.append(f"{out}[b, 0] = {value}")
            elif ndim == "elements":
                body += [f"{out}[b, {k}] = {value}[{k}]" for k in range(int(np.size(leaf)))]
            else:
                where = re.search(r"\(([^()]*):(\d+)\)\.$", self.device_text.split("\n", 1)[0])
                raise UnsupportedSyntaxError(
                    f"target='cuda': the per-example function returns an array of shape "
                    f"{np.shape(leaf)}, which a GPU thread cannot allocate; return scalars, "
                    f"or gradients of 1-d array arguments, or use target='cpu'",
                    where.group(1) if where else None, int(where.group(2)) if where else None)
        tape = ["tape_t = tape[t]", "need_t = need[t]"] if self.taped else []
        return ("@cuda.jit\n"
                f"def vmap_kernel({', '.join(args + outs + ['tape', 'need'])}):\n"
                f"    # one thread per example (a grid-stride loop); {entry} per example, "
                f"outputs written in place\n"
                "    t = cuda.grid(1)\n"
                + "".join(f"    {line}\n" for line in tape)
                + f"    for b in range(t, {first}.shape[0], cuda.gridsize(1)):\n"
                + textwrap.indent("\n".join(body), " " * 8) + "\n")

    def launch(self, cuda, inputs, outs, size, threads_per_block, stream):
        """Run the kernel over ``size`` examples, lengthening the tape until it fits.
        ``threads_per_block`` None: chosen from the kernel's occupancy."""
        kernel = self.kernel
        if threads_per_block is None:
            types = [*inputs, *outs, cuda.device_array((1, 1), dtype=self.tape_dtype),
                     cuda.device_array((1, 5), dtype=np.int64)]
            try:
                kernel, threads_per_block = choose(self.kernel, types,
                                                   None if simulated() else
                                                   cuda.get_current_device())
            except NumbaError as error:         # typing and lowering errors
                raise self._explain(error) from error
        self.block = threads_per_block
        if simulated():
            threads_per_block = min(threads_per_block, 32)  # a Python thread each
        while True:
            threads = self._threads(size, threads_per_block)
            blocks = -(-threads // threads_per_block)
            rows = blocks * threads_per_block
            tape = cuda.device_array((rows, self.cap) if self.taped else (1, 1),
                                     dtype=self.tape_dtype, stream=stream)
            need = np.zeros((rows if self.taped else 1, 5), dtype=np.int64)
            need[:, 1] = self.scratch
            need[:, 3] = self.list_cap
            need = cuda.to_device(need, stream=stream)
            try:
                kernel[blocks, threads_per_block, stream](*inputs, *outs, tape, need)
            except NumbaError as error:         # typing and lowering errors
                raise self._explain(error) from error
            if not self.taped:
                return
            need = need.copy_to_host(stream=stream)
            longest, pushes = int(need[:, 0].max()), int(need[:, 2].max())
            if longest <= self.cap and pushes <= self.list_cap:
                return
            self.cap = max(self.cap, longest)
            self.list_cap = max(self.list_cap, pushes)

    def _threads(self, size, threads_per_block):
        limit = MAX_THREADS
        if self.taped:
            limit = max(threads_per_block,
                        TAPE_BUDGET // (np.dtype(self.tape_dtype).itemsize * self.cap))
        if simulated():
            limit = min(limit, 32)
        return max(1, min(size, limit))

    def _explain(self, error):
        """Numba failing to compile the device code, at the user's line."""
        filename = self.device.__file__
        return backends._numba_error(error, self.device_text, filename, "vmap_kernel")

