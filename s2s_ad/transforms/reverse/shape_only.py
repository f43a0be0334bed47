"""Values the adjoint sweep reads for their shape alone.

Two consequences, both general (issue 22, ``docs/array_loops.md``):

* **A shape comes from a value that is live anyway.**  The adjoint of a
  slice write ``B[1:-1] = t`` un-broadcasts its cotangent to ``t``'s shape,
  so inside a loop ``t`` (a new array per iteration) would be pushed on a
  stack for its shape alone.  When a view in the same block has ``t``'s
  shape class (``A[:-2]``, which ``t = c * (A[:-2] + A[1:-1] + A[2:])``
  is shaped like; see ``analyses.ranks.shape_classes``), the adjoint reads
  the view instead, which the reversed loop re-slices rather than stores.
* **A restore nobody reads is not made.**  An element or slice write saves
  what it overwrites so that the adjoint sweep can put it back before an
  adjoint reads the array; an adjoint that reads the array (or its views)
  only for shapes (``rt.unbroadcast(g, A[:-2])``, ``rt.sum_grad(g, A)``),
  or reads it only before the restore runs, needs no save and no restore.
  :func:`value_reads` says which names printed adjoint code reads for
  their values.
"""
import ast

from ...ir import Prim, all_blocks
from ...rules import RULES
from .common import rooted

#: Calls whose argument at these positions is read for its shape (and dtype)
#: only: the adjoint helpers below, and the primitives declared ``metadata``
#: (np.zeros_like, np.shape...), by their names and the names they print as.
SHAPE_ARGS = {"rt.unbroadcast": (1,), "rt.sum_grad": (1,), "rt.mean_grad": (1,),
              "rt.sum_grad_kept": (1,), "rt.mean_grad_kept": (1,), "rt.like": (1,),
              "rt.zeros_like": (0,),
              **{name: (0,) for rule in RULES.values() if rule.metadata
                 for name in (rule.name, rule.emit)}}

#: Attributes that read an array's metadata, not its elements.
SHAPE_ATTRS = {"shape", "ndim", "dtype", "size"}


def shape_sources(fn, classes, is_view):
    """Value name -> a view of the same shape class defined in the same block.

    A view's block pops or recomputes it wherever the value itself would be
    available, so the adjoint may read it for the value's shape.  Views and
    values of no known class are left out.
    """
    out = {}
    for body in all_blocks(fn.body):
        views = {}
        for s in body:
            if is_view(s) and classes.get(s.targets[0]) is not None:
                views.setdefault(classes[s.targets[0]], s.targets[0])
        for s in body:
            if isinstance(s, Prim) and not s.rule.mutates and len(s.targets) == 1 \
                    and not is_view(s):
                view = views.get(classes.get(s.targets[0]))
                if view is not None:
                    out[s.targets[0]] = view
    return out


def value_reads(nodes, view_bases):
    """Names the printed statements ``nodes`` read for their values.

    Shape-only arguments (:data:`SHAPE_ARGS`, :data:`SHAPE_ATTRS`) are not
    value reads, nor is the array a recomputed view re-slices
    (``v = a[1:-1]``, with ``view_bases[v] == a``): reading ``v`` later
    counts for ``a``.
    """
    out = set()

    def visit(node):
        if isinstance(node, ast.Name):
            if not isinstance(node.ctx, ast.Store):
                out.add(node.id)
            return
        if isinstance(node, ast.Attribute) and node.attr in SHAPE_ATTRS and \
                isinstance(node.value, ast.Name):
            return
        if isinstance(node, ast.Call):
            skip = SHAPE_ARGS.get(_dotted(node.func), ())
            visit(node.func)
            for k, arg in enumerate(node.args):
                if not (k in skip and isinstance(arg, ast.Name)):
                    visit(arg)
            for kw in node.keywords:
                visit(kw.value)
            return
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Subscript) \
                and isinstance(node.value.value, ast.Name) and \
                view_bases.get(node.targets[0].id) == node.value.value.id:
            visit(node.value.slice)
            return
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
        for child in ast.iter_child_nodes(node):
            visit(child)

    for node in nodes:
        visit(node)
    return out


def _dotted(func):
    return ast.unparse(func) if isinstance(func, (ast.Name, ast.Attribute)) else None


def adjoint_reads(emitted, roots, view_bases, unplaced):
    """Arrays read for their values where each primal statement's adjoint runs.

    ``emitted``: id(primal statement) -> the nodes printed while writing its
    adjoint (a compound statement's own nodes: its pops, recomputations and
    set-ups, not its statements'); ``unplaced``: nodes printed outside any
    statement (the seeds, the returned expression).  Returns (id -> set of
    root arrays, set of root arrays read where no statement places them).
    """
    root = lambda names: rooted(roots, names)      # noqa: E731
    placed = {k: root(value_reads(nodes, view_bases)) for k, nodes in emitted.items()}
    return placed, root(value_reads(unplaced, view_bases))


def primal_reads(nodes, recomputed, view_bases, roots, reads_all):
    """(values, shapes): the primal names the adjoint sweep ``nodes`` reads
    for their values, and those among ``reads_all`` (everything it reads) it
    reads for their shapes alone; see ``analyses.shape_live``.  A recomputed
    view read for its values makes the array it looks into a value read."""
    read = value_reads(nodes, view_bases)
    values = (read - recomputed) | rooted(roots, {n for n in read & recomputed if n in roots})
    return values, set(reads_all) - values
