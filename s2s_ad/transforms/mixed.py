"""mixed: forward mode through scalar ``while`` loops, inside reverse-mode code.

Receives the lowered function reverse mode will differentiate; returns it
with each eligible ``while`` loop replaced by a call of the loop's JVP.

Reverse mode pushes, in every iteration of a loop, each value the adjoint
reads, and its adjoint sweep runs the iterations backwards popping them
(and the trip count).  A ``while`` loop on scalars with a few differentiated
inputs -- Newton's iteration, a fixed-point solve, a series summed to a
tolerance -- has a cheaper derivative: forward mode, carried along the loop
in the primal sweep with one unit tangent per differentiated input (vector
mode, :func:`s2s_ad.transforms.forward.jvp_function`).  The tangents of a scalar loop
ride along its own dependency chain, so they cost little on top of the loop
itself, and the adjoint sweep then needs only the partial derivatives of
the loop's results: ``k * m`` numbers for k inputs and m results, instead
of a stack entry per iteration.  This is Tapenade's and ADOL-C's "tangent
mode inside adjoint mode" for a region with few inputs.

The loop (with the copy-in of its carried name ``x`` before it)::

    x = x0
    while True: <test>; if not cond: break; <body>

becomes::

    x0_s = x0                     # stop_gradient: the call is not differentiated
    a_s = a
    x_p, dx_dx, dx_da = jvp_f_while(x0_s, a_s, 1.0, 0.0, 0.0, 1.0)
    x = x_p                       # through2(x_p, x0, a, dx_dx, dx_da)

``through`` (:data:`THROUGH`) is a primitive whose value is its first
operand and whose partial derivative in each following input is the
matching partial; reverse mode turns it into ``bx0 += bx * dx_dx`` and
``ba += bx * dx_da``.

A loop is eligible when its test and body are primitives and branches on
values that are not written in place (no calls, no inner loops), 1 to
:data:`MAX_INPUTS` of the values flowing in are differentiated scalars, the
differentiated values flowing out are scalars, and every name its region
(the loop with the scalar statements before it that it takes in, such as
the copy-ins of its carried names) assigns is assigned nowhere else.
"""
from dataclasses import replace

from ..analyses import activity, ranks
from ..analyses.dce import reads
from ..ir import (
    Call,
    Const,
    Function,
    If,
    Prim,
    Return,
    Rewriter,
    Tup,
    Var,
    While,
    var_names,
    walk,
)
from ..rules import RULES
from ..rules.registry import Rule
from . import forward

#: The most differentiated inputs a loop may have for forward mode to pay.
MAX_INPUTS = 4
#: How many statements before a loop its region may take in.
_REACH = 16


def _through(k):
    xs = tuple(f"x{j}" for j in range(1, k + 1))
    ps = tuple(f"p{j}" for j in range(1, k + 1))
    return Rule(name=f"through{k}", params=("v",) + xs + ps, operands=("v",) + xs + ps,
                emit="identity", partials=dict(zip(xs, ps)), broadcast=True,
                doc="value v; partial derivative p_j in x_j (forward mode through a loop)")


#: ``through{k}(v, x_1..x_k, p_1..p_k)``: the value ``v``, with partial
#: derivative ``p_j`` in ``x_j``.
THROUGH = {k: _through(k) for k in range(1, MAX_INPUTS + 1)}


def forward_loops(program, fn, wrt, seeds, param_ranks):
    """``fn`` with its eligible ``while`` loops run in forward mode (see the
    module doc), or ``fn`` itself when there are none.

    ``wrt`` are the differentiated parameter leaves, ``seeds`` the output
    leaves, ``param_ranks`` the parameters' ranks (None where unknown).
    """
    if not any(isinstance(s, While) for s in walk(fn.body)):
        return fn
    act = activity.analyse(fn, wrt, seeds)
    known = ranks.infer(fn, list(param_ranks))
    rewriter = _Rewriter(program, fn, act, known)
    body = rewriter.block(fn.body)
    if not rewriter.changed:
        return fn
    return replace(fn, body=body)


