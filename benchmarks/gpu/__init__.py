"""GPU benchmarks of the CUDA target: ``python -m benchmarks.gpu.run`` (see run.py)."""
