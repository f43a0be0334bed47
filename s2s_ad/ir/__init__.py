"""The intermediate representation between the passes (layer ``ir``, the bottom).

The package imports nothing else of s2s_ad; beside the nodes it holds
``names`` (fresh, readable names) and ``pytree`` (the structure of user
values: flatten/unflatten, dicts and NamedTuples).

``parse`` produces a :class:`FunctionSource` (the user's function as a gast
tree with every free name resolved); ``normalize`` lowers it to a
:class:`Function` in A-normal form, which ``activity``, ``reverse`` and
``codegen`` read.  In A-normal form every statement is one primitive call on
*atoms* (names and constants), so derivative rules only ever see simple
statements:

* :class:`Prim` ``t1, ... = rule(args..., **params)``
* :class:`Call` ``t1, ... = helper(args...)`` (a user function, itself lowered)
* :class:`Return` the function's single exit, a pytree of atoms.

Tuples and lists of values ("pytrees") never exist at run time in lowered
code: the normaliser tracks their structure statically and passes leaves.
"""
from dataclasses import dataclass, field, replace
from typing import Any

from .pytree import Fields


@dataclass(frozen=True)
class Const:
    """A compile-time constant (number, bool, None, string, dtype...)."""
    value: Any


@dataclass(frozen=True)
class Var:
    """A run-time value held in a local variable."""
    name: str


Atom = Var | Const


@dataclass(frozen=True)
class Tup:
    """A statically known tuple of atoms or tuples (a pytree node).

    ``is_list`` remembers a list display: generated code passes tuples, and
    the API gives a function's list outputs back as lists.
    """
    items: tuple
    is_list: bool = field(default=False, compare=False)

    def leaves(self):
        for item in self.items:
            if isinstance(item, Tup):
                yield from item.leaves()
            else:
                yield item


def leaves_of(value):
    """The atoms of a value: a :class:`Tup`'s leaves in order, else ``[value]``."""
    return list(value.leaves()) if isinstance(value, Tup) else [value]


def map_leaves(tree, fn):
    """``tree`` (an atom or a nested :class:`Tup`) with every leaf replaced by ``fn(leaf)``."""
    if isinstance(tree, Tup):
        return Tup(tuple(map_leaves(t, fn) for t in tree.items), tree.is_list)
    return fn(tree)


@dataclass(frozen=True)
class Slice:
    """``lo:hi:step`` inside an index; bounds are atoms or None."""
    lo: Any = None
    hi: Any = None
    step: Any = None


@dataclass(frozen=True)
class Loc:
    """Where a statement came from in the user's source."""
    filename: str
    lineno: int
    col: int
    text: str


@dataclass
class Prim:
    """``targets = rule(*args, **params)``.

    ``args`` are the rule's positional operands (atoms, or :class:`Tup` for
    sequence operands such as ``np.concatenate``'s); ``params`` are static
    keyword parameters (axis, keepdims, shape, index...).
    """
    targets: list
    rule: Any
    args: list
    params: dict = field(default_factory=dict)
    loc: Loc | None = None


@dataclass
class Call:
    """``targets = callee(*args)`` for a lowered user function."""
    targets: list
    callee: "Function"
    args: list
    loc: Loc | None = None


@dataclass
class Return:
    value: Any  # Atom or Tup
    loc: Loc | None = None


@dataclass
class Function:
    """A user function lowered to A-normal form.

    ``params`` are the leaf parameter names in order; ``param_trees`` maps each
    original parameter to its structure (a :class:`Var` or :class:`Tup` of
    leaves).  ``consts`` are module-level and closed-over values the body
    reads, by the name the generated module binds them to.
    """
    name: str
    params: list
    param_trees: list
    body: list
    consts: dict
    source: Any  # FunctionSource
    names: Any = None  # the Names allocator, shared with later passes
    key: tuple = ()
    # Parameters split into scalars by ``scalarize``: name -> element names.
    elements: dict = field(default_factory=dict)
    # Parameter leaves passed as None (no leaves, as JAX's None: no gradient).
    none_params: frozenset = frozenset()
    # The user's rule (``ad.custom_vjp`` / ``ad.custom_jvp``) of a custom
    # function, kept by rewrites of its body; and, for a rewrite that changes
    # the rule's functions too (batching), how to lower them (see
    # ``frontend.custom.lower_rule``).
    custom: Any = None
    rule_lowering: Any = None
    custom_trees: Any = None      # the structures its rules are lowered with
    # A derivative helper (``ad.grad(f)`` written in user code): what it
    # computes, for the lowerings that run it as reverse code (see
    # :class:`Gradient`); its body computes the same by forward-mode columns.
    gradient: Any = None

    @property
    def out_tree(self):
        return self.body[-1].value


@dataclass(eq=False)
class Gradient:
    """What a gradient helper computes: the gradient of one scalar output of
    ``fn`` with respect to some of its parameter leaves, beside outputs of
    ``fn`` itself.

    The helper takes ``fn``'s parameters; ``seed`` is the position of the
    differentiated output among ``fn``'s output leaves, ``wrt`` the
    parameter leaves differentiated, and ``outputs`` says, for each leaf of
    the helper's result in order, what it is: ``("out", i)``, ``fn``'s
    output leaf ``i``, or ``("grad", p)``, the gradient for parameter ``p``.
    """
    fn: "Function"
    wrt: tuple
    seed: int
    outputs: tuple


