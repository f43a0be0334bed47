"""generate: lowered statements -> generated-code trees -> readable Python source.

Prints :mod:`ir` statements and ``ast`` expressions with ``ast.unparse``,
adds a comment with the user's line above each block that comes from it, and
assembles a module that imports only ``math``, ``numpy`` (as ``np``) and the
runtime (as ``rt``).

Generated code is handed between passes as a tree: a list of ``ast``
statements (function definitions, or an adjoint sweep's body) in which a
comment is the statement :func:`comment` makes (``ast`` keeps no comments).
A :class:`Writer` still assembles a function line by line; its output is
:meth:`Writer.tree`, the lines parsed once.  Text exists again only where
module assembly calls :func:`unparse`, which prints the markers back as
comments.  Guarantees: the text is valid Python that runs in the
plain-Python backend and compiles with Numba; names are those the passes
allocated; no statement is printed that a pass did not ask for.
"""
import ast
import copy
import textwrap

import numpy as np

from .. import rules
from ..ir import Call, Const, For, If, Prim, Return, Slice, Tup, Var, While, all_blocks

_OPERATOR_OF = {name: op for op, name in rules.OPERATORS.items()}
_UNARY = (ast.USub, ast.UAdd, ast.Not)
_COMPARE = (ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq)
_BOOL = (ast.And, ast.Or)

HEADER = ("import math\n\nimport numpy as np\n\nfrom s2s_ad import runtime as rt\n")

#: The function a comment statement calls in a tree of generated code (see :func:`comment`).
COMMENT = "__s2s_ad_comment__"
#: The function whose call prints as parentheses around its arguments (see :func:`paren`).
PAREN = "__s2s_ad_paren__"


def name(n):
    return ast.Name(n, ast.Load())


def stored_names(nodes):
    """Names assigned anywhere in the AST ``nodes``."""
    return {n.id for node in nodes for n in ast.walk(node)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def read_names(nodes):
    """Names read anywhere in the AST ``nodes``."""
    return {n.id for node in nodes for n in ast.walk(node)
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Store)}


def names_in(node):
    """Every name in the AST ``node``."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def loads(node):
    """Names ``node`` reads (``x += 1`` reads ``x``)."""
    return read_names([node]) | {n.target.id for n in ast.walk(node)
                                 if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name)}


def atom(a):
    """An ast expression for an atom, tuple or constant."""
    if isinstance(a, Var):
        return name(a.name)
    if isinstance(a, Tup):
        return ast.Tuple([atom(x) for x in a.items], ast.Load())
    if isinstance(a, Slice):
        return ast.Slice(*(None if b is None else atom(b) for b in (a.lo, a.hi, a.step)))
    if isinstance(a, Const):
        return const(a.value)
    raise TypeError(f"not an atom: {a!r}")


def const(v):
    if isinstance(v, slice):
        return ast.Slice(*(None if b is None else const(b) for b in (v.start, v.stop, v.step)))
    if isinstance(v, tuple):
        return ast.Tuple([const(x) for x in v], ast.Load())
    if isinstance(v, (bool, int, float, complex, str, type(None))) or v is Ellipsis:
        return ast.Constant(v)
    if v in (int, float, bool, complex):       # a dtype written as a builtin (a.astype(int))
        return name(v.__name__)
    for module, alias in ((np, "np"),):
        n = getattr(v, "__name__", None)
        if n and getattr(module, n, None) is v:
            return name(f"{alias}.{n}")
    if isinstance(v, np.dtype) and getattr(np, v.name, None) is not None:
        return name(f"np.{v.name}")
    raise TypeError(f"cannot print the constant {v!r}")


def prim_expr(p):
    """The right-hand side of a primitive statement."""
    rule = p.rule
    args = [atom(a) for a in p.args]
    op = _OPERATOR_OF.get(rule.name)
    if op is ast.MatMult:
        op = None       # rt.matmul: Numba's @ rejects mixed dtypes and non-contiguous operands
    if op is not None:
        if issubclass(op, _UNARY):
            return ast.UnaryOp(op(), args[0])
        if issubclass(op, _COMPARE):
            return ast.Compare(args[0], [op()], [args[1]])
        if issubclass(op, _BOOL):
            return ast.BoolOp(op(), args)
        return ast.BinOp(args[0], op(), args[1])
    if rule.emit == "setitem":
        raise TypeError("setitem is a statement")
    if rule.emit == "getitem":
        return ast.Subscript(args[0], atom(p.params["index"]), ast.Load())
    if rule.emit == "identity":
        return args[0]
    if rule.emit == "attribute":
        return ast.Attribute(args[0], rule.name, ast.Load())
    return ast.Call(name(rule.emit), *_call_args(p, args))


def _call_args(p, operands):
    """Positional and keyword arguments in the rule's parameter order.

    Parameters without a default are positional; optional ones are passed
    by keyword, and only when they differ from the default.
    """
    given = dict(zip(p.rule.operands, p.args))
    printed = dict(zip(p.rule.operands, operands))
    positional, keywords = [], []
    skipped = False       # after a left-out argument the rest go by keyword
    for k in p.rule.params:
        if k in given:
            value, expr = given[k], printed[k]
        elif k in p.params:
            value = p.params[k]
            expr = atom(value)
        else:
            skipped = True
            continue
        if k in p.rule.defaults and isinstance(value, Const) and _same(
                value.value, p.rule.defaults[k]):
            skipped = True
        elif k not in p.rule.defaults or (k in given and not skipped):
            positional.append(expr)
        else:
            skipped = True
            keywords.append(ast.keyword(k, expr))
    if len(operands) > len(given):        # calls to functions without a rule
        positional += operands[len(given):]
    return positional, keywords


def _same(a, b):
    return type(a) is type(b) and a == b


def targets(names):
    if len(names) == 1:
        return ast.Name(names[0], ast.Store())
    return ast.Tuple([ast.Name(n, ast.Store()) for n in names], ast.Store())


def nested_targets(names, tree):
    """Targets unpacking a call's result in the structure the callee returns."""
    if not isinstance(tree, Tup):
        return targets(names)
    it = iter(names)

    def build(t):
        if isinstance(t, Tup):
            return ast.Tuple([build(x) for x in t.items], ast.Store())
        return ast.Name(next(it), ast.Store())
    return build(tree)


