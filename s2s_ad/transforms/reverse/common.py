"""Shared by the parts of reverse mode: which primitives return views, and small
helpers over statements and printed code.
"""
import ast
import textwrap

from ...analyses import ranks
from ...analyses.ranks import rank_of
from ...codegen import printer as codegen
from ...codegen.adjoints import call
from ...ir import (
    Call,
    For,
    Prim,
    Tup,
    While,
    blocks,
    walk,
)
from ...rules import RULES

#: Rules whose result may share memory with their first operand: those declared
#: ``view`` (np.reshape), indexing, and the identities (a join copy, stop_gradient).
VIEWS = frozenset({name for name, rule in RULES.items() if rule.view}
                  | {"getitem", "copy", "stop_gradient"})


def rooted(roots, names):
    """The arrays that ``names`` may look into (``roots``: see
    ``ReverseWriter._view_roots``; a name not in it is its own array)."""
    out = set()
    for n in names:
        out |= roots.get(n, {n})
    return out


def blocks_of(s):
    return [x for b in blocks(s) for x in b]


def _targets(s):
    if isinstance(s, Prim) and s.rule.mutates:
        return []
    return list(getattr(s, "targets", ()))


def grads_expr(fn, wrt_trees, adj):
    """``rt.like(bx, x)`` per differentiated leaf, in the parameters' structure."""
    def one(tree):
        if isinstance(tree, Tup):
            return ast.Tuple([one(t) for t in tree.items], ast.Load())
        b = adj.get(tree.name)
        if tree.name in fn.none_params:
            return ast.Constant(None)          # None holds no leaves: no gradient
        if b is None:
            return call("rt.zeros_like", codegen.name(tree.name))
        return call("rt.like", codegen.name(b), codegen.name(tree.name))
    return ast.Tuple([one(t) for t in wrt_trees], ast.Load())


def _scalar_code(fn, arg_ranks, seen=()):
    """Whether ``fn`` (and what it calls) is loop-free code on scalars only."""
    if fn.key in seen:
        return False
    known = ranks.infer(fn, list(arg_ranks))
    for s in walk(fn.body):
        if isinstance(s, (For, While)):
            return False
        if isinstance(s, (Prim, Call)) and any(known.get(t) != 0 for t in s.targets):
            return False
        if isinstance(s, Call) and not _scalar_code(
                s.callee, [rank_of(a, known) for a in s.args], seen + (fn.key,)):
            return False
    return True


def _read_first(lines):
    """Names that some path through the code ``lines`` reads before assigning."""
    def scan(stmts, assigned):
        out = set()
        for s in stmts:
            if isinstance(s, (ast.For, ast.While)):
                head = s.iter if isinstance(s, ast.For) else s.test
                out |= codegen.loads(head) - assigned
                target = [s.target] if isinstance(s, ast.For) else []
                out |= scan(s.body, set(assigned) | codegen.stored_names(target))
            elif isinstance(s, ast.If):
                out |= codegen.loads(s.test) - assigned
                out |= scan(s.body, set(assigned)) | scan(s.orelse, set(assigned))
            else:
                out |= codegen.loads(s) - assigned
                assigned |= codegen.stored_names([s])
        return out
    tree = ast.parse(textwrap.dedent("\n".join(lines)))
    return scan(tree.body, set())


def _rebuild_tuple(node, names):
    """``node`` (a tuple expression, nested) with each leaf replaced by the next name."""
    if isinstance(node, ast.Tuple):
        return ast.Tuple([_rebuild_tuple(e, names) for e in node.elts], ast.Load())
    return codegen.name(next(names))


def _flat(exprs):
    out = []
    for e in exprs:
        out.extend(_flat(e.elts) if isinstance(e, ast.Tuple) else [e])
    return out
