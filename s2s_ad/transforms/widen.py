"""Vector-mode adjoint sweeps: one sweep that carries K cotangents at once.

``widen(body, seeds, width, names, pure)`` takes an adjoint sweep as a tree
(a list of ``ast`` statements, comments as :func:`s2s_ad.codegen.printer.comment`
statements; one cotangent per output, seeded by the names ``seeds``) and
returns the tree of a sweep for ``width`` cotangents.  A name is *dependent* when its value
depends on a seed: assigned from a dependent value, or written into
(``b[i] += v``, ``rt.index_add(b, i, v)``) with one.  Every statement that
mentions a dependent name is repeated once per cotangent, with each
dependent name renamed for that cotangent (``bx`` -> ``bx_0``, ``bx_1``,
...); everything else -- stack pops, recomputed primal values, loop and
branch headers -- runs once.  That is the point: the adjoint's control flow
and the primal values it reads are shared by the K cotangents, as one
``jax.vmap`` of a VJP shares them.

Returns None when the sweep cannot be shared: a loop or branch whose
header reads a dependent name, or a repeated statement with a side effect
on shared state (a stack pop or push, a call of a generated function that
is not a pure joint VJP, a runtime call that writes into a shared array).

Arrays whose elements the loops read and write (``bx[i] += ...``) get
*lanes*: the K copies become views ``bx_lanes[..., q]`` of one array with
the K cotangents side by side in memory, and the loops index that array
(``bx_lanes[i, q]`` for an element, ``bx_lanes[i, ..., q]`` for a row).
The K repeated statements of a loop body then load and store neighbouring
elements, which LLVM's SLP vectorizer turns into SIMD instructions across
the cotangents (see :func:`uses_lanes`).

A linear chain of statements in a loop body becomes its partials, computed
once, and one multiply-add per row and output: :mod:`.widen_partials`.
"""
import ast
import copy

from .. import rules
from ..codegen import printer as codegen
from ..codegen.adjoints import Subst
from ..codegen.slice_adjoints import INTO
from ..ir import dump
from ..rules.internal import INTERNAL
from .widen_partials import _Partials, _PerRow, _scalar_index, _simple

#: Runtime calls that write into their first argument (the product adjoints
#: that add into a slice in place, ``rt.add_matmul_grad_b(bK[b], ...)``, too).
_WRITES_FIRST = {"rt.index_add", "rt.copy_into", "rt.set_row", "rt.add_minmax_grad",
                 "rt.add_into"} | set(INTO.values())
_PURE_MODULES = ("rt.", "np.", "math.")
_BUILTINS = {"float", "int", "bool", "len", "range", "abs", "min", "max"}
#: Calls that return a new array (element writes into it stay inside a function):
#: the rules declared ``fresh``, and the stacks' copies.
_FRESH = {r.emit for r in list(rules.RULES.values()) + list(INTERNAL.values()) if r.fresh} | {
    "rt.snapshot", "rt.float_stack"}


def _makes_array(value):
    """Whether the expression ``value`` makes a new array (when it is one):
    arithmetic, a call in :data:`_FRESH`, or a ``.copy()`` (of an array or a
    stack)."""
    return isinstance(value, (ast.BinOp, ast.UnaryOp)) or (
        isinstance(value, ast.Call) and (ast.unparse(value.func) in _FRESH
                                         or _is_copy(value)))


def _is_copy(call):
    return isinstance(call.func, ast.Attribute) and call.func.attr == "copy" and not call.args


def widen(body, seeds, width, names, pure, ranks=None, after=()):
    """The sweep ``body`` (ast statements, rewritten in place) for ``width``
    cotangents, as ast statements, and per cotangent the names its copies use
    (dependent name -> its copy), or None when the sweep cannot be widened.

    ``names`` allocates the new names; ``pure(fname)`` says whether a call of
    generated function ``fname`` may be repeated (see :func:`pure_function`);
    ``ranks`` (name -> rank, where known) says which dependent names hold
    arrays and which indices are scalars, for the lanes (see :func:`_lanes`);
    ``after`` holds the names read after the sweep.
    """
    dependent = _dependent(body, set(seeds))
    if not _bound_first(body, dependent - set(seeds)):
        return None
    families = {n: names.family(n, width) for n in sorted(dependent)}
    per_row = [{n: family[q] for n, family in families.items()} for q in range(width)]
    partials = _Partials(body, dependent, per_row, names, ranks or {}, set(after))
    try:
        body = _rewrite(body, dependent, per_row, pure, partials)
    except _Shared:
        return None
    body = _lanes(body, families, ranks or {}, names, set(after))
    dump.after("widen", lambda: codegen.unparse(body))
    return body, per_row


class _Shared(Exception):
    """A statement that must run once would have to be repeated."""


