"""normalize (part): transforms called inside transformed functions.

``ad.grad(f)(x)``, ``ad.value_and_grad``, ``ad.jacfwd``, ``ad.jacrev``,
``ad.hessian``, ``ad.vjp`` and ``ad.hvp`` written in a function that is
itself transformed are lowered here, by :class:`~s2s_ad.frontend.anf.Lowerer`, to
ordinary lowered code, so the transform around them differentiates,
batches and compiles them like any other code (``ad.jvp`` and ``ad.vmap``
are lowered in :mod:`s2s_ad.frontend.anf` and take the same transformed functions).

Receives the gast node of the transform expression and the lowered
arguments.  Guarantees: each transformed function (a :class:`Spec`) becomes
one lowered helper :class:`~s2s_ad.ir.Function` per argument structure,
named after it (``grad_f``, ``jac_f``) and called like a user function.
Its body calls ``f``'s forward-mode JVP (:func:`s2s_ad.transforms.forward.jvp_function`)
once per element of each differentiated argument leaf, along that
element's unit tangent, and writes each directional derivative into a
column of the Jacobian (``rt.jac_zeros`` storage, one row per output
element).  A gradient is the one-row case; ``hessian`` is ``jacfwd`` of
``jacrev``, so the JVP of the inner helper (forward over forward); ``hvp``
is the JVP of the gradient helper; ``vjp``'s function is the gradient of
``<cotangent, f(x)>``.

Cost: one JVP (about two to three evaluations of ``f``) per input element,
plus one evaluation for the value, so O(n) passes for n differentiated
elements where reverse mode would take one; a Hessian takes O(n^2).  This
is exact and composes with every outer transform (reverse mode
differentiates the loop of JVPs; an outer JVP differentiates it again);
the price is paid for large differentiated arguments.
"""
import ast
import os
from dataclasses import dataclass, replace
from typing import Any

import gast

from .. import rules
from ..analyses import ranks
from ..frontend import custom
from ..frontend.anf import (
    LEAF,
    LocalFn,
    Lowerer,
    map_values,
    transform_kind,
    transformed_object,
    tree_of,
)
from ..frontend.parse import is_user_function
from ..ir import (
    Call,
    Const,
    For,
    Function,
    Gradient,
    Prim,
    Record,
    Return,
    Tup,
    Var,
    leaves_of,
    pytree,
)
from ..ir.names import Names
from ..rules.internal import (
    FLAT,
    FLAT_SIZE,
    GRAD_ZEROS,
    JAC_SHAPE,
    JAC_ZEROS,
    UNIT_LIKE,
)
from . import forward

_STORED = ("a transformed function (such as ad.grad(f)) can only be called where it is written "
           "inside a transformed function: write ad.grad(f)(x), not g = ad.grad(f); g(x), and "
           "do not pass or return it")


@dataclass(frozen=True)
class Spec:
    """A transformed function written in user code.

    ``kind`` is ``"fn"`` (a user function, ``fn``), ``"grad"``,
    ``"value_and_grad"`` or ``"jac"`` (of the :class:`Spec` ``fn``), or
    ``"contract"`` (``<cotangent, fn(primals)>``, whose gradient is ``vjp``'s
    function).
    """
    kind: str
    fn: Any
    argnums: tuple = (0,)
    single: bool = True
    has_aux: bool = False

    @property
    def name(self):
        if self.kind == "fn":
            name = getattr(self.fn, "__name__", "f")
            return name if name.isidentifier() else "lambda_"      # a lambda's "<lambda>"
        return f"{self.kind}_{self.fn.name}"


def spec_of(lw, node):
    """The :class:`Spec` of the function expression ``node`` (``f``,
    ``ad.grad(f, argnums=1)``, ``ad.hessian(f)``...)."""
    if isinstance(node, gast.Call):
        ok, obj = lw.src.resolve(node.func)
        kind = transform_kind(obj) if ok else None
        if kind in ("grad", "value_and_grad", "jac", "hessian"):
            return _transform_spec(lw, kind, node)
        if kind is not None:
            raise lw.error(node, f"ad.{kind}(...) cannot be transformed again inside a "
                           f"transformed function; call it on arguments, or move it into a "
                           f"module-level function and transform that")
    local = lw.local_callee(node) if isinstance(node, (gast.Lambda, gast.Name)) else None
    if local is not None:                  # a lambda or nested def: closure-converted
        return Spec("fn", closure_of(local))
    ok, obj = lw.src.resolve(node)
    if ok:
        spec = _value_spec(obj)
        if spec is not None:
            return spec
    raise lw.error(node, "the function given to a transform here must be a function named "
                   "directly (module-level or nested), a lambda, or a transform of one "
                   "(ad.grad(f))")


