"""Lowering calls: NumPy and ``math`` functions (their rules), array methods,
namedtuples, and the dispatch of a call to the right lowering (see
``inlining``; s2s_ad's own transforms go to ``markers.nested``).
"""
import builtins

import gast
import numpy as np

from ... import rules
from ...analyses.ranks import prim_rank, rank_of
from ...ir import (
    Const,
    Prim,
    Record,
    Tup,
    Var,
    pytree,
)
from ...rules import library
from .. import comprehensions, custom
from ..parse import (
    is_user_function,
)
from . import markers
from .common import (
    _IN_PLACE,
    _VARARG_METHODS,
    LIST_METHODS,
    LocalFn,
    _atom,
    _cse_key,
    _inside,
    _is_constant,
    _is_view,
    _python_value,
    _qualname,
    _values,
)
from .markers import transform_kind


class Calls:
    """Call dispatch, rules, array methods and statement emission."""

    def expr_Call(self, node):
        func = node.func
        local = self.local_callee(func)
        if local is not None:
            return self.call_local(local, node)
        ok, obj = self.src.resolve(func)
        held = None
        if not ok and isinstance(func, gast.Name):
            held = self.env.get(func.id)
        elif not ok and (isinstance(func, gast.Subscript) or isinstance(func, gast.Call) and (
                self.src.resolve(func.func)[1] is getattr)):   # acts["relu"](x), getattr(np, n)(x)
            held = self.expr(func)
            if isinstance(held, LocalFn):
                return self.call_local(held, node)
        if isinstance(held, Const) and callable(held.value) and not isinstance(
                held.value, markers.transform_calls.VjpFunction):
            ok, obj = True, held.value        # for f in (np.sin, helper): a function as a value
        if not ok:
            if isinstance(func, gast.Attribute):
                return self.method(func, node)
            if isinstance(func, gast.Call) and self._transform_of(func) == "vmap":
                return markers.transform_calls.call_vmap(self, func, node)
            if isinstance(func, gast.Call):          # ad.grad(f)(x) and friends
                return markers.transform_calls.call_transformed(self, func, node)
            vjp_fn = self.env.get(func.id) if isinstance(func, gast.Name) else None
            calls = markers.transform_calls
            if isinstance(vjp_fn, Const) and isinstance(vjp_fn.value, calls.VjpFunction):
                return markers.transform_calls.call_vjp_fn(self, vjp_fn.value, node)
            what = f"'{func.id}' is a local variable that holds no function: " if isinstance(
                func, gast.Name) else ""
            raise self.error(node, f"{what}only functions can be called (module-level, NumPy and "
                             "math functions, lambdas and nested defs, also kept in a variable, "
                             "list, tuple or dict picked by a constant key)")
        if obj is print:                  # print(...) inside an expression: its effect, None
            self.print_statement(node)
            return Const(None)
        if transform_kind(obj) == "jvp":
            return markers.transform_calls.call_jvp(self, node)
        # ad.vjp, ad.hvp, a module-level ad.grad(f)
        value = markers.transform_calls.call_object(self, obj, node)
        if value is not None:
            return value
        value = comprehensions.call(self, obj, node)    # sum(e for x in xs), np.stack([...])
        if value is not None:
            return value
        args = [self.expr(a) for a in node.args]
        kwargs = {k.arg: self.expr(k.value) for k in node.keywords}
        if None in kwargs:
            raise self.error(node, "**kwargs in calls is not supported; pass arguments by name")
        return self.call(obj, args, kwargs, node)

    def list_method(self, func, node):
        """``xs.append(v)``, ``xs.extend(ys)``, ``xs.pop()`` on a list the function
        built (``xs = []``): every name bound to the list sees the new one (it is
        rebuilt, statically)."""
        old = self.env[func.value.id]
        if func.value.id not in self.src.locals:
            raise self.error(node, f"'{func.value.id}.{func.attr}()' would change a list outside "
                             "the function, a side effect its derivative cannot have; build "
                             "a local list and return what you need from it")
        if any(old is p for p in self.param_trees) or _inside(old, self.param_trees):
            raise self.error(node, f"'{func.value.id}.{func.attr}()' would change a list the "
                             "caller passed in; build a new list (ys = xs + [v]) and return it")
        if not old.is_list or isinstance(old, Record):
            raise self.error(node, f"'{func.value.id}' is a tuple or dict here, which has no "
                             f".{func.attr}(); build a list ([...]) to grow")
        if _inside(old, [v for v in self.env.values() if v is not old]):
            raise self.error(node, f"'{func.value.id}' is also held in a tuple, list or dict, "
                             f"which would see the change; call .{func.attr}() before putting "
                             "it there")
        args = [self.expr(a) for a in node.args]
        if node.keywords:
            raise self.error(node, f"list.{func.attr}() takes no keyword arguments")
        items, result = list(old.items), Const(None)
        if func.attr == "append" and len(args) == 1:
            items.append(args[0])
        elif func.attr == "extend" and len(args) == 1 and isinstance(args[0], Tup):
            items.extend(args[0].items)
        elif func.attr == "pop" and len(args) <= 1 and all(
                isinstance(a, Const) and isinstance(a.value, int) for a in args):
            if not items:
                raise self.error(node, f"'{func.value.id}.pop()' of an empty list")
            result = items.pop(args[0].value if args else -1)
        else:
            usage = {"append": "xs.append(value)", "extend": "xs.extend([a, b]) (a list or tuple)",
                     "pop": "xs.pop() or xs.pop(k) with a constant k"}[func.attr]
            raise self.error(node, f"write {usage}")
        new = Tup(tuple(items), is_list=True)
        for name, v in list(self.env.items()):
            if v is old:
                self.env[name] = new
        self.effects += 1
        return result

    def _transform_of(self, node):
        """The transform a call node ``ad.X(...)`` calls, or None."""
        ok, obj = self.src.resolve(node.func)
        return transform_kind(obj) if ok else None

    def method(self, func, node):
        receiver = self.env.get(func.value.id) if isinstance(func.value, gast.Name) else None
        if func.attr in LIST_METHODS and isinstance(receiver, Tup):
            return self.list_method(func, node)
        if func.attr in LIST_METHODS and comprehensions.is_list(self, receiver):
            raise self.error(node, f"'{func.value.id}' was built by a comprehension or by a "
                             "loop that appends to it once per iteration, so it is an array "
                             f"of its elements here and cannot .{func.attr}() again; build "
                             "the whole list in one loop or one comprehension")
        if func.attr in ("items", "keys", "values") and isinstance(receiver, Record) and \
                receiver.container.cls is dict:
            if node.args or node.keywords:
                raise self.error(node, f"dict.{func.attr}() takes no arguments")
            keys = receiver.keys_in_order()
            if func.attr == "keys":
                return Tup(tuple(Const(k) for k in keys))
            if func.attr == "values":
                return Tup(tuple(receiver.item(k) for k in keys))
            return Tup(tuple(Tup((Const(k), receiver.item(k))) for k in keys))
        name = rules.METHODS.get(func.attr)
        if name is None and func.attr in library.METHODS:
            args = [self.expr(a) for a in node.args]
            kwargs = {k.arg: self.expr(k.value) for k in node.keywords}
            return self.call_library(library.METHODS[func.attr],
                                     [self.expr(func.value)] + args, kwargs, node)
        if name is None:
            raise self.error(node, f"the array method '.{func.attr}()' is not supported; "
                             "call the NumPy function instead")
        args = [self.expr(a) for a in node.args]
        vararg = _VARARG_METHODS.get(func.attr)
        if vararg and len(args) > 1:
            args = [Tup(tuple(args))]
        kwargs = {k.arg: self.expr(k.value) for k in node.keywords}
        rule = rules.RULES[name]
        return self.emit_call(rule, [self.expr(func.value)] + args, kwargs, node)

    def call(self, obj, args, kwargs, node):
        if custom.rule_of(obj) is not None:
            return self.call_user(obj.fun, args, kwargs, node, custom=obj)
        target = getattr(obj, "__s2s_ad_function__", None)
        if target is not None:
            obj = target
        if obj in (min, max, abs) and len(args) >= 1 + (obj is not abs) and not kwargs and all(
                isinstance(a, Const) and isinstance(a.value, (int, float)) for a in args):
            return Const(obj(*(a.value for a in args)))     # min(len(a), len(b)): a constant
        if obj in rules.BUILTINS and not kwargs:
            if obj is abs or len(args) == 2:
                return self.emit_call(rules.RULES[rules.BUILTINS[obj]], args, kwargs, node)
        if isinstance(obj, type) and issubclass(obj, tuple) and hasattr(obj, "_fields"):
            return self.namedtuple(obj, args, kwargs, node)
        if obj is dict and not args:        # dict(w=w, b=b): the display {"w": w, "b": b}
            keys = sorted(kwargs)
            return Record(tuple(kwargs[k] for k in keys), container=pytree.Keyed(dict, keys),
                          order=tuple(kwargs))
        if getattr(obj, "__s2s_ad_static__", False):
            return self.call_static(obj, args, kwargs, node)
        if obj in (hasattr, getattr, callable) and not kwargs and args and all(
                isinstance(a, Const) for a in args):    # hasattr(np, "trapezoid"): a constant
            try:
                return Const(obj(*(a.value for a in args)))
            except AttributeError as error:
                raise self.error(node, str(error)) from None
        if obj is slice and all(isinstance(a, Const) for a in args) and not kwargs:
            return Const(slice(*(a.value for a in args)))
        if obj in (tuple, list) and len(args) == 1 and _sequence(args[0]) and not kwargs:
            return Tup(args[0].items, is_list=obj is list)   # a new tuple or list of the items
        if obj is zip and args and all(_sequence(a) for a in args) and not kwargs:
            return Tup(tuple(Tup(items) for items in zip(*(a.items for a in args))))
        if obj is enumerate and len(args) == 1 and _sequence(args[0]) and not kwargs:
            return Tup(tuple(Tup((Const(i), v)) for i, v in enumerate(args[0].items)))
        if obj is len and len(args) == 1 and isinstance(args[0], Tup) and not kwargs:
            return Const(len(args[0].items))
        if obj is len and len(args) == 1 and isinstance(args[0], Const) and not kwargs and \
                isinstance(args[0].value, (tuple, list, str)):   # a constant sequence
            return Const(len(args[0].value))
        if library.is_helper(obj):       # a plain helper of the library: inlined too
            return self.call_library(library.helper(obj), args, kwargs, node)
        rule = rules.lookup(obj)
        if rule is not None:
            return self.emit_call(rule, args, kwargs, node)
        impl = library.lookup(obj)
        if impl is not None:
            return self.call_library(impl, args, kwargs, node)
        if is_user_function(obj):
            return self.call_user(obj, args, kwargs, node)
        if obj is getattr(builtins, "range", None):
            raise self.error(node, "range() is only supported as the iterable of a for loop")
        if obj in _IN_PLACE or isinstance(getattr(obj, "__self__", None), np.ufunc) and \
                obj.__name__ == "at":
            raise self.error(node, f"{_qualname(obj)}() writes into an array argument in place, "
                             f"which is not differentiated; build the new array instead (for "
                             f"example with x[idx] = v on a copy, or np.where)")
        module = getattr(obj, "__module__", None) or ""
        if module.split(".")[0] == "numpy" and not module.startswith("numpy.random") and \
                getattr(obj, "__name__", "") not in _READS_OUTSIDE and \
                all(_is_constant(v) for v in list(args) + list(kwargs.values())):
            try:                 # np.linspace(0, 1, 5): a constant array, its rank known
                value = obj(*(_python_value(a) for a in args),
                            **{k: _python_value(v) for k, v in kwargs.items()})
            except Exception:    # noqa: BLE001  (not a constant: called at run time below)
                value = None
            if isinstance(value, (np.ndarray, np.generic)):
                return self.constant(getattr(obj, "__name__", "c"), value, node)
        cname = self.bind_const(getattr(obj, "__name__", "f"), obj)
        rule = rules.unknown_rule(obj, _qualname(obj))
        rule.emit, rule.params, rule.operands = cname, tuple(f"a{i}" for i in range(len(args))), ()
        if kwargs:
            raise self.error(node, f"keyword arguments to {rule.name} are not supported")
        return self.emit(rule, args, {}, node)

    def namedtuple(self, cls, args, kwargs, node):
        """``Point(x, y=...)``: a :class:`Record` of the NamedTuple's fields."""
        fields = cls._fields
        values = dict(zip(fields, args))
        for k, v in kwargs.items():
            if k not in fields or k in values:
                raise self.error(node, f"bad keyword argument '{k}' for {cls.__name__}")
            values[k] = v
        defaults = getattr(cls, "_field_defaults", {})
        for f in fields:
            if f not in values:
                if f not in defaults:
                    raise self.error(node, f"{cls.__name__}() is missing the field '{f}'")
                values[f] = self.constant(f, defaults[f], node)
        if len(args) > len(fields):
            raise self.error(node, f"{cls.__name__}() takes {len(fields)} values")
        return Record(tuple(values[f] for f in fields), container=pytree.Keyed(cls, fields))

    def emit_call(self, rule, args, kwargs, node):
        other = rule.forms(args, kwargs) if rule.forms is not None else None
        if isinstance(other, rules.Rule):       # another primitive (a.astype(int))
            rule = other
        elif other is not None:  # another call form (np.where(c) is np.nonzero(c))
            return self.call_library(other, args, kwargs, node)
        if rule.varargs:         # np.einsum(subscripts, *operands): the operands as one tuple
            k = len(rule.params) - 1
            args = list(args[:k]) + [Tup(tuple(args[k:]))]
        bound = rules.bind(rule, args, kwargs, lambda msg: self.error(node, msg))
        if rule.gives_rank and rank_of(bound[rule.params[0]], self.ranks) is not None:
            return Const(rank_of(bound[rule.params[0]], self.ranks))
        if rule.gives_rank and _is_constant(bound[rule.params[0]]):
            try:                 # np.ndim of a constant sequence: its nesting depth
                return Const(int(np.ndim(_python_value(bound[rule.params[0]]))))
            except (TypeError, ValueError):
                pass
        if rule.parts:           # several outputs: one primitive each (unused ones are dropped)
            parts = rule.parts(bound) if callable(rule.parts) else rule.parts
            made = [self.emit_call(rules.RULES[p], [], {k: v for k, v in bound.items()
                                                       if k in rules.RULES[p].params}, node)
                    for p in (parts if isinstance(parts, tuple) else (parts,))]
            return Tup(tuple(made)) if isinstance(parts, tuple) else made[0]
        if rule.from_list:
            value = bound.get(rule.operands[0])
            if isinstance(value, Tup):           # a list display: an array of its elements
                return self.array_of(value, node)
            if not rule.view and isinstance(value, Var):
                rule = rules.RULES["np.copy"]    # np.array of an array copies it
                bound = {rule.operands[0]: value}
        for p in rule.index_params:
            if isinstance(bound.get(p), Tup) and bound[p].is_list:
                bound[p] = self.array_of(bound[p], node)    # an index array, as NumPy reads it
        for p in rule.operands:
            if isinstance(bound.get(p), Tup) and not callable(rule.vjp.get(p)):
                # NumPy reads a list where it wants an array as np.array(list).
                bound[p] = self.array_of(bound[p], node)
        operands = [bound[p] for p in rule.operands if p in bound]
        params = {p: bound[p] for p in rule.params if p not in rule.operands and p in bound}
        for p, default in rule.defaults.items():
            params.setdefault(p, Const(default))
        return self.emit(rule, operands, params, node)

    def array_of(self, value, node):
        """``np.array(value)`` for a list or tuple display: of numbers, or its rows
        stacked (Numba's ``np.array`` takes no tuple of arrays)."""
        if not value.items:
            raise self.error(node, "an empty list cannot be made into an array here; use "
                             "np.zeros(0)")
        if not any(isinstance(v, Tup) for v in value.items) and \
                not any(rank_of(v, self.ranks) for v in value.items):
            return self.emit(rules.RULES["np.array"], [value], {}, node)   # of numbers
        rows = Tup(tuple(self.array_of(v, node) if isinstance(v, Tup) else v
                         for v in value.items))
        return self.emit(rules.RULES["np.stack"], [rows], {"axis": Const(0)}, node)

    def emit(self, rule, operands, params, node=None):
        if any(isinstance(v, LocalFn) for o in operands for v in _values(o)):
            raise self.error(node or self.node, f"a function defined here can only be called, "
                             f"or passed to a function that calls it (not used as a value "
                             f"in {rule.name})")
        if rule.equal_operands and len(operands) == 2 and not params and \
                isinstance(operands[0], Var) and operands[0] == operands[1]:
            # ``a * a`` is np.square(a): its adjoint is one product, g * 2a,
            # not two accumulated into one cotangent.
            rule, operands = rules.RULES[rule.equal_operands], operands[:1]
        # The same read earlier in this block is reused (x[i] read twice is
        # one value, so its adjoint is one update).
        key = _cse_key(rule, operands, params)
        table = self.cse.setdefault(id(self.body), {})
        if key is not None and key in table:
            return table[key]
        target = self.names.temp()
        loc = self.src.loc(node or self.node)
        prim = Prim([target], rule, list(operands), params, loc)
        self.body.append(prim)
        self.note_rank(target, prim_rank(prim, self.ranks))
        if _is_view(rule):
            self.views.add(target)
            if rule.name == "getitem" and self.view_of is not None:
                self.view_of[target] = (operands[0], params["index"])
            elif self.view_of is not None and isinstance(operands[0], Var):
                self.remade[target] = (rule, list(operands), dict(params))
            # An element read (rank 0) is a number, not a view: NumPy copies it;
            # a value of unknown rank may be a view.
            if self.writes is not None and isinstance(operands[0], Var) and \
                    rank_of(Var(target), self.ranks) != 0:
                root = self.root(operands[0]).name
                self.made_at[target] = (root, self.writes.get(root, 0))
        if key is not None:
            table[key] = Var(target)
        return Var(target)

    def note_rank(self, name, rank):
        """Record ``name``'s rank; a name given two ranks has none."""
        if name in self.ranks and self.ranks[name] != rank:
            rank = None
        self.ranks[name] = rank

    def call_static(self, fn, args, kwargs, node):
        """A library helper run while lowering, on constant arguments."""
        try:
            values = [_python_value(a) for a in args]
            named = {k: _python_value(v) for k, v in kwargs.items()}
            return _atom(fn(*values, **named))
        except (TypeError, ValueError) as exc:
            what = getattr(self.src, "library_name", fn.__name__)
            raise self.error(node, f"{what}: {exc}") from None


#: NumPy functions whose value is not theirs to compute from constants (files, clocks):
#: called at run time, never folded while lowering.
_READS_OUTSIDE = {"load", "loadtxt", "genfromtxt", "fromfile", "memmap", "fromregex",
                  "frombuffer", "fromstring", "fromiter", "datetime64", "timedelta64"}


def _sequence(value):
    """A tuple, list or NamedTuple, whose items Python iterates (a dict iterates
    its keys instead)."""
    return isinstance(value, Tup) and not (isinstance(value, Record) and
                                           value.container.cls is dict)
