"""analyse: activity of each name in a lowered function.

Receives a lowered :class:`~s2s_ad.ir.Function`, the leaf names being
differentiated (``wrt``) and the output leaves that receive a cotangent
(``seeds``).  Guarantees: ``active`` holds exactly the names that depend on a
differentiated input *and* influence a seeded output (iterated to a fixed
point around loops; an array written in place is one name); only those get
adjoints or tangents.  Dependence flows through calls with no derivative
rule too (:func:`flow_args`), so such a call anywhere on a path from a
differentiated input to a seeded output -- whatever follows it -- raises
:class:`~s2s_ad.errors.NonDifferentiableError` at the user's line; rules with
zero derivative (comparisons, ``np.floor``, ``ad.stop_gradient``...) end a
path.
"""
from dataclasses import dataclass

from ..errors import NonDifferentiableError
from ..ir import Call, Prim, Var, var_names, walk


@dataclass
class Activity:
    varied: set
    useful: set

    def __contains__(self, name):
        return name in self.varied and name in self.useful

    def is_active(self, atom):
        return isinstance(atom, Var) and atom.name in self


def diff_args(s):
    """(operand value, rule parameter) pairs that carry derivatives."""
    if isinstance(s, Call):
        return [(a, None) for a in s.args]
    diff = s.rule.diff_operands
    return [(a, p) for a, p in zip(s.args, s.rule.operands) if p in diff]


def flow_args(s):
    """Operand values whose variation reaches the result, derivative rule or not.

    Activity follows these, not only :func:`diff_args`: a call with no rule
    (or an operand without a derivative) still passes its input's dependence
    on to its result, so it is found wherever it sits on a path from a
    differentiated input to a seeded output -- and refused there.
    """
    if isinstance(s, Prim) and s.rule.unknown:
        return list(s.args)
    if isinstance(s, Prim) and s.rule.undiff:
        undiff = [(a, p) for a, p in zip(s.args, s.rule.operands) if p in s.rule.undiff]
        return [a for a, _ in diff_args(s) + undiff]
    return [a for a, _ in diff_args(s)]


def outputs(s):
    """Names a statement gives a value to (an element write: its array)."""
    if isinstance(s, Prim) and s.rule.mutates:
        return [s.args[0].name]
    return s.targets


def analyse(fn, wrt, seeds):
    stmts = [s for s in walk(fn.body) if isinstance(s, (Prim, Call))]
    varied = set(wrt)
    while True:
        before = len(varied)
        for s in stmts:
            if set(var_names(flow_args(s))) & varied:
                varied.update(outputs(s))
        if len(varied) == before:
            break
    useful = set(seeds)
    while True:
        before = len(useful)
        for s in reversed(stmts):
            if useful.intersection(outputs(s)):
                useful.update(var_names(flow_args(s)))
        if len(useful) == before:
            break
    for s in stmts:
        if isinstance(s, Prim) and s.rule.unknown and useful.intersection(s.targets):
            _check_unknown(s, varied)
        if isinstance(s, Prim) and s.rule.undiff and useful.intersection(s.targets):
            _check_undiff(s, varied)
    return Activity(varied, useful)


def _check_unknown(s, varied):
    if set(var_names(s.args)) & varied:
        loc = s.loc
        raise NonDifferentiableError(
            f"{no_rule_message(s.rule)}, called on a differentiated value in "
            f"'{loc.text.strip()}'. Wrap it in a function decorated with @ad.custom_vjp to "
            f"give it a rule, or apply ad.stop_gradient to its arguments if no derivative "
            f"should flow through it.", loc.filename, loc.lineno)


def no_rule_message(rule):
    """``no derivative rule for np.i0() (<the reason in the unsupported table>)``."""
    from ..rules.table import unsupported_reason
    listed = unsupported_reason(rule.obj) if rule.obj is not None else None
    if listed is None:
        return f"no derivative rule for {rule.name}()"
    return f"no derivative rule for {listed[0]}() ({listed[1]})"


def _check_undiff(s, varied):
    for a, p in zip(s.args, s.rule.operands):
        if p in s.rule.undiff and set(var_names([a])) & varied:
            loc = s.loc
            raise NonDifferentiableError(
                f"{s.rule.name}() has no derivative with respect to '{p}', which a higher "
                f"derivative of '{loc.text.strip()}' needs. Give the function computing it a "
                f"rule with @ad.custom_vjp.", loc.filename, loc.lineno)