def _value_spec(obj):
    """The :class:`Spec` of a function object, or None."""
    if custom.rule_of(obj) is not None:
        return Spec("fn", obj)
    what = transformed_object(obj)
    if what == "batched":          # ad.vmap(f) bound outside: its wrapper def (as_function)
        try:
            return Spec("fn", obj.as_function()[0])
        except TypeError:
            return None
    if what == "jacobian":
        inner = _value_spec(obj.fun)
        return None if inner is None else Spec("jac", inner, obj.argnums, obj.single)
    if what == "transformed":
        if obj.layers or obj.units:
            return None
        if obj.kind == "primal":
            return _value_spec(obj.fun)
        if obj.kind in ("grad", "value_and_grad"):
            inner = _value_spec(obj.fun)
            return None if inner is None else Spec(obj.kind, inner, tuple(obj.argnums),
                                                   obj.single, obj.has_aux)
        return None
    obj = getattr(obj, "__s2s_ad_function__", obj)
    return Spec("fn", obj) if is_user_function(obj) else None


def _transform_spec(lw, kind, node):
    names = ("fun", "argnums", "has_aux")
    given = list(zip(names, node.args)) + [(k.arg, k.value) for k in node.keywords]
    if len(node.args) > (2 if kind == "hessian" else 3):
        raise lw.error(node, f"too many arguments to ad.{kind}")
    options = {"argnums": 0, "has_aux": False}
    fun = None
    for name, value in given:
        if name == "fun":
            fun = value
        elif name in options and (name == "argnums" or kind != "hessian"):
            options[name] = _literal(lw, value, name, kind)
        else:
            raise lw.error(node, f"ad.{kind} inside a transformed function takes no "
                           f"argument '{name}'")
    if fun is None:
        raise lw.error(node, f"ad.{kind} needs the function to transform")
    argnums, has_aux = options["argnums"], options["has_aux"]
    single = isinstance(argnums, int) and not isinstance(argnums, bool)
    nums = (argnums,) if single else argnums
    if not (isinstance(nums, tuple) and nums and all(
            isinstance(a, int) and not isinstance(a, bool) for a in nums)):
        raise lw.error(node, f"argnums must be an int or a non-empty tuple of ints, got "
                       f"{argnums!r}")
    if not isinstance(has_aux, bool):
        raise lw.error(node, "has_aux must be True or False")
    inner = spec_of(lw, fun)
    if kind == "hessian":
        return Spec("jac", Spec("jac", inner, nums, single), nums, single)
    return Spec(kind, inner, nums, single, has_aux)


def _literal(lw, node, name, kind):
    try:
        return ast.literal_eval(gast.gast_to_ast(node))
    except ValueError:
        raise lw.error(node, f"{name} of ad.{kind} inside a transformed function must be "
                       f"written as a literal") from None


# -- transformed functions as lowered helpers -----------------------------------------
def apply(lw, spec, args, node):
    """The value of the transformed function ``spec`` called on lowered ``args``."""
    if spec.kind == "fn" and not isinstance(spec.fn, Closure):
        return lw.call(spec.fn, args, {}, node)
    callee = lower(lw, spec, [tree_of(a) for a in args], node)
    leaves = [leaf for a in args for leaf in leaves_of(a)] + list(hidden_of(spec))
    out = lw._fresh_like(callee.out_tree)
    lw.body.append(Call([t.name for t in leaves_of(out)], callee, leaves, lw.src.loc(node)))
    return out


