"""Launch configuration of the CUDA target (s2s_ad/api/cuda_launch.py): the
occupancy arithmetic on a described device (no GPU needed), and the choice
and its override on a kernel (under the simulator, from tests/test_cuda.py)."""
import types

import numpy as np
import pytest

import s2s_ad as ad
from s2s_ad.api import cuda_launch
from s2s_ad.api.cuda import simulated
from s2s_ad.api.cuda_launch import block_size, choose, occupancy

#: An H100-like multiprocessor.
H100 = types.SimpleNamespace(WARP_SIZE=32, MAX_THREADS_PER_BLOCK=1024,
                             MAX_THREADS_PER_MULTI_PROCESSOR=2048,
                             MAX_REGISTERS_PER_MULTIPROCESSOR=65536,
                             MAX_REGISTERS_PER_BLOCK=65536,
                             MAX_SHARED_MEMORY_PER_MULTIPROCESSOR=233472,
                             MAX_SHARED_MEMORY_PER_BLOCK=49152, MULTIPROCESSOR_COUNT=132)


def test_occupancy_by_hand():
    # 32 registers: 64 threads fill the 32 block slots x 2 warps = all 64 warps
    assert occupancy(64, 32, 0, H100) == 1.0
    assert occupancy(32, 32, 0, H100) == 0.5           # block slots run out first
    # 128 registers = 4096 per warp: 16 warps fit the register file, whatever the block
    assert occupancy(64, 128, 0, H100) == occupancy(512, 128, 0, H100) == 0.25
    assert occupancy(1024, 128, 0, H100) == 0.0       # 131072 registers > one block's
    # 255 registers round up to 8192 per warp: at most 8 warps in a block
    assert occupancy(256, 255, 0, H100) == 0.125 and occupancy(288, 255, 0, H100) == 0.0
    assert occupancy(2048, 16, 0, H100) == 0.0        # more threads than a block may have
    assert occupancy(128, 32, 60000, H100) == 0.0     # more shared memory than a block may have


def test_block_size_follows_registers_and_shared_memory():
    assert block_size(32, 0, H100) == 64               # full occupancy from 64 threads on
    assert block_size(255, 0, H100) == 64              # every size ties: the smallest >= 64
    # 48 KB of shared memory per block: 4 blocks per multiprocessor, so blocks of 512
    assert block_size(32, 49152, H100) == 512
    assert block_size(32, 60000, H100) is None         # nothing can launch it


class _Kernel:
    def __init__(self, regs, shared, limit=None):
        self.regs, self.shared, self.limit, self.args = regs, shared, limit, None

    def specialize(self, *args):
        self.args = args
        special = types.SimpleNamespace(get_regs_per_thread=lambda: self.regs,
                                        get_shared_mem_per_block=lambda: self.shared)
        if self.limit is not None:
            special.get_max_threads_per_block = lambda: self.limit
        return special


def test_choose_from_the_kernels_own_use_and_fallback():
    kernel = _Kernel(32, 49152)
    special, threads = choose(kernel, (1, 2), H100)
    assert threads == 512 and kernel.args == (1, 2) and special.get_regs_per_thread() == 32
    simulated_kernel = types.SimpleNamespace(specialize=lambda *a: simulated_kernel)
    assert choose(simulated_kernel, (), None) == (simulated_kernel, cuda_launch.FALLBACK)


def test_the_block_stays_within_the_drivers_limit_for_the_kernel():
    # Seen on an H200: kernels of 84-88 registers per thread; by the occupancy
    # arithmetic their best block is 736 threads, the driver's limit is 640 and
    # a launch of 736 failed (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES).
    assert block_size(86, 0, H100) == 736
    assert block_size(86, 0, H100, limit=640) == 32      # 23 blocks of a warp per SM
    for regs in (84, 86, 88):
        _, threads = choose(_Kernel(regs, 0, limit=640), (), H100)
        assert threads <= 640 and threads % 32 == 0
    _, threads = choose(_Kernel(40, 0, limit=1024), (), H100)
    assert threads == block_size(40, 0, H100)              # a limit that does not bind
    # nothing launchable by the arithmetic: the fallback, within the driver's limit
    _, threads = choose(_Kernel(32, 60000, limit=96), (), H100)
    assert threads == 96


@pytest.mark.skipif(not simulated(), reason="runs under the simulator "
                    "(tests/test_cuda.py::test_under_simulator)")
def test_threads_per_block_is_chosen_or_overridden():
    from programs.cuda_seeds import td_loss
    rng = np.random.default_rng(0)
    args = (rng.random(3), rng.random((4, 3)), rng.random(4), rng.random((4, 3)))
    f = ad.jit(ad.vmap(ad.grad(td_loss), in_axes=(None, 0, 0, 0)), target="cuda")
    want = f(*args)
    assert f.threads_per_block is None
    assert [k.block for k in f._kernels.values()] == [cuda_launch.FALLBACK]
    g = ad.jit(ad.vmap(ad.grad(td_loss), in_axes=(None, 0, 0, 0)), target="cuda")
    g.threads_per_block = 64
    np.testing.assert_array_equal(g(*args), want)
    assert [k.block for k in g._kernels.values()] == [64]
