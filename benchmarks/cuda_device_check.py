"""One command for a machine with a GPU, from the repository root:

    python benchmarks/cuda_device_check.py [--json OUT] [--md OUT] [--dry-run]

The same as ``python -m benchmarks.gpu.run`` (see benchmarks/gpu/run.py):
installs what the machine lacks from ``wheels/``, runs the CUDA tests on
the GPU, and times the issue's workloads against JAX, torch.func and a
hand-written numba.cuda kernel, results checked equal first.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.gpu.run import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