def lower(lw, spec, trees, node):
    """The lowered helper function computing ``spec`` for argument structures ``trees``."""
    program = lw.program
    cache = program.__dict__.setdefault("_nested", {})
    if spec.kind == "fn" and isinstance(spec.fn, Closure):
        key = ("closure", spec.fn, tuple(trees))
        if key not in cache:
            cache[key] = program.functions[key] = _lower_closure(lw, spec.fn, trees, node, key)
        return cache[key]
    if spec.kind == "fn":
        fn = spec.fn
        if custom.rule_of(fn) is not None:
            return program.lower_custom(fn, trees, node, lw.src)
        callee = program.lower(fn, trees, node, lw.src)
        writes = program.arg_writes.get(callee.key)
        if writes:
            loc = next(iter(writes.values()))
            raise lw.error(node, f"{fn.__name__}() writes into an array it is passed (line "
                           f"{loc.lineno}: '{loc.text.strip()}'), so it cannot be transformed "
                           f"here: each derivative pass would see the array the last one "
                           f"changed; copy the argument first in {fn.__name__} "
                           f"(u = u.copy())")
        return callee
    spec = _jacobian_of_gradient(lw, spec, trees, node)
    key = ("nested", spec, tuple(trees))
    if key not in cache:
        if spec.kind == "contract":     # the primals, then the cotangent
            inner = lower(lw, spec.fn, trees[:-1], node)
            cache[key] = _Derivative(lw, spec, inner, node).contract(key, trees[-1])
        else:
            inner = lower(lw, spec.fn, trees, node)
            cache[key] = _Derivative(lw, spec, inner, node).build(key)
        program.functions[key] = cache[key]   # seen by whole-program queries (has_loops)
    return cache[key]


def _jacobian_of_gradient(lw, spec, trees, node):
    """A Jacobian of a Jacobian (``ad.hessian``, ``jacfwd(jacrev(f))``) of a
    function whose output is one scalar is the Jacobian of its gradient: one
    reverse-over-forward pass per column instead of one forward-over-forward
    pass per entry."""
    inner = spec.fn if spec.kind == "jac" else None
    if inner is None or inner.kind != "jac" or inner.has_aux or inner.fn.kind == "contract":
        return spec
    fn = lower(lw, inner.fn, trees, node)
    out = fn.out_tree
    if isinstance(out, Tup) or ranks.infer(fn, [None] * len(fn.params)).get(
            getattr(out, "name", None)) != 0:
        return spec
    return replace(spec, fn=Spec("grad", inner.fn, inner.argnums, inner.single))


# -- lambdas and nested defs: closure conversion -------------------------------------
@dataclass(frozen=True, eq=False)
class Closure:
    """A lambda or nested ``def`` given to a transform, closure-converted.

    Its helper takes the function's own parameters, then one hidden
    parameter per value of the defining function it reads (``hidden``, atoms
    of the caller, passed at each call): so the inner transform
    differentiates only the function's own arguments, and the transform
    around the caller differentiates through the captured values too (an
    array closed over is a constant for ``ad.grad(lambda v: ...)`` and a
    value like any other for the function that contains it).  ``fn`` is the
    :class:`~s2s_ad.frontend.anf.LocalFn` with its free names (and those of the local
    functions it reads, to any depth) bound to the caller's values now.
    """
    fn: Any
    hidden: tuple          # the caller's atoms, passed after the arguments
    names: tuple           # a readable name for each hidden parameter

    @property
    def __name__(self):
        return self.fn.name


def hidden_of(spec):
    """The caller's atoms a transformed function takes after its arguments."""
    while spec.kind != "fn":
        spec = spec.fn
    return spec.fn.hidden if isinstance(spec.fn, Closure) else ()


def closure_of(local):
    """The :class:`Closure` of the local function ``local``, reading its free
    variables now (Python reads a closure's variables when it is called)."""
    hidden = {}

    def leaf(value, base):
        if isinstance(value, Var) and value not in hidden:
            hidden[value] = base
        return value

    fn = _rebind(local, leaf, {})
    return Closure(fn, tuple(hidden), tuple(hidden.values()))


def _rebind(value, leaf, memo, base="v"):
    """``value`` with every local function's free names bound to their values
    now (recursively), and each atom replaced by ``leaf(atom, name)``."""
    if isinstance(value, LocalFn):
        if id(value) in memo:
            return memo[id(value)]
        env = value.env if value.env is not None else value.owner.env
        bound = {}
        copy = replace(value, env=bound, defaults=())
        memo[id(value)] = copy
        for name in _free_names(value):
            if name in env:
                bound[name] = _rebind(env[name], leaf, memo, name)
        object.__setattr__(copy, "defaults", tuple(
            _rebind(d, leaf, memo, f"{value.name}_default") for d in value.defaults))
        return copy
    if isinstance(value, Tup):
        return replace(value, items=tuple(_rebind(v, leaf, memo, f"{base}_{i}")
                                          for i, v in enumerate(value.items)))
    return leaf(value, base)


def _free_names(local):
    """The names a local function reads that are not its own (sorted)."""
    return sorted({n.id for n in gast.walk(local.node) if isinstance(n, gast.Name)}
                  - set(local.src.own))