def stmt(s, fn_names=None):
    """The ast statement for one lowered statement."""
    if isinstance(s, Prim) and s.rule.mutates:
        x, value = s.args
        target = ast.Subscript(atom(x), atom(s.params["index"]), ast.Store())
        return ast.Assign([target], atom(value), lineno=0)
    if isinstance(s, Prim):
        return ast.Assign([targets(s.targets)], prim_expr(s), lineno=0)
    if isinstance(s, Call):
        callee = fn_names[s.callee.key] if fn_names else s.callee.name
        call = ast.Call(name(callee), [atom(a) for a in s.args], [])
        return ast.Assign([nested_targets(s.targets, s.callee.out_tree)], call, lineno=0)
    if isinstance(s, Return):
        return ast.Return(atom(s.value))
    raise TypeError(f"cannot print {s!r}")


# -- generated-code trees -------------------------------------------------------------

def comment(text):
    """The statement that stands for the comment ``# text`` in a tree."""
    return ast.Expr(ast.Call(name(COMMENT), [ast.Constant(text)], []))


def is_comment(s):
    """Whether statement ``s`` is a :func:`comment`."""
    return isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and \
        isinstance(s.value.func, ast.Name) and s.value.func.id == COMMENT


def paren(*exprs):
    """An expression that :func:`unparse` prints as ``(exprs)``: parentheses
    ``ast.unparse`` would leave out (an operator's operand that binds tighter
    anyway, a tuple in a subscript)."""
    return ast.Call(name(PAREN), list(exprs), [])


