"""``S2S_AD_DUMP_AFTER``: print the code after the named passes, to stderr.

Set it to a comma-separated list of pass names (or ``all``): ``parse``,
``normalize``, ``scalarize``, ``batch`` (each vmap layer), ``forward``,
``mixed``, ``reverse``, ``widen`` (each widened adjoint sweep), ``generate``
-- see :data:`s2s_ad.pipeline.PASSES`.  Every pass reports through
:func:`after`, so a pass deep inside another (batching inside the forward
layers, widening inside reverse mode) is dumped under its own name.
"""
import os
import sys


def wanted(name):
    """Whether the code after pass ``name`` is to be printed."""
    names = {p.strip() for p in os.environ.get("S2S_AD_DUMP_AFTER", "").split(",")}
    return name in names or "all" in names


def after(name, text):
    """Print ``text`` -- a string, or a function computing it, called only when
    asked for -- as the code after pass ``name``."""
    if wanted(name):
        text = text() if callable(text) else text
        if text:
            print(f"# ---- s2s_ad: after {name} ----\n{text}", file=sys.stderr)
