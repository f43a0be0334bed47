"""normalize: resolved gast function -> A-normal form (:mod:`ir`).

Receives a :class:`~s2s_ad.parse.FunctionSource` and the structure of each
argument (a leaf, or a tuple of structures).  Guarantees: every statement is
one primitive (:class:`~s2s_ad.ir.Prim`) or user-function call
(:class:`~s2s_ad.ir.Call`) on atoms; names are in SSA form (a user variable
redefined gets a fresh name, so no value is ever overwritten); calls are in
canonical form (operators, methods and attributes become the rule of their
NumPy function: ``a * b`` and ``np.multiply``, ``x.sum(0)`` and ``np.sum``,
``x.T`` and ``np.transpose`` share one rule); tuples are static
(:class:`~s2s_ad.ir.Tup`) and never built at run time; the body ends in one
:class:`~s2s_ad.ir.Return`.
"""
import ast
import builtins
import dataclasses
import inspect
import numbers
import operator
from dataclasses import dataclass, field
from typing import Any

import gast
import numpy as np

from . import comprehensions, custom, library, nested, pytree, rules
from .errors import NonDifferentiableError, UnsupportedSyntaxError
from .ir import (
    Call,
    Const,
    For,
    Function,
    If,
    Prim,
    Return,
    Slice,
    Tup,
    Var,
    While,
    walk,
)
from .names import Names
from .parse import (
    FunctionSource,
    closure_cells,
    is_user_function,
    nested_source,
    read_closure,
)
from .ranks import _call_ranks as call_ranks
from .ranks import _rank as prim_rank
from .ranks import rank_of
from .rules.internal import STACK_LIKE

LEAF = None  # the structure of a single value


@dataclass(frozen=True)
class Record(Tup):
    """A dict or NamedTuple: a :class:`~s2s_ad.ir.Tup` whose items are also found
    by key (``v["a"]``) or field name (``p.a``); ``container`` (a
    :class:`~s2s_ad.pytree.Keyed`) holds the keys and rebuilds the value."""
    container: Any = field(default=None, compare=False)

    def item(self, key):
        """The item under ``key``, or None."""
        keys = self.container.keys
        return self.items[keys.index(key)] if key in keys else None

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


_FOLD = {gast.Add: operator.add, gast.Sub: operator.sub, gast.Mult: operator.mul,
         gast.Div: operator.truediv, gast.Pow: operator.pow, gast.FloorDiv: operator.floordiv,
         gast.Mod: operator.mod, gast.USub: operator.neg, gast.UAdd: operator.pos,
         gast.Not: operator.not_}
# Comparisons folded while lowering when both sides are constants.
_COMPARE = {gast.Eq: operator.eq, gast.NotEq: operator.ne, gast.Lt: operator.lt,
            gast.LtE: operator.le, gast.Gt: operator.gt, gast.GtE: operator.ge,
            gast.Is: operator.is_, gast.IsNot: operator.is_not,
            gast.In: lambda a, b: a in b, gast.NotIn: lambda a, b: a not in b}
_ATTRIBUTES = {"T": "np.transpose", "shape": "np.shape", "ndim": "np.ndim", "size": "np.size",
               "dtype": "dtype"}
_BUILTINS = {abs: "np.abs", max: "np.maximum", min: "np.minimum"}
# Results that may share their operand's memory: writing into one writes the other.
_VIEWS = {"getitem", "np.reshape", "np.ravel", "np.transpose", "np.squeeze", "np.expand_dims",
          "np.asarray"}
_VARARG_METHODS = {"reshape": "shape", "transpose": "axes"}
# NumPy functions that write into an array argument (ufunc.at methods too).
_IN_PLACE = {np.copyto, np.put, np.place, np.putmask, np.fill_diagonal, np.put_along_axis,
             np.random.shuffle}


class Program:
    """Every function lowered for one request, each once per argument structure."""

    def __init__(self):
        self.functions = {}
        self.arg_writes = {}          # function key -> {param leaf: Loc of a write into it}
        self.entry_writes = False     # the entry function, run as Python, writes into an argument
        self._active = []
        self.module_names = Names()   # functions and constants share the module namespace
        self.consts = {}
        self._sources = {}

    def source(self, fn):
        """The parsed and fenced source of ``fn`` (parsed once)."""
        if fn not in self._sources:
            self._sources[fn] = FunctionSource(fn)
        return self._sources[fn]

    def const_name(self, base, obj):
        """The module-level name bound to ``obj`` in the generated module."""
        for name, value in self.consts.items():
            if value is obj:
                return name
        name = self.module_names.fresh(base)
        self.consts[name] = obj
        return name

    def lower(self, fn, trees, call_node=None, caller=None, ranks=None):
        """``ranks``: the rank of each parameter leaf where known (the entry's,
        from the arguments; a helper's, from its call), so that ``np.ndim``
        and the library functions that depend on it specialise."""
        ranks = tuple(ranks) if ranks is not None and any(
            r is not None for r in ranks) else None
        key = (fn, tuple(trees)) + ((ranks,) if ranks is not None else ())
        if key in self.functions:
            return self.functions[key]
        if fn in self._active:
            raise caller.error(call_node, f"recursive call to '{fn.__name__}' is not supported; "
                               "write the recursion as a loop")
        self._active.append(fn)
        try:
            src = self.source(fn)
            if caller is None and closure_cells(fn):
                # The entry's closed-over arrays and floats are hidden
                # parameters after its own, read at each call (see api).
                src.hidden = tuple(read_closure(closure_cells(fn))[0])
                src.locals = src.locals | set(src.hidden)
            lowerer = Lowerer(src, trees, self, ranks=ranks)
            lowered = lowerer.run()
            written = lowerer.written_params()
            if caller is None:
                self.entry_writes = bool(lowerer.arg_writes)
                if written:
                    # The entry function writes into an argument: the generated
                    # code copies it first, so the caller's array never changes
                    # (the derivative is that of the function of the input values).
                    lowered = Lowerer(src, trees, self, copies=written, ranks=ranks).run()
            self.arg_writes[key] = lowerer.arg_writes
            lowered.name = self.module_names.fresh(src.name)
            lowered.key = key
        finally:
            self._active.pop()
        self.functions[key] = lowered
        return lowered

    def lower_custom(self, custom_fn, trees, call_node=None, caller=None):
        """Lower a custom_vjp/custom_jvp function (its body), marked with its rule."""
        return custom.lower_custom(self, custom_fn, trees, call_node, caller)


class ListTree(tuple):
    """The structure of a list display passed to a helper: a tuple of
    structures that is not equal to the tuple's, so the helper sees a list
    (``v[idx]`` with ``idx = [2, 0]`` indexes with an integer array)."""

    def __eq__(self, other):
        return type(other) is ListTree and tuple.__eq__(self, other)

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash((ListTree, tuple(self)))


def same_structure(a, b):
    """Whether two lowered values have one structure, a list matching a tuple."""
    def plain(tree):
        if isinstance(tree, pytree.Fields):
            return pytree.Fields(tuple(map(plain, tree)), tree.container)
        return tuple(map(plain, tree)) if isinstance(tree, tuple) else tree
    return plain(tree_of(a)) == plain(tree_of(b))