def is_paren(node):
    """Whether ``node`` is a :func:`paren`."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
        node.func.id == PAREN


def parse(lines):
    """Generated source ``lines`` (any common indentation) as a list of ``ast``
    statements, each comment line a :func:`comment` statement."""
    out = []
    for line in textwrap.dedent("\n".join(lines)).splitlines():
        stripped = line.lstrip()
        if stripped.startswith("#"):
            indent = line[:len(line) - len(stripped)]
            line = f"{indent}{COMMENT}({stripped[1:].strip()!r})"
        out.append(line)
    return ast.parse("\n".join(out)).body


class Tree(tuple):
    """The statements :meth:`Writer.tree` parsed, with the text they were parsed
    from (``source``), which :func:`unparse` returns instead of printing them
    again.  A tuple: a pass that changes generated code builds a new tree."""

    def __new__(cls, stmts, source):
        tree = super().__new__(cls, stmts)
        tree.source = source
        return tree


def unparse(stmts):
    """The source of the statements ``stmts`` (no final newline), each
    :func:`comment` printed as the comment, each :func:`paren` as parentheses;
    a block left with comments alone gets a ``pass``.  A :class:`Tree` gives
    back the text it was parsed from (the same text: the lines a
    :class:`Writer` prints are what ``ast.unparse`` prints)."""
    if isinstance(stmts, Tree):
        return stmts.source
    stmts = [_with_pass(copy.copy(s)) for s in stmts]
    text = ast.unparse(ast.fix_missing_locations(ast.Module(stmts, [])))
    if PAREN in text:
        text = text.replace(PAREN + "(", "(")
    out = []
    for line in text.splitlines():
        stripped = line.lstrip()
        if stripped.startswith(COMMENT + "("):
            indent = line[:len(line) - len(stripped)]
            line = f"{indent}# {ast.literal_eval(stripped[len(COMMENT) + 1:-1])}"
        out.append(line)
    return "\n".join(out)


def _with_pass(s):
    for field in ("body", "orelse"):
        block = getattr(s, field, None)
        if block and isinstance(block, list):
            block = [_with_pass(copy.copy(x)) for x in block]
            if all(is_comment(x) for x in block):
                block.append(ast.Pass())
            setattr(s, field, block)
    return s


class Writer:
    """Accumulates indented source lines with user-line comments; its output is
    :meth:`tree` (the lines parsed once), or :meth:`text` for a dump."""

    def __init__(self):
        self.lines = []
        self.nodes = []
        self.indent = 0
        self._last_loc = None

    def comment(self, text):
        self.lines.append("    " * self.indent + "# " + text)

    def loc(self, loc, prefix=""):
        """A comment naming the user's line, once per run of statements."""
        key = loc and (loc.filename, loc.lineno, prefix)
        if loc is None or key == self._last_loc:
            return
        self._last_loc = key
        self.comment(f"{prefix}{loc.text.strip()}  [line {loc.lineno}]")

    def node(self, node):
        """Print the statement ``node`` (a tree: its :func:`comment` statements
        are printed as comments)."""
        self.nodes.append(node)
        text = unparse([node]) if hasattr(node, "body") or is_comment(node) else \
            ast.unparse(ast.fix_missing_locations(node))
        for line in text.splitlines():
            self.lines.append("    " * self.indent + line)

    def line(self, text, *exprs):
        """A raw line (a compound statement's header) reading ``exprs``."""
        self.nodes.extend(exprs)
        self.lines.append("    " * self.indent + text)

    def blank(self):
        self.lines.append("")
        self._last_loc = None

    def text(self):
        return "\n".join(self.lines) + "\n"

    def tree(self):
        """The functions written, as a :class:`Tree` of ``ast`` statements (see
        :func:`parse`), the lines parsed once."""
        return Tree(parse(self.lines), "\n".join(self.lines).rstrip("\n"))


def def_line(w, fname, params):
    w.lines.append(f"def {fname}({', '.join(params)}):")
    w._last_loc = None


def range_expr(start, stop, step):
    """``range(...)`` with default start and step left out."""
    args = [stop]
    if not (isinstance(start, Const) and start.value == 0) or not (
            isinstance(step, Const) and step.value == 1):
        args = [start, stop] + ([] if isinstance(step, Const) and step.value == 1 else [step])
    return ast.Call(name("range"), [atom(a) for a in args], [])


def sums_of_squares(fn_body, kept, live=()):
    """Sums to print as one reduction of their operand's squares.

    ``t = np.square(x); s = np.sum(t, axis=1)`` prints as
    ``s = rt.sum_squares(x, axis=1)``, with no full-size square, when the
    sum is the only statement of the function reading ``t``, ``t`` is not in
    ``live`` (names read elsewhere: an adjoint sweep's), both are printed
    (ids in ``kept``), and only pure statements that leave ``x`` alone lie
    between them in one block.  The sum is a rule whose ``total`` is
    ``"elements"``; the square, a rule declaring the call that sums its
    values (``Rule.summed``).  Returns ``{id(sum): (x, that call)}`` and the
    squares' ids, which are not printed.
    """
    from ..analyses.dce import read_counts
    count = read_counts(fn_body)
    fused, squares = {}, set()
    for body in all_blocks(fn_body):
        made = {}       # square's name -> (its statement's id, its operand, its summed call)
        for s in body:
            if not isinstance(s, Prim) or s.rule.mutates or id(s) not in kept:
                made = {}
                continue
            arg = s.args[0] if s.args else None
            if s.rule.total == "elements" and isinstance(arg, Var) and arg.name in made and \
                    count.get(arg.name) == 1 and arg.name not in live:
                square, x, summed = made.pop(arg.name)
                fused[id(s)] = (x, summed)
                squares.add(square)
            made = {t: m for t, m in made.items() if m[1] not in s.targets}
            if s.rule.summed and isinstance(arg, Var):
                made[s.targets[0]] = (id(s), arg.name, s.rule.summed)
    return fused, squares


