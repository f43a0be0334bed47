"""transform (forward mode): a lowered function -> its JVP, as a lowered function.

Receives a lowered :class:`~s2s_ad.ir.Function`, the parameter leaves that
get tangents, and what to return.  Produces a new :class:`Function` whose
parameters are the original ones followed by one tangent per differentiated
leaf, and which returns ``(out, tangent_out)`` (or only ``tangent_out``).

Each statement is followed by its tangent statement, built from the rule's
declaration: elementwise rules give ``sum(partial * d_operand)``, rules
declared linear (in each operand) apply themselves to the tangents, and the
others (``np.prod``, ``np.max``...) sum their declared JVP templates.
Control flow maps structurally: a branch keeps its condition, a loop
carries the tangents of its carried names, a call to a user function calls
that function's JVP.  The result is ordinary lowered
code over registered rules, so every later pass -- printing, compiling, and
reverse mode (reverse-over-forward for Hessian-vector products) -- reads it
as it reads user code.  Only names that depend on a differentiated input and
influence the output get tangents (activity analysis).
"""
from dataclasses import replace

from .. import rules
from ..analyses import activity, ranks
from ..frontend import custom
from ..frontend.anf import map_values
from ..ir import (
    Call,
    Const,
    Function,
    Prim,
    Return,
    Rewriter,
    Tup,
    Var,
    leaves_of,
    walk,
)
from ..ir.names import Names
from ..rules.internal import ZEROS_LIKE
from .forward_rules import RuleTangents

#: Builds the tangent of a gradient helper's call (installed by
#: :mod:`s2s_ad.transforms.nested`, which builds gradient helpers).
_gradient_tangent = None


def install_gradient_tangent(build):
    global _gradient_tangent
    _gradient_tangent = build


def jvp_function(program, fn, wrt, param_ranks=None, output="pair", cache=None, width=1):
    """The JVP of ``fn`` with tangents for the parameter leaves ``wrt``.

    ``output`` is ``"pair"`` (return ``(out, tangent_out)``), ``"tangent"``
    (return ``tangent_out`` alone) or ``"flat"`` (the leaves of both in one
    tuple, for a called helper).

    With ``width`` K > 1 the JVP carries K tangents at once (vector mode):
    it takes K tangents per leaf of ``wrt`` (all of the first direction,
    then all of the second, ...), computes the primal and every partial
    once, and returns K tangent outputs (a tuple of K trees; for ``"flat"``
    the leaves of each direction in turn).  Each tangent is its own local,
    so scalar code stays scalar code.
    """
    cache = program.__dict__.setdefault("_jvps", {}) if cache is None else cache
    ranks_key = tuple(param_ranks) if param_ranks is not None else None
    key = ("jvp", fn.key, tuple(wrt), ranks_key, output, width)
    if key not in cache and fn.gradient is not None:
        fn = _calling(fn)          # its body is not what is differentiated: see call()
    if key not in cache:
        cache[key] = Forward(program, fn, wrt, param_ranks, cache, width).build(output, key)
        if custom.recomputed(fn):      # reverse over it recomputes it too (ad.checkpoint)
            cache[key].custom = fn.custom
    return cache[key]


