"""Tapes: the stacks the primal sweep pushes values on inside loops and the
adjoint sweep pops, as lists or preallocated float arrays with a top index
(``rt.float_stack``, sized by :func:`_capacity`).
"""
import ast
import copy

from ...codegen import printer as codegen
from ...codegen.adjoints import assign, call
from ...ir import (
    Call,
    Const,
    For,
    If,
    Prim,
    Tup,
    Var,
    While,
    blocks,
    var_names,
    walk,
)
from .common import _targets, rooted


class _ForwardHooks(codegen.Hooks):
    """The primal sweep: kept statements, plus pushes, saves and trip counts."""

    def __init__(self, writer, kept):
        self.r = writer
        self.kept = kept
        self.loops = {id(s.body): s for s in walk(writer.fn.body) if isinstance(s, While)}

    def before(self, w, s):
        counter = self.r.counters.get(id(s))
        if counter is not None:
            w.node(assign(counter, ast.Constant(0)))
        for stack, size in self.r.allocs.get(id(s), ()):
            if stack in self.r.used:
                w.node(assign(stack, call("rt.float_stack", size)))
                w.node(assign(self.r.tops[stack], ast.Constant(0)))

    def top(self, w, body):
        for n in self.r.push_top.get(id(body), ()):
            self._push(w, self.r._stack(n), n)

    def _push(self, w, stack, value):
        for p in self.r._push(stack, value):
            w.node(p)

    def end(self, w, body):
        loop = self.loops.get(id(body))
        counter = self.r.counters.get(id(loop)) if loop is not None else None
        if counter is not None:
            w.node(assign(counter, ast.BinOp(codegen.name(counter), ast.Add(), ast.Constant(1))))
        for n in self.r.push_end.get(id(body), ()):
            self._push(w, self.r._stack(n), n)

    def simple(self, w, s):
        split = self.r.split_calls.get(id(s))
        if split is not None:
            fwd_name, residuals = split
            w.loc(s.loc)
            names = [ast.Name(n, ast.Store()) for n in s.targets + residuals]
            invoke = ast.Call(codegen.name(fwd_name), [codegen.atom(a) for a in s.args], [])
            w.node(ast.Assign([ast.Tuple(names, ast.Store())], invoke, lineno=0))
            return True
        stack = self.r.saves.get(id(s))
        if stack is None:
            return False
        w.loc(s.loc)
        x = s.args[0]
        part = ast.Subscript(codegen.name(x.name), codegen.atom(s.params["index"]), ast.Load())
        self._push(w, stack, part if stack in self.r.tops else call("rt.snapshot", part))
        w.node(codegen.stmt(s))
        return True


def _capacity(chains):
    """(loop, size) for a stack that blocks inside the statements ``chains``
    (each the statements enclosing one block, outermost first) push at most
    once each time they run: the top-level ``for`` loop they all lie in,
    and the most pushes it can make (``len(range(n)) * len(range(k))`` for a
    block inside two loops), when that is known before the loop runs.  None
    for a block inside a ``while`` loop or in more than one top-level loop,
    or inside a loop whose bounds the outermost loop changes (other than
    by reading a shape, see :func:`_shapes_before`).
    """
    chains = [c for c in chains if any(isinstance(x, (For, While)) for x in c)]
    if not chains or not isinstance(chains[0][0], For):
        return None
    outer = chains[0][0]
    changed = {outer.index} | set(outer.carried)
    for x in walk(outer.body):
        changed.update(_targets(x))
        if isinstance(x, (For, While)):
            changed.update(x.carried)
        if isinstance(x, For):
            changed.add(x.index)
        elif isinstance(x, If):
            changed.update(x.joins)
    hoisted = _shapes_before(outer, changed)
    terms = {}
    for chain in chains:
        loops = [x for x in chain if isinstance(x, (For, While))]
        if chain[0] is not outer or any(isinstance(x, While) for x in loops) or any(
                set(var_names([x.start, x.stop, x.step])) & changed - set(hoisted)
                for x in loops[1:]):
            return None
        trips = [_Substitute(hoisted).visit(
            ast.Call(codegen.name("len"), [codegen.range_expr(x.start, x.stop, x.step)], []))
            for x in loops]
        term = trips[0]
        for t in trips[1:]:
            term = ast.BinOp(term, ast.Mult(), t)
        key = ast.unparse(term)
        terms[key] = (terms.get(key, (0, term))[0] + 1, term)
    size = None
    for count, term in terms.values():
        term = term if count == 1 else ast.BinOp(ast.Constant(count), ast.Mult(), term)
        size = term if size is None else ast.BinOp(size, ast.Add(), term)
    return outer, size


def _shapes_before(outer, changed):
    """{name: expression} for the names the loop ``outer`` defines once as
    the shape of an array it does not rebind (``np.shape(B)``), or an item
    of such a shape (``_t4[1]``): writes into an array keep its shape, so
    the expression, printed before the loop, has the value the name has in
    every iteration (an inner loop's bound ``B.shape[1]``)."""
    defs = {}
    for x in walk(outer.body):
        for t in _targets(x):
            defs[t] = None if t in defs else x
    hoisted = {}
    for t, x in defs.items():
        if not isinstance(x, Prim) or t in outer.carried or not x.args or \
                not isinstance(x.args[0], Var):
            continue
        a = x.args[0].name
        if x.rule.gives_shape and a not in changed:
            hoisted[t] = codegen.prim_expr(x)
        elif x.rule.name == "getitem" and a in hoisted and \
                isinstance(x.params.get("index"), Const):
            hoisted[t] = _Substitute(hoisted).visit(codegen.prim_expr(x))
    return hoisted