def _sum_squares(s, fused):
    """``s``'s statement with its sum of ``np.square(x)`` as one call."""
    x, summed = fused
    node = stmt(s)
    node.value.func = name(summed)
    node.value.args[0] = name(x)
    return node


class Hooks:
    """What a printer adds around statements; the plain primal adds nothing.

    The reverse transform uses these to push values on stacks, count loop
    trips and save array elements in its primal sweep.
    """
    kept = None     # ids of the statements to print (None: all)
    fused = {}      # id of a sum -> (the operand whose squares it adds, the call: sums_of_squares)

    def fuse_squares(self, fn_body, live=()):
        """Print sums of squares as one reduction (see sums_of_squares)."""
        self.fused, squares = sums_of_squares(fn_body, self.kept, live)
        self.kept = self.kept - squares

    def keep(self, s):
        return self.kept is None or id(s) in self.kept

    def before(self, w, s):
        """Before a compound statement."""

    def top(self, w, body):
        """At the top of a loop body."""

    def end(self, w, body):
        """At the end of a block."""

    def simple(self, w, s):
        """Print a simple statement; False to print it plainly."""
        return False


def block(w, body, fn_names, hooks):
    """Print a statement list."""
    start = len(w.lines)
    for s in body:
        if not hooks.keep(s):
            continue
        if isinstance(s, If):
            w.loc(s.loc)
            hooks.before(w, s)
            cond = atom(s.cond)
            w.line(f"if {ast.unparse(cond)}:", cond)
            _nested(w, s.body, fn_names, hooks)
            if any(hooks.keep(x) for x in s.orelse):
                w.line("else:")
                _nested(w, s.orelse, fn_names, hooks)
        elif isinstance(s, For):
            w.loc(s.loc)
            hooks.before(w, s)
            rng = range_expr(s.start, s.stop, s.step)
            w.line(f"for {s.index} in {ast.unparse(rng)}:", rng)
            _nested(w, s.body, fn_names, hooks, loop=True)
        elif isinstance(s, While):
            w.loc(s.loc)
            hooks.before(w, s)
            cond = atom(s.cond)
            if not any(hooks.keep(x) for x in s.test):
                w.line(f"while {ast.unparse(cond)}:", cond)
                _nested(w, s.body, fn_names, hooks, loop=True)
                continue
            w.line("while True:")
            w.indent += 1
            block(w, s.test, fn_names, hooks)
            w.line(f"if not {ast.unparse(cond)}:", cond)
            w.line("    break")
            hooks.top(w, s.body)
            block(w, s.body, fn_names, hooks)
            w.indent -= 1
        elif not hooks.simple(w, s):
            w.loc(s.loc)
            fused = hooks.fused.get(id(s))
            w.node(stmt(s, fn_names) if fused is None else _sum_squares(s, fused))
    hooks.end(w, body)
    if all(line.lstrip().startswith("#") for line in w.lines[start:]):
        w.line("pass")


def _nested(w, body, fn_names, hooks, loop=False):
    w.indent += 1
    w._last_loc = None
    if loop:
        hooks.top(w, body)
    block(w, body, fn_names, hooks)
    w.indent -= 1
    w._last_loc = None


def primal(fn, fname, w, fn_names):
    """Print the lowered function itself (used by jit and called helpers)."""
    from ..analyses.dce import keep
    def_line(w, fname, fn.params)
    w.indent += 1
    hooks = Hooks()
    hooks.kept = keep(fn.body, set())
    hooks.fuse_squares(fn.body)
    block(w, fn.body, fn_names, hooks)
    w.indent -= 1
    w.blank()
