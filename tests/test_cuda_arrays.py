"""The CUDA target with small arrays made per example (s2s_ad/api/cuda_arrays.py):
``np.zeros(x.shape[0])`` filled in loops, a helper returning ``y + h * dy``,
arrays carried by a loop and kept past it, ``np.sum``/``np.dot`` of them, and
the adjoints of all these, as per-thread ``cuda.local.array``s; lengths known
only from the data refused at the user's line.

Under the simulator (tests/test_cuda.py runs this file in its subprocess) a
local array is one buffer per statement and thread, as on a GPU
(``cuda_local.SimulatorCuda``), so an array kept past the next run of its
statement would read what that run wrote here too.  Without a simulator or
GPU the kernels are compiled to PTX.
"""
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import s2s_ad as ad
from s2s_ad.errors import UnsupportedSyntaxError

sys.path.insert(0, str(Path(__file__).parent))
from conftest import fd_jacobian  # noqa: E402
from cuda_support import nvvm, ptx_only, runs  # noqa: E402,F401
from programs.cuda_arrays import data_length, integrate  # noqa: E402

Y = np.array([[0.3, -0.2, 0.5], [0.1, 0.4, -0.3], [0.6, 0.2, -0.1]])
A = np.array([1.3, 0.7, -0.4])
N = 5
FUN = ad.vmap(ad.value_and_grad(integrate, argnums=(0, 1)), in_axes=(0, 0, None))
KERNEL = ad.jit(FUN, target="cuda")


@runs
def test_arrays_made_per_example_equal_cpu_and_finite_differences():
    value, (gy, ga) = KERNEL(Y, A, N)
    cpu_value, (cpu_gy, cpu_ga) = FUN(Y, A, N)
    np.testing.assert_allclose(value, cpu_value, rtol=1e-12)
    np.testing.assert_allclose(gy, cpu_gy, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ga, cpu_ga, rtol=1e-10, atol=1e-12)
    for b in range(len(Y)):
        fd_y = fd_jacobian(lambda y, b=b: integrate(y, A[b], N), Y[b].copy())
        fd_a = fd_jacobian(lambda a, b=b: integrate(Y[b], a, N), A[b])
        np.testing.assert_allclose(gy[b], fd_y, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(ga[b], fd_a, rtol=1e-6, atol=1e-8)


def test_arrays_made_per_example_are_local_arrays_in_the_source():
    text = ad.source(KERNEL, Y, A, N)
    device = "\n".join(line for line in text[text.index("# the device functions it calls:"):]
                       .split("\n") if not line.lstrip().startswith("#"))   # code, no comments
    assert "np.zeros" not in device and "np.sum" not in device and "np.dot" not in device
    assert "dy = cuda.local.array((3,), np.float64)" in device
    # prev = y in the loop: a copy (y's buffer is written again by the next step)
    assert re.search(r"(prev\w*) = cuda\.local\.array\(\(3,\), np\.float64\)\n\s*"
                     r"rtd\.copy_into\(\1, \w+, 1\.0\)", device)
    # the step's states pushed for the reverse sweep element by element
    assert re.search(r"for e in range\(3\):\n\s*y_stack_len = rtd\.push\(y_stack, "
                     r"y_stack_len, y\[e\], need\)", device)


@runs
def test_a_length_known_only_from_the_data_is_refused_at_its_line():
    f = ad.jit(ad.vmap(ad.grad(data_length)), target="cuda")
    with pytest.raises(UnsupportedSyntaxError, match="np.zeros makes an array whose length "
                       "is known only from the data.*x.shape") as info:
        f(np.array([[0.5, 1.0], [0.7, 2.0]]))
    assert "cuda_arrays.py" in str(info.value) and "line 27" in str(info.value)


@ptx_only
@pytest.mark.usefixtures("nvvm")
def test_arrays_made_per_example_compile_to_ptx():
    ptx = KERNEL.compile_ptx(Y, A, N)
    assert ".entry" in ptx and "malloc" not in ptx
    ptx32 = KERNEL.compile_ptx(Y.astype(np.float32), A.astype(np.float32), N)
    # float32 arithmetic (the tape of the while-style list stacks stays float64, see
    # docs/cuda.md, so f64 loads, stores and conversions remain; libdevice's sinf/cosf
    # reduce huge arguments with one f64 multiply by 2**-64 * pi / 2, 0d3BF921FB54442D19)
    f64 = re.findall(r"^\s*(?:add|sub|mul|fma|div|neg|max|min)[a-z.]*\.f64\b.*$", ptx32, re.M)
    assert all("0d3BF921FB54442D19" in line for line in f64), f64
    assert re.findall(r"^\s*(?:add|mul|fma)[a-z.]*\.f32\b", ptx32, re.M)
