"""Shared by the parts of the lowering: constant folding, the structure of
lowered values, and which NumPy functions return views or write in place.
"""
import ast
import dataclasses
import numbers
import operator
from dataclasses import dataclass
from typing import Any

import gast
import numpy as np

from ...errors import UnsupportedSyntaxError
from ...ir import (
    Const,
    If,
    Slice,
    Tup,
    Var,
    walk,
)

_FOLD = {gast.Add: operator.add, gast.Sub: operator.sub, gast.Mult: operator.mul,
         gast.Div: operator.truediv, gast.Pow: operator.pow, gast.FloorDiv: operator.floordiv,
         gast.Mod: operator.mod, gast.USub: operator.neg, gast.UAdd: operator.pos,
         gast.Not: operator.not_}


# Comparisons folded while lowering when both sides are constants.
_COMPARE = {gast.Eq: operator.eq, gast.NotEq: operator.ne, gast.Lt: operator.lt,
            gast.LtE: operator.le, gast.Gt: operator.gt, gast.GtE: operator.ge,
            gast.Is: operator.is_, gast.IsNot: operator.is_not,
            gast.In: lambda a, b: a in b, gast.NotIn: lambda a, b: a not in b}


# Results that may share their operand's memory: writing into one writes the other
# (the rules declared ``view``, and indexing).
def _is_view(rule):
    return rule.view or rule.name == "getitem"


_VARARG_METHODS = {"reshape": "shape", "transpose": "axes"}


# NumPy functions that write into an array argument (ufunc.at methods too).
_IN_PLACE = {np.copyto, np.place, np.putmask, np.fill_diagonal, np.put_along_axis,
             np.random.shuffle}


class _InlinedSource:
    """A library implementation's source, seen from the user's call: every
    statement it lowers is located at the call, and its errors name the
    NumPy function (``library_name``) rather than the library's file."""

    def __init__(self, src, caller, call_node, name):
        self._src = src
        self._caller = caller
        self._call = call_node
        self.library_name = name

    def __getattr__(self, attr):
        return getattr(self._src, attr)

    def loc(self, node):
        return self._caller.loc(self._call)

    def error(self, node, msg):
        if isinstance(msg, str) and not msg.startswith(self.library_name):
            msg = f"{self.library_name}(): {msg}"
        loc = self.loc(node)
        return UnsupportedSyntaxError(msg, loc.filename, loc.lineno, loc.col, loc.text)


class _NotConstant(TypeError):
    pass


def _python_value(atom):
    """The Python value of a constant atom (tuples of constants too)."""
    if isinstance(atom, Const):
        return atom.value
    if isinstance(atom, Tup):
        return tuple(_python_value(v) for v in atom.items)
    if isinstance(atom, Slice):
        return slice(*(None if b is None else _python_value(b)
                       for b in (atom.lo, atom.hi, atom.step)))
    raise _NotConstant("this argument must be a constant (written in the code, not computed "
                       "from array values)")


def _atom(value):
    """A Python value computed while lowering, as an atom (index tuples
    holding slices become :class:`Tup` of :class:`Slice`)."""
    if isinstance(value, tuple) and not all(isinstance(v, numbers.Number) for v in value):
        return Tup(tuple(_atom(v) for v in value))
    if isinstance(value, slice):
        if (value.start, value.stop, value.step) == (None, None, None):
            return Const(slice(None))
        return Slice(*(None if b is None else Const(b)
                       for b in (value.start, value.stop, value.step)))
    return Const(value.item() if isinstance(value, np.generic) else value)


def _is_constant(atom):
    try:
        _python_value(atom)
    except _NotConstant:
        return False
    return True


def _fold_subscript(value, index):
    """A constant-indexed item or slice of a tuple (a Tup or a constant tuple)."""
    if isinstance(value, Const) and isinstance(value.value, tuple) and \
            isinstance(index, (int, slice)) and not isinstance(index, bool):
        return Const(value.value[index])
    if isinstance(value, Tup) and isinstance(index, slice):
        return dataclasses.replace(value, items=value.items[index])
    return None


def _fold_compare(op, a, b):
    """``a op b`` of constants, folded (``v is None`` of an array value is
    False); None when the comparison happens at run time."""
    if type(op) not in _COMPARE:
        return None
    if isinstance(a, Const) and isinstance(b, Const):
        return Const(bool(_COMPARE[type(op)](a.value, b.value)))
    if isinstance(op, (gast.Is, gast.IsNot)) and (
            isinstance(a, Const) and a.value is None and isinstance(b, (Var, Tup))
            or isinstance(b, Const) and b.value is None and isinstance(a, (Var, Tup))):
        return Const(isinstance(op, gast.IsNot))       # an array value is never None
    return None


def _replace(value, old, new):
    if value == old:
        return new
    if isinstance(value, Tup):
        return dataclasses.replace(value, items=tuple(_replace(v, old, new) for v in value.items))
    return value


def map_values(value, fn):
    """Like :func:`~s2s_ad.ir.map_leaves`, keeping each node's kind (list, Record)."""
    if isinstance(value, Tup):
        return dataclasses.replace(value, items=tuple(map_values(v, fn) for v in value.items))
    return fn(value)


