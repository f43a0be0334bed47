"""Adjoint variables and derivative templates for the reverse transform.

:class:`Adjoints` tracks, for each primal name, the name of its adjoint and
whether that array may be updated in place; :func:`instantiate` fills a
rule's template with the statement's names and folds constants so the
generated code reads like hand-written code.
"""
import ast
import copy

from ..rules import RULES
from . import printer as codegen
from . import slice_adjoints


class Adjoints:
    """Adjoint variables: name, and whether the array is ours to update in place.

    The first contribution to ``bx`` binds it (possibly to another adjoint's
    array: not owned); later ones rebind ``bx = bx + c`` (a fresh array).
    Element updates (``bx[i] += g``, ``bx[i] = 0``) first make ``bx`` owned.
    When the adjoint whose array ``bx`` shares is no longer read
    (:meth:`release`), ``bx`` becomes owned if it was the only one sharing
    it: ``bx = bx + c`` becomes ``bx += c``.

    Ownership has a middle state, :data:`VIEW`: the array is no other
    adjoint's, but it may be a read-only broadcast (``rt.sum_grad``'s in
    NumPy; compiled, a new array).  An element update then makes it owned
    with ``bx = rt.writable(bx)``, a copy only where it is read-only.

    A cotangent that is one value broadcast (``bt = rt.sum_grad(1.0, t)``)
    is remembered while it is unchanged, so that summing it
    (``np.sum(bt)``, the cotangent of a scalar added to ``t``) is its value
    times the element count (``rt.broadcast_total``), not a pass over it.
    """

    def __init__(self, names, writer, named, sharing=set):
        self.names = names
        self.w = writer
        # names -> those names and every name whose array may share memory with one
        self.sharing = sharing
        # primal name -> [adjoint name, owned, adjoint names whose array it may share]
        self.vars = {}
        self._named = named  # primal name -> adjoint name, stable across passes
        self.stale = {}     # primal name -> its forgotten adjoint (see drop)
        self.uniform = {}   # adjoint name -> (sum_grad call, where it was printed)

    def get(self, var):
        entry = self.vars.get(var)
        return entry[0] if entry else None

    def owned(self, var):
        """True, :data:`VIEW` or False (see the class)."""
        entry = self.vars.get(var)
        return entry[1] if entry else False

    def name_of(self, var):
        if var not in self._named:
            self._named[var] = self.names.adjoint(var)
        return self._named[var]

    def bind(self, var, adj_name, owned=False):
        self.vars[var] = [adj_name, owned, frozenset()]
        self._named.setdefault(var, adj_name)
        self.uniform.pop(adj_name, None)

    def drop(self, var):
        """Forget ``bx``: the next contribution starts it afresh."""
        entry = self.vars.pop(var, None)
        if entry is not None:
            self.stale[var] = entry[0]
            self.uniform.pop(entry[0], None)

    def release(self, var, was_owned):
        """``bvar`` is read no more: its array passes to the one adjoint sharing it.

        ``was_owned``: whether ``bvar`` was owned before the statement that
        read it last, so that its array was ours and no other name's.
        """
        entry = self.vars.get(var)
        if entry is None or not was_owned:
            return
        sharing = [e for e in self.vars.values() if entry[0] in e[2]]
        if len(sharing) == 1 and sharing[0][2] == {entry[0]}:
            sharing[0][1], sharing[0][2] = was_owned, frozenset()

    def add(self, var, expr, fresh=None):
        """Add the contribution ``expr`` to ``bvar``.

        ``fresh`` says whether ``expr`` is a new array (None: decided from
        its form).  An owned adjoint is updated in place (``bx += c``: no
        allocation, and its dtype stays); any adjoint ``expr`` may return
        stops being owned, since two names now share its array.  A read-only
        view (:data:`_VIEWS`) is never owned, nor is an adjoint sharing it.
        """
        expr = self._total(expr)
        view = _called(expr) in _VIEWS
        sources = set() if fresh else _sources(expr.args[0] if view else expr)
        for entry in self.vars.values():
            if entry[0] in sources:
                entry[1] = False
        if view:
            fresh, sources = VIEW, set()
        if fresh is None:
            fresh = not sources
        entry = self.vars.get(var)
        if entry is None:
            adj = self.name_of(var)
            self.vars[var] = [adj, fresh, frozenset(sources)]
            self.w.node(assign(adj, expr))
            if _uniform(expr):
                self.uniform[adj] = (expr, self.w, len(self.w.nodes), len(self.w.lines))
            return
        self.uniform.pop(entry[0], None)
        if entry[1] is True:
            self.w.node(_accumulate(entry[0], expr))
        else:
            entry[1], entry[2] = True, frozenset()
            self.w.node(assign(entry[0], _plus(codegen.name(entry[0]), expr)))

    def _total(self, expr):
        """``expr``, or for ``np.sum(bt)`` of an unchanged uniform cotangent
        ``bt = rt.sum_grad(g, t)`` (see the class) ``rt.broadcast_total(g, t)``
        (negated for ``-np.sum(bt)``)."""
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
            total = self._total(expr.operand)
            return expr if total is expr.operand else ast.UnaryOp(ast.USub(), total)
        if not (_called(expr) == RULES["np.sum"].name and len(expr.args) == 1
                and not expr.keywords and isinstance(expr.args[0], ast.Name)):
            return expr
        found = self.uniform.get(expr.args[0].id)
        if found is None:
            return expr
        made, writer, nodes, lines = found
        # Printed in this block, and nothing it reads rebound since.
        if writer is not self.w or any(
                len(line) - len(line.lstrip(" ")) < 4 * writer.indent
                for line in writer.lines[lines:] if line.strip()):
            return expr
        read = codegen.names_in(made) | {expr.args[0].id}
        for node in self.w.nodes[nodes:]:
            for sub in ast.walk(node):
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store) \
                        and sub.id in read:
                    return expr
        return call("rt.broadcast_total", *copy.deepcopy(made.args[:2]))

    def state(self):
        """Which adjoints own their arrays, and with whom they may share them."""
        return {var: (entry[1], entry[2]) for var, entry in self.vars.items()}

    def merge(self, *paths):
        """After a branch or loop: own an array only if every path that can
        reach here left it owned (``paths``: :meth:`state` at the end of
        each), and share it with every name some path shares it with."""
        for var, entry in self.vars.items():
            ends = [p[var] for p in paths if var in p]
            if ends:
                entry[1] = min([entry[1]] + [owned for owned, _ in ends], key=_OWNERSHIP.index)
                entry[2] = entry[2].union(*(sharing for _, sharing in ends))

    def prepare(self, var, inplace, from_primal=False):
        """Make ``bx`` defined (zeros), and owned when it is updated in place;
        ``from_primal``: shaped like ``x`` itself even where a forgotten
        adjoint of ``x`` is at hand (a loop-carried ``x`` whose shape changes
        from one iteration to the next)."""
        entry = self.vars.get(var)
        if entry is None:
            adj = self.name_of(var)
            self.vars[var] = [adj, True, frozenset()]
            # A forgotten adjoint still has the primal's shape: zeroing from it
            # keeps the primal value (and its stack) out of the adjoint sweep.
            like = var if from_primal else self.stale.get(var, var)
            self.w.node(assign(adj, call("rt.zeros_like", codegen.name(like))))
        elif inplace and entry[1] is not True:
            copier = "rt.writable" if entry[1] is VIEW else RULES["np.copy"].name
            entry[1], entry[2] = True, frozenset()
            self.uniform.pop(entry[0], None)
            self.w.node(assign(entry[0], call(copier, codegen.name(entry[0]))))

    def add_at(self, var, index, expr, scatter=False, view=False):
        """``bvar[index] += expr``; ``scatter`` when an index array may repeat;
        ``view`` when ``bvar[index]`` is a view (see slice_adjoints)."""
        self.prepare(var, True)
        if scatter:
            self.w.node(ast.Expr(call("rt.index_add", codegen.name(self.get(var)),
                                      _index_value(index), expr)))
            return
        if view and isinstance(expr, ast.Name):
            part = ast.Subscript(codegen.name(self.get(var)), index, ast.Load())
            if slice_adjoints.fold_into_slice(self.w, part, expr.id, self.sharing):
                return
        if view:      # into the view, with no store of the view onto itself (Numba)
            part = ast.Subscript(codegen.name(self.get(var)), index, ast.Load())
            self.w.node(ast.Expr(call("rt.add_into", part, expr)))
            return
        target = ast.Subscript(codegen.name(self.get(var)), index, ast.Store())
        self.w.node(ast.AugAssign(target, ast.Add(), expr))


