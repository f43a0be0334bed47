"""``python -m benchmarks``: the benchmark suite (see benchmarks/README.md)."""
import os
import sys

# Quiet thread pools before NumPy loads its BLAS: on 2-core machines spinning
# OpenMP/BLAS threads starve the code being timed (DESIGN.md, "Numba realities").
for _k, _v in (("OMP_WAIT_POLICY", "PASSIVE"), ("OMP_NUM_THREADS", "1"),
               ("OPENBLAS_NUM_THREADS", "1"), ("MKL_NUM_THREADS", "1")):
    os.environ.setdefault(_k, _v)

from .runner import main  # noqa: E402  (after the thread settings above)

sys.exit(main())
