"""float32 end to end on the CUDA target: float32 inputs give float32
arithmetic (constants cast, s2s_ad/api/cuda_float32.py), float32 tapes and
per-thread arrays, and float32 results, equal to the CPU path to float32
precision.  Runs under the simulator from tests/test_cuda.py; the PTX test
checks that no float64 instruction is left (the simulator computes in NumPy
and cannot show it)."""
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import s2s_ad as ad

sys.path.insert(0, str(Path(__file__).parent))
from cuda_support import nvvm, ptx_only, runs  # noqa: E402,F401
from programs.cuda_nested import hvp_inside  # noqa: E402
from programs.cuda_seeds import mlp_loss, ode_loss, ode_until, td_loss  # noqa: E402

rng = np.random.default_rng(5)
B = 4
f32 = np.float32


def _cases():
    theta, state0 = 1 + 0.1 * rng.random((B, 4)), 1 + 0.2 * rng.random((B, 2))
    return {
        "td0": (ad.grad(td_loss), (None, 0, 0, 0),
                (rng.random(3), rng.random((B, 3)), rng.random(B), rng.random((B, 3)))),
        "rk4": (ad.grad(ode_loss, argnums=(0, 1)), (0, 0, None, None), (theta, state0, 0.05, 12)),
        "mlp": (ad.grad(mlp_loss, argnums=(0, 1, 2)), (None,) * 4 + (0, 0),
                (rng.random(6), rng.random(3), rng.random(3), 0.3, rng.random((B, 2)),
                 rng.random(B))),
        "hvp": (hvp_inside, (0, 0, None), (rng.random((B, 3)), rng.random((B, 3)), 0.7)),
        "while": (ad.grad(ode_until), (0, 0, None, 0),
                  (theta, state0, 0.05, np.linspace(0.1, 0.4, B))),
    }


CASES = _cases()


def _single(args):
    return tuple(x.astype(f32) if isinstance(x, np.ndarray) else
                 f32(x) if isinstance(x, float) else x for x in args)


@runs
@pytest.mark.parametrize("case", sorted(CASES))
def test_float32_results_equal_the_cpu_path(case):
    fun, axes, args = CASES[case]
    single = _single(args)
    gpu = ad.jit(ad.vmap(fun, in_axes=axes), target="cuda")
    got = gpu(*single)
    want = ad.vmap(fun, in_axes=axes)(*args)          # the NumPy backend, in float64
    for a, b in zip(*(ad.pytree.flatten(v)[0] for v in (got, want))):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)
    kernel, = gpu._kernels.values()
    if case in ("rk4", "mlp", "td0", "hvp"):
        assert kernel.tape_dtype == np.float32
    else:           # the while loop's stacks keep integers: a float64 tape
        assert kernel.tape_dtype == np.float64
    if case == "hvp":
        assert "cuda.local.array((1, 3), np.float32)" in kernel.text


@ptx_only
@pytest.mark.usefixtures("nvvm")
def test_float32_kernels_have_no_float64_instructions():
    for case in ("td0", "rk4", "mlp", "rk4 with a Python float step"):
        fun, axes, args = CASES[case.split()[0]]
        args = _single(args)
        if case.endswith("step"):          # float32 arrays, the step size a Python float
            args = args[:2] + (0.05,) + args[3:]
        ptx = ad.jit(ad.vmap(fun, in_axes=axes), target="cuda").compile_ptx(*args)
        assert ".f32" in ptx and not re.findall(r"^\s*[a-z.]+\.f64\b", ptx, re.M), case
