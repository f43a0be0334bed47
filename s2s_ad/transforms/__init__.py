"""Derivative and batching transforms (layer ``transforms``: reads everything below).

``forward`` (JVP functions, vector mode), ``reverse`` (VJP functions: primal
sweep, tapes, adjoint sweep), ``mixed`` (forward mode for scalar ``while``
loops inside reverse mode), ``scalarize`` (small static-length vectors as
scalars for Numba), ``widen`` (several cotangent rows per adjoint sweep),
``batch`` (vmap by batching rules), ``nested`` and ``nested_calls``
(``ad.grad(f)(x)`` and friends written inside a transformed function, as
forward-mode columns) and
``module`` (assembles the entry function, its callees and their VJPs).

Reverse mode, ``widen`` and ``module`` hand generated code to one another as
trees (lists of ``ast`` statements, see :mod:`s2s_ad.codegen.printer`): text
is made once, when ``module`` unparses the assembled module.

To add a pass: write it here (IR in, IR out where it can), then add it to
``s2s_ad.pipeline.PASSES``.
"""