def _dependent(body, seeds):
    out = set(seeds)
    changed = True
    while changed:
        changed = False
        for s in _simple(body):
            if codegen.loads(s) & out:
                new = _written(s) - out
                if new:
                    out |= new
                    changed = True
    return out


def _bound_first(body, names):
    """Whether each of ``names`` is first mentioned (in the order of the code)
    by an assignment to it: a name from outside the sweep cannot be given
    one copy per cotangent."""
    seen = set()
    for s in _simple(body):
        bound = _roots(s.targets) if isinstance(s, ast.Assign) and all(
            isinstance(t, (ast.Name, ast.Tuple)) for t in s.targets) else set()
        for n in (codegen.names_in(s) & names) - seen:
            if n not in bound or n in codegen.loads(s):
                return False
            seen.add(n)
    return True


def _rewrite(body, dependent, per_row, pure, partials=None, loop=False):
    if loop and partials is not None:
        body = partials.block(body)
    out = []
    for s in body:
        if isinstance(s, (ast.For, ast.While, ast.If)):
            head = s.iter if isinstance(s, ast.For) else s.test
            if codegen.loads(head) & dependent:
                raise _Shared
            inner = not isinstance(s, ast.If)
            s.body = _rewrite(s.body, dependent, per_row, pure, partials, loop or inner)
            s.orelse = _rewrite(s.orelse, dependent, per_row, pure, partials, loop)
            out.append(s)
        elif isinstance(s, _PerRow):
            out.extend(renamed(s.node, mapping) for mapping in per_row)
        elif codegen.names_in(s) & dependent:
            _check_repeatable(s, dependent, pure)
            out.extend(renamed(s, mapping) for mapping in per_row)
        else:
            out.append(s)
    return out


def uses_lanes(source):
    """Whether generated ``source`` has lanes (and so wants the SLP vectorizer)."""
    return "rt.lanes(" in source or "rt.zeros_lanes(" in source


def _lanes(body, families, ranks, names, after):
    """Give each eligible array family one lanes array (see the module doc).

    A family qualifies when its K copies are arrays (``ranks``), each bound
    once, at the sweep's top level, to a new array (:func:`_makes_array`),
    and every mention of a copy inside a loop is an element or slice read or
    write with scalar indices.  The copies are then
    views of the lanes array, so code outside the loops, aliases included,
    sees the same values as before (a view no code outside the loops reads,
    and no name in ``after``, is left out).
    """
    loops = [s for s in body if isinstance(s, (ast.For, ast.While))]
    for base, copies in families.items():
        if not ranks.get(base) or not loops:
            continue
        where = _single_bindings(body, copies)
        if where is None or not _lane_uses(loops, set(copies), ranks):
            continue
        lanes = names.fresh(f"{base}_lanes")
        values = [body[i].value for i in where]
        zeros = {ast.unparse(v) for v in values}
        if len(zeros) == 1 and ast.unparse(values[0].func) == "rt.zeros_like":
            made = [_statement(f"{lanes} = rt.zeros_lanes({ast.unparse(values[0].args[0])}, "
                               f"{len(copies)})")]
            keep = set()
        else:
            made = [_statement(f"{lanes} = rt.lanes(({', '.join(copies)},))")]
            keep = set(where)
        last = max(where)
        index = {c: q for q, c in enumerate(copies)}
        rest = body[last + 1:]
        for s in rest:
            if isinstance(s, (ast.For, ast.While)):
                _ToLanes(index, lanes, ranks.get(base)).visit(s)
        read = codegen.read_names(rest)
        made += [_statement(f"{c} = {lanes}[..., {q}]") for q, c in enumerate(copies)
                 if c in read or base in after]
        body = [s for i, s in enumerate(body[:last + 1]) if i not in where or i in keep] + \
            made + rest
    return body


def _statement(text):
    return ast.parse(text).body[0]


def _single_bindings(body, copies):
    """Positions in ``body`` of the one top-level binding of each copy to a new
    array, or None if a copy is bound otherwise or more than once."""
    where = []
    for c in copies:
        found = [i for i, s in enumerate(body) if isinstance(s, ast.Assign)
                 and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
                 and s.targets[0].id == c]
        if len(found) != 1:
            return None
        value = body[found[0]].value
        if not _makes_array(value):
            return None
        stores = [n for s in body for n in ast.walk(s)
                  if isinstance(n, ast.Name) and n.id == c and not isinstance(n.ctx, ast.Load)]
        if len(stores) != 1:
            return None
        where.append(found[0])
    return where


