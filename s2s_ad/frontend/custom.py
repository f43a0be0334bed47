"""User derivative rules: ``ad.custom_vjp`` and ``ad.custom_jvp``, used as in JAX.

A decorated function calls through to itself; inside transformed code the
compiler lowers it like any user function, marks it, and:

* reverse mode calls ``f_fwd(*args) -> (out, residuals)`` in the primal
  sweep and ``f_bwd(residuals, g) -> (one cotangent per argument)`` in the
  adjoint sweep (:func:`vjp_adapters`), instead of differentiating the body;
* forward mode calls ``f_jvp(primals, tangents) -> (out, tangent_out)``.

``f_fwd``, ``f_bwd`` and ``f_jvp`` are ordinary module-level functions: they
are lowered, printed and compiled with the rest of the generated module, so
a custom rule runs inside jitted code too.  A rule for one mode only: the
other mode differentiates the function's body (JAX would refuse; here the
body is plain differentiable code, so its derivative is the honest fallback).
"""
import functools

from ..ir import Call, Function, Prim, Return, Tup, Var, leaves_of, tree_of
from ..ir.names import Names
from ..rules.internal import ZEROS_LIKE


class _Custom:
    kind = ""

    def __init__(self, fun):
        if not callable(fun):
            raise TypeError(f"@ad.{self.kind} expects a function, got {fun!r}")
        self.fun = fun
        functools.update_wrapper(self, fun)

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

    def __init__(self, fun):
        super().__init__(fun)
        self.fwd = self.bwd = None

    def defvjp(self, fwd, bwd):
        self._check_rule(fwd, "defvjp")
        self._check_rule(bwd, "defvjp")
        self.fwd, self.bwd = fwd, bwd
        return self


class custom_jvp(_Custom):
    """A function with a user-defined JVP: ``f.defjvp(f_jvp)``."""
    kind = "custom_jvp"

    def __init__(self, fun):
        super().__init__(fun)
        self.jvp = None

    def defjvp(self, jvp):
        self._check_rule(jvp, "defjvp")
        self.jvp = jvp
        return self


def has_vjp_rule(callee):
    """Whether a lowered called function carries a user VJP rule (ad.custom_vjp)."""
    rule = getattr(callee, "custom", None)
    return isinstance(rule, custom_vjp) and rule.fwd is not None


def has_jvp_rule(callee):
    """Whether a lowered called function carries a user JVP rule (ad.custom_jvp)."""
    rule = getattr(callee, "custom", None)
    return isinstance(rule, custom_jvp) and rule.jvp is not None


def rule_of(obj):
    return obj if isinstance(obj, _Custom) else None


def entry_function(program, custom, trees):
    """A lowered function whose body calls the custom function once.

    Transforming a custom function itself (``ad.grad(f)`` with ``f``
    decorated) goes through this wrapper, so the rule is used as it is for
    a call inside other code.
    """
    callee = lower_custom(program, custom, trees)
    names = Names(callee.params)
    outs = [Var(names.temp()) for _ in leaves_of(callee.out_tree)]
    it = iter(outs)
    value = _rebuild(callee.out_tree, it)
    body = [Call([o.name for o in outs], callee, [Var(p) for p in callee.params], None),
            Return(value, callee.body[-1].loc)]
    fn = Function(callee.source.name, list(callee.params), list(callee.param_trees), body, {},
                  callee.source, names=names, key=("custom entry", callee.key))
    fn.name = program.module_names.fresh(f"call_{callee.name}")
    return fn


def lower_custom(program, custom, trees, node=None, caller=None):
    callee = program.lower(custom.fun, trees, node, caller)
    callee.custom = custom
    return callee


def vjp_adapters(module, callee, fwd_name, bwd_name):
    """(fwd adapter, bwd adapter, residual names) around the user's f_fwd/f_bwd.

    Same calling convention as a generated helper VJP: ``fwd(params)`` returns
    the output leaves then the residual leaves; ``bwd(params, residuals,
    cotangents of every output leaf)`` returns one cotangent per parameter.
    """
    custom, program = callee.custom, module.program
    trees = [tree_of(t) for t in callee.param_trees]
    fwd = program.lower(custom.fwd, trees)
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
    bwd = program.lower(custom.bwd, [res_tree, cot_tree])
    cts = list(leaves_of(bwd.out_tree))
    n_params = len(callee.params)
    if not isinstance(bwd.out_tree, Tup) or len(cts) != n_params:
        raise TypeError(f"{custom.bwd.__qualname__} must return a tuple with one cotangent "
                        f"per argument of {custom.fun.__qualname__} ({n_params})")
    names = Names(callee.params)
    res_params = [names.fresh("res") for _ in res_vars]
    cot_params = [names.fresh("g") for _ in out_vars]
    ct_vars = [names.fresh("ct") for _ in cts]
    body = [Call(ct_vars, bwd, [Var(n) for n in res_params + cot_params], None),
            Return(Tup(tuple(Var(n) for n in ct_vars)), None)]
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
    custom = callee.custom
    trees = [tree_of(t) for t in callee.param_trees]
    jvp = program.lower(custom.jvp, [tuple(trees), tuple(trees)])
    out_tree = jvp.out_tree
    if not (isinstance(out_tree, Tup) and len(out_tree.items) == 2):
        raise TypeError(f"{custom.jvp.__qualname__} must return (output, tangent_output)")
    return Call(list(s.targets) + list(douts), jvp, list(s.args) + list(tangents), s.loc)


def zero_of(atom, names, body, loc):
    z = Var(names.temp())
    body.append(Prim([z.name], ZEROS_LIKE, [atom], {}, loc))
    return z


def _rebuild(tree, it):
    if isinstance(tree, Tup):
        return Tup(tuple(_rebuild(t, it) for t in tree.items))
    return next(it)
