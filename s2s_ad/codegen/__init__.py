"""Printing lowered code as Python (layer ``codegen``: reads ``ir``, ``rules``, ``analyses``).

``printer`` writes a lowered :class:`~s2s_ad.ir.Function` as Python source
(each primitive through its rule's ``emit``), with hooks the reverse sweep
uses to push and pop values; ``adjoints`` instantiates a rule's VJP/JVP
templates with the names of one statement and simplifies them.

Generated code is handed between passes as a tree: a list of ``ast``
statements, comments as :func:`printer.comment` statements.  Reverse mode
builds its functions with ``printer.Writer`` (line by line, parsed once into
a tree when a function is finished, :meth:`printer.Writer.tree`), ``widen``
rewrites an adjoint sweep's tree, and module assembly turns the trees into
text once with :func:`printer.unparse`.  The transforms build generated code
with these helpers, which is why this layer sits below them.
"""