def _lower_closure(lw, closure, trees, node, key):
    """The helper of a :class:`Closure` for argument structures ``trees``."""
    import copy

    fn = closure.fn
    params = fn.node.args.args
    first_default = len(params) - len(fn.defaults)
    if not first_default <= len(trees) <= len(params):
        raise lw.error(node, f"{fn.name}() takes {len(params)} arguments, got {len(trees)}")
    src = copy.copy(fn.src)
    args = copy.copy(fn.node.args)
    args.args, args.defaults = params[:len(trees)], []
    body = fn.node.body
    if isinstance(fn.node, gast.Lambda):
        body = [gast.copy_location(gast.Return(fn.node.body), fn.node.body)]
    src.node = gast.copy_location(
        gast.FunctionDef(src.name, args, body, [], None, None, []), fn.node)
    taken, names = set(src.own), []
    for base in closure.names:          # hidden names never shadow the function's own
        name, i = base, 1
        while name in taken:
            name, i = f"{base}_{i}", i + 1
        taken.add(name)
        names.append(name)
    src.hidden = tuple(names)
    program = lw.program
    if fn.node in program._active:
        raise lw.error(node, f"recursive call to '{fn.name}' is not supported; write the "
                       f"recursion as a loop")
    lowerer = Lowerer(src, list(trees) + [LEAF] * len(names), program)
    mapping = dict(zip(closure.hidden, lowerer.param_trees[len(trees):]))
    inner = _rebind(fn, lambda v, _: mapping.get(v, v) if isinstance(v, Var) else v, {})
    lowerer.env.update(inner.env)
    defaults = inner.defaults
    for p, d in zip(params[len(trees):], defaults[len(defaults) - (len(params) - len(trees)):]):
        lowerer.env[p.id] = d
    program._active.append(fn.node)
    try:
        lowered = lowerer.run()
    finally:
        program._active.pop()
    if lowerer.arg_writes:
        loc = next(iter(lowerer.arg_writes.values()))
        raise lw.error(node, f"{fn.name} writes into an array it is passed (line {loc.lineno}: "
                       f"'{loc.text.strip()}'), so it cannot be transformed here: copy the "
                       f"argument first (u = u.copy())")
    lowered.name = program.module_names.fresh(src.name)
    lowered.key = key
    return lowered


