"""Comprehensions and generator expressions, lowered to loops.

Used by :mod:`s2s_ad.frontend.anf` while it lowers an expression, so a comprehension
is evaluated where Python evaluates it (inside the branch of an ``if``
expression, in a ``while`` test).  Each form becomes ordinary loop source
(``gast``) that goes through :mod:`s2s_ad.frontend.desugar`'s loop rewriting
(``zip``, ``enumerate``, rows of an array) and is lowered statement by
statement, as if the user had written the loop:

* ``sum(e for x in xs if c)`` (``sum([...])``, ``np.sum(...)``) accumulates::

      _sum = 0
      for x in xs:
          if c:
              _sum = _sum + e

* a list ``[e for x in xs if c]`` becomes an array of the elements stacked
  on a new first axis: storage shaped after the first element (``_list``),
  filled by one loop (``_list[_k] = e``); when there is a filter or a nested
  ``for``, a first loop counts the elements.  ``np.array``, ``np.stack``,
  ``max``, ``min`` and a name bound to the list read that array.
* over a tuple or list of values (``for p in params``, ``zip(ws, bs)``) the
  loop is unrolled, and a list comprehension is a list of its values.

The comprehension's variables do not leak: the names it binds get back the
values they had before it.  Names the lowering introduces are fresh.
"""
import ast
import builtins
import copy
import inspect

import gast

from .. import rules
from ..ir import Const, Tup, Var
from ..rules.internal import STACK_LIKE
from .desugar import Desugar


def _reduction_of(obj):
    """The rule that the builtin ``obj`` (``max``, ``min``) of an iterable is, or None
    (Rule.reduces_iterable)."""
    return next((r for r in rules.RULES.values() if r.reduces_iterable is obj), None)


def _name(id_, store=False):
    return gast.Name(id_, gast.Store() if store else gast.Load(), None, None)


def _assign(target, value):
    return gast.Assign([target if isinstance(target, gast.AST) else _name(target, True)],
                       value, None)


def _plus(name, value):
    return _assign(name, gast.BinOp(_name(name), gast.Add(), value))


def is_comprehension(node):
    return isinstance(node, (gast.ListComp, gast.GeneratorExp))


def _lists(low):
    """Names of the arrays this function built from list comprehensions."""
    if not hasattr(low, "comp_lists"):
        low.comp_lists = set()
    return low.comp_lists


def mark_list(low, value):
    """``value`` (an array) is a list the user holds: its ``+`` and ``*`` are refused."""
    _lists(low).add(value.name)


def is_list(low, value):
    return isinstance(value, Var) and value.name in _lists(low)


def refuse_list_operator(low, name, args, node):
    """``+`` and ``*`` of a list built by a comprehension (an array here) would be
    NumPy's arithmetic, not Python's concatenation and repetition: refused."""
    lists = [is_list(low, a) for a in args]
    if not any(lists) or len(args) != 2:
        return
    other = args[lists.index(False)] if not all(lists) else None
    concat = name == rules.OPERATORS[ast.Add] and (other is None or isinstance(other, Tup))
    repeat = name == rules.OPERATORS[ast.Mult] and isinstance(other, Const) and \
        isinstance(other.value, int) and not isinstance(other.value, bool)
    if concat or repeat:
        raise low.error(node, "a list built by a comprehension is an array here, so + and * "
                        "would add or multiply its elements rather than join or repeat the "
                        "list; build the whole list in one comprehension instead")


