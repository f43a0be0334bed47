"""Writes into arrays: which arrays a statement may write (views share memory
with their base), and helpers that update an argument in place, inlined.
"""
import gast

from ... import rules
from ...analyses.ranks import rank_of
from ...ir import (
    Const,
    Prim,
    Slice,
    Tup,
    Var,
    tree_of,
)
from .common import _leaves, map_values

#: How an augmented assignment's operator is written, for messages.
_OPS = {gast.Add: "+=", gast.Sub: "-=", gast.Mult: "*=", gast.Div: "/=", gast.Pow: "**=",
        gast.FloorDiv: "//=", gast.Mod: "%=", gast.MatMult: "@="}


class Memory:
    """In-place writes and views: what a write changes; helpers writing into arguments."""

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
        self.check_aliases(storage, target)
        self.note_write(storage, target)
        if storage.name in self.views:
            raise self.error(target, "writing into a view of another array (a slice, row, "
                             "reshape or transpose of it) is not supported, because the write "
                             "changes that array too; write into the array itself (M[i, j] = v "
                             "rather than row = M[i]; row[j] = v), or copy the view first "
                             "(row = np.copy(M[i]))")
        return storage

    def check_aliases(self, storage, node):
        """Refuse a write into an array that another name still holds through
        a join or a loop header (``r = p`` in one branch and ``r = q`` in the
        other, then ``r[0] = v``; ``w = u`` before a loop that writes ``u``):
        NumPy's write changes what the other name sees, which the lowered
        code, giving each name its own value, cannot follow."""
        if not self.copied_from:
            return
        targets = {}
        for t, sources in self.copied_from.items():
            for s in sources:
                targets.setdefault(s, set()).add(t)
        group, todo = set(), [storage.name]
        while todo:
            n = todo.pop()
            if n not in group:
                group.add(n)
                todo += list(self.copied_from.get(n, ())) + list(targets.get(n, ()))
        group.discard(storage.name)
        if not group:
            return
        for env in (self.env,) + tuple(self.outer_envs):
            for name, v in env.items():
                held = [leaf.name for leaf in _leaves(v) if isinstance(leaf, Var)]
                if any(h in group for h in held) and storage not in _leaves(v):
                    raise self.error(node, f"this write changes an array that '{name}' also "
                                     f"holds (the two names were made one array by an "
                                     f"assignment before a loop or in a branch), so NumPy "
                                     f"changes '{name}' too; copy it where the names part "
                                     f"(np.copy(...)) if '{name}' should keep its values, or "
                                     f"use one name")

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

    def shared_update(self, target, node):
        """``x += e`` where another name sees ``x``'s array: ``x`` is a view
        of an array (``tail = u[1:]; tail += e`` updates ``u``), another name
        holds the same array, or a view of it was made.  NumPy updates the
        array in place, so the others see the update: it is lowered as a
        write (``u[1:] = u[1:] + e``, ``x[:] = x + e``).  Returns whether the
        update was lowered so.  Only names still bound count: a slice read
        inside an expression (``u[1:] - u[:-1]``) is gone by the update."""
        value = self.env[target.id]
        if self.writes is None or not isinstance(value, Var) or rank_of(value, self.ranks) == 0:
            return False
        if value.name in self.views:
            origin = (self.view_of or {}).get(value.name)
            if origin is None or not isinstance(origin[0], Var) or origin[0].name in self.views:
                raise self.error(node, f"'{target.id} {_OPS.get(type(node.op), '?=')}' updates "
                                 f"a view (a reshape, transpose or slice of a slice) in place, "
                                 f"which changes the array it looks into; update the array "
                                 f"itself, or copy the view first (np.copy(...))")
            array, index = origin
            current = self.current_view(value, target)
            new = self.operator(node.op, [current, self.expr(node.value)], node)
            self.emit_setitem(self.writable(array, node), index, new)
            return True
        if rank_of(value, self.ranks) is None:
            return False          # perhaps a number: ``x += e`` rebinds the name
        held = [leaf for k, env in enumerate((self.env,) + tuple(self.outer_envs))
                for name, v in env.items() if k or name != target.id
                for leaf in _leaves(v) if isinstance(leaf, Var)]
        others = value in held
        viewed = any(self.made_at.get(leaf.name, (None,))[0] == value.name for leaf in held)
        if not (others or viewed):
            return False
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
        values = [map_values(v, lambda x: copies.get(x, x)) for v in values]
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

    def current_view(self, value, node):
        """``value``, or -- when it is a view of an array written into since the
        view was made -- the view read again from the array: a NumPy view sees
        the write, so its derivative must too (re-slicing, or reshaping the
        array or its slice again, is exactly what the view holds).  A view
        made otherwise cannot be read again and is refused."""
        if self.writes is None or not isinstance(value, Var) or \
                value.name not in self.made_at:
            return value
        root, count = self.made_at[value.name]
        if self.writes.get(root, 0) == count:
            return value
        origin = (self.view_of or {}).get(value.name)
        remade = (self.remade or {}).get(value.name)
        if origin is None and remade is not None and self.root(remade[1][0]).name == root:
            rule, operands, params = remade     # a reshape (of a slice) of the array
            return self.emit(rule, [self.current_view(v, node) if isinstance(v, Var) else v
                                    for v in operands], params, node)
        if origin is None or not isinstance(origin[0], Var) or origin[0].name != root:
            raise self.error(node, f"'{node.id}' is a view (a reshape, transpose or slice of a "
                             f"slice) of an array written into since it was made; NumPy's "
                             f"view would show the write. Make the view again after the "
                             f"write, or copy it where it is made (np.copy(...))")
        return self.emit(rules.RULES["getitem"], [origin[0]], {"index": origin[1]}, node)

    def note_array_write(self, storage):
        """``storage``'s array is written into (see :meth:`current_view`)."""
        if self.writes is not None:
            name = self.root(storage).name
            self.writes[name] = self.writes.get(name, 0) + 1

    def emit_setitem(self, storage, index, value):
        self.cse.clear()           # an element write may change what reads see
        self.note_array_write(storage)
        self.body.append(Prim([], rules.RULES["setitem"], [storage, value], {"index": index},
                              self.src.loc(self.node)))
