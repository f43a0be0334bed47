"""Shared by the CUDA test files (tests/test_cuda_*.py): whether kernels can
run here, and the fixture that lets kernels compile to PTX without a GPU."""
import types

import pytest

from s2s_ad.api.cuda import simulated


def gpu():
    """Whether a real GPU runs kernels here (not the simulator)."""
    if simulated():
        return False
    try:
        from numba import cuda
        return cuda.is_available()
    except Exception:            # noqa: BLE001
        return False


RUNS = simulated() or gpu()
runs = pytest.mark.skipif(not RUNS, reason="needs a GPU or NUMBA_ENABLE_CUDASIM=1 "
                          "(tests/test_cuda.py::test_under_simulator runs these)")
ptx_only = pytest.mark.skipif(simulated(), reason="the simulator has no PTX compiler")


@pytest.fixture
def nvvm(monkeypatch):
    """Compiling needs libNVVM (and, for numba-cuda 0.30, NVRTC): skip where a
    trivial kernel does not compile to PTX; without a GPU, device functions called
    from a kernel ask for the current device's compute capability: answer 8.0."""
    try:
        from numba.cuda.cudadrv import nvvm as nv
        nv.NVVM()
    except Exception as error:       # noqa: BLE001
        pytest.skip(f"no libNVVM: {error}")
    if not gpu():
        import numba.cuda.dispatcher as disp
        monkeypatch.setattr(disp, "get_current_device",
                            lambda: types.SimpleNamespace(compute_capability=(8, 0)))
    from s2s_ad.api.cuda import numba_cuda
    try:                         # numba-cuda 0.30 also needs NVRTC to compile
        numba_cuda().compile_ptx(_copy, "void(float64[:], float64[:])", cc=(8, 0))
    except Exception as error:       # noqa: BLE001
        pytest.skip(f"no PTX compiler: {type(error).__name__}: {str(error)[:200]}")


def _copy(x, y):
    y[0] = x[0]