def call(low, obj, node):
    """A call whose first argument is a comprehension or a list one built, or None."""
    if not node.args:
        return None
    arg = node.args[0]
    named = isinstance(arg, gast.Name) and arg.id in low.src.locals and \
        is_list(low, low.env.get(arg.id))
    if not (is_comprehension(arg) or named):
        return None
    keywords = {k.arg: k.value for k in node.keywords}
    rule = rules.lookup(obj)
    if obj is builtins.sum and not set(keywords) - {"start"} and len(node.args) <= 2:
        start = node.args[1] if len(node.args) == 2 else keywords.get("start")
        start = Const(0) if start is None else low.expr(start)
        if named:
            total = low.emit_call(rules.RULES["np.sum"], [low.env[arg.id]], {"axis": Const(0)},
                                  node)
            return total if start == Const(0) else low.operator(gast.Add(), [start, total], node)
        return Lowering(low, arg).accumulate(start)
    if rule is not None and rule.total == "elements" and is_comprehension(arg) and \
            len(node.args) == 1 and set(keywords) <= {"axis"}:
        axis = low.expr(keywords["axis"]) if "axis" in keywords else Const(None)
        if axis in (Const(0), Const(None)):
            total = Lowering(low, arg).accumulate(Const(0))
            if axis == Const(0):
                return total
            return low.emit_call(rule, [total], {}, node)
    reduction = _reduction_of(obj)
    if reduction is not None and len(node.args) == 1 and not keywords:
        stacked = low.env[arg.id] if named else Lowering(low, arg).build(mark=False)
        if isinstance(stacked, Tup):
            return None          # a static list: max(a, b, ...) as usual
        return low.emit_call(reduction, [stacked], {"axis": Const(0)}, node)
    if rule is not None and rule.stacks_list and len(node.args) == 1:
        axis = keywords.get("axis")
        if "axis" in rule.params and axis is not None and low.expr(axis) != Const(0):
            raise low.error(node, f"{rule.name} of a comprehension stacks on axis 0 here; stack "
                            f"on axis 0 and transpose the result ({rule.name}([...]).T)")
        if named:        # a new array, as NumPy makes from a list
            return low.emit_call(rules.RULES["np.copy"], [low.env[arg.id]], {}, node)
        stacked = Lowering(low, arg).build(mark=False)
        if isinstance(stacked, Tup):
            return low.emit_call(rule, [stacked], {}, node)
        return stacked
    if rule is not None and rule.shape == "joined":
        raise low.error(node, f"{rule.name} of a comprehension is not supported; stack the "
                        "pieces instead (np.stack([...]), then .ravel() or np.reshape for the "
                        "shape you want), or write a loop that fills an array")
    if isinstance(arg, gast.GeneratorExp):
        raise generator_error(low, arg)
    return None


def generator_error(low, node):
    return low.error(node, "a generator expression can only be passed to sum(), max(), min() "
                     "or np.sum() here; write a list comprehension [...] instead")