class _Substitute(ast.NodeTransformer):
    """Replaces the names of ``exprs`` by (copies of) their expressions."""

    def __init__(self, exprs):
        self.exprs = exprs

    def visit_Name(self, node):
        e = self.exprs.get(node.id)
        return node if e is None else copy.deepcopy(e)


def _offset(index, k):
    """``index + k`` (``index`` itself for 0)."""
    if k == 0:
        return index
    if isinstance(index, ast.Constant) and type(index.value) is int:
        return ast.Constant(index.value + k)
    op = ast.Add() if k > 0 else ast.Sub()
    return ast.BinOp(index, op, ast.Constant(abs(k)))


class Stacks:
    """Where values are pushed, how each stack is allocated, push and pop."""

    def _stack(self, name, kind="stack"):
        key = (name, kind)
        if key not in self.stacks:
            label = kind if isinstance(kind, str) else kind[0]
            stack = self.stacks[key] = self.names.fresh(f"{name.lstrip('_')}_{label}")
            sized = self._allocation(name, kind)
            if sized is not None:
                loop, size = sized
                self.tops[stack] = self.names.fresh(f"{stack.removesuffix('_stack')}_top")
                self.allocs.setdefault(id(loop), []).append((stack, size))
        self.used.add(self.stacks[key])
        return self.stacks[key]

    def _allocation(self, name, kind):
        """(top-level loop, size) when the stack of ``name`` (a scalar float
        the adjoint reads, or a saved element of a float array: an integer
        index per axis) can be allocated before that loop, else None: a list."""
        names, writes = self._push_sites()
        if kind == "stack":
            if name not in self.act or self.ranks.get(name) != 0:
                return None
            return _capacity(names.get(name, []))
        s, chain = writes[kind[1]]
        index = s.params.get("index")
        items = index.items if isinstance(index, Tup) else (index,)
        scalar = len(items) == self.ranks.get(name) and all(
            isinstance(k, Const) and type(k.value) is int or
            isinstance(k, Var) and self.ranks.get(k.name) == 0 for k in items)
        if name not in self.act or not scalar:
            return None
        return _capacity([chain])

    def _push_sites(self):
        """Where a stack may be pushed: (name -> the enclosing statements of
        each block that may push it, id(element write) -> (the write, its
        enclosing statements)), outermost first.  A block pushes a name at
        most once each time it runs: at its end the names it defines (and
        its ifs' complete joins) but not the names pushed elsewhere (a loop's
        carried names, at its body's top; an if's joins, at the end of the
        block holding the if, or of the branch that alone sets them)."""
        if self._sites is None:
            names, writes = {}, {}

            def visit(body, chain, elsewhere=()):
                for s in body:
                    if isinstance(s, (Prim, Call)):
                        for t in _targets(s):
                            if t not in elsewhere:
                                names.setdefault(t, []).append(chain)
                        if isinstance(s, Prim) and s.rule.mutates:
                            writes[id(s)] = (s, chain)
                    elif isinstance(s, If):
                        for n, sides in s.joins.items():
                            names.setdefault(n, []).append(chain if all(sides) else chain + (s,))
                        for b in blocks(s):
                            visit(b, chain + (s,), s.joins)
                    elif isinstance(s, (For, While)):
                        for h in s.carried:
                            names.setdefault(h, []).append(chain + (s,))
                        for b in blocks(s):
                            visit(b, chain + (s,), s.carried)
            visit(self.fn.body, ())
            self._sites = names, writes
        return self._sites

    def _push(self, stack, value):
        """Statements pushing ``value`` (a name or an expression) on ``stack``."""
        value = codegen.name(value) if isinstance(value, str) else value
        top = self.tops.get(stack)
        if top is None:
            invoke = ast.Call(ast.Attribute(codegen.name(stack), "append", ast.Load()), [value], [])
            return [ast.Expr(invoke)]
        slot = ast.Subscript(codegen.name(stack), codegen.name(top), ast.Store())
        return [ast.Assign([slot], value, lineno=0),
                ast.AugAssign(ast.Name(top, ast.Store()), ast.Add(), ast.Constant(1))]

    def _pop(self, target, stack):
        """Statements popping ``stack`` into ``target`` (a name or a subscript)."""
        target = ast.Name(target, ast.Store()) if isinstance(target, str) else target
        top = self.tops.get(stack)
        if top is None:
            invoke = ast.Call(ast.Attribute(codegen.name(stack), "pop", ast.Load()), [], [])
            return [ast.Assign([target], invoke, lineno=0)]
        slot = ast.Subscript(codegen.name(stack), codegen.name(top), ast.Load())
        return [ast.AugAssign(ast.Name(top, ast.Store()), ast.Sub(), ast.Constant(1)),
                ast.Assign([target], slot, lineno=0)]

    def _storage_read(self, reads):
        """Arrays written in place whose contents (or a view's) the adjoint reads."""
        return rooted(self._view_roots(), reads)

    def _stack_names(self):
        """The stacks the sweeps use, and the indices of their tops."""
        used = {n for n in self.stacks.values() if n in self.used}
        return used | {self.tops[n] for n in used if n in self.tops}
