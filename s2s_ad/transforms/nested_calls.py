"""Calls of s2s_ad's transforms written in user code, lowered by the front end.

``ad.grad(f)(x)``, ``ad.value_and_grad``, ``ad.jacfwd``/``jacrev``/``hessian``
applied where they are written, ``ad.vjp`` and its ``vjp_fn``, ``ad.jvp``,
``ad.hvp`` and ``ad.vmap(f)(xs)``: the front end (``frontend.anf``) recognises
them by marker and hands them here -- this module installs itself with
``anf.install_transform_calls`` when imported (the pipeline imports it).  The
derivative helpers they call are built by :mod:`s2s_ad.transforms.nested`.
"""
import ast
import sys
from dataclasses import dataclass
from typing import Any

import gast

from .. import rules
from ..frontend import anf
from ..frontend.anf import (
    Record,
    map_values,
    transform_kind,
    transformed_object,
    tree_of,
)
from ..ir import Call, Const, For, Tup, Var, leaves_of, same_structure
from ..rules.internal import (
    STACK_LIKE,
)
from . import forward
from .nested import (
    _STORED,
    Closure,
    Spec,
    _literal,
    _value_spec,
    apply,
    hidden_of,
    lower,
    spec_of,
)


def call_transformed(lw, func, node):
    """``ad.grad(f, ...)(args)`` and friends: ``func`` is the transform expression."""
    return call_transformed_value(lw, spec_of(lw, func), node)


def call_object(lw, obj, node):
    """A call of ``ad.vjp`` or ``ad.hvp``, or of a transformed function bound at
    module level (``dg = ad.grad(f)``); None for any other callable."""
    kind = transform_kind(obj)
    if kind == "vjp":
        return call_vjp(lw, node)
    if kind == "hvp":
        if not node.args:
            raise lw.error(node, "write ad.hvp(f, (x, ...), (v, ...))")
        spec = Spec("grad", spec_of(lw, node.args[0]))
        return call_jvp(lw, node, spec).items[1]
    if kind is not None:
        raise lw.error(node, _STORED)
    what = transformed_object(obj)
    if what == "batched":
        return call_batched(lw, obj, node)
    if what == "vjp_fn":
        return call_outer_vjp_fn(lw, obj, node)
    if what == "jacobian" or what == "transformed" and obj.kind != "primal":
        spec = _value_spec(obj)
        if spec is None:
            raise lw.error(node, f"{obj!r} cannot be called inside a transformed function; "
                           f"write the transform where it is called (ad.grad(f)(x))")
        return call_transformed_value(lw, spec, node)
    return None


def call_transformed_value(lw, spec, node):
    args = [lw.expr(a) for a in node.args]
    if node.keywords:
        args = _by_position(lw, spec, args, node)
    return apply(lw, spec, args, node)


def _by_position(lw, spec, args, node):
    """The lowered arguments of a call of the transformed function ``spec``
    with keyword arguments, each in its parameter's place (defaults fill the
    gaps).  As in JAX, an argument passed by keyword is not differentiated:
    every ``argnums`` of the transforms must be passed positionally."""
    kwargs = {k.arg: lw.expr(k.value) for k in node.keywords}
    if None in kwargs:
        raise lw.error(node, "**kwargs in calls is not supported; pass arguments by name")
    root = spec
    while root.kind != "fn":
        if root.kind != "contract" and max(root.argnums) >= len(args):
            raise lw.error(node, f"differentiating with respect to argnums={root.argnums} "
                           f"needs at least {max(root.argnums) + 1} positional arguments, "
                           f"but {len(args)} were passed (the others by keyword, which is "
                           f"never differentiated)")
        root = root.fn
    fn = root.fn.fn if isinstance(root.fn, Closure) else root.fn
    return lw.bound_values(fn, args, kwargs, node)


