"""Vector-mode adjoint sweeps: one sweep that carries K cotangents at once.

``widen(lines, seeds, width, names, pure)`` takes the source of an adjoint sweep
(one cotangent per output, seeded by the names ``seeds``) and returns a
sweep for ``width`` cotangents.  A name is *dependent* when its value
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
"""
import ast
import copy
import textwrap

from .. import rules
from ..codegen import printer as codegen
from ..codegen.adjoints import Subst
from ..codegen.slice_adjoints import INTO
from ..ir import dump
from ..rules.internal import INTERNAL

_MARK = "__s2s_ad_comment__"
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


def widen(lines, seeds, width, names, pure, ranks=None, after=()):
    """The sweep ``lines`` for ``width`` cotangents, and per cotangent the names
    its copies use (dependent name -> its copy), or None when the sweep cannot
    be widened.

    ``names`` allocates the new names; ``pure(fname)`` says whether a call of
    generated function ``fname`` may be repeated (see :func:`pure_function`);
    ``ranks`` (name -> rank, where known) says which dependent names hold
    arrays and which indices are scalars, for the lanes (see :func:`_lanes`);
    ``after`` holds the names read after the sweep.
    """
    tree = ast.parse(_comments_to_marks(lines))
    dependent = _dependent(tree.body, set(seeds))
    if not _bound_first(tree.body, dependent - set(seeds)):
        return None
    families = {n: names.family(n, width) for n in sorted(dependent)}
    per_row = [{n: family[q] for n, family in families.items()} for q in range(width)]
    partials = _Partials(tree.body, dependent, per_row, names, ranks or {}, set(after))
    try:
        body = _rewrite(tree.body, dependent, per_row, pure, partials)
    except _Shared:
        return None
    body = _lanes(body, families, ranks or {}, names, set(after))
    _fill_emptied(body)
    module = ast.fix_missing_locations(ast.Module(body, []))
    lines = _marks_to_comments(ast.unparse(module)).splitlines()
    dump.after("widen", lambda: "\n".join(lines))
    return lines, per_row


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


class _PerRow(ast.stmt):
    """A statement :func:`_rewrite` repeats per row as it is (``node``)."""
    _fields = ("node",)