class Lowering:
    """One comprehension, lowered into ``low``'s current block."""

    def __init__(self, low, node):
        self.low, self.node = low, node
        self.added = []            # names made local for the comprehension
        for gen in node.generators:
            if gen.is_async:
                raise low.error(node, "async comprehensions are not supported; use a plain for")

    # -- the two forms ---------------------------------------------------------
    def accumulate(self, start):
        """``start + e1 + e2 + ...`` over the elements."""
        with self:
            acc = self.local("_sum", start)
            self.lower(self.loops([_plus(acc, self.elt())]))
            return self.low.env[acc]

    def build(self, mark=True):
        """The elements stacked on a new first axis (a static list when unrolled)."""
        with self:
            gens = self.node.generators
            if self.static is not None:
                if len(gens) > 1:
                    raise self.low.error(self.node, "a list comprehension over a tuple takes "
                                         "one for clause here; nest two comprehensions")
                return self.static_list()
            simple = len(gens) == 1 and not gens[0].ifs and (
                not _is_call(self.low, gens[0].iter, range) or len(gens[0].iter.args) == 1)
            if not simple:       # count the elements first
                count = self.local("_n", Const(0))
                self.lower(self.loops([_plus(count, gast.Constant(1, None))]))
                size = self.low.env[count]
                k = self.local("_k", Const(0))
            out = self.local("_list")
            position = gast.Constant(0, None) if simple else _name(k)
            write = _assign(gast.Subscript(_name(out), position, gast.Store()), self.elt())
            fill = self.loops([write] + ([] if simple else [_plus(k, gast.Constant(1, None))]))
            if simple:           # the loop index is the position
                loop = fill[-1]
                write.targets[0].slice = _name(loop.target.id)
                self.lower(fill[:-1])
                count = self.local("_n")
                self.low.bind(count, self.low.expr(loop.iter.args[1]))
                size, loop.iter.args[1] = self.low.env[count], _name(count)
                fill = fill[-1:]
            element = self.local("_first")
            self.lower(_first_element(fill, out, element))
            self.low.emit(STACK_LIKE, [self.low.env[element], size], {}, self.node)
            allocation = self.low.body[-1]          # named after the user's variable
            allocation.targets = [self.low.names.user(self.user_target() or out)]
            self.low.env[out] = Var(allocation.targets[0])
            self.lower(fill)
            stacked = self.low.env[out]
            if mark:     # a list the user holds: its + and * are not NumPy's
                _lists(self.low).add(stacked.name)
            return stacked

    def user_target(self):
        """``ys`` in ``ys = [...]`` or ``ys = np.array([...])``, else None."""
        st = self.saved_node
        if not (isinstance(st, gast.Assign) and len(st.targets) == 1
                and isinstance(st.targets[0], gast.Name)):
            return None
        value = st.value
        direct = value is self.node or isinstance(value, gast.Call) and self.node in value.args
        return st.targets[0].id if direct else None

    def static_list(self):
        """``[e for p in (a, b)]``: the list of the values, when filters are constants."""
        gen, values = self.node.generators[0], []
        for item in self.static:
            self.low.assign(gen.target, item)
            tests = [self.low.expr(t) for t in gen.ifs]
            if not all(isinstance(t, Const) for t in tests):
                raise self.low.error(self.node, "a list comprehension over a tuple can only "
                                     "be filtered by conditions known before the run; write "
                                     "sum(...) or a for loop instead")
            if all(t.value for t in tests):
                values.append(self.low.expr(copy.deepcopy(self.node.elt)))
        return Tup(tuple(values), is_list=True)

    # -- scope -----------------------------------------------------------------
    def __enter__(self):
        self.saved_env = dict(self.low.env)
        self.saved_node = self.low.node
        self.static, self.first_iter = self.outer_iterable(self.node.generators[0].iter)
        return self

    def __exit__(self, *exc):
        low = self.low
        low.env.clear()
        low.env.update(self.saved_env)
        for name in self.added:
            low.src.locals.discard(name)
        low.node = self.saved_node
        return False

    def local(self, base, value=None):
        """A fresh local variable of the lowering, bound to ``value`` when given."""
        name = self.low.names.fresh(base)
        self.added.append(name)
        self.low.src.locals.add(name)
        self.low.names.own.add(name)
        if value is not None:
            self.low.env[name] = value
        return name

    def outer_iterable(self, it):
        """(static items or None, the iterable to loop over), evaluated once, first."""
        low = self.low
        if _is_call(low, it, range):
            return None, it
        if _is_call(low, it, zip) or _is_call(low, it, enumerate):
            if it.keywords:
                raise low.error(it, "write zip(a, b) and enumerate(x) without keywords here")
            values = [low.expr(a) for a in it.args]
            if all(isinstance(v, Tup) for v in values):
                if _is_call(low, it, enumerate):
                    if len(values) != 1:
                        raise low.error(it, "write enumerate loops as: for i, v in enumerate(x)")
                    return [Tup((Const(i), v)) for i, v in enumerate(values[0].items)], it
                return [Tup(items) for items in zip(*(v.items for v in values))], it
            if any(isinstance(v, Tup) for v in values):
                raise low.error(it, "zip() of a tuple and an array is not supported; make "
                                "both arrays (np.array(...)) or both tuples")
            args = [self.hoisted(a, v) for a, v in zip(it.args, values)]
            it = gast.copy_location(gast.Call(it.func, args, []), it)
            return None, it
        if isinstance(it, gast.Call) and inspect.isgeneratorfunction(_resolved(low, it.func)):
            raise low.error(it, "iterating over a generator function is not supported; make it "
                            "return an array (or a tuple) and iterate over that")
        value = low.expr(it)
        if isinstance(value, Tup):
            return list(value.items), it
        if isinstance(value, Const):
            raise low.error(it, "a comprehension iterates over range(...), an array, zip(...) "
                            "or enumerate(...), not a constant")
        return None, self.hoisted(it, value)

    def hoisted(self, node, value):
        """A name for the iterable ``node``, already lowered to ``value``."""
        if isinstance(node, gast.Name) and node.id in self.low.src.locals:
            return node
        return gast.copy_location(_name(self.local("_seq", value)), self.node)

    # -- loop source -----------------------------------------------------------
    def elt(self):
        return copy.deepcopy(self.node.elt)

    def loops(self, inner):
        """The comprehension's ``for`` clauses around ``inner``, as range loops."""
        body = inner
        for gen in reversed(self.node.generators):
            ifs = copy.deepcopy(gen.ifs)
            if ifs:
                test = ifs[0] if len(ifs) == 1 else gast.BoolOp(gast.And(), ifs)
                body = [gast.If(test, body, [])]
            target = copy.deepcopy(gen.target)
            outer = gen is self.node.generators[0]
            it = self.first_iter if outer else gen.iter
            if outer and self.static is not None:
                body = self.unrolled(target, it, body)
            else:
                body = [gast.For(target, copy.deepcopy(it), body, [], None)]
        stmts = body
        for s in stmts:
            _locate(s, self.node)
        taken = set(self.low.names.taken) | set(self.low.src.locals)
        d = Desugar(self.low.src, taken)
        d.done = d.which = d.flag_site = None
        d.depth, d.sites = 0, []
        out = d.block(stmts, [])
        for new in sorted(d.taken - taken):
            self.local(new)
        for s in out:
            _locate(s, self.node)
        return out

    def unrolled(self, target, seq, body):
        """One copy of ``body`` per item of a static sequence."""
        name = self.hoisted(seq, None) if isinstance(seq, gast.Name) else \
            _name(self.local("_seq", Tup(tuple(self.static))))
        out = []
        for i in range(len(self.static)):
            item = gast.Subscript(copy.deepcopy(name), gast.Constant(i, None), gast.Load())
            out += [_assign(copy.deepcopy(target), item)] + copy.deepcopy(body)
        return out

    def lower(self, stmts):
        """Lower loop source into the current block."""
        low = self.low
        for s in stmts:
            low.node = s
            low.stmt(s)
        low.node = self.saved_node


