"""User derivative rules: ``ad.custom_vjp`` and ``ad.custom_jvp``, used as in JAX.

A decorated function calls through to itself; inside transformed code the
compiler lowers it like any user function, marks it (``Function.custom``),
and never differentiates its body where a rule covers the mode:

* reverse mode, custom_vjp: ``f_fwd(*args) -> (out, residuals)`` in the
  primal sweep and ``f_bwd(residuals, g) -> (one cotangent per argument)``
  in the adjoint sweep (:func:`vjp_adapters`);
* reverse mode, custom_jvp: the rule transposed, as JAX does.  The rule is
  linear in the tangents, so the cotangents of the arguments are the
  reverse-mode derivative of its tangent output with respect to its tangent
  inputs, at zero tangents (:func:`tangent_map`, differentiated by
  ``ModuleBuilder.helper_vjp``);
* forward mode, custom_jvp: ``f_jvp(primals, tangents) -> (out, tangent_out)``
  (:func:`jvp_call`); ``f.defjvps`` rules are summed into such a function.

Forward mode of a custom_vjp function (which JAX refuses) differentiates its
body: see docs/custom_rules.md.

``f_fwd``, ``f_bwd`` and ``f_jvp`` are ordinary module-level functions: they
are lowered, printed and compiled with the rest of the generated module, so
a custom rule runs inside jitted code too.  A rewrite that changes a custom
function (batching) changes its rules alike (``Function.rule_lowering``).
"""
import dataclasses
import functools
import inspect
import os
import types

from ..ir import (
    LEAF,
    Call,
    Const,
    Function,
    Prim,
    Return,
    Tup,
    Var,
    leaf_count,
    leaves_of,
    tree_of,
)
from ..ir.names import Names
from ..rules import RULES
from ..rules.internal import ZEROS_LIKE


class _Custom:
    kind = ""

    def __init__(self, fun, nondiff_argnums=()):
        if not callable(fun):
            raise TypeError(f"@ad.{self.kind} expects a function, got {fun!r}")
        self.fun = fun
        functools.update_wrapper(self, fun)
        self.nondiff_argnums = _argnums(fun, nondiff_argnums, self.kind)

    def __call__(self, *args, **kwargs):
        return self.fun(*args, **kwargs)

    def __repr__(self):
        return f"<s2s_ad {self.kind} {self.fun.__qualname__}>"

    def _check_rule(self, rule, what):
        if not callable(rule):
            raise TypeError(f"{self.fun.__qualname__}.{what} expects functions, got {rule!r}")
        from .parse import FunctionSource
        FunctionSource(rule)        # fenced now, at the rule's own lines


class custom_vjp(_Custom):
    """A function with a user-defined VJP: ``f.defvjp(f_fwd, f_bwd)``."""
    kind = "custom_vjp"

    def __init__(self, fun, nondiff_argnums=()):
        super().__init__(fun, nondiff_argnums)
        self.fwd = self.bwd = None

    def defvjp(self, fwd, bwd):
        self._check_rule(fwd, "defvjp")
        self._check_rule(bwd, "defvjp")
        self.fwd, self.bwd = fwd, bwd
        return self


class custom_jvp(_Custom):
    """A function with a user-defined JVP: ``f.defjvp(f_jvp)``, or one rule
    per argument: ``f.defjvps(rule_0, rule_1, ...)``."""
    kind = "custom_jvp"

    def __init__(self, fun, nondiff_argnums=()):
        super().__init__(fun, nondiff_argnums)
        self.jvp = None
        self.jvps = None    # defjvps: per argument, rule(g, ans, *primals) or None

    def defjvp(self, jvp):
        self._check_rule(jvp, "defjvp")
        self.jvp, self.jvps = jvp, None
        return self

    def defjvps(self, *jvps):
        """One rule per argument, as in JAX: ``rule(g, ans, *primals)`` is that
        argument's contribution to the output tangent (``g`` its tangent,
        ``ans`` the output); None for an argument whose tangent contributes
        nothing.  The output tangent is the sum of the contributions."""
        n = len(inspect.signature(self.fun).parameters)
        if len(jvps) != n:
            raise TypeError(f"{self.fun.__qualname__}.defjvps expects one rule per argument "
                            f"({n}), got {len(jvps)}")
        if self.nondiff_argnums:
            raise TypeError(f"{self.fun.__qualname__}.defjvps: a function with nondiff_argnums "
                            f"takes its rule through defjvp")
        for rule in jvps:
            if rule is not None:
                self._check_rule(rule, "defjvps")
        self.jvp, self.jvps = None, tuple(jvps)
        return self