class _Rewriter(Rewriter):
    def __init__(self, program, fn, act, known):
        self.program, self.fn, self.act, self.ranks = program, fn, act, known
        self.changed = False
        self.count = 0
        self.hoisted = set()          # hoisted element reads the loop's results depend on
        self.assigned = {}            # name -> how many statements assign it
        self.reads = []               # (id, names it reads) of every statement of fn
        for s in walk(fn.body):
            for t in _targets(s):
                self.assigned[t] = self.assigned.get(t, 0) + 1
            self.reads.append((id(s), reads(s)))

    def stmt_While(self, s, out):
        new = self.loop(s, out)
        if new is None:
            super().stmt_While(s, out)
        else:
            out.extend(new)
            self.changed = True

    def loop(self, s, before):
        """The statements replacing ``s`` and the statements before it that
        join its region (removed from ``before``), or None when no region
        ending at ``s`` is eligible.

        The region grows back over the scalar statements before the loop
        (the copy-ins of its carried names, the branch choosing a start
        value...) while that does not add differentiated inputs: fewer
        inputs, fewer tangents.
        """
        if not self._eligible(s):
            return None
        original = {id(x) for x in walk([s])}
        s, hoisted = self._hoist_reads(s)
        needed = set(var_names([x.args[0] for x in hoisted] +
                               [x.params["index"] for x in hoisted]))
        best, start = None, len(before)
        for first in range(len(before), max(-1, len(before) - _REACH - 1), -1):
            if first < len(before) and not self._eligible(before[first]) or \
                    needed & set(_targets(before[first] if first < len(before) else s)):
                break
            found = self._region(before[first:] + [s], original)
            if found is not None and (best is None or len(found[2]) < len(best[2])):
                best, start = found, first
        if best is None:
            return None
        inputs, outputs, active_in, active_out = best
        jvp = self._jvp(s, before[start:] + [s], inputs, outputs, active_in)
        names, loc = self.fn.names, s.loc
        stmts, args = list(hoisted), []
        for p in inputs:
            if p in active_in:
                stopped = names.fresh(f"{p.lstrip('_')}_s")
                stmts.append(Prim([stopped], RULES["stop_gradient"], [Var(p)], {}, loc))
                args.append(Var(stopped))
            else:
                args.append(Var(p))
        k = len(active_in)
        args += [Const(1.0 if j == q else 0.0) for q in range(k) for j in range(k)]
        values = {o: names.fresh(f"{o.lstrip('_')}_p") if o in active_out else o
                  for o in outputs}
        partial = {(o, p): names.fresh(f"d{o.lstrip('_')}_d{p.lstrip('_')}")
                   for p in active_in for o in outputs}
        targets = [values[o] for o in outputs] + [partial[o, p] for p in active_in
                                                  for o in outputs]
        stmts.append(Call(targets, jvp, args, loc))
        for o in active_out:
            stmts.append(Prim([o], THROUGH[k], [Var(values[o])] + [Var(p) for p in active_in]
                              + [Var(partial[o, p]) for p in active_in], {}, loc))
        del before[start:]
        return stmts

    def _hoist_reads(self, s):
        """``s`` with the element reads of differentiated arrays in its test
        (at an index it does not change) taken out, and those reads; the
        body's reads of the same elements become copies.  The test runs at
        least once and nothing in the loop writes the array, so the value is
        the same -- and the loop's input is now a scalar, not the array."""
        defined = {t for x in walk(s.test + s.body) for t in _targets(x)}
        hoisted, name_of = [], {}
        for x in s.test:
            if isinstance(x, Prim) and x.rule.name == "getitem" and \
                    isinstance(x.args[0], Var) and x.args[0].name in self.act and \
                    x.args[0].name not in defined and \
                    self.ranks.get(x.targets[0]) == 0 and \
                    not set(var_names([x.params["index"]])) & defined:
                hoisted.append(x)
                name_of.setdefault((x.args[0].name, repr(x.params["index"])), x.targets[0])
        if not hoisted:
            return s, []
        moved = {id(x) for x in hoisted}

        def block(stmts):
            out = []
            for x in stmts:
                if id(x) in moved:
                    continue
                key = (x.args[0].name, repr(x.params["index"])) if isinstance(x, Prim) and \
                    x.rule.name == "getitem" and isinstance(x.args[0], Var) else None
                if key in name_of:
                    if x.targets[0] in self.act:
                        self.hoisted.add(name_of[key])
                    x = Prim(list(x.targets), RULES["copy"], [Var(name_of[key])], {}, x.loc)
                elif isinstance(x, If):
                    x = replace(x, body=block(x.body), orelse=block(x.orelse))
                out.append(x)
            return out
        return replace(s, test=block(s.test), body=block(s.body)), hoisted

    def _eligible(self, s):
        """Primitives (not writing in place, with derivative rules) and branches
        and while loops of them."""
        if isinstance(s, Prim):
            return not (s.rule.mutates or s.rule.unknown or s.rule.undiff)
        if isinstance(s, If):
            return all(self._eligible(x) for x in s.body + s.orelse)
        if isinstance(s, While):
            return all(self._eligible(x) for x in s.test + s.body)
        return False

    def _region(self, stmts, replaced=()):
        """(inputs, outputs, differentiated inputs, differentiated outputs) of the
        region ``stmts``, or None when it cannot run in forward mode: a name
        it assigns is also assigned outside it, an output might be unbound,
        or the differentiated values flowing in or out are not 1 to
        :data:`MAX_INPUTS` scalars in and scalars out.  ``replaced`` holds
        the statements of the loop as it was before :meth:`_hoist_reads`."""
        inside = list(walk(stmts))
        count = {}
        for x in inside:
            for t in _targets(x):
                count[t] = count.get(t, 0) + 1
        if any(self.assigned[t] != n for t, n in count.items()):
            return None
        read = set()
        for x in inside:
            read |= reads(x)
        inputs = sorted(read - set(count) - set(self.fn.consts))
        ids = {id(x) for x in inside} | set(replaced)
        outside = set()
        for i, names in self.reads:
            if i not in ids:
                outside |= names
        outputs = sorted(set(count) & outside)
        loop = stmts[-1]
        bound = set(loop.carried) | {t for x in walk(loop.test) for t in _targets(x)}
        for x in stmts[:-1]:
            bound |= set(_targets(x)) | (set(x.joins) if isinstance(x, If) else set())
        if not set(outputs) <= bound:
            return None
        active_in = [p for p in inputs if p in self.act or p in self.hoisted]
        active_out = [o for o in outputs if o in self.act]
        if not (1 <= len(active_in) <= MAX_INPUTS and active_out) or any(
                self.ranks.get(n) != 0 for n in active_in + active_out):
            return None
        return inputs, outputs, active_in, active_out

    def _jvp(self, s, stmts, inputs, outputs, active_in):
        """The region as a function of its inputs, and its JVP along each
        differentiated input."""
        self.count += 1
        line = s.loc.lineno if s.loc is not None else self.count
        body = list(stmts) + [Return(Tup(tuple(Var(o) for o in outputs)), s.loc)]
        region = Function(f"{self.fn.name}_while{line}", list(inputs),
                          [Var(p) for p in inputs], body, self.fn.consts, self.fn.source,
                          names=self.fn.names, key=self.fn.key + ("while", self.count))
        return forward.jvp_function(self.program, region, list(active_in),
                                    [self.ranks.get(p) for p in inputs], output="flat",
                                    width=len(active_in))


def _targets(s):
    return list(s.targets) if isinstance(s, (Prim, Call)) else []
