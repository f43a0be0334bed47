"""reverse: lowered function -> VJP source (primal sweep + adjoint sweep).

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
* ``common`` -- shared constants and helpers;
* ``entries`` -- what module assembly (``transforms.module``) calls.
"""
from .common import VIEWS
from .entries import entry_source, helper_joint_source, helper_vjp_source, rows_source
from .peepholes import _increments
from .writer import ReverseWriter

__all__ = ["ReverseWriter", "VIEWS", "entry_source", "helper_joint_source",
           "helper_vjp_source", "rows_source", "_increments"]