def call_vjp(lw, node):
    """``ad.vjp(f, *primals)``: ``(out, vjp_fn)`` where ``vjp_fn`` is a :class:`VjpFunction`
    that the same function calls as ``vjp_fn(cotangent)``."""
    has_aux = False
    for k in node.keywords:
        if k.arg != "has_aux":
            raise lw.error(node, f"ad.vjp takes no argument '{k.arg}'")
        has_aux = _literal(lw, k.value, "has_aux", "vjp")
    if len(node.args) < 2:
        raise lw.error(node, "write ad.vjp(f, x, ...) with the function and its primals")
    spec = spec_of(lw, node.args[0])
    primals = [lw.expr(a) for a in node.args[1:]]
    out = apply(lw, spec, primals, node)
    if has_aux:
        if not (isinstance(out, Tup) and len(out.items) == 2):
            raise lw.error(node, "has_aux=True requires the function to return a pair "
                           "(output, aux)")
        out, aux = out.items
    fn = Const(VjpFunction(spec, tuple(primals), out, has_aux))
    return Tup((out, fn, aux)) if has_aux else Tup((out, fn))


@dataclass(frozen=True)
class VjpFunction:
    """The ``vjp_fn`` of an ``ad.vjp`` in user code: applied where it is called."""
    spec: Spec
    primals: tuple
    out: Any
    has_aux: bool

    def __repr__(self):
        return "<vjp_fn>"


def call_vjp_fn(lw, vjp_fn, node):
    """``vjp_fn(cotangent)``: one cotangent per primal, as a tuple."""
    if len(node.args) != 1 or node.keywords:
        raise lw.error(node, "vjp_fn takes one cotangent, passed positionally")
    ct = lw.expr(node.args[0])
    if not same_structure(ct, vjp_fn.out):
        raise lw.error(node, "the cotangent passed to vjp_fn must have the structure of the "
                       "output of ad.vjp's function")
    n = len(vjp_fn.primals)
    contract = Spec("contract", vjp_fn.spec, has_aux=vjp_fn.has_aux)
    spec = Spec("grad", contract, tuple(range(n)), single=False)
    grads = apply(lw, spec, list(vjp_fn.primals) + [ct], node)
    return Tup(tuple(grads.items))


def call_outer_vjp_fn(lw, obj, node):
    """``vjp_fn(ct)`` of a ``vjp_fn`` that ``ad.vjp`` made outside this function
    (at module level): its primals are constants here, and the call is lowered
    like that of an ``ad.vjp`` written inline (linear in the cotangent)."""
    t = obj.transformed
    spec = _value_spec(t.fun)
    n = len(obj.primals)
    if spec is None or tuple(obj.argnums) != tuple(range(n)):
        raise lw.error(node, f"{obj!r} cannot be called inside a transformed function (its "
                       f"function has arguments that are not float arrays); call ad.vjp "
                       f"inside the function instead: out, vjp_fn = ad.vjp(f, x); vjp_fn(ct)")
    primals = tuple(lw.constant(f"primal{i}", p, node) for i, p in enumerate(obj.primals))
    out = apply(lw, spec, list(primals), node)
    if t.has_aux:
        out = out.items[0]
    return call_vjp_fn(lw, VjpFunction(spec, primals, out, t.has_aux), node)


def check_escapes(lw, value, node):
    """A ``vjp_fn`` that is returned or passed on: refused at the user's line."""
    for leaf in leaves_of(value):
        if isinstance(leaf, Const) and isinstance(leaf.value, VjpFunction):
            raise lw.error(node, "the vjp_fn of ad.vjp can only be called (vjp_fn(ct)) in the "
                           "function that made it; it cannot be returned or passed on")


# -- ad.vmap and ad.jvp written in user code ------------------------------------------
def call_vmap(lw, vnode, node):
    """``ad.vmap(f, in_axes)(args)`` in user code: a loop over the examples.

    Each example's ``f`` result is written into outputs allocated from
    the first one, so the function around it can be differentiated
    (``grad`` of a function that sums a ``vmap``) and compiled.
    """
    spec = _vmap_spec(lw, vnode)
    if not vnode.args:
        raise lw.error(vnode, "ad.vmap needs the function to batch")
    fn = spec_of(lw, vnode.args[0])      # f, or a transform of it (ad.grad(f))
    if node.keywords:
        raise lw.error(node, "pass the arguments of a vmapped function positionally")
    args = [lw.expr(a) for a in node.args]
    return _vmap_loop(lw, lambda xs: apply(lw, fn, xs, node), spec["in_axes"], args, node,
                      vnode)


