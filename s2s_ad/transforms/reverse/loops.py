"""The adjoint of a loop: its body reversed, with what the body reads either
popped from a stack or recomputed (cheap scalars, slice views).
"""
import ast
import copy

from ...analyses.activity import diff_args
from ...analyses.dce import reads
from ...codegen import printer as codegen
from ...codegen.adjoints import assign, call, simplify
from ...ir import (
    Call,
    Const,
    For,
    If,
    Prim,
    Var,
    While,
    var_names,
    walk,
)
from .common import _targets, blocks_of
from .peepholes import _outside_loops
from .stacks import _offset


def _reversed_range(s):
    """``range(...)`` visiting a for loop's indices last to first."""
    start, stop, step = (codegen.atom(a) for a in (s.start, s.stop, s.step))
    if isinstance(s.step, Const) and s.step.value == 1:
        args = [simplify(ast.BinOp(stop, ast.Sub(), ast.Constant(1))),
                simplify(ast.BinOp(start, ast.Sub(), ast.Constant(1))), ast.Constant(-1)]
    else:
        last = call("rt.range_last", start, stop, step)
        args = [last, simplify(ast.BinOp(copy.deepcopy(start), ast.Sub(), copy.deepcopy(step))),
                simplify(ast.UnaryOp(ast.USub(), copy.deepcopy(step)))]
    return ast.Call(codegen.name("range"), args, [])