def _argnums(fun, nondiff_argnums, kind):
    """``nondiff_argnums`` checked against ``fun``'s positional parameters."""
    nums = (nondiff_argnums,) if isinstance(nondiff_argnums, int) else tuple(nondiff_argnums)
    n = len(inspect.signature(fun).parameters)
    for i in nums:
        if not isinstance(i, int) or not -n <= i < n:
            raise TypeError(f"ad.{kind}(nondiff_argnums={nondiff_argnums!r}): each must be the "
                            f"position of an argument of {fun.__qualname__} ({n} arguments)")
    return tuple(sorted({i % n for i in nums}))


def _split(callee):
    """(leaf positions of the nondiff arguments, of the others) of ``callee``'s parameters."""
    nondiff, diff, k = [], [], 0
    for i, tree in enumerate(callee.param_trees):
        n = len(leaves_of(tree))
        (nondiff if i in callee.custom.nondiff_argnums else diff).extend(range(k, k + n))
        k += n
    return nondiff, diff


def nondiff_leaves(callee):
    """The positions of the parameter leaves of ``callee``'s nondiff arguments
    (an ``f_bwd`` takes them first)."""
    return _split(callee)[0]


def has_vjp_rule(callee):
    """Whether a lowered called function carries a user VJP rule (ad.custom_vjp)."""
    rule = getattr(callee, "custom", None)
    return isinstance(rule, custom_vjp) and rule.fwd is not None


def has_jvp_rule(callee):
    """Whether a lowered called function carries a user JVP rule (ad.custom_jvp)."""
    rule = getattr(callee, "custom", None)
    return isinstance(rule, custom_jvp) and (rule.jvp is not None or rule.jvps is not None)


def has_reverse_rule(callee):
    """Whether reverse mode uses a user rule for a call of ``callee`` (its VJP
    rule, or its JVP rule transposed) instead of differentiating its body."""
    return has_vjp_rule(callee) or has_jvp_rule(callee)


def lower_rule(program, callee, which, trees):
    """The lowered rule ``which`` ("fwd", "bwd" or "jvp") of custom function
    ``callee``, for arguments of structures ``trees``.

    A rewritten custom function (a batched one) lowers its rules its own way
    (``callee.rule_lowering``); ``f.defjvps`` rules make one JVP function
    (:func:`jvps_function`).
    """
    if callee.rule_lowering is not None:
        return callee.rule_lowering(which, trees)
    custom = callee.custom
    if which == "jvp" and custom.jvp is None:
        return jvps_function(program, callee, trees)
    nondiff = [trees_of_args(callee)[i] for i in custom.nondiff_argnums]
    if which == "jvp" and nondiff:
        return _jvp_adapter(program, callee)
    if which == "bwd":
        trees = nondiff + list(trees)
    return program.lower(getattr(custom, which), trees)


def trees_of_args(callee):
    """The structures of ``callee``'s arguments as its rules are lowered with
    (a function passed to it bound, see ``anf.common.StaticFn``)."""
    return list(callee.custom_trees or [tree_of(t) for t in callee.param_trees])


