"""``s2s-ad bench``: run the benchmark suite of a source checkout.

The suite (``benchmarks/`` beside this package in the repository) is not
installed with s2s_ad: it imports JAX, PyTorch and autograd when present and
is meant to be run from a checkout.  ``dispatch(argv)`` lets the command
line hand ``bench ...`` over without teaching its parser the suite's options.
"""
import sys
from pathlib import Path


def main(argv=None):
    """Run ``python -m benchmarks`` with ``argv``; returns its exit status."""
    # A source checkout: beside this package, or the folder the command runs in.
    roots = [Path(__file__).resolve().parents[1], Path.cwd()]
    root = next((r for r in roots if (r / "benchmarks" / "runner.py").is_file()), roots[0])
    if not (root / "benchmarks" / "runner.py").is_file():
        print("s2s-ad bench: the benchmark suite is not installed with s2s_ad; run it from a "
              "source checkout: python -m benchmarks --help", file=sys.stderr)
        return 1
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    from benchmarks.runner import main as run
    return run(argv, prog="s2s-ad bench")


def dispatch(argv=None):
    """The exit status of ``s2s-ad bench ...`` when ``argv`` is that, else None."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] != ["bench"]:
        return None
    return main(argv[1:])
