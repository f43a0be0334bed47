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
import numbers
import operator
from dataclasses import dataclass, field
from typing import Any

import gast
import numpy as np

from . import custom, pytree, rules
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
    map_leaves,
    walk,
)
from .names import Names
from .parse import FunctionSource, is_user_function
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

_FOLD = {gast.Add: operator.add, gast.Sub: operator.sub, gast.Mult: operator.mul,
         gast.Div: operator.truediv, gast.Pow: operator.pow, gast.FloorDiv: operator.floordiv,
         gast.Mod: operator.mod, gast.USub: operator.neg, gast.UAdd: operator.pos}
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

    def lower(self, fn, trees, call_node=None, caller=None):
        key = (fn, tuple(trees))
        if key in self.functions:
            return self.functions[key]
        if fn in self._active:
            raise caller.error(call_node, f"recursive call to '{fn.__name__}' is not supported; "
                               "write the recursion as a loop")
        self._active.append(fn)
        try:
            src = self.source(fn)
            lowerer = Lowerer(src, trees, self)
            lowered = lowerer.run()
            written = lowerer.written_params()
            if caller is None:
                self.entry_writes = bool(lowerer.arg_writes)
                if written:
                    # The entry function writes into an argument: the generated
                    # code copies it first, so the caller's array never changes
                    # (the derivative is that of the function of the input values).
                    lowered = Lowerer(src, trees, self, copies=written).run()
            self.arg_writes[key] = lowerer.arg_writes
            lowered.name = self.module_names.fresh(fn.__name__)
            lowered.key = key
        finally:
            self._active.pop()
        self.functions[key] = lowered
        return lowered

    def lower_custom(self, custom_fn, trees, call_node=None, caller=None):
        """Lower a custom_vjp/custom_jvp function (its body), marked with its rule."""
        return custom.lower_custom(self, custom_fn, trees, call_node, caller)


def tree_of(value):
    """The structure of a lowered value (LEAF, a tuple of structures, or
    :class:`~s2s_ad.pytree.Fields` for a dict or NamedTuple)."""
    if isinstance(value, Record):
        return pytree.Fields(tuple(tree_of(v) for v in value.items), value.container)
    if isinstance(value, Tup):
        return tuple(tree_of(v) for v in value.items)
    return LEAF