class Forward(RuleTangents, Rewriter):
    """The JVP of one function: names, activity and the statement walk (the tangents of
    each primitive come from :class:`~s2s_ad.transforms.forward_rules.RuleTangents`)."""

    def __init__(self, program, fn, wrt, param_ranks, cache, width=1):
        self.program, self.fn, self.cache = program, fn, cache
        self.width = width
        self.q = 0                # the direction whose tangents d() names
        self.names = fn.names
        self.wrt = [p for p in fn.params if p in set(wrt)]
        seeds = [v.name for v in leaves_of(fn.out_tree) if isinstance(v, Var)]
        self.act = activity.analyse(fn, self.wrt, seeds)
        self.ranks = ranks.infer(fn, list(param_ranks) if param_ranks is not None
                                 else [None] * len(fn.params))
        self.classes = ranks.shape_classes(
            fn, [ranks.SCALAR if self.ranks.get(p) == 0 else ("param", p) for p in fn.params],
            self.ranks)
        self.tangent = {}         # (name, direction) -> tangent name
        self.tangent_names = set()
        self.mutating = any(isinstance(s, Prim) and s.rule.mutates for s in walk(fn.body))

    # -- names --------------------------------------------------------------
    def d(self, name):
        """The tangent name of an active name in direction ``self.q`` (allocated on
        first use)."""
        key = (name, self.q)
        if key not in self.tangent:
            base = "d" + name.lstrip("_")
            family = [self.names.fresh(base)] if self.width == 1 else \
                self.names.family(base, self.width)
            for q, t in enumerate(family):
                self.tangent[name, q] = t
            self.tangent_names |= set(family)
        return self.tangent[key]

    def directions(self):
        """Each direction in turn, with ``self.q`` set to it."""
        for q in range(self.width):
            self.q = q
            yield q
        self.q = 0

    def active(self, atom):
        return isinstance(atom, Var) and atom.name in self.act

    # -- the function -------------------------------------------------------
    def build(self, output, key):
        fn = self.fn
        tangents = [self.d(p) for _ in self.directions() for p in self.wrt]
        body = []
        # An active parameter without a tangent (an array written in place
        # with differentiated values) starts from zero.
        for p in fn.params:
            if p in self.act and p not in self.wrt:
                for _ in self.directions():
                    body.append(Prim([self.d(p)], ZEROS_LIKE, [Var(p)], {}, None))
        ret = None
        for s in fn.body:
            if isinstance(s, Return):
                ret = s
            else:
                self.stmt(s, body)
        value = ret.value
        per_direction = [self.tangent_tree(value, body, ret.loc) for _ in self.directions()]
        tangent = per_direction[0] if self.width == 1 else Tup(tuple(per_direction))
        if output == "pair":
            result = Tup((value, tangent))
        elif output == "flat":        # a helper's: one leaf per call target
            result = Tup(tuple(leaves_of(value)) + tuple(leaves_of(tangent)))
        else:
            result = tangent
        body.append(Return(result, ret.loc))
        name = self.program.module_names.fresh("jvp_" + fn.name)
        trees = list(fn.param_trees)
        for _ in self.directions():
            for t in fn.param_trees:
                leaves = [v.name for v in leaves_of(t) if v.name in self.wrt]
                if len(leaves) == len(leaves_of(t)):
                    trees.append(_mirror(t, self.d))
                else:
                    trees += [Var(self.d(v)) for v in leaves]
        return Function(name, list(fn.params) + tangents, trees, body, fn.consts, fn.source,
                        names=self.names, key=key, none_params=fn.none_params)

    def tangent_tree(self, value, body, loc):
        if isinstance(value, Tup):
            return Tup(tuple(self.tangent_tree(v, body, loc) for v in value.items))
        if self.active(value):
            return Var(self.d(value.name))
        if isinstance(value, Var):
            return self.emit(body, ZEROS_LIKE, [value], {}, loc)
        return Const(None) if value.value is None else Const(0.0)

    # -- statements -----------------------------------------------------------
    def stmt_Prim(self, s, body):
        body.append(replace(s))
        if s.rule.mutates:
            for _ in self.directions():
                self.setitem(s, body)
        elif len(s.targets) == 1 and s.targets[0] in self.act:
            self.prim(s, body)

    def stmt_Call(self, s, body):
        self.call(s, body)

    def stmt_If(self, s, body):
        new = replace(s, body=self.block(s.body), orelse=self.block(s.orelse),
                      joins=dict(s.joins))
        for _ in self.directions():
            new.joins.update((self.d(n), j) for n, j in s.joins.items() if n in self.act)
        body.append(new)

    def stmt_For(self, s, body):
        body.append(replace(s, body=self.block(s.body), carried=self.carried(s.carried)))

    def stmt_While(self, s, body):
        body.append(replace(s, test=self.block(s.test), body=self.block(s.body),
                            carried=self.carried(s.carried)))

    def stmt_Return(self, s, body):
        raise TypeError(f"forward mode cannot transform {s!r}")

    def carried(self, names):
        return list(names) + [self.d(n) for _ in self.directions() for n in names
                              if n in self.act]

    def setitem(self, s, body):
        x, value = s.args
        if x.name not in self.act:
            return
        dvalue = Var(self.d(value.name)) if self.active(value) else Const(0.0)
        body.append(Prim([], s.rule, [Var(self.d(x.name)), dvalue], dict(s.params), s.loc))

    def prim(self, s, body):
        target = s.targets[0]
        rule = s.rule
        active = [(a, p) for a, p in zip(s.args, rule.operands)
                  if p in rule.diff_operands and (self.active(a) or (
                      isinstance(a, Tup) and any(self.active(x) for x in a.leaves())))]
        if not active:
            for _ in self.directions():
                body.append(Prim([self.d(target)], ZEROS_LIKE, [Var(target)], {}, s.loc))
            return
        start = len(body)
        if rule.elementwise:
            values = self.elementwise(s, active, body)
        elif rule.linear:
            values = [self.multilinear(s, active, body) for _ in self.directions()]
        else:
            values = [self.jvp_templates(s, active, body) for _ in self.directions()]
        for q in self.directions():
            self.bind(s, values[q], body, start)

    def bind(self, s, value, body, start):
        """Name ``value`` as the tangent of the statement's target (direction ``self.q``).

        ``body[start:]`` holds the tangent statements emitted for ``s``.
        """
        target, dt = s.targets[0], self.d(s.targets[0])
        if isinstance(value, Var) and self.mutating and self.ranks.get(target) != 0 \
                and not _fresh(value, body[start:]):
            # A fresh array in the primal gets a fresh tangent: an alias (of
            # another tangent, or of an argument's through rt.broadcast_like
            # or a view) would be changed by a later element write to either.
            value = self.emit(body, rules.RULES["np.positive"], [value], {}, s.loc)
        if isinstance(value, Var) and value.name not in self.tangent_names:
            for t in body[start:]:
                if isinstance(t, Prim) and t.targets == [value.name]:
                    t.targets = [dt]      # the temporary is the tangent itself
                    return
        body.append(Prim([dt], rules.RULES["copy"], [value], {}, s.loc))

    def call(self, s, body):
        body.append(replace(s))
        ins = [p for p, a in zip(s.callee.params, s.args) if self.active(a)]
        outs = [t for t in s.targets if t in self.act]
        if not ins or not outs:
            for _ in self.directions():
                for t in outs:
                    body.append(Prim([self.d(t)], ZEROS_LIKE, [Var(t)], {}, s.loc))
            return
        body.pop()
        if s.callee.gradient is not None:
            self.gradient_call(s, ins, body)
            return
        if custom.has_vjp_rule(s.callee) and self.program.__dict__.get("reverse_outer"):
            raise TypeError(_VJP_RULE_UNDER_FORWARD.format(s.callee.custom.fun.__qualname__))
        if custom.has_jvp_rule(s.callee):
            # The user's rule computes one direction (and the primal) per call.
            for q in self.directions():
                tangents = [self.tangent_of(a, body, s.loc) for a in s.args]
                douts = [self.d(t) if t in self.act else self.names.temp() for t in s.targets]
                call = custom.jvp_call(self.program, s, tangents, douts)
                if q:
                    call.targets[:len(s.targets)] = [self.names.temp() for _ in s.targets]
                body.append(call)
            return
        arg_ranks = [ranks.rank_of(a, self.ranks) for a in s.args]
        callee = jvp_function(self.program, s.callee, ins, arg_ranks, "flat", self.cache,
                              self.width)
        tangents = [Var(self.d(a.name)) for _ in self.directions() for a in s.args
                    if self.active(a)]
        douts = [self.d(t) if t in self.act else self.names.temp() for _ in self.directions()
                 for t in s.targets]
        body.append(Call(list(s.targets) + douts, callee, list(s.args) + tangents, s.loc))


    def gradient_call(self, s, ins, body):
        """A call of a gradient helper (``ad.grad(f)(x)`` in user code): its
        tangent is a gradient helper of ``f``'s JVP, run as reverse code like
        the call itself (see :func:`s2s_ad.transforms.nested.gradient_tangent`)."""
        body.append(replace(s))
        arg_ranks = [ranks.rank_of(a, self.ranks) for a in s.args]
        callee = _gradient_tangent(self.program, s.callee, ins, arg_ranks, self.cache)
        for _ in self.directions():
            tangents = [Var(self.d(a.name)) for a in s.args if self.active(a)]
            douts = [self.d(t) if t in self.act else self.names.temp() for t in s.targets]
            body.append(Call(douts, callee, list(s.args) + tangents, s.loc))