def _jvp_adapter(program, callee):
    """``(primals, tangents) -> (out, tangent_out)`` of every argument, around a
    JVP rule with nondiff_argnums: ``f_jvp(*nondiff_args, primals, tangents)``
    with the primals and tangents of the other arguments only."""
    custom = callee.custom
    trees = trees_of_args(callee)
    nums = custom.nondiff_argnums
    others = [t for i, t in enumerate(trees) if i not in nums]
    jvp = program.lower(custom.jvp, [trees[i] for i in nums] + [tuple(others), tuple(others)])
    nondiff, diff = _split(callee)
    names = Names(callee.params)
    primals = [names.fresh(p) for p in callee.params]
    tangents = [names.fresh("d" + p.lstrip("_")) for p in callee.params]
    outs = [Var(names.fresh("out")) for _ in leaves_of(jvp.out_tree)]
    args = [Var(primals[i]) for i in nondiff + diff] + [Var(tangents[i]) for i in diff]
    body = [Call([o.name for o in outs], jvp, args, None),
            Return(_rebuild(jvp.out_tree, iter(outs)), None)]
    p_trees = [_renamed(t, dict(zip(callee.params, primals))) for t in callee.param_trees]
    t_trees = [_renamed(t, dict(zip(callee.params, tangents))) for t in callee.param_trees]
    return Function(program.module_names.fresh(f"jvp_{callee.name}"), primals + tangents,
                    [Tup(tuple(p_trees)), Tup(tuple(t_trees))], body, {}, callee.source,
                    names=names, key=("custom jvp nondiff", callee.key))


def rule_of(obj):
    return obj if isinstance(obj, _Custom) else None


def entry_function(program, custom, trees, known=()):
    """A lowered function whose body calls the custom function once.

    Transforming a custom function itself (``ad.grad(f)`` with ``f``
    decorated) goes through this wrapper, so the rule is used as it is for
    a call inside other code.  ``known``: (leaf position, value) of the
    argument leaves known before the run; a function among them is bound
    into the custom function and its rules (``ad.grad(app, 1)(cube, 3.)``),
    and the wrapper's parameter for it is not read.
    """
    from .anf.common import StaticFn
    bound, trees, k = {}, list(trees), 0
    functions = {i: v for i, v in known if isinstance(v, types.FunctionType)}
    for i, tree in enumerate(trees):
        if tree is LEAF and k in functions:
            bound[i] = trees[i] = StaticFn(Const(functions[k]))
        k += leaf_count(tree)
    callee = lower_custom(program, custom, trees)
    names = Names(callee.params)
    params, param_trees = [], []
    for i, tree in enumerate(callee.param_trees):
        if i in bound:
            tree = Var(names.fresh(f"fn{i}"))
        params += [leaf.name for leaf in leaves_of(tree)]
        param_trees.append(tree)
    outs = [Var(names.temp()) for _ in leaves_of(callee.out_tree)]
    it = iter(outs)
    value = _rebuild(callee.out_tree, it)
    body = [Call([o.name for o in outs], callee, [Var(p) for p in callee.params], None),
            Return(value, callee.body[-1].loc)]
    fn = Function(callee.source.name, params, param_trees, body, {},
                  callee.source, names=names, key=("custom entry", callee.key))
    fn.name = program.module_names.fresh(f"call_{callee.name}")
    return fn


def lower_custom(program, custom, trees, node=None, caller=None):
    callee = program.lower(custom.fun, trees, node, caller, tag=custom)
    callee.custom = custom
    callee.custom_trees = list(trees)      # a bound function (StaticFn) included
    return callee


