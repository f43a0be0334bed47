"""The launch configuration of a CUDA kernel: threads per block from its
register and shared-memory use and the device's limits (occupancy).

A multiprocessor runs as many blocks at once as its registers, shared
memory, thread slots and block slots allow; the fraction of its warp slots
they fill is the *occupancy*.  The per-example kernels of ``target="cuda"``
are latency-bound scalar code (one example per thread, loads and
transcendental functions in long dependent chains), so they run faster the
more warps a multiprocessor can switch between: :func:`block_size` takes,
among the multiples of the warp size up to the device's limit, the one
with the highest occupancy for the kernel's registers per thread, and
among equals the smallest of at least :data:`PREFERRED_MIN` threads
(smaller blocks leave fewer idle threads at the end of a batch and let
registers be allocated in finer steps).

Under Numba's CUDA simulator (which has no registers) and wherever the
kernel or the device does not say, the block is :data:`FALLBACK` threads.
``threads_per_block=`` (an option of ``ad.jit`` or an attribute of the
compiled function) overrides the choice.
"""

#: Threads per block when the occupancy cannot be computed.
FALLBACK = 128
#: The smallest block taken when several sizes reach the same occupancy.
PREFERRED_MIN = 64
#: Registers are allocated to a warp in units of this many (all current GPUs).
REGISTER_UNIT = 256
#: Block slots per multiprocessor when the device does not report them.
BLOCKS_PER_SM = 32


def _attr(device, name, default=None):
    try:
        return int(getattr(device, name))
    except Exception:                     # noqa: BLE001  (absent or not readable)
        return default


def occupancy(threads, regs, shared, device):
    """The fraction of a multiprocessor's warp slots that blocks of ``threads``
    threads using ``regs`` registers per thread and ``shared`` bytes of shared
    memory per block fill (0 when such a block cannot be launched)."""
    warp = _attr(device, "WARP_SIZE", 32)
    sm_threads = _attr(device, "MAX_THREADS_PER_MULTI_PROCESSOR", 2048)
    sm_regs = _attr(device, "MAX_REGISTERS_PER_MULTIPROCESSOR", 65536)
    block_regs = _attr(device, "MAX_REGISTERS_PER_BLOCK", 65536)
    sm_shared = _attr(device, "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR", 0)
    block_shared = _attr(device, "MAX_SHARED_MEMORY_PER_BLOCK", 49152)
    warps = -(-threads // warp)
    per_warp = -(-max(regs, 1) * warp // REGISTER_UNIT) * REGISTER_UNIT
    if threads > _attr(device, "MAX_THREADS_PER_BLOCK", 1024) or \
            warps * per_warp > block_regs or shared > block_shared:
        return 0.0
    blocks = min(_attr(device, "MAX_BLOCKS_PER_MULTIPROCESSOR", BLOCKS_PER_SM),
                 sm_threads // (warps * warp), sm_regs // (warps * per_warp))
    if shared and sm_shared:
        blocks = min(blocks, sm_shared // shared)
    return blocks * warps * warp / sm_threads


def block_size(regs, shared, device, limit=None):
    """Threads per block for a kernel of ``regs`` registers per thread and
    ``shared`` bytes of static shared memory per block (see the module
    docstring), at most ``limit`` (the driver's largest block for the kernel,
    where known); None when no block size can launch it."""
    warp = _attr(device, "WARP_SIZE", 32)
    largest = _attr(device, "MAX_THREADS_PER_BLOCK", 1024)
    if limit is not None:
        largest = min(largest, limit)
    sizes = range(warp, largest + 1, warp)
    rated = [(occupancy(t, regs, shared, device), t) for t in sizes]
    best = max(o for o, _ in rated)
    if best == 0.0:
        return None
    ties = [t for o, t in rated if o == best]
    return next((t for t in ties if t >= PREFERRED_MIN), ties[-1])


def choose(kernel, args, device):
    """(the kernel specialised for ``args``, threads per block): from its
    register and shared-memory use on ``device`` where Numba reports them,
    else (the kernel, :data:`FALLBACK`).

    The block never exceeds the driver's largest block for the kernel
    (``CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK``, "beyond which a launch of the
    function would fail"): the arithmetic above is the occupancy calculator's,
    but the driver reserves more.  On an H200, kernels of 84-88 registers per
    thread reach their best occupancy by that arithmetic with blocks of 736
    threads; the driver's limit for them is 640, and blocks of 736 failed with
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES."""
    try:
        special = kernel.specialize(*args)
        regs = int(special.get_regs_per_thread())
        shared = int(special.get_shared_mem_per_block())
    except (AttributeError, NotImplementedError, TypeError):
        return kernel, FALLBACK            # the simulator, or an older Numba
    try:
        limit = int(special.get_max_threads_per_block())
    except (AttributeError, NotImplementedError, TypeError):
        limit = None                       # a numba-cuda that does not report it
    threads = block_size(regs, shared, device, limit)
    if threads is None:
        threads = FALLBACK if limit is None else min(FALLBACK, limit)
    return special, threads
