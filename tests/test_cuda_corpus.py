"""The control-flow corpus (tests/programs/control_flow.py) on the CUDA
target: per-example gradients of every program with a scalar output --
loops, while loops, break/continue, returns inside loops, branches, helpers
-- as kernels, equal to the CPU path and to finite differences; programs that make
small arrays of static length per example (per-thread arrays); programs a
thread cannot run (2-d arrays, slices of moving bounds) refused naming the
user's line.

Under the simulator (tests/test_cuda.py runs this file in its subprocess);
the PTX test compiles a few of them for a real GPU.  Two examples per
batch, the second a little perturbed, so their trip counts and branches
may differ (the simulator runs a Python thread per example).
"""
import sys
from pathlib import Path

import numpy as np
import pytest

import s2s_ad as ad
from s2s_ad.errors import UnsupportedSyntaxError

sys.path.insert(0, str(Path(__file__).parent))
from conftest import fd_jacobian, load_program  # noqa: E402
from cuda_support import nvvm, ptx_only, runs  # noqa: E402,F401

cf = load_program(Path(__file__).parent / "programs" / "control_flow.py")
PROGRAMS = {f.__name__: (f, make, argnums) for f, make, argnums in cf.CORPUS}
#: Programs that make small 1-d arrays of static length per example (np.zeros(n)
#: filled in loops, y + h * k1 in an integrator, helpers returning arrays, slices):
#: per-thread arrays (s2s_ad/api/cuda_arrays.py); all 12 of the corpus.
ARRAYS = ["momentum", "while_fill", "continue_write", "recurrence", "overwrite_needed",
          "elementwise_aug", "slice_aug", "accumulate_at", "fill_and_read", "two_buffers",
          "same_read_after_write", "ode_rk2"]
#: Programs a thread cannot run: 2-d arrays made per example (matrix_fill, row_loop's
#: gradient of a 2-d argument) and slices whose bounds move in a loop (slice_writes;
#: growing_prefix and shrinking_suffix, an array carried around a loop whose length
#: changes).
REFUSED = ["matrix_fill", "row_loop", "slice_writes", "growing_prefix", "shrinking_suffix"]
#: Every other program with a scalar output (62: what the gradient test checks).
EVERY = [name for name, (f, make, _) in PROGRAMS.items()
         if name not in REFUSED and np.ndim(f(*make())) == 0]


def _batch(args):
    """Two examples of ``args`` (floats and float arrays batched, the rest shared)."""
    out, axes = [], []
    for a in args:
        if isinstance(a, (float, np.ndarray)) and np.result_type(a).kind == "f":
            out.append(np.stack([np.asarray(a), np.asarray(a) * (1 + 1e-3)]))
            axes.append(0)
        else:
            out.append(a)
            axes.append(None)
    return out, tuple(axes)


@runs
@pytest.mark.parametrize("name", EVERY)
def test_corpus_gradient_kernel_equals_cpu_and_finite_differences(name):
    f, make, argnums = PROGRAMS[name]
    args, axes = _batch(make())
    fun = ad.grad(f, argnums=argnums)
    gpu = ad.jit(ad.vmap(fun, in_axes=axes), target="cuda")(*args)
    cpu = ad.vmap(fun, in_axes=axes)(*args)          # the NumPy backend
    nums = argnums if isinstance(argnums, tuple) else (argnums,)
    got = gpu if isinstance(argnums, tuple) else (gpu,)
    for g, c in zip(got, cpu if isinstance(argnums, tuple) else (cpu,)):
        np.testing.assert_allclose(g, c, rtol=1e-10, atol=1e-12)
    for b in range(2):
        example = [a[b] if ax == 0 else a for a, ax in zip(args, axes)]
        for k, i in enumerate(nums):
            leaves, tree = ad.pytree.flatten(example[i])      # (weights, bias) pairs too
            for j, leaf in enumerate(leaves):
                def along(x, i=i, j=j):
                    arg = ad.pytree.unflatten([x if m == j else v for m, v in
                                               enumerate(leaves)], tree)
                    return f(*[arg if n == i else (np.copy(a) if isinstance(a, np.ndarray)
                                                   else a) for n, a in enumerate(example)])
                fd = fd_jacobian(along, np.asarray(leaf, dtype=float))
                np.testing.assert_allclose(ad.pytree.flatten(got[k])[0][j][b], fd,
                                           rtol=1e-5, atol=1e-7)


def test_every_array_program_is_checked():
    assert set(ARRAYS) <= set(EVERY) and len(EVERY) == 62


@runs
@pytest.mark.parametrize("name", REFUSED)
def test_corpus_programs_that_allocate_are_refused_at_their_line(name):
    f, make, argnums = PROGRAMS[name]
    args, axes = _batch(make())
    with pytest.raises(UnsupportedSyntaxError, match="GPU thread") as info:
        ad.jit(ad.vmap(ad.grad(f, argnums=argnums), in_axes=axes), target="cuda")(*args)
    assert "control_flow.py" in str(info.value)


@ptx_only
@pytest.mark.usefixtures("nvvm")
def test_corpus_kernels_compile_to_ptx():
    _compile(("while_in_for", "nested_continue_break", "piecewise", "pytree_loop"))


@ptx_only
@pytest.mark.usefixtures("nvvm")
def test_corpus_kernels_with_per_thread_arrays_compile_to_ptx():
    _compile(("ode_rk2", "momentum", "slice_aug"))


def _compile(names):
    for name in names:
        f, make, argnums = PROGRAMS[name]
        args, axes = _batch(make())
        ptx = ad.jit(ad.vmap(ad.grad(f, argnums=argnums), in_axes=axes),
                     target="cuda").compile_ptx(*args)
        assert ".entry" in ptx and "malloc" not in ptx, name