#: Helpers with a twin that adds their result into an owned adjoint in place
#: (``bx = rt.add_minmax_grad(bx, ...)``): no full-size temporary.
_ACCUMULATING = {"rt.minmax_grad": "rt.add_minmax_grad"}

#: Helpers whose result may be a read-only view (a broadcast, see the runtime).
_VIEWS = {"rt.sum_grad", "rt.mean_grad"}

#: The middle state of an adjoint's ownership (see :class:`Adjoints`), and
#: the three states from least to most owned.
VIEW = "view"
_OWNERSHIP = [False, VIEW, True]


def _uniform(expr):
    """Whether ``expr`` is ``rt.sum_grad(g, t)`` of the whole of ``t``: the
    value ``g`` (a number, or the cotangent of the sum: a scalar) in every
    element."""
    return _called(expr) == "rt.sum_grad" and len(expr.args) >= 2 and \
        isinstance(expr.args[0], (ast.Constant, ast.Name)) and \
        isinstance(expr.args[1], ast.Name) and \
        all(isinstance(a, ast.Constant) and a.value in (None, False)
            for a in expr.args[2:]) and not expr.keywords


def _called(expr):
    """The dotted name ``expr`` calls, or None."""
    return ast.unparse(expr.func) if isinstance(expr, ast.Call) else None