def vjp_adapters(module, callee, fwd_name, bwd_name):
    """(fwd adapter, bwd adapter, residual names) around the user's f_fwd/f_bwd.

    Same calling convention as a generated helper VJP: ``fwd(params)`` returns
    the output leaves then the residual leaves; ``bwd(params, residuals,
    cotangents of every output leaf)`` returns one cotangent per parameter.
    """
    custom, program = callee.custom, module.program
    trees = trees_of_args(callee)
    fwd = lower_rule(program, callee, "fwd", trees)
    out_tree = fwd.out_tree
    if not (isinstance(out_tree, Tup) and len(out_tree.items) == 2):
        raise TypeError(f"{custom.fwd.__qualname__} must return (output, residuals)")
    out, res = out_tree.items
    names = Names(callee.params)
    out_vars = [Var(names.fresh("out")) for _ in leaves_of(out)]
    res_vars = [Var(names.fresh("res")) for _ in leaves_of(res)]
    body = [Call([v.name for v in out_vars + res_vars], fwd, [Var(p) for p in callee.params],
                 None),
            Return(Tup(tuple(out_vars + res_vars)), None)]
    fwd_adapter = Function(fwd_name, list(callee.params), list(callee.param_trees), body, {},
                           fwd.source, names=names, key=("custom fwd", callee.key))
    res_tree = tree_of(res)
    cot_tree = tree_of(out)
    bwd = lower_rule(program, callee, "bwd", [res_tree, cot_tree])
    cts = list(leaves_of(bwd.out_tree))
    nondiff, diff = _split(callee)
    if not isinstance(bwd.out_tree, Tup) or len(cts) != len(diff):
        what = " differentiable" if nondiff else ""
        n_args = len(callee.param_trees) - len(custom.nondiff_argnums)
        raise TypeError(f"{custom.bwd.__qualname__} must return a tuple with one cotangent "
                        f"per{what} argument of {custom.fun.__qualname__} ({n_args})")
    names = Names(callee.params)
    res_params = [names.fresh("res") for _ in res_vars]
    cot_params = [names.fresh("g") for _ in out_vars]
    ct_vars = [names.fresh("ct") for _ in cts]
    passed = [Var(callee.params[i]) for i in nondiff] + [Var(n) for n in res_params + cot_params]
    body = [Call(ct_vars, bwd, passed, None)]
    # None for an argument's cotangent is a zero one, as in JAX; a nondiff
    # argument's is 0.0 (it may be a string).
    by_leaf = dict(zip(diff, zip(cts, ct_vars)))
    results = []
    for i, p in enumerate(callee.params):
        if i not in by_leaf:
            results.append(Const(0.0))
            continue
        ct, v = by_leaf[i]
        results.append(zero_of(Var(p), names, body, None) if _is_none(ct) else Var(v))
    body.append(Return(Tup(tuple(results)), None))
    bwd_adapter = Function(bwd_name, list(callee.params) + res_params + cot_params,
                           list(callee.param_trees), body, {}, bwd.source, names=names,
                           key=("custom bwd", callee.key))
    return fwd_adapter, bwd_adapter, [v.name for v in res_vars]


def jvp_call(program, s, tangents, douts):
    """The call of the user's ``f_jvp`` that replaces a call of a custom_jvp function.

    ``tangents`` has one atom per argument leaf (zeros for inactive ones),
    ``douts`` one name per output leaf.
    """
    callee = s.callee
    jvp = lowered_jvp(program, callee)
    return Call(list(s.targets) + list(douts), jvp, list(s.args) + list(tangents), s.loc)


def lowered_jvp(program, callee):
    """The lowered JVP rule of ``callee``: ``(primal leaves, tangent leaves) ->
    (output leaves, tangent output leaves)``."""
    trees = trees_of_args(callee)
    jvp = lower_rule(program, callee, "jvp", [tuple(trees), tuple(trees)])
    out_tree = jvp.out_tree
    if not (isinstance(out_tree, Tup) and len(out_tree.items) == 2):
        rule = callee.custom.jvp or callee.custom.fun
        raise TypeError(f"{rule.__qualname__} must return (output, tangent_output)")
    return jvp


def primal_adapter(callee, fname):
    """``fname(params) -> output leaves``: the forward half of the VJP of a
    custom_jvp function (it keeps no residuals: the adjoint half reads the
    call's arguments)."""
    names = Names(callee.params)
    outs = [Var(names.fresh("out")) for _ in leaves_of(callee.out_tree)]
    body = [Call([v.name for v in outs], callee, [Var(p) for p in callee.params], None),
            Return(Tup(tuple(outs)), None)]
    return Function(fname, list(callee.params), list(callee.param_trees), body, {},
                    callee.source, names=names, key=("custom primal", callee.key))