def _calling(helper):
    """A function that calls ``helper`` and returns its result: what forward
    mode differentiates for a gradient helper, whose body it never reads."""
    names = Names(helper.params)
    out = map_values(helper.out_tree, lambda _: Var(names.temp()))
    body = [Call([v.name for v in leaves_of(out)], helper, [Var(p) for p in helper.params],
                 None), Return(out, None)]
    return Function(helper.name + "_call", list(helper.params), list(helper.param_trees), body,
                    {}, helper.source, names=names, key=("calling", helper.key))


#: A custom_vjp function under forward mode differentiates its body (docs/custom_rules.md);
#: under a second-order derivative that would silently drop the rule from the result.
_VJP_RULE_UNDER_FORWARD = (
    "{0} is an ad.custom_vjp function: a second derivative through it (hessian, "
    "jacfwd(grad(...)), grad(grad(...))) would differentiate the rule's derivative, which "
    "s2s_ad does not build from f_bwd (JAX does); give {0} a JVP rule with ad.custom_jvp "
    "instead (reverse mode then uses it too), see docs/custom_rules.md")


def _mirror(tree, d):
    if isinstance(tree, Tup):
        return Tup(tuple(_mirror(t, d) for t in tree.items))
    return Var(d(tree.name))


def _fresh(value, emitted):
    """Whether tangent ``value`` was just made by an elementwise operation
    (which always allocates), so no other name shares its array."""
    producer = next((t for t in emitted if isinstance(t, Prim) and t.targets == [value.name]),
                    None)
    return producer is not None and bool(producer.rule.partials)