def _accumulate(adj, expr):
    """``adj += expr`` for owned ``adj``, in the cheapest form."""
    twin = _ACCUMULATING.get(_called(expr))
    if twin is not None:
        return assign(adj, call(twin, codegen.name(adj), *expr.args))
    return ast.AugAssign(ast.Name(adj, ast.Store()), *_signed(expr))


def _plus(left, expr):
    """``left + expr`` (``left - e`` for ``expr = -e``)."""
    return ast.BinOp(left, *_signed(expr))


def _signed(expr):
    """(operator, operand) that add ``expr``: (Sub, e) for ``expr = -e``."""
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        return ast.Sub(), expr.operand
    return ast.Add(), expr


# Helpers whose result may be their first argument (or a view of it), and the
# rules declared ``view`` (np.reshape), as templates spell them and as printed.
_MAY_RETURN_ARG = {"rt.unbroadcast", "rt.reshape_like", "rt.like", "rt.transpose_grad"} | {
    spelling for rule in RULES.values() if rule.view for spelling in (rule.name, rule.emit)}


def _sources(expr):
    """Names whose array ``expr`` may be, rather than a fresh array."""
    if isinstance(expr, ast.Name):
        return {expr.id}
    if isinstance(expr, ast.Subscript):
        return _sources(expr.value)
    if isinstance(expr, ast.Call) and expr.args and ast.unparse(expr.func) in _MAY_RETURN_ARG:
        return _sources(expr.args[0])
    return set()


def assign(n, expr):
    return ast.Assign([ast.Name(n, ast.Store())], expr, lineno=0)


def _index_value(index):
    """An index expression as a value to pass to a function: ``:`` and ``1:n``
    (valid only inside brackets) become ``slice(None)`` and ``slice(1, n)``."""
    if isinstance(index, ast.Slice):
        bounds = [index.lower, index.upper] + ([index.step] if index.step else [])
        if bounds == [None, None]:
            bounds = [None]
        return call("slice", *(ast.Constant(None) if b is None else b for b in bounds))
    if isinstance(index, ast.Tuple):
        return ast.Tuple([_index_value(x) for x in index.elts], ast.Load())
    return index


def call(fname, *args):
    return ast.Call(codegen.name(fname), list(args), [])


class Subst(ast.NodeTransformer):
    def __init__(self, env):
        self.env = env

    def visit_Name(self, node):
        if node.id not in self.env:
            return node
        new = copy.deepcopy(self.env[node.id])
        if isinstance(new, ast.Name):
            new.ctx = node.ctx          # a renamed assignment target stays one
        return new


def instantiate(template, env):
    """The template with its parameter names replaced, lightly simplified."""
    return simplify(Subst(env).visit(copy.deepcopy(template)))


_FOLD = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
         ast.Mult: lambda a, b: a * b, ast.Div: lambda a, b: a / b}


def _num(e):
    return isinstance(e, ast.Constant) and type(e.value) in (int, float)


#: Sums over axes and the linear reductions (np.sum, np.mean): a negation inside
#: commutes out, onto the smaller result.
_REDUCING = {"rt.unbroadcast"} | {name for name, rule in RULES.items()
                                  if rule.linear and rule.shape == "reduced"}


def simplify(e):
    """Fold constants, ``g * 1.0`` -> ``g``, ``g * -1.0`` -> ``-g``, ``x ** 1`` -> ``x``,
    ``rt.unbroadcast(-g, x)`` -> ``-rt.unbroadcast(g, x)`` (negate after summing)."""
    if isinstance(e, ast.Call):
        e.args = [simplify(a) for a in e.args]
        first = e.args[0] if e.args else None
        if _called(e) in _REDUCING and isinstance(first, ast.UnaryOp) and \
                isinstance(first.op, ast.USub) and not _num(first.operand):
            e.args[0] = first.operand
            return ast.UnaryOp(ast.USub(), e)
    if isinstance(e, ast.UnaryOp):
        e.operand = simplify(e.operand)
        if isinstance(e.op, ast.USub) and _num(e.operand):
            return ast.Constant(-e.operand.value)
    if not isinstance(e, ast.BinOp):
        return e
    e.left, e.right = simplify(e.left), simplify(e.right)
    if _num(e.left) and _num(e.right) and type(e.op) in _FOLD:
        try:
            return ast.Constant(_FOLD[type(e.op)](e.left.value, e.right.value))
        except ZeroDivisionError:
            return e
    if isinstance(e.op, ast.Pow) and _num(e.right) and e.right.value == 1:
        return e.left
    if isinstance(e.op, ast.Mult):
        for a, b in ((e.left, e.right), (e.right, e.left)):
            if _num(b) and b.value == 1:
                return a
            if _num(b) and b.value == -1:
                return ast.UnaryOp(ast.USub(), a)
    return e
