"""Functions for tests/test_cli.py to show.

It imports its sibling ``cli_helpers`` as a plain top-level module, which
works only when this file's folder is on ``sys.path`` (as ``python
cli_demo.py`` has it), and refuses to run as a script: ``s2s-ad show`` must
import it, not run its ``__main__`` block.
"""
import numpy as np
from cli_helpers import scale

import s2s_ad as ad

SCALE = 2.0


def loss(x):
    return np.sum(np.sin(x) * x)


def weighted(x, w):
    return np.sum(w * x * x)


def scaled_loss(x):
    return np.sum(scale(x) ** 2)


def through_unknown(x):
    y = x * 2.0
    z = np.spacing(y)  # <- unknown_call
    return np.sum(z)


jitted_loss = ad.jit(loss)


if __name__ == "__main__":
    raise SystemExit("cli_demo.py must be imported by s2s-ad show, not run")