def tangent_map(program, callee):
    """``tangents_f(primals, tangents) -> tangent output leaves``: the JVP
    rule of ``callee`` as a function of the tangents, linear in them.  Its
    reverse-mode derivative with respect to the tangents, at zero tangents,
    is the rule transposed: the VJP of ``callee``.

    Returns (the function, its tangent parameters)."""
    jvp = lowered_jvp(program, callee)
    names = Names(callee.params)
    primals = [names.fresh(p) for p in callee.params]
    tangents = [names.fresh("d" + p.lstrip("_")) for p in callee.params]
    n_out = len(leaves_of(callee.out_tree))
    outs = [names.fresh("out") for _ in range(n_out)]
    douts = [names.fresh("dout") for _ in range(n_out)]
    body = [Call(outs + douts, jvp, [Var(n) for n in primals + tangents], None),
            Return(Tup(tuple(Var(d) for d in douts)), None)]
    trees = ([_renamed(t, dict(zip(callee.params, primals))) for t in callee.param_trees]
             + [_renamed(t, dict(zip(callee.params, tangents))) for t in callee.param_trees])
    fn = Function(program.module_names.fresh(f"tangents_{callee.name}"), primals + tangents,
                  trees, body, {}, callee.source, names=names,
                  key=("custom tangents", callee.key))
    return fn, tangents


def jvps_function(program, callee, trees):
    """The JVP function of ``f.defjvps(rule_0, ...)``: ``(primals, tangents) ->
    (f(*primals), sum over arguments i of rule_i(tangent_i, f(*primals), *primals))``."""
    custom = callee.custom
    names = Names(callee.params)
    primals = [names.fresh(p) for p in callee.params]
    tangents = [names.fresh("d" + p.lstrip("_")) for p in callee.params]
    p_trees = [_renamed(t, dict(zip(callee.params, primals))) for t in callee.param_trees]
    t_trees = [_renamed(t, dict(zip(callee.params, tangents))) for t in callee.param_trees]
    outs = [Var(names.fresh("ans")) for _ in leaves_of(callee.out_tree)]
    body = [Call([o.name for o in outs], callee, [Var(p) for p in primals], None)]
    total = None
    for rule, t_tree in zip(custom.jvps, t_trees):
        if rule is None:
            continue
        fn = program.lower(rule, [tree_of(t_tree), tree_of(callee.out_tree)] + list(trees[0]))
        part = [Var(names.fresh("part")) for _ in leaves_of(fn.out_tree)]
        if len(part) != len(outs):
            raise TypeError(f"{rule.__qualname__} must return a tangent shaped like the "
                            f"output of {custom.fun.__qualname__}")
        body.append(Call([v.name for v in part], fn, list(leaves_of(t_tree)) + outs
                         + [Var(p) for p in primals], None))
        total = part if total is None else [_add(a, b, names, body) for a, b in zip(total, part)]
    if total is None:
        total = [zero_of(o, names, body, None) for o in outs]
    it_out, it_tan = iter(outs), iter(total)
    value = Tup((_rebuild(callee.out_tree, it_out), _rebuild(callee.out_tree, it_tan)))
    body.append(Return(value, None))
    return Function(program.module_names.fresh(f"jvps_{callee.name}"), primals + tangents,
                    [Tup(tuple(p_trees)), Tup(tuple(t_trees))], body, {}, callee.source,
                    names=names, key=("custom jvps", callee.key))


def _add(a, b, names, body):
    z = Var(names.temp())
    body.append(Prim([z.name], RULES["np.add"], [a, b], {}, None))
    return z


def _renamed(tree, mapping):
    """A parameter tree with its leaves renamed by ``mapping``."""
    if isinstance(tree, Tup):
        return dataclasses.replace(tree, items=tuple(_renamed(t, mapping) for t in tree.items))
    return Var(mapping[tree.name]) if isinstance(tree, Var) else tree


