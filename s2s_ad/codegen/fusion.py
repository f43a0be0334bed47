"""Single-use variables written back into the expression that uses them
(the cpu target's module, before it is unparsed and Numba compiles it).

The generated code is three-address: ``_t5 = 2.0 * _t4``, ``_t6 = _t3 -
_t5``...  Numba fuses a chain of array operators into one loop only through
its own unnamed temporaries: a named variable ends the chain, so each
operator became a loop of its own, with its own allocation, its own
broadcasting code and LLVM's loop unswitching over it (one sweep of the
3-D heat stencil: 142 s to compile against 8.5 s for the same statements
written as one expression, see docs/compile_time.md §4).  Here a variable
assigned once by an expression without calls (but of ufuncs) and read once, by a statement
of the same block reached through such assignments only, is replaced by
that expression (in parentheses where precedence needs them, and also
around an operator's operand, to show the order of evaluation): the same
operations on the same operands, evaluated at the same point.

The pass edits the module's trees (lists of ``ast`` statements, comments as
:func:`~s2s_ad.codegen.printer.comment` statements, see
:class:`~s2s_ad.transforms.module.ModuleBuilder`) before their one unparse:
a part it leaves alone is printed from the text it was written as, and the
parentheses it adds are :func:`~s2s_ad.codegen.printer.paren` calls, which
print as parentheses.  A name counts as used wherever it is spelt: as a
variable, an attribute, a parameter or a word of a string.
"""
import ast
import copy
import re

import numpy as np

from . import printer

_NAME = re.compile(r"\b[A-Za-z_]\w*\b")
#: Expression nodes a moved expression may contain: operators, names,
#: constants, subscripts and slices, and calls of NumPy's ufuncs (see
#: _ufunc) -- nothing that stores.  (Any context: a subscript the slice fusion
#: copied from a store's target reads, as its printed text does.)
_PURE = (ast.BinOp, ast.UnaryOp, ast.Name, ast.Constant, ast.Subscript,
         ast.Slice, ast.Tuple, ast.expr_context, ast.operator, ast.unaryop)
#: Where an expression is evaluated later, several times or maybe not at all.
_DEFERRED = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp,
             ast.BoolOp, ast.IfExp)


def fuse_temporaries(parts):
    """``parts`` (the module's trees) with each single-use temporary substituted
    (see module doc); a part with nothing to substitute is returned as it is."""
    uses, defs = {}, {}
    for part in parts:
        for word in _words(part, defs):
            uses[word] = uses.get(word, 0) + 1
    # uses counts the definition too: a single-use temporary appears twice.
    single = {n for n, k in defs.items() if k == 1 and uses.get(n) == 2}
    return [_Block(single).run(part) for part in parts]


class _Block:
    def __init__(self, single):
        self.single = single

    def run(self, stmts):
        """The statements of one block, rewritten (``stmts`` itself when unchanged)."""
        out, pending = [], {}        # temporary -> (its assignment, the names it reads)
        for s in stmts:
            if printer.is_comment(s):
                out.append(s)
                continue
            used = pending and [n for n in _spelt(s) if n in pending]
            if used:
                at = None if isinstance(s, ast.While) else _reads(s, set(used))
                if at is not None:
                    s = _substitute(s, {n: pending.pop(n)[0].value for n in at})
                else:
                    self._flush(pending, out)
            reads = _pure(s.value) if isinstance(s, ast.Assign) and _target(s) else None
            if reads is None:          # a call, a store, a block: every chain ends
                self._flush(pending, out)
                out.append(self._blocks(s))
                continue
            target = s.targets[0].id
            # A chain ends where what it reads is assigned.
            self._flush({n: pending.pop(n) for n in [n for n, (_, r) in pending.items()
                                                     if target in r]}, out)
            if target in self.single:
                pending[target] = (s, reads)
            else:
                out.append(s)
        self._flush(pending, out)
        same = len(out) == len(stmts) and all(a is b for a, b in zip(out, stmts))
        return stmts if same else out

    def _blocks(self, s):
        """``s`` with the blocks it holds rewritten (``s`` when none changes)."""
        fields = {f: self.run(getattr(s, f)) for f in ("body", "orelse", "finalbody")
                  if isinstance(getattr(s, f, None), list)}
        if all(fields[f] is getattr(s, f) for f in fields):
            return s
        s = copy.copy(s)
        for f, block in fields.items():
            setattr(s, f, block)
        return s

    @staticmethod
    def _flush(pending, out):
        """Write the pending assignments back where a chain ends (in their order)."""
        out += [s for s, _ in pending.values()]
        pending.clear()


def _target(assign):
    """Whether ``assign`` is ``name = ...`` (its first target a plain name)."""
    t = assign.targets[0]
    return isinstance(t, ast.Name) and "." not in t.id


_BLOCKS = ("body", "orelse", "finalbody", "handlers")


def _line(s):
    """The nodes statement ``s``'s first line shows (a block's header alone)."""
    yield s
    for field, value in ast.iter_fields(s):
        if field not in _BLOCKS:
            for x in value if isinstance(value, list) else [value]:
                if isinstance(x, ast.AST):
                    yield from ast.walk(x)


def _spelt(s):
    """Every word that spells a name on statement ``s``'s first line."""
    if not isinstance(s, _COMPOUND):
        return _words([s])
    return [w for node in _line(s) for text in _words_of(node) for w in _NAME.findall(text)]


_COMPOUND = (ast.If, ast.For, ast.While, ast.With, ast.FunctionDef, ast.Try)


