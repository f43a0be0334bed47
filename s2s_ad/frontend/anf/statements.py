"""Lowering statements: assignments (to names, elements, slices, dict entries),
branches and loops in SSA form (joins by copies, one header name per carried
variable), returns.
"""
import copy

import gast

from ... import rules
from ...analyses.ranks import rank_of
from ...ir import (
    Call,
    Const,
    For,
    If,
    Prim,
    Record,
    Return,
    Tup,
    Var,
    While,
    pytree,
)
from ...rules.internal import PRINT, STACK_LIKE, TRIP_COUNT
from .. import comprehensions
from . import markers
from .common import (
    LocalFn,
    _element_stores,
    _inside,
    _leaves,
    _list_method,
    _replace,
    _stored_names,
    _values,
)

_UNKNOWN = object()          # an exception's argument computed at run time


class Statements:
    """Statements: assignment, unpacking, branches, loops, return."""

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
            # it is passed (``smooth(u)``), lowered into this function, or a
            # print (see print_statement).
            before = self.effects
            self.expr(node.value)
            if self.effects > before:
                return
        raise self.error(node, "a statement that is only an expression has no effect on the result "
                         "(s2s_ad functions are pure); assign its value or remove it")

    def print_statement(self, call):
        """``print(a, b, ...)``: kept as a statement with no derivative that prints
        the values each time it runs (the primal's values; a batch under a
        vectorized vmap); a tuple, list or dict argument prints its leaves."""
        params = {}
        for k in call.keywords:
            value = self.expr(k.value) if k.arg in ("sep", "end") else None
            if not (isinstance(value, Const) and isinstance(value.value, str)):
                raise self.error(call, "print() in a transformed function takes sep= and end= "
                                 "as constant strings (no file=, flush= or **kwargs); its "
                                 "output goes to sys.stdout")
            params[k.arg] = value
        if any(isinstance(a, gast.Starred) for a in call.args):
            raise self.error(call, "print(*args) is not supported in a transformed function; "
                             "pass the values to print one by one")
        values = [leaf for a in call.args for leaf in _leaves(self.expr(a))]
        if any(isinstance(v, LocalFn) for v in values):
            raise self.error(call, "print() of a function defined here is not supported")
        target = self.names.temp()
        self.body.append(Prim([target], PRINT, [Tup(tuple(values))], params,
                              self.src.loc(call)))
        self.note_rank(target, 0)
        self.effects += 1

    def stmt_Assign(self, node):
        value = self.expr(node.value)
        for target in node.targets:          # ``a = b = e``: left to right, as Python does
            self.assign(target, value)
            if isinstance(target, gast.Name):
                value = self.env[target.id]  # the temporary may now carry the user's name

    def stmt_Assert(self, node):
        """``assert test, msg`` with a test known before the run (``x.ndim == 1``,
        ``len(params) == 2``): checked when the function is transformed, raising
        the user's AssertionError.  A test on values is refused (derivatives
        have no exceptions)."""
        saved, self.body = self.body, []
        test = self.expr(node.test)
        self.body = saved
        if not isinstance(test, Const):
            raise self.error(node, "assert on values computed at run time is not supported "
                             "inside a differentiated function (an assert on ranks, "
                             "x.ndim == 1, is); check the values before calling it")
        if not test.value:
            message = self.expr(node.msg) if node.msg is not None else None
            loc = self.src.loc(node)
            text = f" ({loc.filename}, line {loc.lineno})"
            raise AssertionError((str(message.value) if isinstance(message, Const) else
                                  f"assert failed: {loc.text.strip()}") + text)

    def stmt_Raise(self, node):
        """``raise E(...)`` reached on every call: under tests known before the
        run (``if x.ndim != 1:``, ``if len(params) != 2:``, constant options),
        whose taken branches are lowered in place.  It raises the user's
        exception when the function is transformed, as the call would; a raise
        inside a branch on run-time values or a loop is refused (derivatives
        have no exceptions)."""
        if self.program.run_time_blocks:
            raise self.error(node, "raise under a test of values computed at run time (or "
                             "in a loop) is not supported inside a differentiated function; "
                             "a raise under a test known before the run is (if x.ndim != 1:, "
                             "if len(params) != 2:); check the values before calling it")
        loc = self.src.loc(node)
        where = f" ({loc.filename}, line {loc.lineno})"
        if node.exc is None:
            raise self.error(node, "a bare raise has no exception to raise here")
        exc = node.exc
        call = exc if isinstance(exc, gast.Call) else None
        ok, cls = self.src.resolve(call.func if call is not None else exc)
        if not (ok and isinstance(cls, type) and issubclass(cls, BaseException)):
            raise self.error(node, "raise needs an exception class or a call of one "
                             "(raise ValueError('...'))")
        values = [self._raised_value(a) for a in call.args] if call is not None else []
        if call is not None and (call.keywords or any(v is _UNKNOWN for v in values)):
            values = [loc.text.strip()]        # a message of run-time values: the line
        if values:
            raise cls(f"{values[0]}{where}", *values[1:])
        raise cls(f"at {loc.filename}, line {loc.lineno}")

    def _raised_value(self, node):
        """The value of an argument of a raised exception, known before the run
        (constants, ranks, options; f-strings of them), else ``_UNKNOWN``."""
        if isinstance(node, gast.JoinedStr):      # f"... {len(p)} ...": each part
            parts = []
            for part in node.values:
                if isinstance(part, gast.Constant):
                    parts.append(str(part.value))
                    continue
                value = self._raised_value(part.value)
                spec = "" if part.format_spec is None else self._raised_value(part.format_spec)
                if value is _UNKNOWN or spec is _UNKNOWN:
                    return _UNKNOWN
                convert = {-1: format, 115: lambda v, s: format(str(v), s),
                           114: lambda v, s: format(repr(v), s),
                           97: lambda v, s: format(ascii(v), s)}[part.conversion]
                parts.append(convert(value, spec))
            return "".join(parts)
        saved, self.body = self.body, []
        try:
            value = self.expr(node)
        except SyntaxError:                     # "...".format(): the line is the message
            return _UNKNOWN
        finally:
            self.body = saved
        return value.value if isinstance(value, Const) else _UNKNOWN

    def stmt_AugAssign(self, node):
        # ``x += e`` rebinds ``x`` to ``x + e`` where no other name sees the
        # array; where one does (a view, an alias, a helper's argument) it is
        # NumPy's in-place update.
        target = node.target
        if isinstance(target, gast.Name):
            if target.id in self.env:
                if self.in_place_update(target, node) or self.shared_update(target, node):
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
        markers.transform_calls.check_escapes(self, value, node)
        if any(isinstance(v, LocalFn) for v in _values(value)):
            raise self.error(node, "returning a function is not supported; return the values "
                             "it computes, or define it at module level")
        self.body.append(Return(value, self.src.loc(node)))

    def stmt_FunctionDef(self, node):
        self.bind(node.name, self.local_function(node))

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

    # -- control flow ---------------------------------------------------------
    def block(self, stmts):
        """Lower ``stmts`` into a new statement list (a nested block)."""
        saved, self.body = self.body, []
        self.program.run_time_blocks += 1
        try:
            for st in stmts:
                node, self.node = self.node, st
                self.stmt(st)
                self.node = node
        finally:
            self.program.run_time_blocks -= 1
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
            if self.copied_from is not None and isinstance(value, Var) and \
                    rank_of(value, self.ranks) != 0:
                self.copied_from.setdefault(target.name, set()).add(value.name)
            if isinstance(value, Var) and value.name in self.views:
                self.views.add(target.name)

    def enter_loop(self, node, body):
        """Header names for the variables a loop body assigns."""
        # An array the body writes into may change under a view made before
        # the loop from one iteration to the next: such views are read again
        # (see Memory.current_view).
        for name in sorted(_element_stores(body)):
            if isinstance(self.env.get(name), Var):
                self.note_array_write(self.env[name])
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
        if self.needs_unrolling(node):
            return self.unroll(node, start, stop, step)
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

    def needs_unrolling(self, node):
        """Whether the loop's body indexes a tuple, list or dict by a value that
        changes with the iteration (``params[i]``, and ``for W in params``, which
        reads ``params[_i]``), or appends to a list: its iterations are then
        lowered one by one, the loop variable a constant in each."""
        varying = _stored_names(node.body) | {node.target.id}
        for sub in (n for st in node.body for n in gast.walk(st)):
            if isinstance(sub, gast.Subscript) and isinstance(sub.value, gast.Name) and \
                    isinstance(self.env.get(sub.value.id), Tup) and any(
                        isinstance(n, gast.Name) and (n.id in varying or not isinstance(
                            self.env.get(n.id), Const)) for n in gast.walk(sub.slice)):
                return True
            if _list_method(sub, self.env):
                return True
        return False

    def unroll(self, node, start, stop, step):
        """One copy of a range loop's body per iteration (the bounds must be
        constants: a tuple's length, ``range(3)``)."""
        if not all(isinstance(b, Const) and isinstance(b.value, int) for b in (start, stop, step)):
            appended = self.appended_list(node)
            if appended is not None:
                return self.fill_appended(node, start, stop, step, *appended)
            self.refuse_growing_lists(node)
            raise self.error(node, "this loop indexes a tuple or list by its loop variable, so "
                             "its number of iterations must be known before the run "
                             "(range(3), len(params), for w in params); make the values one "
                             "array (np.stack) and index that instead")
        iterations = range(start.value, stop.value, step.value)
        if len(iterations) > _MAX_UNROLLED:
            raise self.error(node, f"this loop indexes a tuple or list, or appends to a list, "
                             f"so each of its {len(iterations)} iterations is lowered on its "
                             f"own (at most {_MAX_UNROLLED}); make the values one array and "
                             "index that instead")
        for i in iterations:
            self.env[node.target.id] = Const(i)
            for st in copy.deepcopy(node.body):
                saved, self.node = self.node, st
                self.stmt(st)
                self.node = saved

    def appended_list(self, node):
        """``(name, position)`` when the loop's body grows one list the function
        built empty by one ``name.append(e)`` statement of its own (not inside a
        branch or an inner loop) and reads it nowhere else; else None."""
        found = []
        for i, st in enumerate(node.body):
            if isinstance(st, gast.Expr) and _list_method(st.value, self.env) and \
                    st.value.func.attr == "append" and len(st.value.args) == 1:
                found.append((st.value.func.value.id, i))
        if len(found) != 1:
            return None
        name, position = found[0]
        held = self.env[name]
        if held.items or name not in self.src.locals or \
                any(held is p for p in self.param_trees) or _inside(held, self.param_trees):
            return None
        reads = [n for st in node.body for n in gast.walk(st)
                 if isinstance(n, gast.Name) and n.id == name]
        return (name, position) if len(reads) == 1 else None

    def fill_appended(self, node, start, stop, step, name, position):
        """A loop over a run-time count that appends to a list: the list is an
        array of its elements stacked on a new first axis, as a comprehension's
        is.  The first iteration is lowered on its own (the storage is shaped
        after its element), then the loop over the others writes ``name[k]``;
        a loop that runs no iteration is an error at run time."""
        count = self.emit(TRIP_COUNT, [start, stop, step], {}, node)
        self.env[node.target.id] = start
        for i, st in enumerate(copy.deepcopy(node.body)):
            saved, self.node = self.node, st
            if i == position:
                first = self.expr(st.value.args[0])
                self.emit(STACK_LIKE, [first, count], {}, st)
                allocation = self.body[-1]
                allocation.targets = [self.names.user(name)]
                storage = Var(allocation.targets[0])
                self.emit_setitem(storage, Const(0), first)
                self.env[name] = storage
                comprehensions.mark_list(self, storage)
            else:
                self.stmt(st)
            self.node = saved
        bounds = [self._local_name(base, value, node) for base, value in (
            ("_start", Const(start.value + step.value) if isinstance(start, Const) and
             isinstance(step, Const) else self.operator(gast.Add(), [start, step], node)),
            ("_stop", stop), ("_step", step), ("_k", Const(1)))]
        k = bounds[-1]
        body = copy.deepcopy(node.body)
        append = body[position]
        write = gast.Assign([gast.Subscript(gast.Name(name, gast.Load(), None, None),
                                            gast.Name(k.id, gast.Load(), None, None),
                                            gast.Store())], append.value.args[0], None)
        step_k = gast.Assign([gast.Name(k.id, gast.Store(), None, None)],
                             gast.BinOp(gast.Name(k.id, gast.Load(), None, None), gast.Add(),
                                        gast.Constant(1, None)), None)
        body[position:position + 1] = [gast.copy_location(write, append),
                                       gast.copy_location(step_k, append)]
        rest = gast.For(gast.Name(node.target.id, gast.Store(), None, None),
                        gast.Call(gast.Name("range", gast.Load(), None, None),
                                  [gast.Name(b.id, gast.Load(), None, None)
                                   for b in bounds[:3]], []), body, [], None)
        gast.copy_location(rest, node)
        self.stmt_For(rest)

    def _local_name(self, base, value, node):
        """A fresh local variable bound to the lowered ``value``: a name for loop
        source written here."""
        name = self.names.fresh(base)
        self.src.locals.add(name)
        self.names.own.add(name)
        self.env[name] = value
        return gast.Name(name, gast.Load(), None, None)

    def refuse_growing_lists(self, node):
        """A list appended to in a loop whose iterations are not known before the
        run would change length from one iteration to the next."""
        grown = next((n for st in node.body for n in gast.walk(st)
                      if _list_method(n, self.env)), None)
        if grown is not None:
            raise self.error(grown, f"'{grown.func.value.id}.{grown.func.attr}()' in a loop "
                             "whose number of iterations is known only at run time is "
                             "supported only as one .append() statement of a for loop's "
                             "body (not inside an if or an inner loop) to a list that was "
                             "empty before the loop and is not read in it; otherwise build "
                             "the values with a list comprehension ([step(t) for t in "
                             "range(n)]) or fill an array (out = np.zeros((n, ...)); "
                             "out[t] = ...)")

    def stmt_While(self, node):
        self.refuse_growing_lists(node)
        headers = self.enter_loop(node, node.body)
        saved, self.body = self.body, []
        cond = self.expr(node.test)
        test, self.body = self.body, saved
        self.loops += 1
        body = self.block(node.body)
        self.loops -= 1
        carried = self.exit_loop(node, headers, body)
        self.body.append(While(test, cond, body, self.src.loc(node), carried))

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
        if self.remade and old.name in self.remade:
            self.remade[new.name] = self.remade[old.name]
        if self.made_at and old.name in self.made_at:
            self.made_at[new.name] = self.made_at[old.name]
        for table in self.cse.values():
            for key, v in table.items():
                if v == old:
                    table[key] = new

    def dict_store(self, target, value):
        """``d["k"] = v`` on a dict value: every name bound to that dict sees the
        new item (the dict is rebuilt, statically, with it)."""
        old = self.env.get(target.value.id) if isinstance(target.value, gast.Name) else None
        key = self.index(target.slice)
        if not (isinstance(key, Const) and isinstance(key.value, str)):
            raise self.error(target, "a dict can only be written under a constant string key")
        if any(old is p for p in self.param_trees) or _inside(old, self.param_trees):
            raise self.error(target, "writing into a dict argument is not supported (the "
                             "caller's dict would change); build a new dict with the items "
                             "you need")
        if _inside(old, [v for v in self.env.values() if v is not old]):
            raise self.error(target, "this dict is also held in a tuple, list or dict, which "
                             "would see the write; write into the dict before putting it there")
        items = dict(zip(old.container.keys, old.items))
        items[key.value] = value
        keys = sorted(items)
        order = old.keys_in_order()
        new = Record(tuple(items[k] for k in keys), container=pytree.Keyed(dict, keys),
                     order=order + ((key.value,) if key.value not in order else ()))
        for name, v in list(self.env.items()):
            if v is old:
                self.env[name] = new


_MAX_UNROLLED = 1000
