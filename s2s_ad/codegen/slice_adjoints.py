"""Adjoints of slice reads: a product's adjoint added straight into the slice.

For ``v = a[i + 1:, i]`` (a basic index, so ``v`` is a view) whose only
contribution is a product's adjoint, the reverse sweep printed

    bv = rt.dot_grad_a(g, v, w)
    ba[i + 1:, i] += bv

a temporary vector per loop iteration; :func:`fold_into_slice` prints
``rt.add_dot_grad_a(ba[i + 1:, i], g, v, w)`` instead, which adds into the
view in place (a loop under Numba, see ``runtime/accumulate.py``).
"""
import ast
import re

from . import printer as codegen

#: Product adjoints with a twin that adds into its first argument in place.
INTO = {"rt.dot_grad_a": "rt.add_dot_grad_a", "rt.dot_grad_b": "rt.add_dot_grad_b",
        "rt.matmul_grad_a": "rt.add_matmul_grad_a", "rt.matmul_grad_b": "rt.add_matmul_grad_b"}


def fold_into_slice(w, target, adj, sharing=set):
    """Print ``target += adj`` as the in-place twin of the product that made
    ``adj``, and drop that product's line; False (nothing printed) unless

    - the latest statement of writer ``w`` assigning ``adj`` is ``adj =
      rt.<product grad>(...)`` on one line, with no later line reading or
      writing ``adj``, and
    - no later line writes a name the product reads, or an element of an
      array one of them may share memory with (``sharing(names)``: those
      names and their views and aliases): its operands are the same values
      when it runs later, at ``target``'s update.  The sweep restores
      overwritten elements of primal arrays in between (``v2[i] =
      v2_saved[top]``), and an operand may be a join copy of ``v2``.

    ``target`` must be a view (a basic index of an owned adjoint array).
    """
    for k in range(len(w.nodes) - 1, -1, -1):
        node = w.nodes[k]
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == [adj]:
            break
    else:
        return False
    value = node.value
    twin = INTO.get(ast.unparse(value.func)) if isinstance(value, ast.Call) else None
    if twin is None or value.keywords:
        return False
    text = "    " * w.indent + ast.unparse(node)
    if "\n" in text or text not in w.lines:
        return False
    at = len(w.lines) - 1 - w.lines[::-1].index(text)
    reads = sharing({n.id for a in value.args for n in ast.walk(a) if isinstance(n, ast.Name)})
    mentions = re.compile(r"\b%s\b" % re.escape(adj))
    stores = re.compile(r"^\s*(%s)\b[^=]*?(=|\+=|-=|\*=|/=)" % "|".join(map(re.escape, reads)))
    for line in w.lines[at + 1:]:
        if line.lstrip().startswith("#"):
            continue
        if mentions.search(line) or (reads and stores.match(line)):
            return False
    del w.lines[at]
    del w.nodes[k]
    w.node(ast.Expr(ast.Call(codegen.name(twin), [target] + value.args, [])))
    return True