def tree_of(value):
    """The structure of a lowered value (LEAF, a tuple of structures -- a
    :class:`ListTree` for a list -- or :class:`~s2s_ad.pytree.Fields` for a
    dict or NamedTuple)."""
    if isinstance(value, Record):
        return pytree.Fields(tuple(tree_of(v) for v in value.items), value.container)
    if isinstance(value, Tup):
        items = tuple(tree_of(v) for v in value.items)
        return ListTree(items) if value.is_list else items
    return LEAF


class Lowerer:
    """Lowers one function body; one instance per (function, structure)."""

    view_of = None            # see __init__ (None in lowerers that do not track views)
    effects = 0               # calls so far that wrote into an array their caller passed

    def __init__(self, src: FunctionSource, trees, program, copies=(), ranks=None):
        self.src = src
        self.program = program
        self.names = Names(_all_identifiers(src.node))
        self.names.claim_user(src.locals)
        self.env = {}
        self.consts = {}
        self.body = []
        self.loops = 0            # loops around the statement being lowered
        self.cse = {}             # id(block) -> {primitive key: its value}
        self.views = set()        # names that may share another array's memory
        self.view_of = {}         # a view made by indexing -> (array, index)
        self.node = src.node
        self.param_trees = []
        self.params = []
        self.written = set()      # parameter leaves an element write changes
        # Where the body writes into an argument's array: an element write,
        # or ``x += e`` while x still names the argument (in place in NumPy).
        self.arg_writes = {}
        self.arguments = None     # names of the arguments, when not the parameters (inlined)
        names = src.param_names + list(getattr(src, "hidden", ()))
        if len(trees) != len(names):
            raise TypeError(f"{src.name}() takes {len(names)} arguments, got {len(trees)}")
        for name, tree in zip(names, trees):
            value = self._param(name, tree)
            self.env[name] = value
            self.param_trees.append(value)
        # Ranks known while lowering: np.ndim(x) of a known rank is a constant.
        self.ranks = dict(zip(self.params, ranks)) if ranks is not None else {}
        if copies:
            self.copy_params(copies)

    def _param(self, name, tree):
        if tree is LEAF:
            var = Var(self.names.user(name))
            self.params.append(var.name)
            return var
        self.names.own.discard(name)
        items = tuple(self._param(f"{name}_{i}", sub) for i, sub in enumerate(tree))
        if isinstance(tree, pytree.Fields):
            return Record(items, container=tree.container)
        return Tup(items, is_list=isinstance(tree, ListTree))

    def copy_params(self, positions):
        """The body works on copies of the parameter leaves at ``positions``
        (those it writes into), so the caller's arrays stay as they are."""
        copies = {}
        for i in positions:
            param = self.params[i]
            copy = self.names.fresh(f"{param}_copy")
            loc = self.src.loc(self.src.node)
            loc = type(loc)(loc.filename, loc.lineno, loc.col,
                            f"{param} is written into below: a copy, so the caller's array "
                            f"is left as it is")
            self.body.append(Prim([copy], rules.RULES["np.copy"], [Var(param)], {}, loc))
            self.ranks[copy] = self.ranks.get(param)
            copies[Var(param)] = Var(copy)
        for name, value in self.env.items():
            self.env[name] = _map_leaves(value, lambda v: copies.get(v, v))

    def written_params(self):
        """Positions of the parameter leaves the body writes into."""
        return tuple(i for i, p in enumerate(self.params) if p in self.written)

    def run(self):
        for stmt in self.src.node.body:
            self.node = stmt
            self.stmt(stmt)
        if not self.body or not isinstance(self.body[-1], Return):
            self.body.append(Return(Const(None), self.src.loc(self.src.node)))
        return Function(self.src.name, self.params, self.param_trees, self.body,
                        self.consts, self.src, names=self.names)

    def error(self, node, msg):
        return self.src.error(node, msg)

    # -- statements ---------------------------------------------------------
    def stmt(self, node):
        method = getattr(self, "stmt_" + type(node).__name__, None)
        if method is None:
            raise self.error(node, f"'{type(node).__name__.lower()}' statements are not supported "
                             "in differentiated functions")
        method(node)

    def stmt_Pass(self, node):
        pass

    def stmt_Expr(self, node):
        if isinstance(node.value, gast.Call):
            # A call made for its effect: a helper that writes into an array
            # it is passed (``smooth(u)``), lowered into this function.
            before = self.effects
            self.expr(node.value)
            if self.effects > before:
                return
        raise self.error(node, "a statement that is only an expression has no effect on the result "
                         "(s2s_ad functions are pure); assign its value or remove it")

    def stmt_Assign(self, node):
        value = self.expr(node.value)
        for target in node.targets:          # ``a = b = e``: left to right, as Python does
            self.assign(target, value)
            if isinstance(target, gast.Name):
                value = self.env[target.id]  # the temporary may now carry the user's name

    def stmt_AugAssign(self, node):
        # ``x += e`` rebinds ``x`` to ``x + e`` (for arrays too: no other
        # name sees the update, unlike NumPy's in-place ``+=``).
        target = node.target
        if isinstance(target, gast.Name):
            if target.id in self.env:
                if self.in_place_update(target, node):
                    return
                self.note_write(self.env[target.id], node)
            load = gast.copy_location(gast.Name(target.id, gast.Load(), None, None), target)
            binop = gast.copy_location(gast.BinOp(load, node.op, node.value), node)
            self.assign(target, self.expr(binop))
        elif isinstance(target, gast.Subscript):
            storage, index = self.storage(target), self.index(target.slice)
            old = self.emit(rules.RULES["getitem"], [storage], {"index": index})
            new = self.operator(node.op, [old, self.expr(node.value)], node)
            self.emit_setitem(storage, index, new)
        else:
            raise self.error(node, "only names and array elements can be updated")

    def stmt_Return(self, node):
        value = Const(None) if node.value is None else self.expr(node.value)
        nested.check_escapes(self, value, node)
        if any(isinstance(v, LocalFn) for v in _values(value)):
            raise self.error(node, "returning a function is not supported; return the values "
                             "it computes, or define it at module level")
        self.body.append(Return(value, self.src.loc(node)))

    def stmt_FunctionDef(self, node):
        self.bind(node.name, self.local_function(node))

    def expr_Lambda(self, node):
        return self.local_function(node)

    def local_function(self, node):
        """A nested ``def`` or ``lambda`` as a value; its default values are
        computed here, where Python computes them."""
        defaults = tuple(self.expr(d) for d in node.args.defaults)
        return LocalFn(node, nested_source(self.src, node), self, defaults)

    def assign(self, target, value):
        if isinstance(target, gast.Name):
            self.bind(target.id, value)
        elif isinstance(target, (gast.Tuple, gast.List)):
            self.unpack(target, value)
        elif isinstance(target, gast.Subscript):
            if isinstance(target.value, gast.Name) and isinstance(
                    self.env.get(target.value.id), Record) and self.env[
                    target.value.id].container.cls is dict:
                return self.dict_store(target, value)
            storage = self.storage(target)
            if isinstance(value, Tup):
                raise self.error(target, "cannot store a tuple into an array element")
            self.emit_setitem(storage, self.index(target.slice), value)
        else:
            raise self.error(target, "only names and tuples of names can be assigned to")

    def storage(self, target):
        """The array an element assignment writes into."""
        storage = self.expr(target.value)
        if isinstance(storage, Tup):
            raise self.error(target, "the elements of a tuple or list cannot be written into; "
                             "pass an array, or build a new tuple")
        return self.writable(storage, target)

    def writable(self, storage, target):
        """``storage``, checked as the array a write lands in."""
        if not isinstance(storage, Var) or storage.name in self.program.consts:
            raise self.error(target, "only local arrays can be written into; copy a module-level "
                             "array first (a = np.copy(A))")
        if storage.name in self.params:
            self.written.add(storage.name)
        self.note_write(storage, target)
        if storage.name in self.views:
            raise self.error(target, "writing into a view of another array (a slice, row, "
                             "reshape or transpose of it) is not supported, because the write "
                             "changes that array too; write into the array itself (M[i, j] = v "
                             "rather than row = M[i]; row[j] = v), or copy the view first "
                             "(row = np.copy(M[i]))")
        return storage

    def note_write(self, value, node):
        """Record a write into ``value`` if it is one of the arguments."""
        arguments = self.params if self.arguments is None else self.arguments
        if isinstance(value, Var) and value.name in arguments:
            self.arg_writes.setdefault(value.name, self.src.loc(node))

    def in_place_update(self, target, node):
        """``x += e`` in an inlined helper while ``x`` still names an array its
        caller passed: NumPy updates that array in place, so the caller sees
        it (``x[:] = x + e``).  Returns whether the update was lowered so."""
        value = self.env[target.id]
        if self.arguments is None or not isinstance(value, Var) or \
                value.name not in self.arguments or rank_of(value, self.ranks) == 0:
            return False      # a number: ``x += e`` rebinds the helper's name only
        storage = self.writable(value, node)
        new = self.operator(node.op, [value, self.expr(node.value)], node)
        self.emit_setitem(storage, Const(slice(None)), new)
        return True

    def view_arguments(self, fn, values, node):
        """Arguments that are views of the caller's arrays (``step(u[1:-1])``)
        and that ``fn`` writes into: each is passed as a copy read from its
        array at the call, and written back after the call, so the write lands
        in the array, as in NumPy.  Returns (values, [(array, index, copy)])."""
        views = [leaf for v in values for leaf in _leaves(v)
                 if isinstance(leaf, Var) and leaf.name in self.views]
        if not views:
            return values, []
        trees = [tree_of(v) for v in values]
        leaves = [leaf for v in values for leaf in _leaves(v)]
        callee = self.program.lower(fn, trees, node, self.src,
                                    [rank_of(leaf, self.ranks) for leaf in leaves])
        written = {leaves[i] for i, p in enumerate(callee.params)
                   if p in self.program.arg_writes.get(callee.key, {})}
        copies, writebacks = {}, []
        for view in views:
            if view not in written or view in copies:
                continue
            array, index = self.view_origin(view, fn, node)
            others = [leaf for leaf in leaves if leaf != view]
            if any(self.root(leaf) == self.root(array) for leaf in others):
                raise self.error(node, f"{fn.__name__}() writes into a view of an array "
                                 f"that is also passed to it another way; pass the array "
                                 f"once, or pass a copy (np.copy(...)) of one of them")
            fresh = Var(self.names.temp())
            loc = self.src.loc(node)
            self.body.append(Prim([fresh.name], rules.RULES["getitem"], [array],
                                  {"index": index}, loc))
            copies[view] = self.emit(rules.RULES["np.copy"], [fresh], {}, node)
            writebacks.append((self.writable(array, node), index, copies[view]))
        values = [_map_leaves(v, lambda x: copies.get(x, x)) for v in values]
        return values, writebacks

    def view_origin(self, view, fn, node):
        """The (array, index) that ``view`` was read from, for a write through it."""
        origin = (self.view_of or {}).get(view.name)
        if origin is None or origin[0].name in self.views:
            raise self.error(node, f"{fn.__name__}() writes into an argument that is a view "
                             f"of another array made otherwise than by slicing it once (a "
                             f"reshape, transpose, or a slice of a slice); pass the array "
                             f"sliced once (u[1:-1]), or pass a copy and assign it back")
        index = origin[1]
        parts = [p for leaf in _leaves(index)
                 for p in ((leaf.lo, leaf.hi, leaf.step) if isinstance(leaf, Slice) else (leaf,))]
        if any(isinstance(p, Var) and rank_of(p, self.ranks) != 0 for p in parts):
            # An array index gives NumPy a copy, not a view: the helper's
            # write would not reach the array; an index of unknown kind
            # cannot be told apart from one.
            raise self.error(node, f"{fn.__name__}() writes into an argument indexed by an "
                             f"array, or by a value not known to be an integer; NumPy passes "
                             f"a copy there, not a view. Index with slices, integers and loop "
                             f"variables, or pass a copy and assign it back")
        return origin

    def root(self, value):
        """The array a view (of a view ...) looks into."""
        while isinstance(value, Var) and self.view_of and value.name in self.view_of:
            value = self.view_of[value.name][0]
        return value

    def emit_setitem(self, storage, index, value):
        self.cse.clear()           # an element write may change what reads see
        self.body.append(Prim([], rules.RULES["setitem"], [storage, value], {"index": index},
                              self.src.loc(self.node)))

    # -- control flow ---------------------------------------------------------
    def block(self, stmts):
        """Lower ``stmts`` into a new statement list (a nested block)."""
        saved, self.body = self.body, []
        for st in stmts:
            node, self.node = self.node, st
            self.stmt(st)
            self.node = node
        block, self.body = self.body, saved
        return block

    def stmt_If(self, node):
        cond = self.expr(node.test)
        if isinstance(cond, Const):       # a constant test: only the branch taken is lowered
            for st in node.body if cond.value else node.orelse:
                saved, self.node = self.node, st
                self.stmt(st)
                self.node = saved
            return
        before = dict(self.env)
        body = self.block(node.body)
        after_body, self.env = self.env, dict(before)
        orelse = self.block(node.orelse)
        after_else, self.env = self.env, before
        joins = self.join(node, [(body, after_body), (orelse, after_else)])
        self.body.append(If(cond, body, orelse, self.src.loc(node), joins))

    def join(self, node, branches):
        """Variables that differ between branches get one name after the if.

        Returns {joined name: (assigned in body, assigned in orelse)}.
        """
        joins = {}
        names = set().union(*(env for _, env in branches))
        for name in sorted(names):
            values = [env.get(name) for _, env in branches]
            if all(v == values[0] for v in values):
                if values[0] is not None:
                    self.env[name] = values[0]
                continue
            joined = self.fresh_like(name, next(v for v in values if v is not None), node)
            for (block, _), value in zip(branches, values):
                if value is not None:
                    self.copy_into(block, joined, value, node)
            self.env[name] = joined
            for leaf in _leaves(joined):
                joins[leaf.name] = tuple(v is not None for v in values)
        return joins

    def fresh_like(self, name, value, node):
        if isinstance(value, LocalFn):
            return value
        if isinstance(value, Tup):
            return dataclasses.replace(value, items=tuple(
                self.fresh_like(f"{name}_{i}", v, node) for i, v in enumerate(value.items)))
        return Var(self.names.user(name))

    def copy_into(self, block, target, value, node):
        if isinstance(target, LocalFn) or isinstance(value, LocalFn):
            if not (isinstance(target, LocalFn) and isinstance(value, LocalFn)
                    and target.node is value.node):
                raise self.error(node, "a variable holds different functions on different "
                                 "paths (or a function on one and a value on another); call "
                                 "each function where it is defined instead")
            return
        if isinstance(target, Tup):
            if not (isinstance(value, Tup) and len(value.items) == len(target.items)):
                raise self.error(node, "a variable holds tuples of different structure on "
                                 "different paths; give it one structure")
            for t, v in zip(target.items, value.items):
                self.copy_into(block, t, v, node)
        elif isinstance(value, Tup):
            raise self.error(node, "a variable holds a tuple on one path and a value on another")
        elif value != target:
            block.append(Prim([target.name], rules.RULES["copy"], [value], {}, None))
            self.note_rank(target.name, rank_of(value, self.ranks))
            if isinstance(value, Var) and value.name in self.views:
                self.views.add(target.name)

    def enter_loop(self, node, body):
        """Header names for the variables a loop body assigns."""
        headers = {}
        for name in sorted(_stored_names(body)):
            if name in self.env:
                header = self.fresh_like(name, self.env[name], node)
                self.copy_into(self.body, header, self.env[name], node)
                self.env[name] = headers[name] = header
            else:
                headers[name] = None
        return headers

    def exit_loop(self, node, headers, body):
        """Copy each variable's end-of-body value into its header.

        The copies act as one parallel assignment: a header another copy
        reads is first saved in a temporary (``i = k; k = k + 1`` must give
        ``i`` the old ``k``).
        """
        copies = []
        for name, header in headers.items():
            if name not in self.env:
                continue
            value = self.env[name]
            if header is None:
                header = self.fresh_like(name, value, node)
            copies.append((header, value))
            headers[name] = header
        assigned = {leaf.name for header, _ in copies for leaf in _leaves(header)}
        for i, (header, value) in enumerate(copies):
            if any(isinstance(v, Var) and v.name in assigned and v not in _leaves(header)
                   for v in _leaves(value)):
                saved = self._fresh_like_temp(value)
                self.copy_into(body, saved, value, node)
                copies[i] = (header, saved)
        for header, value in copies:
            self.copy_into(body, header, value, node)
        for name, header in headers.items():
            if header is not None:
                self.env[name] = header
        return [leaf.name for h in headers.values() if h is not None for leaf in _leaves(h)]

    def stmt_For(self, node):
        start, stop, step = (self.expr(a) for a in node.iter.args)
        if not isinstance(node.target, gast.Name):
            raise self.error(node, "a range loop needs a single loop variable")
        headers = self.enter_loop(node, node.body)
        index = Var(self.names.user(node.target.id))
        self.env[node.target.id] = index
        self.note_rank(index.name, 0)
        self.loops += 1
        body = self.block(node.body)
        self.loops -= 1
        carried = self.exit_loop(node, headers, body)
        self.env[node.target.id] = index
        self.body.append(For(index.name, start, stop, step, body, self.src.loc(node), carried))

    def stmt_While(self, node):
        headers = self.enter_loop(node, node.body)
        saved, self.body = self.body, []
        cond = self.expr(node.test)
        test, self.body = self.body, saved
        self.loops += 1
        body = self.block(node.body)
        self.loops -= 1
        carried = self.exit_loop(node, headers, body)
        self.body.append(While(test, cond, body, self.src.loc(node), carried))

    def expr_IfExp(self, node):
        cond = self.expr(node.test)
        if isinstance(cond, Const):
            return self.expr(node.body if cond.value else node.orelse)
        target = Var(self.names.temp())
        branches = []
        for sub in (node.body, node.orelse):
            saved, self.body = self.body, []
            value = self.expr(sub)
            self.copy_into(self.body, target, value, node)
            branches.append(self.body)
            self.body = saved
        self.body.append(If(cond, branches[0], branches[1], self.src.loc(node),
                            {target.name: (True, True)}))
        return target

    def unpack(self, target, value):
        n = len(target.elts)
        if isinstance(value, Tup):
            if len(value.items) != n:
                raise self.error(target, f"cannot unpack {len(value.items)} values into {n} names")
            items = value.items
        elif isinstance(value, Var):
            items = [self.emit(rules.RULES["getitem"], [value], {"index": Const(i)})
                     for i in range(n)]
        else:
            raise self.error(target, "cannot unpack a constant")
        for elt, item in zip(target.elts, items):
            self.assign(elt, item)

    def bind(self, name, value):
        """Bind a user variable; a fresh temporary is renamed after it."""
        last = self.body[-1] if self.body else None
        if (isinstance(value, Var) and value.name.startswith("_t")
                and isinstance(last, (Prim, Call))
                and last.targets == [value.name]):
            renamed = Var(self.names.user(name))
            last.targets = [renamed.name]
            self._rename(value, renamed)
            value = renamed
        self.env[name] = value

    def _rename(self, old, new):
        """Point every reference the lowering still holds at the new name."""
        for key, v in self.env.items():
            self.env[key] = _replace(v, old, new)
        if old.name in self.ranks:
            self.ranks[new.name] = self.ranks[old.name]
        if old.name in self.views:
            self.views.add(new.name)
        if self.view_of and old.name in self.view_of:
            self.view_of[new.name] = self.view_of[old.name]
        for table in self.cse.values():
            for key, v in table.items():
                if v == old:
                    table[key] = new

    # -- expressions --------------------------------------------------------
    def expr(self, node):
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            raise self.error(node, f"'{type(node).__name__}' expressions are not supported")
        return method(node)

    def expr_Constant(self, node):
        return Const(node.value)

    def expr_Name(self, node):
        if node.id in self.src.locals:
            if node.id not in self.env:
                raise self.error(node, f"local variable '{node.id}' is used before it is assigned")
            return self.env[node.id]
        return self.constant(node.id, self.src.lookup(node), node)

    def expr_Attribute(self, node):
        ok, obj = self.src.resolve(node)
        if ok:
            return self.constant(node.attr, obj, node)
        value = self.expr(node.value)
        if isinstance(value, Record) and value.container.cls is not dict:
            item = value.item(node.attr)
            if item is None:
                raise self.error(node, f"{value.container.__name__} has no field '{node.attr}'")
            return item
        rule = _ATTRIBUTES.get(node.attr)
        if rule is None:
            self._unknown_call_first(value, node)
            raise self.error(node, f"attribute '.{node.attr}' of an array is not supported")
        return self.emit_call(rules.RULES[rule], [value], {}, node)

    def _unknown_call_first(self, value, node):
        """An unsupported attribute of the result of a call with no rule
        (``np.fft.fft(x).real``): report the call, the first thing to fix."""
        made = next((s for s in reversed(self.body) if isinstance(s, Prim) and
                     isinstance(value, Var) and value.name in s.targets), None)
        if made is not None and made.rule.unknown:
            from .activity import no_rule_message
            loc = self.src.loc(node)
            raise NonDifferentiableError(
                f"{no_rule_message(made.rule)}; the attribute '.{node.attr}' of its result is "
                f"not supported either, in '{loc.text.strip()}'", loc.filename, loc.lineno)

    def constant(self, name, obj, node):
        """A free name's value: a literal, or a constant bound in the module."""
        if isinstance(obj, (bool, numbers.Number, str, type(None))) or obj is Ellipsis:
            return Const(obj.item() if isinstance(obj, np.generic) else obj)
        if (isinstance(obj, dict) and all(isinstance(k, str) for k in obj)) or \
                pytree.is_namedtuple(obj):        # a dict or NamedTuple constant, statically
            keys = sorted(obj) if isinstance(obj, dict) else type(obj)._fields
            values = [obj[k] for k in keys] if isinstance(obj, dict) else list(obj)
            return Record(tuple(self.constant(f"{name}_{k}", v, node) for k, v in
                                zip(keys, values)),
                          container=pytree.Keyed(dict if isinstance(obj, dict) else type(obj),
                                                 keys))
        if isinstance(obj, tuple) and all(isinstance(v, numbers.Number) for v in obj):
            return Const(obj)
        if isinstance(obj, (tuple, list)):      # a pytree constant: its leaves, statically
            return Tup(tuple(self.constant(f"{name}_{i}", v, node) for i, v in enumerate(obj)))
        if isinstance(obj, np.ndarray):
            value = Var(self.bind_const(name, obj))
            self.note_rank(value.name, obj.ndim)
            return value
        return Const(obj)   # modules, functions, dtypes: only usable as callees/options

    def bind_const(self, name, obj):
        cname = self.program.const_name(name, obj)
        self.names.taken.add(cname)
        self.consts[cname] = obj
        return cname

    def expr_Tuple(self, node):
        return Tup(tuple(self.expr(e) for e in node.elts))

    def expr_List(self, node):
        return Tup(tuple(self.expr(e) for e in node.elts), is_list=True)

    def expr_Dict(self, node):
        """``{"w": a, "b": c}``: a :class:`Record` (its items in sorted key order,
        as the API flattens a dict argument)."""
        items = {}
        for key, value in zip(node.keys, node.values):
            if not (isinstance(key, gast.Constant) and isinstance(key.value, str)):
                raise self.error(key or value, "dict keys must be constant strings "
                                 "({\"w\": w, \"b\": b}); unpacking (**d) is not supported")
            items[key.value] = self.expr(value)
        keys = sorted(items)
        return Record(tuple(items[k] for k in keys), container=pytree.Keyed(dict, keys))

    def dict_store(self, target, value):
        """``d["k"] = v`` on a dict value: every name bound to that dict sees the
        new item (the dict is rebuilt, statically, with it)."""
        old = self.env.get(target.value.id) if isinstance(target.value, gast.Name) else None
        key = self.index(target.slice)
        if not (isinstance(key, Const) and isinstance(key.value, str)):
            raise self.error(target, "a dict can only be written under a constant string key")
        if any(old is v for p in self.param_trees for v in [p] + _records(p)):
            raise self.error(target, "writing into a dict argument is not supported (the "
                             "caller's dict would change); build a new dict with the items "
                             "you need")
        if any(old is r for v in self.env.values() if v is not old for r in _records(v)):
            raise self.error(target, "this dict is also held in a tuple, list or dict, which "
                             "would see the write; write into the dict before putting it there")
        items = dict(zip(old.container.keys, old.items))
        items[key.value] = value
        keys = sorted(items)
        new = Record(tuple(items[k] for k in keys), container=pytree.Keyed(dict, keys))
        for name, v in list(self.env.items()):
            if v is old:
                self.env[name] = new

    def expr_ListComp(self, node):
        return comprehensions.Lowering(self, node).build()

    def expr_GeneratorExp(self, node):
        raise comprehensions.generator_error(self, node)

    def expr_BinOp(self, node):
        left, right = self.expr(node.left), self.expr(node.right)
        if isinstance(left, Const) and isinstance(right, Const) and type(node.op) in _FOLD:
            return Const(_FOLD[type(node.op)](left.value, right.value))
        return self.operator(node.op, [left, right], node)

    def expr_UnaryOp(self, node):
        operand = self.expr(node.operand)
        if isinstance(operand, Const) and type(node.op) in _FOLD:
            return Const(_FOLD[type(node.op)](operand.value))
        return self.operator(node.op, [operand], node)

    def expr_Compare(self, node):
        left, result = self.expr(node.left), None
        for op, comparator in zip(node.ops, node.comparators):
            right = self.expr(comparator)
            folded = _fold_compare(op, left, right) if len(node.ops) == 1 else None
            if folded is not None:       # constants compared while lowering
                return folded
            test = self.operator(op, [left, right], node)
            result = test if result is None else self.emit(rules.RULES["and"], [result, test], {})
            left = right
        return result

    def expr_BoolOp(self, node):
        """``a and b`` / ``a or b``, evaluating ``b`` only when Python would."""
        result = self.expr(node.values[0])
        for sub in node.values[1:]:
            if isinstance(result, Const):      # Python's short circuit, while lowering
                if bool(result.value) == isinstance(node.op, gast.Or):
                    break
                result = self.expr(sub)
                continue
            saved, self.body = self.body, []
            right = self.expr(sub)
            scratch, self.body = self.body, saved
            if all(isinstance(p, Prim) and p.rule.nondiff and p.rule.name != "getitem"
                   for p in scratch):
                self.body.extend(scratch)    # cheap and safe: evaluate eagerly
                result = self.operator(node.op, [result, right], node)
                continue
            target = Var(self.names.temp())
            self.copy_into(scratch, target, right, node)
            keep = []
            self.copy_into(keep, target, result, node)
            is_and = isinstance(node.op, gast.And)
            then, orelse = (scratch, keep) if is_and else (keep, scratch)
            self.body.append(If(result, then, orelse, self.src.loc(node),
                                {target.name: (True, True)}))
            result = target
        return result

    def operator(self, op, args, node):
        name = rules.OPERATORS.get(_ast_op(op))
        if name is None:
            raise self.error(node, f"the operator {type(op).__name__} is not supported")
        comprehensions.refuse_list_operator(self, name, args, node)
        if any(isinstance(a, Tup) for a in args):
            sequence = self.sequence_operator(name, args, node)
            if sequence is not None:
                return sequence
            # NumPy reads a list or tuple operand as np.array(list).
            args = [self.array_of(a, node) if isinstance(a, Tup) else a for a in args]
        return self.emit(rules.RULES[name], args, {})

    def sequence_operator(self, name, args, node):
        """Python's ``+`` and ``*`` of tuples and lists (concatenation, repetition),
        statically; None where NumPy's arithmetic applies instead."""
        if name == "np.add" and all(isinstance(a, Tup) for a in args):
            return Tup(args[0].items + args[1].items, args[0].is_list)
        if name == "np.multiply" and len(args) == 2:
            seq, n = args if isinstance(args[0], Tup) else args[::-1]
            if isinstance(n, Const) and isinstance(n.value, int) and \
                    not isinstance(n.value, bool):
                return Tup(seq.items * max(n.value, 0), seq.is_list)
            if isinstance(seq, Tup) and isinstance(n, Var) and \
                    all(isinstance(v, Const) for v in seq.leaves()):
                raise self.error(node, "repeating a list ([0.0] * n) is not supported: lists "
                                 "have a fixed length here; use np.zeros(n) or np.full(n, c)")
        return None

    def expr_Subscript(self, node):
        value = self.expr(node.value)
        index = self.index(node.slice)
        if isinstance(value, Record) and value.container.cls is dict:
            item = value.item(index.value) if isinstance(index, Const) else None
            if item is None:
                raise self.error(node, f"a dict argument can only be indexed by one of its keys "
                                 f"({', '.join(map(repr, value.container.keys))}), written as "
                                 f"a constant")
            return item
        if isinstance(value, (Tup, Const)) and _is_constant(index):
            folded = _fold_subscript(value, _python_value(index))   # a tuple's items, statically
            if folded is not None:
                return folded
        if isinstance(value, Tup):
            if not (isinstance(index, Const) and isinstance(index.value, int)):
                raise self.error(node, "a tuple can only be indexed by a constant integer")
            if not -len(value.items) <= index.value < len(value.items):
                raise self.error(node, f"tuple index {index.value} is out of range for a tuple "
                                 f"of {len(value.items)} values")
            return value.items[index.value]
        return self.emit(rules.RULES["getitem"], [value], {"index": index})

    def index(self, node):
        if isinstance(node, gast.Tuple):
            return Tup(tuple(self.index(e) for e in node.elts))
        if isinstance(node, gast.Slice):
            return Const(slice(None)) if (node.lower, node.upper, node.step) == (None,) * 3 else \
                Slice(*(None if b is None else self.expr(b)
                        for b in (node.lower, node.upper, node.step)))
        value = self.expr(node)
        if isinstance(value, Tup) and value.is_list:
            # x[[2, 0]] (or a name bound to a list): NumPy indexes with an
            # integer array there, not with the tuple (2, 0).
            return self.array_of(value, node)
        return value

    def expr_Call(self, node):
        func = node.func
        local = self.local_callee(func)
        if local is not None:
            return self.call_local(local, node)
        ok, obj = self.src.resolve(func)
        if not ok:
            if isinstance(func, gast.Attribute):
                return self.method(func, node)
            if isinstance(func, gast.Call) and self._is_vmap(func):
                return self.call_vmap(func, node)
            if isinstance(func, gast.Call):          # ad.grad(f)(x) and friends
                return nested.call_transformed(self, func, node)
            vjp_fn = self.env.get(func.id) if isinstance(func, gast.Name) else None
            if isinstance(vjp_fn, Const) and isinstance(vjp_fn.value, nested.VjpFunction):
                return nested.call_vjp_fn(self, vjp_fn.value, node)
            what = f"'{func.id}' is a local variable: " if isinstance(func, gast.Name) else ""
            raise self.error(node, f"{what}only module-level functions, NumPy and math functions "
                             "can be called; call the function by its own name")
        from .jacobians import jvp
        if obj is jvp:
            return self.call_jvp(node)
        value = nested.call_object(self, obj, node)     # ad.vjp, ad.hvp, a module-level ad.grad(f)
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

    def _is_vmap(self, node):
        from .batching import vmap
        ok, obj = self.src.resolve(node.func)
        return ok and obj is vmap

    def call_vmap(self, vnode, node):
        """``ad.vmap(f, in_axes)(args)`` in user code: a loop over the examples.

        Each example's ``f`` result is written into outputs allocated from
        the first one, so the function around it can be differentiated
        (``grad`` of a function that sums a ``vmap``) and compiled.
        """
        spec = self._vmap_spec(vnode)
        if not vnode.args:
            raise self.error(vnode, "ad.vmap needs the function to batch")
        fn = nested.spec_of(self, vnode.args[0])      # f, or a transform of it (ad.grad(f))
        if node.keywords:
            raise self.error(node, "pass the arguments of a vmapped function positionally")
        args = [self.expr(a) for a in node.args]
        in_axes = spec["in_axes"]
        if not isinstance(in_axes, tuple):
            in_axes = (in_axes,) * len(args)
        if len(in_axes) != len(args):
            raise self.error(node, f"vmap in_axes has {len(in_axes)} entries but the function "
                             f"is called with {len(args)} arguments")
        leaves_axes = [pair for a, ax in zip(args, in_axes)
                       for pair in self._leaf_axes(a, ax, vnode)]
        batched = [(leaf, ax) for leaf, ax in leaves_axes if ax is not None]
        if not batched:
            raise self.error(vnode, "vmap needs at least one batched argument: every in_axes "
                             "entry is None")
        first, axis = batched[0]
        shape = self.emit(rules.RULES["np.shape"], [first], {}, node)
        size = self.emit(rules.RULES["getitem"], [shape], {"index": Const(axis)}, node)

        def example(b):
            picked = {}
            for leaf, ax in leaves_axes:
                if ax is not None:
                    index = b if ax == 0 else Tup((Const(slice(None)),) * ax + (b,))
                    picked[leaf] = self.emit(rules.RULES["getitem"], [leaf], {"index": index},
                                             node)
            return [_map_leaves(a, lambda x: picked.get(x, x)) for a in args]

        r0 = nested.apply(self, fn, example(Const(0)), node)
        outs = []
        for leaf in _leaves(r0):
            out = self.emit(STACK_LIKE, [leaf, size], {}, node)
            self.emit_setitem(out, Const(0), leaf)
            outs.append(out)
        index = Var(self.names.fresh("b"))
        saved, self.body = self.body, []
        r = nested.apply(self, fn, example(index), node)
        for out, leaf in zip(outs, _leaves(r)):
            self.emit_setitem(out, index, leaf)
        body, self.body = self.body, saved
        self.body.append(For(index.name, Const(1), size, Const(1), body, self.src.loc(node)))
        self.cse.clear()
        it = iter(outs)
        return _map_leaves(r0, lambda _: next(it))

    def _vmap_spec(self, vnode):
        """in_axes and out_axes of ``ad.vmap(f, ...)`` in user code (literals only)."""
        names = ("fun", "in_axes", "out_axes")
        spec = {"in_axes": 0, "out_axes": 0}
        given = list(zip(names, vnode.args)) + [(k.arg, k.value) for k in vnode.keywords]
        for name, value in given:
            if name == "fun":
                continue
            if name not in spec:
                raise self.error(vnode, f"ad.vmap inside a transformed function takes in_axes "
                                 f"and out_axes, not {name}")
            try:
                spec[name] = ast.literal_eval(gast.gast_to_ast(value))
            except ValueError:
                raise self.error(vnode, f"{name} of ad.vmap inside a transformed function must "
                                 f"be written as a literal (ints, None, tuples)") from None
        if spec["out_axes"] != 0:
            raise self.error(vnode, "ad.vmap inside a transformed function stacks its outputs "
                             "on axis 0: use out_axes=0 and move the axis afterwards")
        return spec

    def _leaf_axes(self, value, ax, node):
        """(leaf, batch axis) for every leaf of an argument and its in_axes entry."""
        if isinstance(ax, dict):             # a dict prefix: one entry per key of a dict
            keys = value.container.keys if isinstance(value, Record) else None
            if keys is None or value.container.cls is not dict or set(ax) != set(keys):
                raise self.error(node, f"the dict entry {ax!r} of in_axes must have the keys "
                                 f"of its argument's dict")
            return [p for k, v in zip(keys, value.items) for p in self._leaf_axes(v, ax[k], node)]
        if isinstance(ax, (tuple, list)):
            if not (isinstance(value, Tup) and len(value.items) == len(ax)):
                raise self.error(node, "a tuple entry of in_axes must match its argument's "
                                 "structure")
            return [p for v, a in zip(value.items, ax) for p in self._leaf_axes(v, a, node)]
        if ax is not None and (not isinstance(ax, int) or isinstance(ax, bool) or ax < 0):
            raise self.error(node, "in_axes entries of ad.vmap inside a transformed function "
                             "must be non-negative ints or None")
        return [(leaf, ax) for leaf in _leaves(value)]

    def call_jvp(self, node, spec=None):
        """``ad.jvp(f, (x, ...), (dx, ...))`` in user code: a call to f's JVP
        (``f`` may be a transform itself, ``ad.grad(g)``; ``spec`` overrides it).

        The JVP is lowered like any helper, so the function around it can be
        differentiated again (``grad`` of a directional derivative).
        """
        from . import forward
        what = "ad.hvp" if spec is not None else "ad.jvp"
        if len(node.args) != 3 or node.keywords:
            raise self.error(node, f"write {what}(f, (x, ...), (dx, ...)) with three "
                             f"positional arguments")
        spec = spec or nested.spec_of(self, node.args[0])
        primals, tangents = (self.expr(a) for a in node.args[1:])
        if not (isinstance(primals, Tup) and isinstance(tangents, Tup)
                and len(primals.items) == len(tangents.items)):
            raise self.error(node, "ad.jvp needs a tuple of primals and a tuple of tangents "
                             "with one tangent per primal")
        for p, t in zip(primals.items, tangents.items):
            if not same_structure(p, t):
                raise self.error(node, "each tangent passed to ad.jvp must have the structure "
                                 "of its primal")
        callee = nested.lower(self, spec, [tree_of(v) for v in primals.items], node)
        hidden = list(nested.hidden_of(spec))     # a closure's captured values: not tangents
        wrt = list(callee.params)[:len(callee.params) - len(hidden)]
        jvp_fn = forward.jvp_function(self.program, callee, wrt, None, "flat")
        out = self._fresh_like(Tup((callee.out_tree, callee.out_tree)))
        leaves = _leaves(primals) + hidden + _leaves(tangents)
        self.body.append(Call([t.name for t in _leaves(out)], jvp_fn, leaves, self.src.loc(node)))
        return out

    def method(self, func, node):
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
        if obj in _BUILTINS and not kwargs:
            if obj is abs or len(args) == 2:
                return self.emit_call(rules.RULES[_BUILTINS[obj]], args, kwargs, node)
        if isinstance(obj, type) and issubclass(obj, tuple) and hasattr(obj, "_fields"):
            return self.namedtuple(obj, args, kwargs, node)
        if getattr(obj, "__s2s_ad_static__", False):
            return self.call_static(obj, args, kwargs, node)
        if obj is slice and all(isinstance(a, Const) for a in args) and not kwargs:
            return Const(slice(*(a.value for a in args)))
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
        if rule.varargs:         # np.einsum(subscripts, *operands): the operands as one tuple
            k = len(rule.params) - 1
            args = list(args[:k]) + [Tup(tuple(args[k:]))]
        bound = rules.bind(rule, args, kwargs, lambda msg: self.error(node, msg))
        if rule.name == "np.ndim" and rank_of(bound[rule.params[0]], self.ranks) is not None:
            return Const(rank_of(bound[rule.params[0]], self.ranks))
        if rule.name == "np.ndim" and _is_constant(bound[rule.params[0]]):
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
        if rule.name in ("np.array", "np.asarray"):
            value = bound.get(rule.operands[0])
            if isinstance(value, Tup):           # a list display: an array of its elements
                return self.array_of(value, node)
            if rule.name == "np.array" and isinstance(value, Var):
                rule = rules.RULES["np.copy"]    # np.array of an array copies it
                bound = {rule.operands[0]: value}
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
        """``np.array(value)`` for a list or tuple display, nested ones row by row."""
        if not value.items:
            raise self.error(node, "an empty list cannot be made into an array here; use "
                             "np.zeros(0)")
        if not any(isinstance(v, Tup) for v in value.items):
            return self.emit(rules.RULES["np.array"], [value], {}, node)
        rows = Tup(tuple(self.array_of(v, node) if isinstance(v, Tup) else v
                         for v in value.items))
        return self.emit(rules.RULES["np.stack"], [rows], {"axis": Const(0)}, node)

    def emit(self, rule, operands, params, node=None):
        if any(isinstance(v, LocalFn) for o in operands for v in _values(o)):
            raise self.error(node or self.node, f"a function defined here can only be called, "
                             f"or passed to a function that calls it (not used as a value "
                             f"in {rule.name})")
        if rule.name == "np.multiply" and len(operands) == 2 and not params and \
                isinstance(operands[0], Var) and operands[0] == operands[1]:
            # ``a * a`` is np.square(a): its adjoint is one product, g * 2a,
            # not two accumulated into one cotangent.
            rule, operands = rules.RULES["np.square"], operands[:1]
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
        if rule.name in _VIEWS:
            self.views.add(target)
            if rule.name == "getitem" and self.view_of is not None:
                self.view_of[target] = (operands[0], params["index"])
        if key is not None:
            table[key] = Var(target)
        return Var(target)

    def local_callee(self, func):
        """The local function a call's ``func`` names (or is), or None."""
        if isinstance(func, gast.Lambda):               # (lambda z: ...)(x)
            return self.local_function(func)
        if isinstance(func, gast.Name) and func.id in self.src.locals:
            value = self.env.get(func.id)
            if isinstance(value, LocalFn):
                return value
        return None

    def call_local(self, fn, node):
        """A call of a nested ``def`` or ``lambda``, lowered in place.

        Its parameters are bound to the call's values and its free names to
        the defining function's variables (their values now, or when it was
        passed to the function calling it), as Python's closures read them.
        """
        args = [self.expr(a) for a in node.args]
        kwargs = {k.arg: self.expr(k.value) for k in node.keywords}
        if None in kwargs:
            raise self.error(node, "**kwargs in calls is not supported; pass arguments by name")
        params = [a.id for a in fn.node.args.args]
        if len(args) > len(params):
            raise self.error(node, f"{fn.name}() takes {len(params)} arguments, got {len(args)}")
        bound = dict(zip(params, args))
        for k, v in kwargs.items():
            if k not in params or k in bound:
                raise self.error(node, f"bad keyword argument '{k}' in call to {fn.name}()")
            bound[k] = v
        first_default = len(params) - len(fn.defaults)
        for i, p in enumerate(params):
            if p not in bound:
                if i < first_default:
                    raise self.error(node, f"{fn.name}() is missing the argument '{p}'")
                bound[p] = fn.defaults[i - first_default]
        if fn.node in self.program._active:
            raise self.error(node, f"recursive call to '{fn.name}' is not supported; "
                             "write the recursion as a loop")
        env = fn.env if fn.env is not None else fn.owner.env
        child = Lowerer.__new__(Lowerer)
        child.__dict__.update(self.__dict__)     # this function's body, names, tables
        child.src, child.node = fn.src, fn.node
        child.env = {k: v for k, v in env.items() if k not in fn.src.own}
        child.env.update((p, self.passed(bound[p])) for p in params)
        start = len(self.body)
        self.program._active.append(fn.node)
        try:
            if isinstance(fn.node, gast.Lambda):
                return child.expr(fn.node.body)
            for stmt in fn.node.body:
                child.node = stmt
                child.stmt(stmt)
            return child.body.pop().value
        finally:
            self.program._active.pop()
            if any(isinstance(p, Prim) and p.rule.name == "setitem"
                   for p in walk(self.body[start:])):
                self.effects += 1         # it wrote into an array (a call for its effect)

    def passed(self, value):
        """``value`` as passed to another function: a local function carries
        its defining function's variables as they are now."""
        if isinstance(value, LocalFn) and value.env is None:
            return dataclasses.replace(value, env=dict(value.owner.env))
        return value

    def call_user(self, fn, args, kwargs, node, custom=None):
        src_params = list(fn.__code__.co_varnames[:fn.__code__.co_argcount])
        if inspect.ismethod(fn):
            src_params = src_params[1:]          # self.helper(x): self is a constant
        defaults = fn.__defaults__ or ()
        bound = dict(zip(src_params, args))
        for k, v in kwargs.items():
            if k not in src_params or k in bound:
                raise self.error(node, f"bad keyword argument '{k}' in call to {fn.__name__}()")
            bound[k] = v
        first_default = len(src_params) - len(defaults)
        for i, p in enumerate(src_params):
            if p not in bound:
                if i < first_default:
                    raise self.error(node, f"{fn.__name__}() is missing the argument '{p}'")
                bound[p] = self.constant(p, defaults[i - first_default], node)
        values = [bound[p] for p in src_params]
        src = self.program.source(fn)
        if any(isinstance(v, LocalFn) for v in values):
            # apply(f, x) with f a nested def or lambda: lowered in place, so
            # that calls of f inside it see f's variables.
            return self.inline(fn, [self.passed(v) for v in values], node)
        if custom is None and self.loops and _has_loops(src):
            return self.inline(fn, values, node)
        trees = [tree_of(v) for v in values]
        if custom is not None:
            callee = self.program.lower_custom(custom, trees, node, self.src)
        else:
            callee = self.program.lower(fn, trees, node, self.src,
                                        [rank_of(leaf, self.ranks) for v in values
                                         for leaf in _leaves(v)])
            if self.program.arg_writes.get(callee.key) or _has_branches(callee):
                # A helper that writes into an array it is passed is lowered
                # into this function, so the write lands in the caller's array.
                return self.inline(fn, values, node)
        leaves = [leaf for v in values for leaf in _leaves(v)]
        out = self._fresh_like(callee.out_tree)
        call = Call([t.name for t in _leaves(out)], callee, leaves, self.src.loc(node))
        self.body.append(call)
        for t, r in zip(call.targets, call_ranks(call, self.ranks)):
            self.note_rank(t, r)
        return out

    def inline(self, fn, values, node):
        """Lower a call's body into this function; returns the call's value.

        Used for a user function that loops, called inside a loop: lowered
        in place, its loops share this function's tape, so the adjoint does
        not allocate a stack per call (a separate fwd/bwd pair would); and
        for a user function with branches (see ``_has_branches``); and for
        one that writes into an array it is passed, so that the caller sees
        the write (and its derivative flows through it).
        """
        if fn in self.program._active:
            raise self.error(node, f"recursive call to '{fn.__name__}' is not supported; "
                             "write the recursion as a loop")
        values, writebacks = self.view_arguments(fn, values, node)
        src = self.program.source(fn)
        child = Lowerer.__new__(Lowerer)
        child.src, child.program, child.names = src, self.program, self.names
        child.consts, child.body, child.loops = self.consts, self.body, self.loops
        child.cse = self.cse
        child.views = self.views
        child.ranks = self.ranks
        child.params, child.written = self.params, self.written
        child.arguments = {leaf.name for v in values for leaf in _leaves(v)
                           if isinstance(leaf, Var)}
        child.arg_writes = {}
        child.view_of, child.effects = self.view_of, 0
        child.env = dict(zip(src.param_names, values))
        self.program._active.append(fn)
        try:
            for stmt in src.node.body:
                child.node = stmt
                child.stmt(stmt)
        finally:
            self.program._active.pop()
        ret = child.body.pop()
        for name in child.arg_writes:           # the caller's arrays it wrote into
            self.note_write(Var(name), node)
        for array, index, copy in writebacks:
            self.emit_setitem(array, index, copy)
        if child.arg_writes:
            self.effects += 1
        return ret.value

    def call_library(self, impl, args, kwargs, node):
        """A call of a NumPy/SciPy function written in :mod:`s2s_ad.library`:
        its implementation is lowered in place with the call's arguments bound
        (constant options select their branches); what goes wrong inside is
        reported at the user's call, naming the NumPy function."""
        name = getattr(self.src, "library_name", impl.name)
        if "out" in kwargs:
            raise self.error(node, f"{name}(..., out=...) writes into an array, which is not "
                             f"differentiated; assign the result instead (y = {name}(...))")
        try:
            bound = impl.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise self.error(node, f"{impl.name}(): {exc} (supported parameters: "
                             f"{', '.join(impl.signature.parameters)})") from None
        values = []
        for p, param in impl.signature.parameters.items():
            values.append(bound.arguments[p] if p in bound.arguments
                          else self.constant(p, param.default, node))
        src = _InlinedSource(self.program.source(impl.fn), self.src, node, name)
        if self.program._active.count(impl.fn) > 32:    # constant options end a recursion
            raise self.error(node, f"{impl.name} calls itself too deeply")
        child = Lowerer.__new__(Lowerer)
        child.src, child.program, child.names = src, self.program, self.names
        child.consts, child.body, child.loops = self.consts, self.body, self.loops
        child.cse, child.views, child.ranks = self.cse, self.views, self.ranks
        child.params, child.written = self.params, self.written
        child.arguments = {leaf.name for v in values for leaf in _leaves(v)
                           if isinstance(leaf, Var)}
        child.arg_writes = {}
        child.env = dict(zip(src.param_names, values))
        self.program._active.append(impl.fn)
        try:
            for stmt in src.node.body:
                child.node = stmt
                child.stmt(stmt)
        finally:
            self.program._active.pop()
        return child.body.pop().value

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

    def _fresh_like_temp(self, value):
        if isinstance(value, Tup):
            return dataclasses.replace(value, items=tuple(self._fresh_like_temp(v)
                                                          for v in value.items))
        return Var(self.names.temp()) if isinstance(value, Var) else value

    def _fresh_like(self, tree):
        if isinstance(tree, Tup):
            return dataclasses.replace(tree, items=tuple(self._fresh_like(t) for t in tree.items))
        return Var(self.names.temp())


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


def _map_leaves(value, fn):
    """Like :func:`~s2s_ad.ir.map_leaves`, keeping each node's kind (list, Record)."""
    if isinstance(value, Tup):
        return dataclasses.replace(value, items=tuple(_map_leaves(v, fn) for v in value.items))
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


def _records(value):
    """The dicts and NamedTuples held inside a lowered value (not itself)."""
    if not isinstance(value, Tup):
        return []
    return [r for v in value.items for r in ([v] if isinstance(v, Record) else []) + _records(v)]


def _values(value):
    """Every item of a lowered value, local functions included."""
    return list(value.leaves()) if isinstance(value, Tup) else [value]


def _ast_op(op):
    """The standard-library ast class for a gast operator node."""
    import ast
    return getattr(ast, type(op).__name__)


def _qualname(obj):
    module = getattr(obj, "__module__", None) or ""
    return f"{module}.{getattr(obj, '__qualname__', repr(obj))}".lstrip(".")


def _all_identifiers(fn_node):
    return {n.id for n in gast.walk(fn_node) if isinstance(n, gast.Name)}