class _Partials:
    """Shared partials for straight-line adjoint code in loops.

    A sweep's statements that depend on the cotangent are linear in it: a
    run of them maps a few inputs (cotangents from before the run, elements
    of cotangent arrays) to a few outputs (increments of cotangent arrays,
    cotangents read after the run) by partial derivatives that do not depend
    on the row.  Where that is cheaper, the run is replaced by those partials,
    computed once (``bt12_d = _t13``, ``bz_d = bt12_d * _t11``, ...), and one
    statement per output and row (``bx_q[i] += bdens_q[c] * bt8_d``): for a
    loop body whose chain of ten statements maps one element to another,
    one multiply-add per row instead of ten statements.

    ``block(body)`` rewrites the runs of simple statements in ``body`` (a
    loop's body) where the rows' statements would cost more than the
    partials and the outputs; other runs are left to be repeated per row.
    """

    def __init__(self, body, dependent, per_row, names, ranks, after):
        self.dependent, self.names, self.ranks = dependent, names, ranks
        self.per_row = per_row
        self.width = len(per_row)
        self.mentions = {}      # dependent name -> ids of the statements mentioning it
        for s in _simple(body):
            for n in codegen.names_in(s) & dependent:
                self.mentions.setdefault(n, set()).add(id(s))
        self.after = after

    def block(self, body):
        out, run = [], []
        for s in body + [None]:
            if s is None or isinstance(s, (ast.For, ast.While, ast.If)):
                out.extend(self._run(run) if run else [])
                run = []
                if s is not None:
                    out.append(s)
            else:
                run.append(s)
        return out

    def _run(self, run):
        mine = [s for s in run if codegen.names_in(s) & self.dependent]
        if len(mine) < 2:
            return run
        try:
            shared, outputs = self._linear(run, {id(s) for s in mine})
        except _Nonlinear:
            return run
        ours = {id(s) for s in run}
        partials = sum(id(s) not in ours for s in shared)
        cost = sum(len(terms) for _, terms in outputs)
        if partials + self.width * cost >= self.width * len(mine):
            return run
        rows = [_PerRow(node=stmt) for stmt in self._outputs(outputs)]
        return shared + [_statement(f"{_MARK}('every row, through the partials above')")] + rows

    def _load(self, element):
        """Each row's element ``a[i]`` of a cotangent array, read into a name
        first: the rows' loads, then their writes, so that LLVM may pack each
        into vector instructions without proving the arrays apart."""
        base = self.names.fresh(f"{element.value.id}_el")
        for q, name in enumerate(self.names.family(base, self.width)):
            self.per_row[q][base] = name
        self.dependent.add(base)
        return base, ast.Assign([ast.Name(base, ast.Store())], element, lineno=0)

    def _linear(self, run, mine):
        """(the run with its cotangent statements replaced by their partials,
        the outputs: (target, [(input, partial)])) or _Nonlinear."""
        forms, inputs, out, shared = {}, {}, [], []
        written = {t.value.id for s in run if isinstance(s, ast.AugAssign)
                   for t in [s.target] if isinstance(t, ast.Subscript)
                   and isinstance(t.value, ast.Name)}
        # later[k]: the names statement k and those after it store.
        later = [set()]
        for s in reversed(run):
            later.append(later[-1] | codegen.stored_names([s]))
        later.reverse()
        for k, s in enumerate(run):
            if id(s) not in mine:
                shared.append(s)
                continue
            read = _Reader(self, forms, inputs, written, later[k], shared)
            if isinstance(s, ast.Assign) and len(s.targets) == 1 and \
                    isinstance(s.targets[0], ast.Name) and self.ranks.get(s.targets[0].id) == 0:
                name = s.targets[0].id
                forms[name] = read.form(s.value, name)
            elif isinstance(s, ast.AugAssign) and isinstance(s.op, (ast.Add, ast.Sub)) and \
                    isinstance(s.target, ast.Name):
                name = s.target.id
                before = read.form(ast.Name(name, ast.Load()), name)
                forms[name] = read.combine(before, read.form(s.value, name), s.op, name)
            elif isinstance(s, ast.AugAssign) and isinstance(s.op, ast.Add) and \
                    isinstance(s.target, ast.Subscript):
                target = read.element(s.target, inputs=False)
                out.append((target, read.form(s.value, s.target.value.id)))
            else:
                raise _Nonlinear
        for name, form in forms.items():
            outside = self.mentions.get(name, set()) - mine
            if outside or name in self.after or name in inputs:
                out.append((ast.Name(name, ast.Store()), form))
        # An output that is also an input is assigned after the outputs reading it.
        out.sort(key=lambda o: isinstance(o[0], ast.Name) and o[0].id in inputs)
        carried = [o for o in out if isinstance(o[0], ast.Name) and o[0].id in inputs]
        if len(carried) > 1:
            raise _Nonlinear
        out = [(t, [(inputs[k], c) for k, c in form.items()]) for t, form in out
               if not (isinstance(t, ast.Name) and list(form) == [t.id] and _is_one(form[t.id]))]
        return _needed(shared, out, {id(s) for s in run}), out

    def _outputs(self, outputs):
        loaded = {}
        for _, terms in outputs:
            for read, _ in terms:
                key = ast.unparse(read)
                if isinstance(read, ast.Subscript) and key not in loaded:
                    loaded[key], load = self._load(read)
                    yield load
        for target, terms in outputs:
            terms = [(ast.Name(loaded[ast.unparse(r)], ast.Load()) if ast.unparse(r) in loaded
                      else r, p) for r, p in terms]
            value = None
            for read, partial in terms:
                term = copy.deepcopy(read) if _is_one(partial) else \
                    ast.BinOp(copy.deepcopy(read), ast.Mult(), copy.deepcopy(partial))
                value = term if value is None else ast.BinOp(value, ast.Add(), term)
            if isinstance(target, ast.Name):
                yield ast.Assign([copy.deepcopy(target)], value or ast.Constant(0.0), lineno=0)
            elif value is not None:
                target = copy.deepcopy(target)
                target.ctx = ast.Store()
                yield ast.AugAssign(target, ast.Add(), value)


def _needed(shared, outputs, original):
    """``shared`` without the partials no output reads (those of cotangents
    that are only intermediate)."""
    wanted = {n.id for _, terms in outputs for _, c in terms for n in ast.walk(c)
              if isinstance(n, ast.Name)}
    keep = []
    for s in reversed(shared):
        if id(s) in original or s.targets[0].id in wanted:
            keep.append(s)
            if id(s) not in original:
                wanted |= codegen.read_names([s.value])
    return keep[::-1]


class _Nonlinear(Exception):
    """A run whose cotangent statements are not a linear map the partials cover."""


def _is_one(node):
    return isinstance(node, ast.Constant) and node.value == 1.0


