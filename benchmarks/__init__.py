"""s2s_ad's benchmark suite: one module per workload, one runner.

``python -m benchmarks [--quick] [--only NAME] [--json OUT] [--plot OUT.png]``;
see README.md in this folder.
"""