def _words(stmts, defs=None):
    """Every word that spells a name in ``stmts`` (comments left out), counting
    into ``defs`` the ``name = ...`` assignments of each name."""
    words, stack = [], list(stmts)
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is ast.Name:
            words += _NAME.findall(node.id) if "." in node.id else [node.id]
            continue
        if kind is ast.Expr and printer.is_comment(node):
            continue
        if kind is ast.Assign and defs is not None and _target(node):
            defs[node.targets[0].id] = defs.get(node.targets[0].id, 0) + 1
        if kind in _SPELLING:
            words += [w for text in _words_of(node) for w in _NAME.findall(text)]
        for field in node._fields:
            value = getattr(node, field, None)
            if type(value) is list:
                stack += [v for v in value if isinstance(v, ast.AST)]
            elif isinstance(value, ast.AST) and field != "ctx":
                stack.append(value)
    return words


_SPELLING = {ast.Attribute, ast.Constant, ast.FunctionDef, ast.ClassDef, ast.arg, ast.keyword,
             ast.alias, ast.Global, ast.Nonlocal}


def _words_of(node):
    """The text that spells names in ``node`` itself (not its children)."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [repr(node.value)]
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, ast.keyword):
        return [node.arg or ""]
    if isinstance(node, ast.alias):
        return [node.name, node.asname or ""]
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return list(node.names)
    return []


def _pure(expr):
    """The names ``expr`` reads when it is an expression without calls (but
    of ufuncs), else None."""
    nodes = list(ast.walk(expr))
    calls = [node for node in nodes if isinstance(node, ast.Call) and not printer.is_paren(node)]
    if not all(_ufunc(call) for call in calls):
        return None
    heads = {id(call.func) for call in calls} | \
        {id(getattr(call.func, "value", None)) for call in calls}
    parens = {id(node.func) for node in nodes if printer.is_paren(node)}
    if not all(isinstance(node, (*_PURE, ast.Call)) and not _dotted(node) or id(node) in heads
               or id(node) in parens for node in nodes):
        return None
    return {node.id for node in nodes if isinstance(node, ast.Name)
            and id(node) not in heads and id(node) not in parens}


def _dotted(node):
    return isinstance(node, ast.Name) and "." in node.id


def _ufunc(call):
    """Whether ``call`` is ``np.f(...)`` or ``rt.f(...)`` of a NumPy ufunc ``f``
    (the runtime's are the same functions, see runtime/elementwise.py),
    positional arguments only: a new value, nothing written."""
    f = call.func
    if _dotted(f):
        module, _, attr = f.id.partition(".")
    elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
        module, attr = f.value.id, f.attr
    else:
        return False
    return module in ("np", "rt") and isinstance(getattr(np, attr, None), np.ufunc) and \
        not call.keywords and not any(isinstance(a, ast.Starred) for a in call.args)


def _reads(s, names):
    """``names`` when statement ``s`` (its first line) reads each of them exactly
    once, as a variable, at the point it runs; else None."""
    found = set()
    for node in _line(s):
        if isinstance(node, _DEFERRED) and any(
                isinstance(n, ast.Name) and n.id in names for n in ast.walk(node)):
            return None                    # read later, or not at all: not the same point
        if isinstance(node, ast.Name) and node.id in names:
            if node.id in found or not isinstance(node.ctx, ast.Load):
                return None
            found.add(node.id)
    return found if len(found) == len(names) else None


def _substitute(node, values, whole=False):
    """``node`` with each name of ``values`` read replaced by its expression
    (see :func:`_operand`); a copy where something changed."""
    if isinstance(node, ast.Name) and node.id in values:
        return _operand(values[node.id], whole)
    new = None
    for field, value in ast.iter_fields(node):
        if isinstance(value, list):
            items = [_substitute(v, values, _whole(node, field, k))
                     if isinstance(v, ast.AST) and not isinstance(v, ast.stmt) else v
                     for k, v in enumerate(value)]
            if any(a is not b for a, b in zip(items, value)):
                new = new or copy.copy(node)
                setattr(new, field, items)
        elif isinstance(value, ast.AST) and not isinstance(value, ast.stmt):
            item = _substitute(value, values, _whole(node, field, 0))
            if item is not value:
                new = new or copy.copy(node)
                setattr(new, field, item)
    return new or node


def _whole(parent, field, k):
    """Whether a child in ``parent.field[k]`` is the whole of an argument, an
    element, a subscript or a right-hand side (nothing binds to it)."""
    if isinstance(parent, ast.Call):
        return field == "args"
    if isinstance(parent, (ast.Tuple, ast.List)):
        return True
    if isinstance(parent, ast.Set):
        return k > 0
    if isinstance(parent, ast.keyword):
        return parent.arg is not None
    if isinstance(parent, ast.AugAssign):
        return field == "value" and not isinstance(parent.op, (ast.LShift, ast.RShift))
    return field in ("value", "slice") and isinstance(parent, (ast.Assign, ast.AnnAssign,
                                                               ast.Return, ast.Subscript)) \
        and not (isinstance(parent, ast.Subscript) and field == "value")


def _operand(expr, whole):
    """``expr`` as what replaces a name: in parentheses unless it is a name, a
    constant, a subscript or a call (which bind tighter than any operator), a
    tuple (printed in its parentheses), or the whole of an argument, an
    element or a right-hand side."""
    if isinstance(expr, (ast.Name, ast.Subscript, ast.Call)) or \
            isinstance(expr, ast.Constant) and not str(expr.value).startswith("-"):
        return expr
    if isinstance(expr, ast.Tuple):
        return printer.paren(*expr.elts) if len(expr.elts) > 1 else expr
    return expr if whole else printer.paren(expr)
