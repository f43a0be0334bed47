"""The :class:`Lowerer`: one per (function, argument structure), with its state
(environment of names, the statements being emitted, loop and write tracking);
its methods come from the mixins ``statements``, ``expressions``, ``calls``,
``inlining`` and ``memory`` of this package (see its docstring).
"""
import dataclasses

from ... import rules
from ...ir import (
    LEAF,
    Const,
    Function,
    ListTree,
    Prim,
    Record,
    Return,
    Tup,
    Var,
    pytree,
)
from ...ir.names import Names
from ..parse import (
    FunctionSource,
)
from .calls import Calls
from .common import LocalFn, StaticFn, _all_identifiers, map_values
from .expressions import Expressions
from .inlining import Inlining
from .memory import Memory
from .statements import Statements


class Lowerer(Statements, Memory, Expressions, Calls, Inlining):
    """Lowers one function body; one instance per (function, structure)."""

    view_of = None            # see __init__ (None in lowerers that do not track views)
    remade = None             # see __init__
    writes = None             # see __init__
    copied_from = None        # see __init__
    outer_envs = ()           # the callers' environments, in an inlined helper

    effects = 0               # calls so far that wrote into an array their caller passed

    def __init__(self, src: FunctionSource, trees, program, copies=(), ranks=None, known=()):
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
        self.remade = {}          # another view (a reshape...) -> (rule, operands, params)
        # Writes into each array so far (its root's name -> count), and each
        # view's (root, count) when it was made: a view read after a write
        # into its array is read again from the array (Memory.current_view).
        self.writes, self.made_at = {}, {}
        # Arrays a join or loop header copies into another name -> the names
        # copied from: one array under two names (see Memory.check_aliases).
        self.copied_from = {}
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
            # A bound function (StaticFn) is no parameter: it has no leaves.
            self.param_trees.append(Tup(()) if isinstance(tree, StaticFn) else value)
        # Ranks known while lowering: np.ndim(x) of a known rank is a constant.
        self.ranks = dict(zip(self.params, ranks)) if ranks is not None else {}
        self.none_params = frozenset(self.params[i] for i, v in known
                                     if v is None and i < len(self.params))
        if known:
            # Parameter leaves passed as None or a string: the body reads the
            # constant, so ``if opt is None:`` and ``if mode == "sum":`` take
            # their branch now (the generated function still takes the parameter).
            const = {Var(self.params[i]): Const(v) for i, v in known if i < len(self.params)}
            for name, value in self.env.items():
                self.env[name] = map_values(value, lambda v: const.get(v, v))
        if copies:
            self.copy_params(copies)

    def _param(self, name, tree):
        if isinstance(tree, StaticFn):
            return tree.fn
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
            self.env[name] = map_values(value, lambda v: copies.get(v, v))

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
                        self.consts, self.src, names=self.names, none_params=self.none_params)

    def error(self, node, msg):
        return self.src.error(node, msg)

    def fresh_like(self, name, value, node):
        if isinstance(value, LocalFn):
            return value
        if isinstance(value, Tup):
            return dataclasses.replace(value, items=tuple(
                self.fresh_like(f"{name}_{i}", v, node) for i, v in enumerate(value.items)))
        return Var(self.names.user(name))

    def _fresh_like_temp(self, value):
        if isinstance(value, Tup):
            return dataclasses.replace(value, items=tuple(self._fresh_like_temp(v)
                                                          for v in value.items))
        return Var(self.names.temp()) if isinstance(value, Var) else value

    def _fresh_like(self, tree):
        if isinstance(tree, Tup):
            return dataclasses.replace(tree, items=tuple(self._fresh_like(t) for t in tree.items))
        return Var(self.names.temp())
