"""Printing lowered code as Python (layer ``codegen``: reads ``ir``, ``rules``, ``analyses``).

``printer`` writes a lowered :class:`~s2s_ad.ir.Function` as Python source
(each primitive through its rule's ``emit``), with hooks the reverse sweep
uses to push and pop values; ``adjoints`` instantiates a rule's VJP/JVP
templates with the names of one statement and simplifies them.

The transforms write their output through these (reverse mode and widening
still hand Python source, not IR, to module assembly: see issue 16's note in
the README's Architecture section).
"""