# -- the helper functions -------------------------------------------------------------
class _Derivative:
    """Builds the helper function of one derivative :class:`Spec`."""

    def __init__(self, lw, spec, inner, node, program=None, loc=None):
        self.lw, self.spec, self.inner, self.node = lw, spec, inner, node
        self.program = lw.program if lw is not None else program
        self.loc = lw.src.loc(node) if lw is not None else loc
        self.names = Names(inner.params)
        self.body = []

    def emit(self, rule, args, params=None, base=None, body=None):
        target = self.names.fresh(base) if base else self.names.temp()
        (self.body if body is None else body).append(
            Prim([target], rule, list(args), dict(params or {}), self.loc))
        return Var(target)

    def call(self, callee, args, body=None):
        out = _fresh(callee.out_tree, self.names)
        (self.body if body is None else body).append(
            Call([v.name for v in leaves_of(out)], callee, list(args), self.loc))
        return out

    def build(self, key):
        spec, inner = self.spec, self.inner
        params = [Var(p) for p in inner.params]
        if spec.kind == "contract":
            return self.contract(key, params)
        n_args = len(inner.param_trees) - len(hidden_of(spec))
        for a in spec.argnums:
            if not -n_args <= a < n_args:
                raise self.lw.error(self.node, f"argnums {a} is out of range for a function "
                                    f"of {n_args} arguments")
        argnums = tuple(a % n_args for a in spec.argnums)
        out = self.call(inner, params)
        diff, value, aux = inner, out, None
        if spec.has_aux:
            if not (isinstance(out, Tup) and len(out.items) == 2):
                raise self.lw.error(self.node, "has_aux=True requires the function to return "
                                    "a pair (output, aux)")
            value, aux = out.items
            diff = _first_output(self.program, inner)
        is_grad = spec.kind in ("grad", "value_and_grad")
        if is_grad and isinstance(value, Tup):
            raise self.lw.error(self.node, f"ad.{spec.kind} requires its function to return a "
                                f"scalar, but {spec.fn.name} returns a tuple"
                                + ("" if spec.has_aux else "; use has_aux=True for (out, aux)"))
        if is_grad:
            return self.gradient(key, argnums)
        columns = {}        # (output leaf, parameter leaf) -> Jacobian
        for a in argnums:
            for p in leaves_of(inner.param_trees[a]):
                for v, jac in zip(leaves_of(value), self.columns(diff, params, p, value, False)):
                    columns[v, p] = jac

        def per_input(v):
            trees = [map_values(inner.param_trees[a], lambda p: columns[v, p]) for a in argnums]
            return trees[0] if spec.single else Tup(tuple(trees))

        result = map_values(value, per_input)
        if spec.has_aux:
            result = Tup((result, aux))
        return self.function(key, result)

    def gradient(self, key, argnums):
        """The helper of ``ad.grad`` / ``ad.value_and_grad``: a :class:`Gradient`
        of the inner function's (first) output."""
        spec, inner = self.spec, self.inner
        count = iter(range(len(leaves_of(inner.out_tree))))
        outs = map_values(inner.out_tree, lambda _: ("out", next(count)))
        value, aux = outs.items if spec.has_aux else (outs, None)
        grads = [map_values(inner.param_trees[a], lambda p: ("grad", p.name)) for a in argnums]
        result = grads[0] if spec.single else Tup(tuple(grads))
        if spec.kind == "value_and_grad":
            result = Tup((outs, result))
        elif spec.has_aux:
            result = Tup((result, aux))
        wrt = [p.name for a in argnums for p in leaves_of(inner.param_trees[a])]
        return gradient_function(self.program, inner, wrt, 0, result, self.loc,
                                 self.spec.name, key)

    def columns(self, diff, params, p, value, is_grad):
        """The Jacobian of each output leaf w.r.t. parameter leaf ``p``, column by column."""
        jvp = forward.jvp_function(self.program, diff, [p.name], None, "flat")
        outs = leaves_of(value)
        storage = [self.emit(GRAD_ZEROS if is_grad else JAC_ZEROS, [v, p], base="J")
                   for v in outs]
        size = self.emit(FLAT_SIZE, [p], base="n")
        j = Var(self.names.fresh("j"))
        loop = []
        unit = self.emit(UNIT_LIKE, [p, j], base="e", body=loop)
        result = self.call(jvp, params + [unit], body=loop)
        douts = leaves_of(result)[len(leaves_of(diff.out_tree)):]
        for jac, dout in zip(storage, douts):
            if is_grad:
                index = Tup((Const(0), j))
            else:
                index = Tup((Const(slice(None)), j))
                dout = self.emit(FLAT, [dout], body=loop)
            loop.append(Prim([], rules.RULES["setitem"], [jac, dout], {"index": index},
                             self.loc))
        self.body.append(For(j.name, Const(0), size, Const(1), loop, self.loc))
        base = ("grad_" if is_grad else "jac_") + p.name
        return [self.emit(JAC_SHAPE, [jac, v, p], base=base) for jac, v in zip(storage, outs)]

    def contract(self, key, ct_tree):
        """``<ct, f(primals)>`` summed over the output leaves; the parameters are
        ``f``'s, then the cotangent's."""
        inner = self.inner
        ct = _value_of(ct_tree, lambda: Var(self.names.fresh("ct")))
        out = self.call(inner, [Var(p) for p in inner.params])
        if self.spec.has_aux:
            out = out.items[0]
        total = Const(0.0)
        for v, c in zip(leaves_of(out), leaves_of(ct)):
            product = self.emit(rules.RULES["np.multiply"], [c, v])
            term = self.emit(rules.RULES["np.sum"], [product],
                             {"axis": Const(None), "keepdims": Const(False)})
            total = term if total == Const(0.0) else self.emit(rules.RULES["np.add"],
                                                                [total, term])
        # A closure's hidden parameters stay last: primals, cotangent, hidden.
        k = len(hidden_of(self.spec))
        n, m = len(inner.params) - k, len(inner.param_trees) - k
        params = inner.params[:n] + [v.name for v in leaves_of(ct)] + inner.params[n:]
        return self.function(key, total, params,
                             inner.param_trees[:m] + [ct] + inner.param_trees[m:])

    def function(self, key, result, params=None, param_trees=None, name=None):
        self.body.append(Return(result, self.loc))
        inner = self.inner
        name = name or self.spec.name
        fn = Function(name, params or list(inner.params),
                      param_trees or list(inner.param_trees), self.body, {}, inner.source,
                      names=self.names, key=key)
        fn.name = self.program.module_names.fresh(name)
        return fn