def call_batched(lw, obj, node):
    """A call of an ``ad.vmap(f, ...)`` bound outside the function
    (``batched_predict = ad.vmap(predict, in_axes=(None, 0))`` at module
    level, or ``ad.jit`` of one): lowered as the same vmap written inline."""
    if node.keywords:
        raise lw.error(node, "pass the arguments of a vmapped function positionally")
    args = [lw.expr(a) for a in node.args]
    return _batched_call(lw, obj, node)(args)


def _batched_call(lw, obj, node):
    """A function of lowered arguments computing the vmap object ``obj`` on them
    (a vmap of a vmap object is a loop inside a loop)."""
    if obj.out_axes != 0:
        raise lw.error(node, f"{obj!r} has out_axes={obj.out_axes!r}; called inside a "
                       f"transformed function, ad.vmap stacks its outputs on axis 0: use "
                       f"out_axes=0 and move the axis afterwards")
    in_axes = tuple(obj.in_axes) if isinstance(obj.in_axes, list) else obj.in_axes
    if transformed_object(obj.fun) == "batched":
        per_example = _batched_call(lw, obj.fun, node)
    else:
        spec = _value_spec(obj.fun)
        if spec is None:
            raise lw.error(node, f"{obj.fun!r}, batched by {obj!r}, cannot be called inside "
                           f"a transformed function; batch a def function or a transform "
                           f"of one (ad.vmap(ad.grad(f)))")
        per_example = lambda xs: apply(lw, spec, xs, node)     # noqa: E731
    return lambda args: _vmap_loop(lw, per_example, in_axes, args, node, node)


def _vmap_loop(lw, per_example, in_axes, args, node, vnode):
    """The loop over the examples of a vmap: ``per_example(args)`` gives one
    example's result from lowered arguments; ``args`` are batched as
    ``in_axes`` says."""
    if not isinstance(in_axes, tuple):
        in_axes = (in_axes,) * len(args)
    if len(in_axes) != len(args):
        raise lw.error(node, f"vmap in_axes has {len(in_axes)} entries but the function "
                         f"is called with {len(args)} arguments")
    leaves_axes = [pair for a, ax in zip(args, in_axes)
                   for pair in _leaf_axes(lw, a, ax, vnode)]
    batched = [(leaf, ax) for leaf, ax in leaves_axes if ax is not None]
    if not batched:
        raise lw.error(vnode, "vmap needs at least one batched argument: every in_axes "
                         "entry is None")
    first, axis = batched[0]
    shape = lw.emit(rules.RULES["np.shape"], [first], {}, node)
    size = lw.emit(rules.RULES["getitem"], [shape], {"index": Const(axis)}, node)

    def example(b):
        picked = {}
        for leaf, ax in leaves_axes:
            if ax is not None:
                index = b if ax == 0 else Tup((Const(slice(None)),) * ax + (b,))
                picked[leaf] = lw.emit(rules.RULES["getitem"], [leaf], {"index": index},
                                         node)
        return [map_values(a, lambda x: picked.get(x, x)) for a in args]

    r0 = per_example(example(Const(0)))
    outs = []
    for leaf in anf._leaves(r0):
        out = lw.emit(STACK_LIKE, [leaf, size], {}, node)
        lw.emit_setitem(out, Const(0), leaf)
        outs.append(out)
    index = Var(lw.names.fresh("b"))
    saved, lw.body = lw.body, []
    r = per_example(example(index))
    for out, leaf in zip(outs, anf._leaves(r)):
        lw.emit_setitem(out, index, leaf)
    body, lw.body = lw.body, saved
    lw.body.append(For(index.name, Const(1), size, Const(1), body, lw.src.loc(node)))
    lw.cse.clear()
    it = iter(outs)
    return map_values(r0, lambda _: next(it))


