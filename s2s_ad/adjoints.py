"""Adjoint variables and derivative templates for the reverse transform.

:class:`Adjoints` tracks, for each primal name, the name of its adjoint and
whether that array may be updated in place; :func:`instantiate` fills a
rule's template with the statement's names and folds constants so the
generated code reads like hand-written code.
"""
import ast
import copy

from . import codegen


class Adjoints:
    """Adjoint variables: name, and whether the array is ours to update in place.

    The first contribution to ``bx`` binds it (possibly to another adjoint's
    array: not owned); later ones rebind ``bx = bx + c`` (a fresh array).
    Element updates (``bx[i] += g``, ``bx[i] = 0``) first make ``bx`` owned.
    """

    def __init__(self, names, writer, named):
        self.names = names
        self.w = writer
        self.vars = {}      # primal name -> [adjoint name, owned]
        self._named = named  # primal name -> adjoint name, stable across passes
        self.stale = {}     # primal name -> its forgotten adjoint (see drop)

    def get(self, var):
        entry = self.vars.get(var)
        return entry[0] if entry else None

    def name_of(self, var):
        if var not in self._named:
            self._named[var] = self.names.adjoint(var)
        return self._named[var]

    def bind(self, var, adj_name, owned=False):
        self.vars[var] = [adj_name, owned]
        self._named.setdefault(var, adj_name)

    def drop(self, var):
        """Forget ``bx``: the next contribution starts it afresh."""
        entry = self.vars.pop(var, None)
        if entry is not None:
            self.stale[var] = entry[0]

    def add(self, var, expr, fresh=None):
        """Add the contribution ``expr`` to ``bvar``.

        ``fresh`` says whether ``expr`` is a new array (None: decided from
        its form).  An owned adjoint is updated in place (``bx += c``: no
        allocation, and its dtype stays); any adjoint ``expr`` may return
        stops being owned, since two names now share its array.
        """
        sources = set() if fresh else _sources(expr)
        for entry in self.vars.values():
            if entry[0] in sources:
                entry[1] = False
        if fresh is None:
            fresh = not sources
        entry = self.vars.get(var)
        if entry is None:
            adj = self.name_of(var)
            self.vars[var] = [adj, fresh]
            self.w.node(assign(adj, expr))
        elif entry[1]:
            target = ast.Name(entry[0], ast.Store())
            self.w.node(ast.AugAssign(target, ast.Add(), expr))
        else:
            entry[1] = True
            self.w.node(assign(entry[0], ast.BinOp(codegen.name(entry[0]), ast.Add(), expr)))

    def prepare(self, var, inplace):
        """Make ``bx`` defined (zeros), and owned when it is updated in place."""
        entry = self.vars.get(var)
        if entry is None:
            adj = self.name_of(var)
            self.vars[var] = [adj, True]
            # A forgotten adjoint still has the primal's shape: zeroing from it
            # keeps the primal value (and its stack) out of the adjoint sweep.
            like = self.stale.get(var, var)
            self.w.node(assign(adj, call("rt.zeros_like", codegen.name(like))))
        elif inplace and not entry[1]:
            entry[1] = True
            self.w.node(assign(entry[0], call("np.copy", codegen.name(entry[0]))))

    def add_at(self, var, index, expr, scatter=False):
        """``bvar[index] += expr``; ``scatter`` when an index array may repeat."""
        self.prepare(var, True)
        if scatter:
            self.w.node(ast.Expr(call("rt.index_add", codegen.name(self.get(var)), index, expr)))
            return
        target = ast.Subscript(codegen.name(self.get(var)), index, ast.Store())
        self.w.node(ast.AugAssign(target, ast.Add(), expr))


# Helpers whose result may be their first argument (or a view of it).
_MAY_RETURN_ARG = {"rt.unbroadcast", "rt.reshape_like", "rt.like", "rt.transpose_grad",
                   "np.asarray", "np.ravel", "np.reshape", "np.transpose"}


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


def call(fname, *args):
    return ast.Call(codegen.name(fname), list(args), [])


class Subst(ast.NodeTransformer):
    def __init__(self, env):
        self.env = env

    def visit_Name(self, node):
        return copy.deepcopy(self.env[node.id]) if node.id in self.env else node


def instantiate(template, env):
    """The template with its parameter names replaced, lightly simplified."""
    return simplify(Subst(env).visit(copy.deepcopy(template)))


_FOLD = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
         ast.Mult: lambda a, b: a * b, ast.Div: lambda a, b: a / b}


def _num(e):
    return isinstance(e, ast.Constant) and type(e.value) in (int, float)


def simplify(e):
    """Fold constants, ``g * 1.0`` -> ``g``, ``g * -1.0`` -> ``-g``, ``x ** 1`` -> ``x``."""
    if isinstance(e, ast.Call):
        e.args = [simplify(a) for a in e.args]
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
