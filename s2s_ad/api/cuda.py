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
user's line.  The device module's rewrite is :mod:`s2s_ad.api.cuda_device`;
per-example Jacobians are in :mod:`s2s_ad.api.cuda_jacobians`.
"""
import builtins
import os
import re
import sys
import textwrap

import numpy as np
from numba.core.errors import NumbaError

from .. import backends
from ..errors import UnsupportedSyntaxError
from ..ir import pytree
from .core import Transformed
from .cuda_device import KEPT, MATH, device_source  # noqa: F401  (KEPT, MATH: re-exported)
from .cuda_launch import FALLBACK, choose
from .cuda_local import SimulatorCuda
from .vmap import Batched
from .vmap_common import _element_paths, _float_dtype, _raw_leaves, _rebuild_raw

#: The tapes of one launch use at most this many bytes (fewer threads, each
#: looping over more examples, when a thread's reverse sweep needs much).
TAPE_BUDGET = 512 * 2 ** 20
#: Most threads per launch: enough to fill any current GPU several times.
MAX_THREADS = 2 ** 20

_INSTALL = ("target='cuda' needs numba's CUDA support: pip install 's2s_ad[cuda]' "
            "(numba-cuda) and an NVIDIA driver, or set NUMBA_ENABLE_CUDASIM=1 to run "
            "kernels in Numba's CUDA simulator")


def numba_cuda():
    """``numba.cuda``, or an ImportError that says how to install it."""
    try:
        from numba import cuda
    except ImportError as error:         # pragma: no cover  (numba without CUDA)
        raise ImportError(_INSTALL) from error
    if not simulated():
        _load_array_registry()
    return cuda


def _load_array_registry():
    """Import numba-cuda's array overloads before its first compile does.

    numba-cuda (0.30.4 at least) registers an overload of ``np.row_stack`` when
    that module is imported, at the first kernel compile; NumPy 2.5 removed the
    alias, so every compile failed with "module 'numpy' has no attribute
    'row_stack'" (seen on a GPU machine with numpy 2.5.2).  The alias is lent
    for that one import and taken back, so NumPy is left as it was.  (Every
    call of a CUDA function comes here: once the module is loaded, nothing is
    done.)"""
    if hasattr(np, "row_stack") or "numba.cuda.np.arrayobj" in sys.modules:
        return
    np.row_stack = np.vstack
    try:
        import numba.cuda.np.arrayobj  # noqa: F401
    except ImportError:                  # pragma: no cover  (a numba-cuda without it)
        pass
    finally:
        del np.row_stack


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