class _Reader:
    """Linear forms (input key -> partial, an atom) of one statement's
    expressions; the partials it needs are appended to ``shared``."""

    def __init__(self, partials, forms, inputs, written, later, shared):
        self.p, self.forms, self.inputs = partials, forms, inputs
        self.written, self.later, self.shared = written, later, shared

    def form(self, node, target):
        kind, value = self._eval(node, target)
        if kind == "shared":
            raise _Nonlinear           # a constant term: not linear in the cotangent
        return value

    def _eval(self, node, target):
        dep = codegen.names_in(node) & self.p.dependent
        if not dep:
            return "shared", node
        if isinstance(node, ast.Name):
            if node.id in self.forms:
                return "linear", self.forms[node.id]
            if self.p.ranks.get(node.id) != 0:
                raise _Nonlinear
            self.inputs[node.id] = node
            return "linear", {node.id: ast.Constant(1.0)}
        if isinstance(node, ast.Subscript):
            key = self.element(node, inputs=True)
            return "linear", {key: ast.Constant(1.0)}
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            kind, value = self._eval(node.operand, target)
            if isinstance(node.op, ast.UAdd):
                return kind, value
            return kind, {k: self._emit(target, ast.UnaryOp(ast.USub(), c))
                          for k, c in value.items()}
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Div)):
            left, right = self._eval(node.left, target), self._eval(node.right, target)
            if left[0] == "linear" and right[0] == "shared":
                return "linear", self._scale(left[1], right[1], node.op, target)
            if isinstance(node.op, ast.Mult) and left[0] == "shared" and right[0] == "linear":
                return "linear", self._scale(right[1], left[1], node.op, target)
            raise _Nonlinear
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            left, right = self._eval(node.left, target), self._eval(node.right, target)
            if left[0] == right[0] == "linear":
                return "linear", self.combine(left[1], right[1], node.op, target)
        raise _Nonlinear

    def element(self, node, inputs):
        """The key of a cotangent array's element ``a[i]`` (scalar indices the
        rest of the run does not change)."""
        if not (isinstance(node.value, ast.Name) and node.value.id in self.p.dependent):
            raise _Nonlinear
        index = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        names = codegen.names_in(node.slice)
        if names & self.p.dependent or names & self.later or \
                self.p.ranks.get(node.value.id) != len(index) or \
                not _scalar_index(node.slice, self.p.ranks):
            raise _Nonlinear
        if inputs:
            if node.value.id in self.written:
                raise _Nonlinear
            key = ast.unparse(node)
            read = copy.deepcopy(node)
            read.ctx = ast.Load()
            self.inputs[key] = read
            return key
        return node

    def combine(self, a, b, op, target):
        out = dict(a)
        for k, c in b.items():
            if k not in out:
                out[k] = c if isinstance(op, ast.Add) else \
                    self._emit(target, ast.UnaryOp(ast.USub(), c))
            else:
                out[k] = self._emit(target, ast.BinOp(out[k], op, c))
        return out

    def _scale(self, form, factor, op, target):
        atom = isinstance(factor, (ast.Name, ast.Constant))
        if not atom and len(form) > 1:
            factor, atom = self._emit(target, factor), True
        out = {}
        for k, c in form.items():
            if _is_one(c) and isinstance(op, ast.Mult):
                out[k] = factor if atom else self._emit(target, factor)
            else:
                out[k] = self._emit(target, ast.BinOp(c, op, factor))
        return out

    def _emit(self, target, value):
        name = self.p.names.fresh(f"{target}_d")
        self.shared.append(ast.Assign([ast.Name(name, ast.Store())], value, lineno=0))
        return ast.Name(name, ast.Load())


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


def _scalar_index(index, ranks):
    if isinstance(index, ast.Tuple):
        return all(_scalar_index(e, ranks) for e in index.elts)
    if isinstance(index, ast.Slice):
        return all(p is None or _scalar_index(p, ranks)
                   for p in (index.lower, index.upper, index.step))
    if isinstance(index, ast.Constant):
        return type(index.value) is int
    if isinstance(index, ast.Name):
        return ranks.get(index.id) == 0
    if isinstance(index, ast.BinOp):
        return _scalar_index(index.left, ranks) and _scalar_index(index.right, ranks)
    if isinstance(index, ast.UnaryOp):
        return _scalar_index(index.operand, ranks)
    return False


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


def _simple(body):
    for s in body:
        if isinstance(s, (ast.For, ast.While, ast.If)):
            yield from _simple(s.body)
            yield from _simple(s.orelse)
        else:
            yield s



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


def _fill_emptied(body):
    """``pass`` in each block left with comments only (a loop whose adjoint
    statements all became shared partials no output reads): Python needs a
    statement there."""
    for node in ast.walk(ast.Module(body, [])):
        for field in ("body", "orelse"):
            block = getattr(node, field, None)
            if isinstance(node, ast.Module) or not block or not all(
                    _is_mark(s) for s in block):
                continue
            block.append(ast.Pass())


def _is_mark(s):
    return isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and \
        isinstance(s.value.func, ast.Name) and s.value.func.id == _MARK


def _comments_to_marks(lines):
    out = []
    for line in textwrap.dedent("\n".join(lines)).splitlines():
        stripped = line.lstrip()
        if stripped.startswith("#"):
            indent = line[:len(line) - len(stripped)]
            line = f"{indent}{_MARK}({stripped[1:].strip()!r})"
        out.append(line)
    return "\n".join(out)


def _marks_to_comments(text):
    out = []
    for line in text.splitlines():
        stripped = line.lstrip()
        if stripped.startswith(_MARK + "("):
            indent = line[:len(line) - len(stripped)]
            line = f"{indent}# {ast.literal_eval(stripped[len(_MARK) + 1:-1])}"
        out.append(line)
    return "\n".join(out)
