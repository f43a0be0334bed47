"""The tangents of one statement, from its rule's declaration (a mixin of :class:`Forward`).

:class:`RuleTangents` turns a primitive statement and its active operands
into tangent statements: elementwise rules give ``sum(partial * d_operand)``
(partials computed once for every direction), rules linear in each operand
apply themselves to the tangents, the others sum their JVP templates.  A
template (``"g * out"``, ``"rt.sum_grad(dx, x)"``) is parsed once by the
rules registry and expanded here into lowered statements over registered
rules, constants folded.  It reads, and never sets, the state of the
:class:`~s2s_ad.transforms.forward.Forward` it is mixed into: ``d()`` and
``directions()`` for tangent names, ``active()``, ``ranks``, ``classes`` and
``names``.
"""
import ast
import operator

from .. import rules
from ..analyses import ranks
from ..ir import Const, Prim, Tup, Var
from ..rules.internal import BROADCAST_LIKE, INTERNAL, ZEROS_LIKE
from ..rules.registry import parse_template

_BY_EMIT = {}
_FOLD = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
         ast.Div: operator.truediv}


def _rule_named(dotted):
    """The rule a template's ``np.X`` / ``math.X`` / ``rt.X`` call denotes."""
    if not _BY_EMIT:
        for r in rules.RULES.values():
            if isinstance(r.emit, str) and r.emit.startswith("rt."):
                _BY_EMIT.setdefault(r.emit, r)
        _BY_EMIT.update(INTERNAL)
    return rules.RULES.get(dotted) or _BY_EMIT[dotted]


class RuleTangents:
    """Tangent statements of primitives, built from their rules (see the module docstring)."""

    def env(self, s):
        env = {p: a for p, a in zip(s.rule.operands, s.args)}
        env.update(s.params)
        env["out"] = Var(s.targets[0])
        return env

    def elementwise(self, s, active, body):
        """The tangent of an elementwise statement in each direction (partials once)."""
        rule, target = s.rule, s.targets[0]
        env = self.env(s)
        full = self.ranks.get(target) == 0
        out_class = self.classes.get(target)
        partials, declared = [], []
        for arg, p in active:
            if p in rule.jvp:          # a tangent that is not partial * tangent (np.abs)
                declared.append((arg, p))
                full = full or self._full(arg, out_class)
                continue
            partial = self.template(rule.partials[p], env, body, s.loc)
            if partial not in (Const(1.0), Const(-1.0)):
                full = full or self._full(partial, out_class)
            full = full or self._full(arg, out_class)
            partials.append((arg, partial))
        values = []
        for _ in self.directions():
            terms = []
            for arg, partial in partials:
                da = Var(self.d(arg.name))
                if partial == Const(1.0):
                    term = da
                elif partial == Const(-1.0):
                    term = self.emit(body, rules.RULES["np.negative"], [da], {}, s.loc)
                else:
                    term = self.emit(body, rules.RULES["np.multiply"], [partial, da], {}, s.loc)
                terms.append(term)
            if declared:
                env.update((f"d{p}", self.tangent_of(arg, body, s.loc)) for arg, p in declared)
                terms += [self.template(rule.jvp[p], env, body, s.loc) for _, p in declared]
            value = self.total(terms, body, s.loc)
            if not full:
                value = self.emit(body, BROADCAST_LIKE, [value, Var(target)], {}, s.loc)
            values.append(value)
        return values

    def _full(self, atom, out_class):
        """Whether ``atom`` is known to have the statement's output shape."""
        return out_class is not None and ranks.class_of(atom, self.classes) == out_class

    def multilinear(self, s, active, body):
        terms = []
        for arg, p in active:
            args = list(s.args)
            i = s.rule.operands.index(p)
            args[i] = self.tangent_of(arg, body, s.loc)
            terms.append(self.emit(body, s.rule, args, dict(s.params), s.loc))
        return self.total(terms, body, s.loc)

    def jvp_templates(self, s, active, body):
        """The sum of the rule's JVP templates of the active operands."""
        env = self.env(s)
        env.update((f"d{p}", self.tangent_of(arg, body, s.loc)) for arg, p in active)
        terms = [self.template(s.rule.jvp[p], env, body, s.loc) for _, p in active]
        return self.total(terms, body, s.loc)

    def tangent_of(self, arg, body, loc):
        if isinstance(arg, Tup):
            return Tup(tuple(self.tangent_of(x, body, loc) for x in arg.items))
        if self.active(arg):
            return Var(self.d(arg.name))
        if isinstance(arg, Var) and self.ranks.get(arg.name) != 0:
            return self.emit(body, ZEROS_LIKE, [arg], {}, loc)
        return Const(0.0)

    def total(self, terms, body, loc):
        value = terms[0]
        for term in terms[1:]:
            value = self.emit(body, rules.RULES["np.add"], [value, term], {}, loc)
        return value

    # -- templates --------------------------------------------------------------
    def emit(self, body, rule, args, params, loc):
        target = self.names.temp()
        body.append(Prim([target], rule, list(args), params, loc))
        return Var(target)

    def template(self, text, env, body, loc):
        return self._expr(parse_template(text), env, body, loc)

    def _expr(self, node, env, body, loc):
        ex = lambda n: self._expr(n, env, body, loc)  # noqa: E731
        if isinstance(node, ast.Constant):
            return Const(node.value)
        if isinstance(node, ast.Name):
            return env[node.id]
        if isinstance(node, ast.UnaryOp):
            operand = ex(node.operand)
            if isinstance(operand, Const) and isinstance(node.op, ast.USub):
                return Const(-operand.value)
            return self.emit(body, rules.RULES[rules.OPERATORS[type(node.op)]], [operand], {}, loc)
        if isinstance(node, ast.BinOp):
            left, right = ex(node.left), ex(node.right)
            if isinstance(left, Const) and isinstance(right, Const) and type(node.op) in _FOLD:
                return Const(_FOLD[type(node.op)](left.value, right.value))
            name = rules.OPERATORS[type(node.op)]
            return self.emit(body, rules.RULES[name], [left, right], {}, loc)
        if isinstance(node, ast.Compare):
            name = rules.OPERATORS[type(node.ops[0])]
            return self.emit(body, rules.RULES[name], [ex(node.left), ex(node.comparators[0])],
                             {}, loc)
        if isinstance(node, ast.Call):
            rule = _rule_named(ast.unparse(node.func))
            bound = rules.bind(rule, [ex(a) for a in node.args], {}, ValueError)
            operands = [bound[p] for p in rule.operands if p in bound]
            params = {p: bound[p] for p in rule.params if p not in rule.operands and p in bound}
            for p, default in rule.defaults.items():
                params.setdefault(p, Const(default))
            return self.emit(body, rule, operands, params, loc)
        raise TypeError(f"unsupported template expression {ast.unparse(node)}")