def gradient_function(program, fn, wrt, seed, shape, loc, name, key):
    """The helper computing the :class:`~s2s_ad.ir.Gradient` of ``fn``'s output
    leaf ``seed`` with respect to the parameter leaves ``wrt``; ``shape`` is
    its result's structure, whose leaves say what each is (``("out", i)``,
    ``("grad", p)``).

    Its body computes it by forward-mode columns (one JVP per element of each
    leaf of ``wrt``): the reference every other lowering agrees with, and
    what a rewrite that cannot keep the :class:`~s2s_ad.ir.Gradient` (batching)
    runs.  Printing, forward mode and reverse mode read the ``gradient`` field
    instead and run ``fn``'s reverse sweep (see
    :func:`s2s_ad.transforms.reverse.gradient_source`)."""
    d = _Derivative(None, None, fn, None, program, loc)
    params = [Var(p) for p in fn.params]
    outs = leaves_of(d.call(fn, params))
    diff = _one_output(program, fn, seed)
    grads = {p: d.columns(diff, params, Var(p), outs[seed], True)[0] for p in wrt}
    result = map_values(shape, lambda m: outs[m[1]] if m[0] == "out" else grads[m[1]])
    helper = d.function(key, result, name=name)
    if os.environ.get("S2S_AD_NESTED") != "columns" and not program.nested_columns:
        helper.gradient = Gradient(fn, tuple(wrt), seed, tuple(leaves_of(shape)))
    return helper


def gradient_tangent(program, helper, ins, arg_ranks, cache=None):
    """The tangent of a call of the gradient helper ``helper`` whose arguments
    ``ins`` (parameter leaves) carry tangents: itself a gradient helper, of the
    JVP of the function differentiated.  With ``y = f(x)`` and ``g = grad f``,
    the tangent of ``g`` along ``dx`` is the gradient, with respect to the same
    leaves, of ``f``'s tangent output ``dy = J(x) dx`` (the second derivative
    is symmetric); the tangents of ``f``'s outputs are ``dy`` itself.  Its
    parameters are ``helper``'s, then one tangent per leaf of ``ins``; its
    result has ``helper``'s structure."""
    grad = helper.gradient
    jvp = forward.jvp_function(program, grad.fn, ins, arg_ranks, "flat", cache)
    n = len(leaves_of(grad.fn.out_tree))
    it = iter(grad.outputs)
    shape = map_values(helper.out_tree, lambda _: next(it))
    shape = map_values(shape, lambda m: ("out", n + m[1]) if m[0] == "out" else m)
    return gradient_function(program, jvp, grad.wrt, n + grad.seed, shape, None,
                             "d" + helper.name, ("gradient tangent", helper.key, tuple(ins),
                                                 tuple(arg_ranks)))


forward.install_gradient_tangent(gradient_tangent)


def _one_output(program, fn, index):
    """``fn`` returning only its output leaf ``index``."""
    ret = fn.body[-1]
    if not isinstance(ret.value, Tup) and index == 0:
        return fn
    cache = program.__dict__.setdefault("_nested_one", {})
    if (fn.key, index) not in cache:
        leaf = leaves_of(ret.value)[index]
        cache[fn.key, index] = replace(fn, body=fn.body[:-1] + [Return(leaf, ret.loc)],
                                       key=("output", index, fn.key), gradient=None,
                                       name=program.module_names.fresh(fn.name + "_out"))
    return cache[fn.key, index]


def _first_output(program, fn):
    """``fn`` returning only the first item of its ``(out, aux)`` result."""
    ret = fn.body[-1]
    cache = program.__dict__.setdefault("_nested_first", {})
    if fn.key not in cache:
        cache[fn.key] = replace(fn, body=fn.body[:-1] + [Return(ret.value.items[0], ret.loc)],
                                key=("first output", fn.key),
                                name=program.module_names.fresh(fn.name + "_out"))
    return cache[fn.key]


def _value_of(tree, fresh):
    """A lowered value of the structure ``tree`` (see :func:`~s2s_ad.ir.tree_of`:
    LEAF, a tuple, or ``pytree.Fields``) whose leaves are ``fresh()``."""
    if tree is LEAF:
        return fresh()
    items = tuple(_value_of(t, fresh) for t in tree)
    if isinstance(tree, pytree.Fields):
        return Record(items, container=tree.container)
    return Tup(items)


def _fresh(tree, names):
    return map_values(tree, lambda _: Var(names.temp()))