@dataclass
class If:
    """``if cond: body else: orelse``; variables assigned in either branch
    are joined by copies at the end of each branch."""
    cond: Any
    body: list
    orelse: list
    loc: Loc | None = None
    joins: dict = field(default_factory=dict)   # joined name -> (set in body, set in orelse)


@dataclass
class For:
    """``for index in range(start, stop, step): body``.

    ``carried`` are the header names of loop-carried variables: each is
    copied in before the loop and re-assigned by a copy at the end of the
    body, so within one iteration every name is assigned once.
    """
    index: str
    start: Any
    stop: Any
    step: Any
    body: list
    loc: Loc | None = None
    carried: list = field(default_factory=list)


@dataclass
class While:
    """``while True: test; if not cond: break; body`` (``test`` computes
    ``cond`` at the top of every iteration)."""
    test: list
    cond: Any
    body: list
    loc: Loc | None = None
    carried: list = field(default_factory=list)


def var_names(values):
    """Names of the variables among atoms, tuples and slices (nested)."""
    for v in values:
        if isinstance(v, Tup):
            yield from var_names(v.items)
        elif isinstance(v, Var):
            yield v.name
        elif isinstance(v, Slice):
            yield from var_names([v.lo, v.hi, v.step])


def blocks(s):
    """The nested statement lists of a compound statement."""
    if isinstance(s, If):
        return [s.body, s.orelse]
    if isinstance(s, For):
        return [s.body]
    if isinstance(s, While):
        return [s.test, s.body]
    return []


def all_blocks(body):
    """``body`` and every statement list nested in it."""
    return [body] + [b for s in walk(body) for b in blocks(s)]


def walk(body):
    """Every statement of a body, nested ones included, in order."""
    for s in body:
        yield s
        for b in blocks(s):
            yield from walk(b)


class Rewriter:
    """Rebuilds a body statement by statement: the one block/statement dispatch
    every transform shares.

    :meth:`block` returns a new statement list; it calls ``stmt_<Kind>(s,
    out)`` (``stmt_Prim``, ``stmt_Call``, ``stmt_If``, ``stmt_For``,
    ``stmt_While``, ``stmt_Return``), which appends what replaces ``s`` to
    ``out`` -- nothing, one statement or several.  By default simple
    statements are kept and compound ones are rebuilt with their blocks
    rewritten; a transform overrides the kinds it changes.
    """

    def block(self, stmts):
        out = []
        for s in stmts:
            self.stmt(s, out)
        return out

    def stmt(self, s, out):
        getattr(self, "stmt_" + type(s).__name__, self.stmt_other)(s, out)

    def stmt_Prim(self, s, out):
        out.append(s)

    stmt_Call = stmt_Return = stmt_Prim

    def stmt_If(self, s, out):
        out.append(replace(s, body=self.block(s.body), orelse=self.block(s.orelse)))

    def stmt_For(self, s, out):
        out.append(replace(s, body=self.block(s.body)))

    def stmt_While(self, s, out):
        out.append(replace(s, test=self.block(s.test), body=self.block(s.body)))

    def stmt_other(self, s, out):
        raise TypeError(f"{type(self).__name__} cannot rewrite {s!r}")


# -- structured values of the front end ------------------------------------------------

LEAF = None  # the structure of a single value


@dataclass(frozen=True)
class Record(Tup):
    """A dict or NamedTuple: a :class:`~s2s_ad.ir.Tup` whose items are also found
    by key (``v["a"]``) or field name (``p.a``); ``container`` (a
    :class:`~s2s_ad.ir.pytree.Keyed`) holds the keys and rebuilds the value."""
    container: Any = field(default=None, compare=False)
    order: Any = field(default=None, compare=False)    # a dict's keys as Python iterates
    # them, when not the container's (sorted) order: a dict built in the function

    def item(self, key):
        """The item under ``key``, or None."""
        keys = self.container.keys
        return self.items[keys.index(key)] if key in keys else None

    def keys_in_order(self):
        """The keys in the order Python iterates them (a dict argument arrives
        with its keys sorted, as JAX rebuilds one)."""
        return tuple(self.order or self.container.keys)


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
        if isinstance(tree, Fields):
            return Fields(tuple(map(plain, tree)), tree.container)
        return tuple(map(plain, tree)) if isinstance(tree, tuple) else tree
    return plain(tree_of(a)) == plain(tree_of(b))


def leaf_count(tree):
    """The number of leaves of a structure (LEAF, or a tuple of structures:
    see :func:`tree_of` and ``pytree.structure``)."""
    return 1 if tree is LEAF else sum(leaf_count(t) for t in tree)


def tree_of(value):
    """The structure of a lowered value (LEAF, a tuple of structures -- a
    :class:`ListTree` for a list -- or :class:`~s2s_ad.ir.pytree.Fields` for a
    dict or NamedTuple)."""
    if isinstance(value, Record):
        return Fields(tuple(tree_of(v) for v in value.items), value.container)
    if isinstance(value, Tup):
        items = tuple(tree_of(v) for v in value.items)
        return ListTree(items) if value.is_list else items
    return LEAF
