"""Lowering expressions other than calls: names, constants (folded while
lowering), attributes, displays, operators, comparisons, subscripts.
"""
import ast
import numbers

import gast
import numpy as np

from ... import rules
from ...analyses.ranks import rank_of
from ...errors import NonDifferentiableError
from ...ir import (
    Const,
    If,
    Prim,
    Record,
    Slice,
    Tup,
    Var,
    pytree,
)
from .. import comprehensions
from ..parse import (
    nested_source,
)
from .common import (
    _FOLD,
    LocalFn,
    _ast_op,
    _fold_compare,
    _fold_subscript,
    _is_constant,
    _python_value,
)


class Expressions:
    """Expressions: names, constants, displays, operators, subscripts."""

    # -- expressions --------------------------------------------------------
    def expr(self, node):
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            raise self.error(node, f"'{type(node).__name__}' expressions are not supported")
        return method(node)

    def expr_Lambda(self, node):
        return self.local_function(node)

    def local_function(self, node):
        """A nested ``def`` or ``lambda`` as a value; its default values are
        computed here, where Python computes them."""
        defaults = tuple(self.expr(d) for d in node.args.defaults)
        return LocalFn(node, nested_source(self.src, node), self, defaults)

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

    def expr_Constant(self, node):
        return Const(node.value)

    def expr_Name(self, node):
        if node.id in self.src.locals:
            if node.id not in self.env:
                raise self.error(node, f"local variable '{node.id}' is used before it is assigned")
            return self.current_view(self.env[node.id], node)
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
        rule = rules.ATTRIBUTES.get(node.attr)
        if rule is None:
            self._unknown_call_first(value, node)
            raise self.error(node, f"attribute '.{node.attr}' of an array is not supported")
        return self.emit_call(rules.RULES[rule], [value], {}, node)

    def _unknown_call_first(self, value, node):
        """An unsupported attribute of the result of a call with no rule
        (``np.fft.hfft(x).flat``): report the call, the first thing to fix."""
        made = next((s for s in reversed(self.body) if isinstance(s, Prim) and
                     isinstance(value, Var) and value.name in s.targets), None)
        if made is not None and made.rule.unknown:
            from ...analyses.activity import no_rule_message
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
                                                 keys),
                          order=tuple(obj) if isinstance(obj, dict) else None)
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
        return Record(tuple(items[k] for k in keys), container=pytree.Keyed(dict, keys),
                      order=tuple(items))

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
            sequence = self.sequence_operator(op, args, node)
            if sequence is not None:
                return sequence
            # NumPy reads a list or tuple operand as np.array(list).
            args = [self.array_of(a, node) if isinstance(a, Tup) else a for a in args]
        return self.emit(rules.RULES[name], args, {})

    def sequence_operator(self, op, args, node):
        """Python's ``+`` and ``*`` of tuples and lists (concatenation, repetition),
        statically; None where NumPy's arithmetic applies instead."""
        if _ast_op(op) is ast.Add and all(isinstance(a, Tup) for a in args):
            return Tup(args[0].items + args[1].items, args[0].is_list)
        if _ast_op(op) is ast.Mult and len(args) == 2:
            seq, n = args if isinstance(args[0], Tup) else args[::-1]
            if isinstance(n, Const) and isinstance(n.value, int) and \
                    not isinstance(n.value, bool):
                return Tup(seq.items * max(n.value, 0), seq.is_list)
            if isinstance(n, Var) and rank_of(n, self.ranks) not in (None, 0):
                return None       # x * [1.0, 2.0]: an array times a list, elementwise
            if isinstance(seq, Tup) and isinstance(n, Var) and \
                    all(isinstance(v, Const) for v in seq.leaves()):
                raise self.error(node, "repeating a list ([0.0] * n) is not supported: lists "
                                 "have a fixed length here; use np.zeros(n) or np.full(n, c)")
        return None

    def expr_Subscript(self, node):
        value = self.expr(node.value)
        if self._is_ix(node.slice):
            return self.outer_index(value, node.slice.args)
        index = self.index(node.slice)
        if isinstance(value, Record) and value.container.cls is dict:
            if getattr(node, "iterates", False) and isinstance(index, Const):
                return Const(value.keys_in_order()[index.value])    # for k in d: its keys
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
                raise self.error(node, "a tuple can only be indexed by a constant integer, or "
                                 "by the variable of a for loop over it (for w in params, "
                                 "for i in range(len(params)): unrolled)")
            if not -len(value.items) <= index.value < len(value.items):
                raise self.error(node, f"tuple index {index.value} is out of range for a tuple "
                                 f"of {len(value.items)} values")
            return value.items[index.value]
        return self.emit(rules.RULES["getitem"], [value], {"index": index})

    def _is_ix(self, node):
        """Whether ``node`` is a call ``np.ix_(i0, i1, ...)`` (positional arrays only)."""
        if not isinstance(node, gast.Call) or node.keywords or not node.args or \
                any(isinstance(a, gast.Starred) for a in node.args):
            return False
        ok, obj = self.src.resolve(node.func)
        return ok and obj is np.ix_

    def outer_index(self, value, indices):
        """``x[np.ix_(i0, i1, ...)]`` read as ``x[i0][:, i1][:, :, i2]...``: the same
        elements (one index array per axis, taken in turn), in a form Numba
        compiles (it has no np.ix_) whose adjoint accumulates repeated indices."""
        for k, arg in enumerate(indices):
            index = self.index(arg)
            if k:
                index = Tup((Const(slice(None)),) * k + (index,))
            value = self.emit(rules.RULES["getitem"], [value], {"index": index})
        return value

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