def _vmap_spec(lw, vnode):
    """in_axes and out_axes of ``ad.vmap(f, ...)`` in user code (literals only)."""
    names = ("fun", "in_axes", "out_axes")
    spec = {"in_axes": 0, "out_axes": 0}
    given = list(zip(names, vnode.args)) + [(k.arg, k.value) for k in vnode.keywords]
    for name, value in given:
        if name == "fun":
            continue
        if name not in spec:
            raise lw.error(vnode, f"ad.vmap inside a transformed function takes in_axes "
                             f"and out_axes, not {name}")
        try:
            spec[name] = ast.literal_eval(gast.gast_to_ast(value))
        except ValueError:
            raise lw.error(vnode, f"{name} of ad.vmap inside a transformed function must "
                             f"be written as a literal (ints, None, tuples)") from None
    if spec["out_axes"] != 0:
        raise lw.error(vnode, "ad.vmap inside a transformed function stacks its outputs "
                         "on axis 0: use out_axes=0 and move the axis afterwards")
    return spec

def _leaf_axes(lw, value, ax, node):
    """(leaf, batch axis) for every leaf of an argument and its in_axes entry."""
    if isinstance(ax, dict):             # a dict prefix: one entry per key of a dict
        keys = value.container.keys if isinstance(value, Record) else None
        if keys is None or value.container.cls is not dict or set(ax) != set(keys):
            raise lw.error(node, f"the dict entry {ax!r} of in_axes must have the keys "
                             f"of its argument's dict")
        return [p for k, v in zip(keys, value.items) for p in _leaf_axes(lw, v, ax[k], node)]
    if isinstance(ax, (tuple, list)):
        if not (isinstance(value, Tup) and len(value.items) == len(ax)):
            raise lw.error(node, "a tuple entry of in_axes must match its argument's "
                             "structure")
        return [p for v, a in zip(value.items, ax) for p in _leaf_axes(lw, v, a, node)]
    if ax is not None and (not isinstance(ax, int) or isinstance(ax, bool) or ax < 0):
        raise lw.error(node, "in_axes entries of ad.vmap inside a transformed function "
                         "must be non-negative ints or None")
    return [(leaf, ax) for leaf in anf._leaves(value)]

def call_jvp(lw, node, spec=None):
    """``ad.jvp(f, (x, ...), (dx, ...))`` in user code: a call to f's JVP
    (``f`` may be a transform itself, ``ad.grad(g)``; ``spec`` overrides it).

    The JVP is lowered like any helper, so the function around it can be
    differentiated again (``grad`` of a directional derivative).
    """
    what = "ad.hvp" if spec is not None else "ad.jvp"
    if len(node.args) != 3 or node.keywords:
        raise lw.error(node, f"write {what}(f, (x, ...), (dx, ...)) with three "
                         f"positional arguments")
    spec = spec or spec_of(lw, node.args[0])
    primals, tangents = (lw.expr(a) for a in node.args[1:])
    if not (isinstance(primals, Tup) and isinstance(tangents, Tup)
            and len(primals.items) == len(tangents.items)):
        raise lw.error(node, "ad.jvp needs a tuple of primals and a tuple of tangents "
                         "with one tangent per primal")
    for p, t in zip(primals.items, tangents.items):
        if not same_structure(p, t):
            raise lw.error(node, "each tangent passed to ad.jvp must have the structure "
                             "of its primal")
    callee = lower(lw, spec, [tree_of(v) for v in primals.items], node)
    hidden = list(hidden_of(spec))     # a closure's captured values: not tangents
    wrt = list(callee.params)[:len(callee.params) - len(hidden)]
    jvp_fn = forward.jvp_function(lw.program, callee, wrt, None, "flat")
    out = lw._fresh_like(Tup((callee.out_tree, callee.out_tree)))
    leaves = anf._leaves(primals) + hidden + anf._leaves(tangents)
    lw.body.append(Call([t.name for t in anf._leaves(out)], jvp_fn, leaves, lw.src.loc(node)))
    return out


anf.install_transform_calls(sys.modules[__name__])
