"""Shared partials for the straight-line adjoint code in loops (used by :mod:`.widen`).

:class:`_Partials` replaces a run of a loop body's cotangent statements, which
are linear in the cotangent, by their partial derivatives computed once and
one multiply-add per row and output (see its docstring); :class:`_Reader`
evaluates the run symbolically.  Also the statement walkers both modules use
(:func:`_simple`, :class:`_PerRow`, :func:`_scalar_index`).  Contract: the
statements it returns compute, for each row, what repeating the run per row
computes; a run it cannot express (not linear, or no cheaper) is returned as
it was.
"""
import ast
import copy

from ..codegen import printer as codegen


class _PerRow(ast.stmt):
    """A statement :func:`_rewrite` repeats per row as it is (``node``)."""
    _fields = ("node",)


def _simple(body):
    for s in body:
        if isinstance(s, (ast.For, ast.While, ast.If)):
            yield from _simple(s.body)
            yield from _simple(s.orelse)
        else:
            yield s


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
        return shared + [codegen.comment("every row, through the partials above")] + rows

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