def _cse_key(rule, operands, params):
    """A key for an element or slice read, or None when it must not be shared.

    Only reads are shared: two reads of ``x[i]`` between writes are one
    value, and two slices of the same array see the same memory anyway;
    any other result may be a fresh array that a later element write
    changes, which a shared value would make visible through both names.
    """
    if rule.name != "getitem":
        return None
    try:
        key = (rule.name, tuple(operands), tuple(sorted(params.items())))
        hash(key)
    except TypeError:      # e.g. a slice constant (unhashable before Python 3.12)
        return None
    return key


def _has_branches(fn):
    """A helper with branches (its own or inlined ones) is lowered into its caller:
    the reverse sweep then replays its branches with the caller's own, and no
    value set on one path only has to cross a function boundary."""
    return any(isinstance(s, If) for s in walk(fn.body))


def _has_loops(src):
    return any(isinstance(n, (gast.For, gast.While)) for n in gast.walk(src.node))


def _stored_names(stmts):
    """User variables (re)bound anywhere in ``stmts``."""
    names = set()
    for st in stmts:
        for n in gast.walk(st):
            if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store):
                names.add(n.id)
    return names


def _leaves(value):
    """The run-time values of a lowered value (a local function has none)."""
    if isinstance(value, Tup):
        return [v for v in value.leaves() if not isinstance(v, LocalFn)]
    return [] if isinstance(value, LocalFn) else [value]


def _tuples(value):
    """The tuples, lists, dicts and NamedTuples held inside a lowered value (not itself)."""
    if not isinstance(value, Tup):
        return []
    return [t for v in value.items for t in ([v] if isinstance(v, Tup) else []) + _tuples(v)]


def _inside(value, holders):
    """Whether the list or dict ``value`` is held inside one of ``holders``."""
    return any(value is t for h in holders for t in _tuples(h))


LIST_METHODS = ("append", "extend", "pop")


def _list_method(node, env):
    """Whether ``node`` calls ``xs.append(...)``, ``extend`` or ``pop`` on a name
    bound to a list."""
    if not (isinstance(node, gast.Call) and isinstance(node.func, gast.Attribute)):
        return False
    func = node.func
    return func.attr in LIST_METHODS and isinstance(func.value, gast.Name) and \
        isinstance(env.get(func.value.id), Tup) and env[func.value.id].is_list


def _values(value):
    """Every item of a lowered value, local functions included."""
    return list(value.leaves()) if isinstance(value, Tup) else [value]


def _ast_op(op):
    """The standard-library ast class for a gast operator node."""
    return getattr(ast, type(op).__name__)


def _qualname(obj):
    module = getattr(obj, "__module__", None) or ""
    return f"{module}.{getattr(obj, '__qualname__', repr(obj))}".lstrip(".")


def _all_identifiers(fn_node):
    return {n.id for n in gast.walk(fn_node) if isinstance(n, gast.Name)}


@dataclass(frozen=True, eq=False)
class LocalFn:
    """A function defined inside the function being lowered (a nested ``def``
    or a ``lambda``), as a value: calls of it are lowered in place, with its
    free variables bound to the defining function's values -- ``env``, read
    when it is passed to another function, or else ``owner``'s at the call."""
    node: Any                 # gast.FunctionDef or gast.Lambda
    src: Any                  # its source (see parse.nested_source)
    owner: Any                # the Lowerer that defined it
    defaults: tuple = ()
    env: Any = None

    @property
    def name(self):
        return getattr(self.node, "name", "lambda")


class StaticFn:
    """A local function passed to a custom function (``fixed_point(f, a, x)``
    with ``nondiff_argnums=(0,)``), as the structure of that argument: the
    custom function, and its rules, are lowered with the function bound, as
    a separate (marked) function rather than in place."""

    def __init__(self, fn):
        self.fn = fn

    def __eq__(self, other):
        return isinstance(other, StaticFn) and other.fn is self.fn

    def __hash__(self):
        return id(self.fn)


def free_runtime_names(fn):
    """The names a local function reads from its defining function that hold
    run-time values (a function bound elsewhere cannot read them)."""
    node = fn.node
    args = node.args
    own = {a.id for a in args.args + args.kwonlyargs if isinstance(a, gast.Name)}
    for sub in gast.walk(node):
        if isinstance(sub, gast.Name) and isinstance(sub.ctx, (gast.Store, gast.Param)):
            own.add(sub.id)
    env = fn.env if fn.env is not None else fn.owner.env
    loads = {sub.id for sub in gast.walk(node)
             if isinstance(sub, gast.Name) and isinstance(sub.ctx, gast.Load)}
    return sorted(n for n in loads - own if n in env and _leaves(env[n]))


def _element_stores(body):
    """The names whose elements a block assigns (``a[i] = ...``, ``a[i] += ...``),
    nested blocks included."""
    out = set()
    for stmt in body:
        for node in gast.walk(stmt):
            targets = node.targets if isinstance(node, gast.Assign) else \
                [node.target] if isinstance(node, gast.AugAssign) else []
            for target in targets:
                for sub in gast.walk(target):
                    if isinstance(sub, gast.Subscript):
                        base = sub.value
                        while isinstance(base, gast.Subscript):
                            base = base.value
                        if isinstance(base, gast.Name):
                            out.add(base.id)
    return out