class Lowerer:
    """Lowers one function body; one instance per (function, structure)."""

    def __init__(self, src: FunctionSource, trees, program, copies=()):
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
        self.node = src.node
        self.param_trees = []
        self.params = []
        self.written = set()      # parameter leaves an element write changes
        # Where the body writes into an argument's array: an element write,
        # or ``x += e`` while x still names the argument (in place in NumPy).
        self.arg_writes = {}
        self.arguments = None     # names of the arguments, when not the parameters (inlined)
        names = src.param_names
        if len(trees) != len(names):
            raise TypeError(f"{src.name}() takes {len(names)} arguments, got {len(trees)}")
        for name, tree in zip(names, trees):
            value = self._param(name, tree)
            self.env[name] = value
            self.param_trees.append(value)
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
        return Tup(items)

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
            # A call made for its effect: one that writes into an array it is
            # passed is refused as such (see refuse_writes).
            self.expr(node.value)
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
        self.body.append(Return(value, self.src.loc(node)))

    def assign(self, target, value):
        if isinstance(target, gast.Name):
            self.bind(target.id, value)
        elif isinstance(target, (gast.Tuple, gast.List)):
            self.unpack(target, value)
        elif isinstance(target, gast.Subscript):
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

    def refuse_writes(self, fn, writes, node):
        """A call of user function ``fn``, which writes into an argument, is
        refused: the write would not be seen by the caller, nor differentiated."""
        if not writes:
            return
        loc = next(iter(writes.values()))
        raise self.error(node, f"{fn.__name__}() writes into an array it is passed (line "
                         f"{loc.lineno}: '{loc.text.strip()}'); writes through a called "
                         f"function are not differentiated, and the caller would not see "
                         f"them. Return the updated array instead: in {fn.__name__}, copy "
                         f"the argument (u = u.copy()), update the copy and return it, and "
                         f"call it as u = {fn.__name__}(u)")

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
        if isinstance(value, Tup):
            return dataclasses.replace(value, items=tuple(
                self.fresh_like(f"{name}_{i}", v, node) for i, v in enumerate(value.items)))
        return Var(self.names.user(name))

    def copy_into(self, block, target, value, node):
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
        if old.name in self.views:
            self.views.add(new.name)
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
            raise self.error(node, f"attribute '.{node.attr}' of an array is not supported")
        return self.emit_call(rules.RULES[rule], [value], {}, node)

    def constant(self, name, obj, node):
        """A free name's value: a literal, or a constant bound in the module."""
        if isinstance(obj, (bool, numbers.Number, str, type(None))) or obj is Ellipsis:
            return Const(obj.item() if isinstance(obj, np.generic) else obj)
        if isinstance(obj, tuple) and all(isinstance(v, numbers.Number) for v in obj):
            return Const(obj)
        if isinstance(obj, (tuple, list)):      # a pytree constant: its leaves, statically
            return Tup(tuple(self.constant(f"{name}_{i}", v, node) for i, v in enumerate(obj)))
        if isinstance(obj, np.ndarray):
            return Var(self.bind_const(name, obj))
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
            test = self.operator(op, [left, right], node)
            result = test if result is None else self.emit(rules.RULES["and"], [result, test], {})
            left = right
        return result

    def expr_BoolOp(self, node):
        """``a and b`` / ``a or b``, evaluating ``b`` only when Python would."""
        result = self.expr(node.values[0])
        for sub in node.values[1:]:
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
        return self.expr(node)

    def expr_Call(self, node):
        func = node.func
        ok, obj = self.src.resolve(func)
        if not ok:
            if isinstance(func, gast.Attribute):
                return self.method(func, node)
            if isinstance(func, gast.Call) and self._is_vmap(func):
                return self.call_vmap(func, node)
            if isinstance(func, gast.Call):
                raise self.error(node, "calling a transformed function (ad.grad(f)(x)) inside a "
                                 "function that is itself transformed is not supported (only "
                                 "ad.jvp(f, primals, tangents) and ad.vmap(f, in_axes)(...) "
                                 "are); call ad.jvp inside it instead, or transform "
                                 "the outer function (ad.hessian, ad.hvp, ad.jvp(ad.grad(f)))")
            what = f"'{func.id}' is a local variable: " if isinstance(func, gast.Name) else ""
            raise self.error(node, f"{what}only module-level functions, NumPy and math functions "
                             "can be called; call the function by its own name")
        from .jacobians import jvp
        if obj is jvp:
            return self.call_jvp(node)
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
        ok, fn = self.src.resolve(vnode.args[0]) if vnode.args else (False, None)
        fn = getattr(fn, "__s2s_ad_function__", fn)
        if not ok or not is_user_function(fn):
            raise self.error(vnode, "the function given to ad.vmap here must be a module-level "
                             "function, named directly")
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
            return [map_leaves(a, lambda x: picked.get(x, x)) for a in args]

        r0 = self.call(fn, example(Const(0)), {}, node)
        outs = []
        for leaf in _leaves(r0):
            out = self.emit(STACK_LIKE, [leaf, size], {}, node)
            self.emit_setitem(out, Const(0), leaf)
            outs.append(out)
        index = Var(self.names.fresh("b"))
        saved, self.body = self.body, []
        r = self.call(fn, example(index), {}, node)
        for out, leaf in zip(outs, _leaves(r)):
            self.emit_setitem(out, index, leaf)
        body, self.body = self.body, saved
        self.body.append(For(index.name, Const(1), size, Const(1), body, self.src.loc(node)))
        self.cse.clear()
        it = iter(outs)
        return map_leaves(r0, lambda _: next(it))

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
        if isinstance(ax, (tuple, list)):
            if not (isinstance(value, Tup) and len(value.items) == len(ax)):
                raise self.error(node, "a tuple entry of in_axes must match its argument's "
                                 "structure")
            return [p for v, a in zip(value.items, ax) for p in self._leaf_axes(v, a, node)]
        if ax is not None and (not isinstance(ax, int) or isinstance(ax, bool) or ax < 0):
            raise self.error(node, "in_axes entries of ad.vmap inside a transformed function "
                             "must be non-negative ints or None")
        return [(leaf, ax) for leaf in _leaves(value)]

    def call_jvp(self, node):
        """``ad.jvp(f, (x, ...), (dx, ...))`` in user code: a call to f's JVP.

        The JVP is lowered like any helper, so the function around it can be
        differentiated again (``grad`` of a directional derivative).
        """
        from . import forward
        if len(node.args) != 3 or node.keywords:
            raise self.error(node, "write ad.jvp(f, (x, ...), (dx, ...)) with three positional "
                             "arguments")
        ok, fn = self.src.resolve(node.args[0])
        fn = getattr(fn, "__s2s_ad_function__", fn)
        if not ok or not is_user_function(fn):
            raise self.error(node, "the function given to ad.jvp here must be a module-level "
                             "function, named directly")
        primals, tangents = (self.expr(a) for a in node.args[1:])
        if not (isinstance(primals, Tup) and isinstance(tangents, Tup)
                and len(primals.items) == len(tangents.items)):
            raise self.error(node, "ad.jvp needs a tuple of primals and a tuple of tangents "
                             "with one tangent per primal")
        for p, t in zip(primals.items, tangents.items):
            if tree_of(p) != tree_of(t):
                raise self.error(node, "each tangent passed to ad.jvp must have the structure "
                                 "of its primal")
        callee = self.program.lower(fn, [tree_of(v) for v in primals.items], node, self.src)
        wrt = list(callee.params)
        jvp_fn = forward.jvp_function(self.program, callee, wrt, None, "flat")
        out = self._fresh_like(Tup((callee.out_tree, callee.out_tree)))
        leaves = _leaves(primals) + _leaves(tangents)
        self.body.append(Call([t.name for t in _leaves(out)], jvp_fn, leaves, self.src.loc(node)))
        return out

    def method(self, func, node):
        name = rules.METHODS.get(func.attr)
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
        rule = rules.lookup(obj)
        if rule is not None:
            return self.emit_call(rule, args, kwargs, node)
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
        bound = rules.bind(rule, args, kwargs, lambda msg: self.error(node, msg))
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
        self.body.append(Prim([target], rule, list(operands), params, loc))
        if rule.name in _VIEWS:
            self.views.add(target)
        if key is not None:
            table[key] = Var(target)
        return Var(target)

    def call_user(self, fn, args, kwargs, node, custom=None):
        src_params = list(fn.__code__.co_varnames[:fn.__code__.co_argcount])
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
        if custom is None and self.loops and _has_loops(src):
            return self.inline(fn, values, node)
        trees = [tree_of(v) for v in values]
        if custom is not None:
            callee = self.program.lower_custom(custom, trees, node, self.src)
        else:
            callee = self.program.lower(fn, trees, node, self.src)
            self.refuse_writes(fn, self.program.arg_writes.get(callee.key), node)
            if _has_branches(callee):
                return self.inline(fn, values, node)
        leaves = [leaf for v in values for leaf in _leaves(v)]
        out = self._fresh_like(callee.out_tree)
        self.body.append(Call([t.name for t in _leaves(out)], callee, leaves, self.src.loc(node)))
        return out

    def inline(self, fn, values, node):
        """Lower a call's body into this function; returns the call's value.

        Used for a user function that loops, called inside a loop: lowered
        in place, its loops share this function's tape, so the adjoint does
        not allocate a stack per call (a separate fwd/bwd pair would); and
        for a user function with branches (see ``_has_branches``).
        """
        if fn in self.program._active:
            raise self.error(node, f"recursive call to '{fn.__name__}' is not supported; "
                             "write the recursion as a loop")
        src = self.program.source(fn)
        child = Lowerer.__new__(Lowerer)
        child.src, child.program, child.names = src, self.program, self.names
        child.consts, child.body, child.loops = self.consts, self.body, self.loops
        child.cse = self.cse
        child.views = self.views
        child.params, child.written = self.params, self.written
        child.arguments = {leaf.name for v in values for leaf in _leaves(v)
                           if isinstance(leaf, Var)}
        child.arg_writes = {}
        child.env = dict(zip(src.param_names, values))
        self.program._active.append(fn)
        try:
            for stmt in src.node.body:
                child.node = stmt
                child.stmt(stmt)
        finally:
            self.program._active.pop()
        self.refuse_writes(fn, child.arg_writes, node)
        ret = child.body.pop()
        return ret.value

    def _fresh_like_temp(self, value):
        if isinstance(value, Tup):
            return dataclasses.replace(value, items=tuple(self._fresh_like_temp(v)
                                                          for v in value.items))
        return Var(self.names.temp()) if isinstance(value, Var) else value

    def _fresh_like(self, tree):
        if isinstance(tree, Tup):
            return dataclasses.replace(tree, items=tuple(self._fresh_like(t) for t in tree.items))
        return Var(self.names.temp())


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
