"""Values the backward sweep reads, written in place after they were saved,
on the CUDA target (issue 46): per-example gradient kernels of the programs
of ``programs/saved_then_written.py`` a thread can run, equal to the CPU
path and to finite differences.  A thread's tape holds values, not arrays,
so a carried array is pushed after the body's writes into it
(``api/cuda_device._late_pushes``) and an array copied into a name that is
written into is a copy (``api/cuda_local.rewrite_assign``).

Under the simulator (tests/test_cuda.py::test_under_simulator runs this
file in its subprocess).
"""
import sys
from pathlib import Path

import numpy as np
import pytest

import s2s_ad as ad

sys.path.insert(0, str(Path(__file__).parent))
from conftest import fd_jacobian, load_program  # noqa: E402
from cuda_support import runs  # noqa: E402

sw = load_program(Path(__file__).parent / "programs" / "saved_then_written.py")
CORPUS = {f.__name__: (f, make, argnums) for f, make, argnums in sw.CORPUS}


@runs
@pytest.mark.parametrize("name", sw.ON_CUDA)
def test_gradient_kernel_equals_cpu_and_finite_differences(name):
    fn, make, argnums = CORPUS[name]
    args = make()
    first = argnums if isinstance(argnums, int) else argnums[0]
    a = np.asarray(args[first], dtype=np.float64)
    xs = np.stack([a, a * 1.01 - 0.002])
    axes = tuple(0 if i == first else None for i in range(len(args)))
    batched = [xs if i == first else v for i, v in enumerate(args)]
    grad = ad.grad(fn, first)
    gpu = ad.jit(ad.vmap(grad, in_axes=axes), target="cuda")(*batched)
    cpu = ad.jit(ad.vmap(grad, in_axes=axes))(*batched)
    np.testing.assert_allclose(gpu, cpu, rtol=1e-10, atol=1e-12)
    for b in range(2):
        rest = [v for i, v in enumerate(args) if i != first]

        def one(x, rest=rest):
            full = list(rest)
            full.insert(first, x)
            return fn(*full)
        np.testing.assert_allclose(gpu[b], fd_jacobian(one, xs[b].copy()), atol=1e-6)