class Loops:
    """Adjoints of ``for`` and ``while`` loops, and what their reversed bodies recompute."""

    def rev_loop(self, s):
        self._prepare(s)
        self.w.loc(s.loc, "adjoint of: ")
        carries = self._neighbour_carries(s) if isinstance(s, For) else {}
        for x, (low, carry, _) in carries.items():
            self.adj.prepare(x, True)
            self.w.node(assign(carry, ast.Constant(0.0)))
        if isinstance(s, For):
            rng = _reversed_range(s)
            self.w.line(f"for {s.index} in {ast.unparse(rng)}:", rng)
        else:
            counter = self.counters.setdefault(id(s), self.names.fresh("_trips"))
            self._reversed_loops.add(id(s))
            self.w.line(f"for _ in range({counter}):", codegen.name(counter))
        self._carrying.update(carries)
        before = self.adj.state()
        self._nested(s.body, True, carried=s.carried, loop=s, carries=carries)
        self.adj.merge(before)           # the loop may not run at all
        for x in carries:
            del self._carrying[x]
        for x, (low, carry, _) in carries.items():     # the last element's carry lands
            ran = ast.Compare(codegen.atom(s.stop), [ast.Gt()], [codegen.atom(s.start)])
            target = ast.Subscript(codegen.name(self.adj.get(x)),
                                   _offset(codegen.atom(s.start), low), ast.Store())
            self.w.node(ast.If(ran, [ast.AugAssign(target, ast.Add(), codegen.name(carry))], []))
        for h in s.carried:
            if h in self.act and self.adj.get(h) is not None:
                self.adj.vars[h][1] = False

    def _neighbour_carries(self, s):
        """Arrays whose adjoint a loop updates at ``i + k`` and ``i + k + 1`` only.

        Reversed, iteration ``i`` adds to elements ``i + k + 1`` and ``i + k``,
        and the next one adds to ``i + k`` again: a read-modify-write of the
        element just stored, which serialises the loop through memory.  As a
        hand-written adjoint does, the contribution to ``i + k`` is carried in
        a local to the next iteration instead, so each element is written
        once.  Returns {array: (k, carry name, {index name: offset local})}.
        """
        if not (isinstance(s.step, Const) and s.step.value == 1):
            return {}
        offsets = {s.index: 0}
        for x in _outside_loops(s.body):
            if isinstance(x, Prim) and len(x.targets) == 1 and len(x.rule.signs) == 2 and \
                    len(x.args) == 2:
                (a, b), (sign_a, sign_b) = x.args, x.rule.signs
                if sign_a == 1 and a == Var(s.index) and isinstance(b, Const) and \
                        type(b.value) is int:
                    offsets[x.targets[0]] = sign_b * b.value
                elif sign_b == 1 and b == Var(s.index) and isinstance(a, Const) and \
                        type(a.value) is int:
                    offsets[x.targets[0]] = sign_a * a.value
        uses = {}
        nested = {n for x in s.body if isinstance(x, (For, While)) for y in walk(blocks_of(x))
                  if isinstance(y, (Prim, Call)) for n in reads(y)}
        bad = set(nested)
        for x in walk(s.body):
            if not isinstance(x, (Prim, Call)):
                continue
            if isinstance(x, Prim) and x.rule.name == "getitem" and isinstance(x.args[0], Var):
                index = x.params["index"]
                name = x.args[0].name
                if isinstance(index, Var) and index.name in offsets:
                    uses.setdefault(name, set()).add(offsets[index.name])
                    continue
            bad.update(reads(x))
            if isinstance(x, Prim) and x.rule.mutates:
                bad.add(x.args[0].name)
        carries = {}
        for name, ks in uses.items():
            if name in bad or name not in self.act or self.ranks.get(name) != 1 or \
                    name in s.carried or len(ks) != 2 or max(ks) - min(ks) != 1:
                continue
            low = min(ks)
            carry = self._local(("carry", id(s), name), f"b{name.lstrip('_')}_carry")
            local = {k: self._local(("carry", id(s), name, k), f"g{name.lstrip('_')}_{k - low}")
                     for k in ks}
            index_locals = {n: local[k] for n, k in offsets.items() if k in ks}
            carries[name] = (low, carry, index_locals)
        return carries

    def _nested(self, body, in_loop, carried=(), joins=(), loop=None, carries=None):
        """Reverse a nested block into its own writer, then pop what it reads.

        Inside a loop, a value the reversed block reads comes back off its
        stack first: names defined in the block (and the join names of the
        ifs in it) were pushed at the block's end, loop-carried names at the
        top of the body; a name only one branch of an if defines was pushed
        in that branch and is popped under the same condition.
        """
        outer = self.w
        sub = codegen.Writer()
        sub.indent = outer.indent + 1
        self.w = self.adj.w = sub
        defined = {h for h in carried if h in self.act and self.adj.get(h) is not None}
        for x, (low, carry, locals_) in (carries or {}).items():
            for local in sorted(set(locals_.values())):
                sub.node(assign(local, ast.Constant(0.0)))
        self._depth += 1
        self.rev_block(body, in_loop)
        self._depth -= 1
        for x, (low, carry, locals_) in (carries or {}).items():
            near, far = (self._local(("carry", id(loop), x, k), None) for k in (low, low + 1))
            target = ast.Subscript(codegen.name(self.adj.get(x)),
                                   _offset(codegen.name(loop.index), low + 1), ast.Store())
            total = ast.BinOp(codegen.name(far), ast.Add(), codegen.name(carry))
            sub.node(ast.AugAssign(target, ast.Add(), total))
            sub.node(assign(carry, codegen.name(near)))
        for h in defined:     # loop-carried adjoints start the next iteration defined
            if self.adj.get(h) is None:
                self.adj.prepare(h, False, from_primal=not self._shape_kept(h))
        self.w = self.adj.w = outer
        pad = "    " * sub.indent
        lines, pops = [], []
        if loop is not None:
            index = [loop.index] if isinstance(loop, For) else []
            self._prepend_recomputed(sub, self._recompute(
                loop.body, codegen.read_names(sub.nodes), index + list(loop.carried), loop.carried))
        if in_loop:
            reads = codegen.read_names(sub.nodes) - self.recomputed
            guarded = []
            for x in body:
                for name, sides in getattr(x, "joins", {}).items():
                    if name in reads and not all(sides):
                        branch = x.body if sides[0] else x.orelse
                        self.push_end.setdefault(id(branch), []).append(name)
                        cond = codegen.atom(x.cond)
                        test = cond if sides[0] else ast.UnaryOp(ast.Not(), cond)
                        guarded.append(ast.If(test, self._pop(name, self._stack(name)), []))
                        reads |= set(var_names([x.cond]))
            local = [n for n in self._block_defs(body) if n in reads and n not in carried
                     and n not in joins]
            self.push_end.setdefault(id(body), []).extend(local)
            self.push_top[id(body)] = [h for h in carried if h in reads]
            pops = [p for n in local + self.push_top[id(body)]
                    for p in self._pop(n, self._stack(n))]
            pops += guarded
            lines = [pad + line for p in pops for line in ast.unparse(p).splitlines()]
        outer.lines.extend(lines)
        outer.lines.extend(sub.lines)
        outer.nodes.extend(pops + sub.nodes)
        if not lines and all(x.lstrip().startswith("#") for x in sub.lines):
            outer.lines.append(pad + "pass")

    def _shape_kept(self, name):
        """Whether the loop-carried ``name`` keeps one shape around its loop
        (a scalar, or a shape class the analysis settled on); otherwise its
        adjoint's zeros for the iteration before are shaped by the value
        ``name`` had entering this one (pushed like any carried value read)."""
        cls = self.classes.get(name)
        return self.ranks.get(name) == 0 or (cls is not None and cls[0] != "unknown")

    def _recompute(self, body, reads, available=(), carried=()):
        """Cheap scalar statements of ``body`` that the adjoint recomputes.

        A hand-written adjoint recomputes ``x[i] ** 2`` from ``x`` and ``i``
        rather than storing it; so do we, for scalar arithmetic and element
        reads whose inputs are ``available`` (a loop's index and carried
        values, popped anyway; a split function's parameters), values that do
        not change while ``body`` runs, or other recomputed values.
        """
        inside = {t for x in walk(body) for t in _targets(x)}
        inside |= {x.index for x in walk(body) if isinstance(x, For)}
        inside |= set(carried)
        written = self._storage_read({x.args[0].name for x in walk(body)
                                      if isinstance(x, Prim) and x.rule.mutates})
        roots = self._storage_read
        available = set(available)
        chosen = {}
        for x in body:
            view = self._slice_view(x)
            # Loop-carried names have two definitions: never recomputed.
            if not view and not (isinstance(x, Prim) and x.rule.cheap
                                 and len(x.targets) == 1 and self.ranks.get(x.targets[0]) == 0
                                 and x.targets[0] not in self.carried):
                continue
            ins = set(var_names(list(x.args) + list(x.params.values())))
            if x.rule.name == "getitem" and not view and roots(ins) & written:
                continue
            if view:     # the array looked into may be written: the view sees the restores
                base = x.args[0].name
                if not (base in available or base in chosen or base not in inside):
                    continue
                ins.discard(base)
            if all(n in available or n in chosen or (n not in inside and not roots({n}) & written)
                   for n in ins):
                chosen[x.targets[0]] = x
        needed, order = set(), []
        for x in reversed(body):
            if isinstance(x, Prim) and x.targets and x.targets[0] in chosen and (
                    x.targets[0] in reads or x.targets[0] in needed):
                order.append(x)
                needed |= set(var_names(list(x.args) + list(x.params.values())))
        return order[::-1]

    def _slice_view(self, x):
        """Whether ``x`` is ``v = a[basic index]`` with ``v`` an array: a view.

        Recomputing the view in the adjoint sweep gives the same memory as
        pushing it on a stack (the sweep restores what later writes changed
        in ``a`` before it reads the view), with no per-iteration stack.
        """
        if not (isinstance(x, Prim) and x.rule.name == "getitem" and len(x.targets) == 1
                and isinstance(x.args[0], Var) and x.targets[0] not in self.carried):
            return False
        rank = self.ranks.get(x.targets[0])
        return rank is not None and rank >= 1 and not self._index_array(x.params["index"])

    def _prepend_recomputed(self, writer, stmts):
        """Print ``stmts`` at the top of ``writer``'s block."""
        if not stmts:
            return
        head = codegen.Writer()
        head.indent = writer.indent
        for x in stmts:
            head.node(codegen.stmt(x, self.module.fn_names))
        writer.lines[:0] = ["    " * writer.indent + "# recomputed, not stored"] + head.lines
        writer.nodes[:0] = head.nodes
        self.recomputed.update(t for x in stmts for t in x.targets)

    def _prepare(self, s):
        """Define the outside adjoints a compound statement contributes to."""
        inside = {t for x in walk(blocks_of(s)) for t in _targets(x)}
        inside |= {x.index for x in walk([s]) if isinstance(x, For)}
        inside -= set(getattr(s, "carried", ()))
        for var, inplace in self._touched(s).items():
            if var not in inside:
                self.adj.prepare(var, inplace)

    def _touched(self, s):
        """Adjoints that statements inside ``s`` add to: {name: updated in place}."""
        out = {}
        for x in walk(blocks_of(s)):
            if isinstance(x, Prim) and x.rule.mutates:
                storage, value = x.args
                if storage.name in self.act:
                    out[storage.name] = True
                    if self.act.is_active(value):
                        out.setdefault(value.name, False)
            elif isinstance(x, (Prim, Call)) and any(t in self.act for t in x.targets):
                inplace = isinstance(x, Prim) and x.rule.name == "getitem"
                for name in var_names(a for a, _ in diff_args(x)):
                    if name in self.act:
                        out[name] = out.get(name, False) or inplace
        return out

    def _has_work(self, s):
        return self._has_work_in(blocks_of(s))

    def _has_work_in(self, body):
        for x in walk(body):
            if isinstance(x, Prim) and x.rule.mutates:
                if id(x) in self.saves or x.args[0].name in self.act:
                    return True
            elif isinstance(x, (Prim, Call)) and any(t in self.act for t in x.targets):
                return True
        return False

    def _block_defs(self, body):
        """Names a block defines at its own level (an if defines its complete joins)."""
        out = []
        for x in body:
            out.extend(_targets(x) if isinstance(x, (Prim, Call)) else [])
            out.extend(self.split_calls.get(id(x), ("", ()))[1])
            if isinstance(x, While) and id(x) in self.counters:
                out.append(self.counters[id(x)])
            if isinstance(x, If):
                out.extend(n for n, sides in x.joins.items() if all(sides))
        return out