def _is_none(atom):
    return isinstance(atom, Const) and atom.value is None


def zero_of(atom, names, body, loc):
    z = Var(names.temp())
    body.append(Prim([z.name], ZEROS_LIKE, [atom], {}, loc))
    return z


def _rebuild(tree, it):
    if isinstance(tree, Tup):
        return Tup(tuple(_rebuild(t, it) for t in tree.items))
    return next(it)


class Checkpointed(_Custom):
    """A function made by ``ad.checkpoint``: see :func:`checkpoint`."""
    kind = "checkpoint"

    def __init__(self, fun, policy=None, static_argnums=()):
        super().__init__(fun, static_argnums)
        self.policy = policy_name(policy)


def checkpoint(fun=None, *, policy=None, prevent_cse=True, static_argnums=()):
    """``ad.checkpoint(fn, policy=None)``, as ``jax.checkpoint``: reverse mode
    keeps the wrapped function's arguments, not its intermediates, and runs it
    again in the backward sweep (see docs/checkpointing.md).  A decorator too,
    bare or with its options (``@ad.checkpoint(policy=...)``).

    ``policy`` says what is kept all the same: ``nothing_saveable`` (the
    default, JAX's too) or ``everything_saveable`` (no recomputation: the
    function is differentiated as if it were not wrapped), as a member of
    ``ad.checkpoint_policies`` or its name.  ``static_argnums``: arguments
    that get no cotangent (an int, a flag).  ``prevent_cse`` is JAX's guard
    against its compiler merging the recomputation away; the generated code
    runs the recomputation as written, so it changes nothing.  The value and
    every derivative are those of ``fn``.
    """
    if fun is None:
        return functools.partial(checkpoint, policy=policy, prevent_cse=prevent_cse,
                                 static_argnums=static_argnums)
    if not isinstance(prevent_cse, bool):
        raise TypeError(f"ad.checkpoint(prevent_cse={prevent_cse!r}) expects True or False")
    return Checkpointed(fun, policy, static_argnums)


class _Policy:
    """A member of ``ad.checkpoint_policies``: which values a checkpointed
    function keeps for the backward sweep."""

    def __init__(self, name, doc):
        self.__name__ = self.name = name
        self.__doc__ = doc

    def __repr__(self):
        return f"ad.checkpoint_policies.{self.name}"


checkpoint_policies = types.SimpleNamespace(
    nothing_saveable=_Policy("nothing_saveable", "Keep only the arguments; recompute the rest."),
    everything_saveable=_Policy("everything_saveable", "Keep every value the backward sweep "
                                "reads (no recomputation: as if the function were not wrapped)."))


def policy_name(policy):
    """The name of a checkpoint policy given as a member of
    ``ad.checkpoint_policies``, its name, or None (``nothing_saveable``)."""
    if policy is None:
        return "nothing_saveable"
    name = policy.name if isinstance(policy, _Policy) else policy
    if not isinstance(name, str) or not hasattr(checkpoint_policies, name):
        known = ", ".join(f"ad.checkpoint_policies.{n}" for n in vars(checkpoint_policies))
        raise TypeError(f"ad.checkpoint(policy={policy!r}): the policy must be one of {known} "
                        f"(or its name as a string)")
    return name


def recomputed(callee):
    """Whether reverse mode runs a call of ``callee`` again in the backward
    sweep instead of keeping its intermediates: ``ad.checkpoint``, or every
    helper without a rule of its own under ``S2S_AD_REMAT=calls`` (the
    oracle's ``[checkpointed calls]`` witness)."""
    rule = getattr(callee, "custom", None)
    if isinstance(rule, Checkpointed):
        return rule.policy == "nothing_saveable"
    return os.environ.get("S2S_AD_REMAT") == "calls" and rule is None and \
        getattr(callee, "gradient", None) is None