def _first_element(stmts, out, element):
    """The statements of ``stmts`` up to the first write into ``out``, with every
    loop's first iteration and every filter passed: they compute the first
    element (for the storage's shape and dtype), as ``element``."""
    pre = []
    for s in stmts:
        if isinstance(s, gast.For):
            index = _locate(gast.Assign([copy.deepcopy(s.target)], copy.deepcopy(s.iter.args[0]),
                                        None), s)
            body = _first_element(s.body, out, element)
            if body is not None:
                return pre + [index] + body
        elif isinstance(s, gast.If):
            body = _first_element(s.body, out, element)
            if body is not None:
                return pre + body
        elif isinstance(s, gast.Assign) and isinstance(s.targets[0], gast.Subscript) and \
                isinstance(s.targets[0].value, gast.Name) and s.targets[0].value.id == out:
            return pre + [_locate(_assign(element, copy.deepcopy(s.value)), s)]
        else:
            pre.append(copy.deepcopy(s))
    return None


def _is_call(low, node, fn):
    return isinstance(node, gast.Call) and _resolved(low, node.func) is fn


def _resolved(low, func):
    ok, obj = low.src.resolve(func)
    return obj if ok else None


def _locate(node, where):
    """Nodes without a location point at the comprehension's line."""
    for n in gast.walk(node):
        if hasattr(n, "lineno") or isinstance(n, (gast.expr, gast.stmt)):
            if getattr(n, "lineno", None) is None:
                gast.copy_location(n, where)
    return node
