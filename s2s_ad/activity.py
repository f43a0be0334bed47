"""analyse: activity of each name in a lowered function.

Receives a lowered :class:`~s2s_ad.ir.Function`, the leaf names being
differentiated (``wrt``) and the output leaves that receive a cotangent
(``seeds``).  Guarantees: ``active`` holds exactly the names that depend on a
differentiated input *and* influence a seeded output; only those get
adjoints or tangents.  A call on an active path that has no derivative rule
raises :class:`~s2s_ad.errors.NonDifferentiableError` at the user's line.
"""
from dataclasses import dataclass

from .errors import NonDifferentiableError
from .ir import Call, Prim, Tup, Var


@dataclass
class Activity:
    varied: set
    useful: set

    def __contains__(self, name):
        return name in self.varied and name in self.useful

    def is_active(self, atom):
        return isinstance(atom, Var) and atom.name in self


def var_leaves(values):
    """Names of the variables among atoms and (nested) tuples of atoms."""
    for v in values:
        if isinstance(v, Tup):
            yield from var_leaves(v.items)
        elif isinstance(v, Var):
            yield v.name


def diff_args(s):
    """(operand value, rule parameter) pairs that carry derivatives."""
    if isinstance(s, Call):
        return [(a, None) for a in s.args]
    diff = s.rule.diff_operands
    return [(a, p) for a, p in zip(s.args, s.rule.operands) if p in diff]


def analyse(fn, wrt, seeds):
    varied = set(wrt)
    for s in fn.body:
        if isinstance(s, (Prim, Call)):
            ins = set(var_leaves(a for a, _ in diff_args(s)))
            if ins & varied:
                varied.update(s.targets)
    useful = set(seeds)
    for s in reversed(fn.body):
        if isinstance(s, (Prim, Call)) and useful.intersection(s.targets):
            useful.update(var_leaves(a for a, _ in diff_args(s)))
            if isinstance(s, Prim) and s.rule.unknown:
                _check_unknown(s, varied)
    return Activity(varied, useful)


def _check_unknown(s, varied):
    if set(var_leaves(s.args)) & varied:
        loc = s.loc
        raise NonDifferentiableError(
            f"no derivative rule for {s.rule.name}(), called on a differentiated value in "
            f"'{loc.text.strip()}'. Wrap it in a function decorated with @ad.custom_vjp to "
            f"give it a rule, or apply ad.stop_gradient to its arguments if no derivative "
            f"should flow through it.", loc.filename, loc.lineno)
