"""Single-use variables written back into the expression that uses them
(the cpu target's source, before Numba compiles it).

The generated code is three-address: ``_t5 = 2.0 * _t4``, ``_t6 = _t3 -
_t5``...  Numba fuses a chain of array operators into one loop only through
its own unnamed temporaries: a named variable ends the chain, so each
operator became a loop of its own, with its own allocation, its own
broadcasting code and LLVM's loop unswitching over it (one sweep of the
3-D heat stencil: 142 s to compile against 8.5 s for the same statements
written as one expression, see docs/compile_time.md §4).  Here a variable
assigned once by an expression without calls (but of ufuncs) and read once, by a statement
of the same block reached through such assignments only, is replaced by
that expression (in parentheses where precedence needs them): the same
operations on the same operands, evaluated at the same point.

Statements are edited line by line, so comments and layout are kept.
"""
import ast
import io
import re
import tokenize

import numpy as np

_DEF = re.compile(r"^(\s*)([A-Za-z_]\w*) = (.+)$")
_NAME = re.compile(r"\b[A-Za-z_]\w*\b")
#: Expression nodes a moved expression may contain: operators, names,
#: constants, subscripts and slices, and calls of NumPy's ufuncs (see
#: _ufunc) -- nothing that stores.
_PURE = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Name, ast.Constant, ast.Subscript,
         ast.Slice, ast.Tuple, ast.Load, ast.operator, ast.unaryop)


def fuse_temporaries(source):
    """``source`` with each single-use temporary substituted (see module doc)."""
    units = _statements(source)
    uses, defs = {}, {}
    for unit in units:
        if unit[0].lstrip().startswith("#"):
            continue
        m = _DEF.match(unit[0]) if len(unit) == 1 else None
        if m:
            defs[m.group(2)] = defs.get(m.group(2), 0) + 1
        for line in unit:
            for name in _NAME.findall(line):
                uses[name] = uses.get(name, 0) + 1
    # uses counts the definition too: a single-use temporary appears twice.
    single = {n for n, k in defs.items() if k == 1 and uses.get(n) == 2}
    out = []
    pending = {}            # temporary -> (its expression, the names it reads, its indent)
    for unit in units:
        line = unit[0]
        if line.lstrip().startswith("#"):
            out += unit
            continue
        if len(unit) > 1:                  # a statement over several lines: left as it is
            _flush(pending, out)
            out += unit
            continue
        indent = len(line) - len(line.lstrip())
        used = [n for n in _NAME.findall(line) if n in pending]
        if used:
            at = _reads(line, set(used))
            if all(pending[n][2] == indent for n in used) and at is not None and \
                    not line.lstrip().startswith(("while ", "elif ")):
                for col, n in sorted(((c, n) for n, c in at.items()), reverse=True):
                    text = _operand(pending.pop(n)[0], line, col, n)
                    line = line[:col] + text + line[col + len(n):]
            else:
                _flush(pending, out)
        m = _DEF.match(line)
        reads = _pure(m.group(3)) if m else None
        if reads is None:                  # a call, a store, a block: every chain ends
            _flush(pending, out)
            out.append(line)
            continue
        target = m.group(2)
        # A chain ends where what it reads is assigned, or its block ends.
        _flush({n: pending.pop(n) for n in [n for n, (_, r, i) in pending.items()
                                            if target in r or i != indent]}, out)
        if target in single:
            pending[target] = (m.group(3), reads, indent)
        else:
            out.append(line)
    _flush(pending, out)
    return "\n".join(out)


def _statements(source):
    """The lines of ``source`` grouped by statement (a statement continued
    over several lines is one group)."""
    lines = source.split("\n")
    starts = {0}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type in (tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT):
                starts.add(tok.end[0])          # the next line (1-based end row = 0-based next)
    except (tokenize.TokenError, SyntaxError):
        return [[line] for line in lines]
    units = []
    for k, line in enumerate(lines):
        if k in starts or not units:
            units.append([line])
        else:
            units[-1].append(line)
    return units


def _pure(text):
    """The names ``text`` reads when it is an expression without calls, else None."""
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        return None
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    if not all(_ufunc(call) for call in calls):
        return None
    heads = {id(call.func) for call in calls} | {id(call.func.value) for call in calls}
    if not all(isinstance(node, (*_PURE, ast.Call)) or id(node) in heads
               for node in ast.walk(tree)):
        return None
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)
            and id(node) not in heads}


def _ufunc(call):
    """Whether ``call`` is ``np.f(...)`` or ``rt.f(...)`` of a NumPy ufunc ``f``
    (the runtime's are the same functions, see runtime/elementwise.py),
    positional arguments only: a new value, nothing written."""
    f = call.func
    return isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and \
        f.value.id in ("np", "rt") and isinstance(getattr(np, f.attr, None), np.ufunc) and \
        not call.keywords and not any(isinstance(a, ast.Starred) for a in call.args)


#: Where an expression is evaluated later, several times or maybe not at all.
_DEFERRED = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp,
             ast.BoolOp, ast.IfExp)


def _reads(line, names):
    """Where ``line`` (one statement) reads each of ``names``, as a column:
    ``{name: column}``, or None unless each is read exactly once there (as
    a variable, not in a string or as an attribute)."""
    text = line.lstrip()
    indent = len(line) - len(text)
    try:
        tree = ast.parse(text + (" pass" if text.endswith(":") else ""))
    except SyntaxError:
        return None
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, _DEFERRED) and any(
                isinstance(n, ast.Name) and n.id in names for n in ast.walk(node)):
            return None                    # read later, or not at all: not the same point
        if isinstance(node, ast.Name) and node.id in names:
            if node.id in found or not isinstance(node.ctx, ast.Load):
                return None
            found[node.id] = indent + node.col_offset
    return found if len(found) == len(names) else None


def _operand(text, line, col, name):
    """``text`` as what replaces ``name`` at column ``col`` of ``line``: in
    parentheses unless it is a name, a constant, a subscript or a call (which bind
    tighter than any operator), already in parentheses, or the whole of an
    argument, an element or a right-hand side."""
    node = ast.parse(text, mode="eval").body
    if isinstance(node, (ast.Name, ast.Subscript, ast.Call)) or \
            isinstance(node, ast.Constant) and not str(node.value).startswith("-"):
        return text
    if text.startswith("(") and text.endswith(")") and _enclosed(text):
        return text
    before, after = line[:col].rstrip(), line[col + len(name):].lstrip()
    whole = (before.endswith(("(", ",", "[")) or re.search(r"(^|[^=!<>])=$", before)
             or re.fullmatch(r"\s*return", before)) \
        and (after[:1] in (")", ",", "]") or not after)
    return text if whole and not isinstance(node, ast.Tuple) else f"({text})"


def _enclosed(text):
    """Whether the parenthesis opening ``text`` closes at its end."""
    depth = 0
    for k, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0:
            return k == len(text) - 1
    return False


def _flush(pending, out):
    """Write the pending assignments back where a chain ends (in their order)."""
    for name, (text, _, indent) in pending.items():
        out.append(f"{' ' * indent}{name} = {text}")
    pending.clear()
