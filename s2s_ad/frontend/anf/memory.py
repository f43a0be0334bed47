"""Writes into arrays: which arrays a statement may write (views share memory
with their base), and helpers that update an argument in place, inlined.
"""
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
        the write, so its derivative must too (re-slicing is exactly what the
        view holds).  A view that is not one slice of an array cannot be read
        again and is refused."""
        if self.writes is None or not isinstance(value, Var) or \
                value.name not in self.made_at:
            return value
        root, count = self.made_at[value.name]
        if self.writes.get(root, 0) == count:
            return value
        origin = (self.view_of or {}).get(value.name)
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