def _lane_uses(loops, copies, ranks):
    """Whether the loops mention ``copies`` (at least once) only as the array
    of a subscript with scalar indices."""
    subscripted, seen = set(), 0
    for loop in loops:
        for node in ast.walk(loop):
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
                    and node.value.id in copies:
                if not _scalar_index(node.slice, ranks):
                    return False
                subscripted.add(id(node.value))
            elif isinstance(node, ast.Name) and node.id in copies:
                seen += 1
    return bool(subscripted) and seen == len(subscripted)


class _ToLanes(ast.NodeTransformer):
    """``copy_q[idx]`` -> ``lanes[idx, ..., q]``, or ``lanes[idx, q]`` when ``idx``
    picks one element of a copy of rank ``rank``.

    The element form matters: NumPy's ``lanes[i, ..., q]`` is a 0-d *view*
    where ``copy_q[i]`` was a number, so ``g = lanes[i, ..., q]`` followed by
    ``lanes[i, ..., q] = 0.0`` would zero ``g`` too (Numba returns a number
    either way; the NumPy module runs first under tiered compilation)."""

    def __init__(self, index, lanes, rank):
        self.index, self.lanes, self.rank = index, lanes, rank

    def visit_Subscript(self, node):
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id in self.index:
            q = self.index[node.value.id]
            idx = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            element = len(idx) == self.rank and not any(isinstance(e, ast.Slice) for e in idx)
            node.value = ast.Name(self.lanes, ast.Load())
            rest = [ast.Constant(q)] if element else [ast.Constant(Ellipsis), ast.Constant(q)]
            node.slice = ast.Tuple(list(idx) + rest, ast.Load())
        return node


def _check_repeatable(s, dependent, pure):
    if not _confined(s, dependent, pure):
        raise _Shared


def _confined(s, mine, pure):
    """Whether statement ``s`` changes nothing but the names ``mine``: element
    writes, the runtime's in-place writers and method calls (``stack.pop()``)
    only on them, and calls only of builtins or of generated functions for
    which ``pure(fname)`` holds."""
    targets = s.targets if isinstance(s, ast.Assign) else \
        [s.target] if isinstance(s, (ast.AugAssign, ast.AnnAssign)) else []
    for t in targets:
        if isinstance(t, ast.Subscript) and not _roots([t]) <= mine:
            return False
    for node in ast.walk(s):
        if not isinstance(node, ast.Call):
            continue
        func = ast.unparse(node.func)
        if func in _WRITES_FIRST:      # into a name or a view of it (rt.add_into(bx[s], g))
            if not (node.args and isinstance(node.args[0], (ast.Name, ast.Subscript))
                    and _roots(node.args[:1]) <= mine):
                return False
        elif isinstance(node.func, ast.Attribute) and not func.startswith(_PURE_MODULES) \
                and not _is_copy(node):
            if not (isinstance(node.func.value, ast.Name) and node.func.value.id in mine):
                return False
        elif isinstance(node.func, ast.Name) and node.func.id not in _BUILTINS \
                and not pure(node.func.id):
            return False
    return True


def pure_function(node, pure):
    """Whether calling the generated function ``node`` (an ``ast.FunctionDef``)
    changes nothing outside it, so that a sweep may call it once per
    cotangent: every statement confined to the arrays it made itself, and
    ``pure`` holding for the generated functions it calls."""
    own = set()

    def confined(body):
        for s in body:
            if codegen.is_comment(s):
                continue
            if isinstance(s, (ast.For, ast.While, ast.If)):
                if not (confined(s.body) and confined(s.orelse)):
                    return False
                continue
            if not _confined(s, own, pure):
                return False
            if isinstance(s, ast.Assign):
                made = _makes_array(s.value)
                for t in s.targets:
                    if isinstance(t, ast.Name):
                        (own.add if made else own.discard)(t.id)
        return True
    return confined(node.body)


def _written(s):
    """Names whose value ``s`` changes: assignment targets, roots of element
    writes, the first argument of the runtime's in-place writers."""
    out = set()
    if isinstance(s, ast.Assign):
        out = _roots(s.targets)
    elif isinstance(s, (ast.AugAssign, ast.AnnAssign)):
        out = _roots([s.target])
    for call in ast.walk(s):
        if isinstance(call, ast.Call) and ast.unparse(call.func) in _WRITES_FIRST and \
                call.args and isinstance(call.args[0], (ast.Name, ast.Subscript)):
            out |= _roots(call.args[:1])
    return out


def _roots(targets):
    out = set()
    for t in targets:
        while isinstance(t, (ast.Subscript, ast.Attribute)):
            t = t.value
        if isinstance(t, ast.Name):
            out.add(t.id)
        elif isinstance(t, (ast.Tuple, ast.List)):
            out |= _roots(t.elts)
    return out


def renamed(node, mapping):
    """A copy of ``node`` with names renamed by ``mapping``."""
    return Subst({k: codegen.name(v) for k, v in mapping.items()}).visit(copy.deepcopy(node))
