"""Dead-code elimination over lowered statements.

``keep(body, live)`` returns the ids of the statements whose values reach
``live`` (the names read afterwards), a ``return``, or an array that
something later reads; branches and loops with nothing kept inside are
dropped.  Lowered code is pure except element writes, which count as
defining their array, and effects (``print``), which are always kept.
"""
from ..ir import Call, For, If, Prim, Return, While, var_names, walk


def reads(s):
    """Names a statement itself reads: a simple statement's operands; a
    branch's condition; a loop's carried names and its bounds or condition
    (not what its blocks read)."""
    if isinstance(s, Prim):
        return set(var_names(list(s.args) + list(s.params.values())))
    if isinstance(s, Call):
        return set(var_names(s.args))
    if isinstance(s, Return):
        return set(var_names([s.value]))
    if isinstance(s, If):
        return set(var_names([s.cond]))
    if isinstance(s, For):
        return set(s.carried) | set(var_names([s.start, s.stop, s.step]))
    if isinstance(s, While):
        return set(s.carried) | set(var_names([s.cond]))
    raise TypeError(s)


def read_counts(body):
    """How many statements of ``body``, nested ones included, read each name."""
    count = {}
    for s in walk(body):
        for n in reads(s):
            count[n] = count.get(n, 0) + 1
    return count


def defs(s):
    """Names a simple statement (re)defines; an element write defines its array."""
    if isinstance(s, Prim) and s.rule.mutates:
        return {s.args[0].name}
    return set(s.targets)


def keep(body, live, extra_defs=None, loops=()):
    """Ids of the statements of ``body`` that ``live`` needs.

    ``extra_defs`` maps a statement's id to further names it defines (the
    residuals a split helper call returns); ``loops`` are ids of loops that
    must run whatever they compute (the adjoint counts their trips).
    """
    kept = set()
    _keep(body, set(live), kept, extra_defs or {}, set(loops))
    return kept


def _keep(body, live, kept, extra, loops=frozenset()):
    """Mark what ``body`` must run for ``live``; returns the names live before it."""
    for s in reversed(body):
        if isinstance(s, Return):
            kept.add(id(s))
            live |= reads(s)
        elif isinstance(s, (Prim, Call)):
            if (defs(s) | set(extra.get(id(s), ()))) & live or \
                    isinstance(s, Prim) and s.rule.effect:
                kept.add(id(s))
                live |= reads(s)
        elif isinstance(s, If):
            live_in = (_keep(s.body, set(live), kept, extra, loops)
                       | _keep(s.orelse, set(live), kept, extra, loops))
            if _any_kept(s.body, kept) or _any_kept(s.orelse, kept):
                kept.add(id(s))
                live |= live_in | set(var_names([s.cond]))
        elif isinstance(s, (For, While)):
            inner = set(live)
            # A while loop's condition is live only if the loop is needed.
            needed = id(s) in loops or _needs(s.body, inner, extra, loops)
            while needed:     # until the names live around the back edge settle
                live_in = _keep(s.body, set(inner), kept, extra, loops)
                if isinstance(s, While):
                    live_in = _keep(s.test, live_in | set(var_names([s.cond])), kept, extra, loops)
                if live_in <= inner:
                    break
                inner |= live_in
            if needed and (_any_kept(s.body, kept) or id(s) in loops):
                kept.add(id(s))
                live |= inner
                if isinstance(s, For):
                    live |= set(var_names([s.start, s.stop, s.step]))
        else:
            raise TypeError(s)
    return live


def _needs(body, live, extra, loops):
    """Whether anything in a loop body is needed for ``live`` (a dry run)."""
    trial = set()
    _keep(body, set(live), trial, extra, loops)
    return bool(trial)


def _any_kept(body, kept):
    return any(id(s) in kept for s in body)
