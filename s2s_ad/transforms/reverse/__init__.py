"""reverse: lowered function -> VJP functions (primal sweep + adjoint sweep), as a tree.

Receives a lowered :class:`~s2s_ad.ir.Function`, which of its parameters to
differentiate and which output leaves are seeded.  Writes one function that
runs the primal statements the adjoint needs (dead code is dropped), then the
adjoint of every active statement in reverse order, each from its rule's
template.  Adjoints are named after their primal (``x`` -> ``bx``); the first
contribution binds the name, later ones add to it; adjoints of broadcasting
operands are un-broadcast to the operand's shape by the rule; reading
``x[i]`` accumulates into ``bx[i]`` in place.  Gradients are returned with
their parameter's type and dtype (``rt.like``).

Calls to user functions become calls to their own VJP function, generated
once per (function, active inputs, active outputs) in the same module.

One :class:`~s2s_ad.transforms.reverse.writer.ReverseWriter` per (function,
differentiated inputs, seeded outputs), written in parts:

* ``writer`` -- the class: activity and ranks, the two sweeps, what the
  primal sweep keeps;
* ``functions`` -- the printed VJP functions (whole, by rows, split in a
  forward/backward pair);
* ``statements`` -- adjoints of primitives, element writes, calls, branches;
* ``loops`` -- adjoints of loops: reversed bodies, recomputation;
* ``stacks`` -- the tapes the primal sweep pushes on inside loops;
* ``peepholes`` -- adjoints cheaper than the rule's template;
* ``shape_only`` -- values adjoints read for their shape alone: shapes from
  views, saves only where an adjoint reads the values;
* ``common`` -- shared constants and helpers;
* ``entries`` -- what module assembly (``transforms.module``) calls.

The functions are printed line by line through ``codegen.printer.Writer`` and
handed on as trees (lists of ``ast`` statements, parsed once when a function
is finished; see :mod:`s2s_ad.codegen.printer`): ``widen`` and module
assembly never parse text.
"""
from .common import VIEWS
from .entries import (
    entry_source,
    gradient_source,
    helper_joint_source,
    helper_vjp_source,
    rows_source,
)
from .peepholes import _increments
from .writer import ReverseWriter

__all__ = ["ReverseWriter", "VIEWS", "entry_source", "gradient_source", "helper_joint_source",
           "helper_vjp_source", "rows_source", "_increments"]
