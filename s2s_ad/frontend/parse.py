"""parse: user function -> gast tree with resolved names, fenced.

Receives a Python function object (a def, a lambda -- located in its file by
its line and code positions -- or a bound method, whose ``self`` is a
constant).  Guarantees: the returned :class:`FunctionSource` holds the
function's ``gast.FunctionDef`` (decorators and docstring removed; nested
``def``s desugared each on their own), its file name and line offset, and resolves every free
name to the object it denotes (NumPy/``math`` functions under any import
alias, user functions, constants, closure cells).  Syntax the compiler cannot
differentiate has been rejected with :class:`UnsupportedSyntaxError` pointing
at the user's line.
"""
import builtins
import copy
import inspect
import linecache
import textwrap
import types

import gast
import numpy as np

from ..errors import UnsupportedSyntaxError
from ..ir import Loc
from . import reads
from .desugar import desugar

_UNSUPPORTED = {
    gast.SetComp: ("set comprehensions are not supported; write a list comprehension"
                   " ([e for x in xs]) or a for loop that fills an array"),
    gast.DictComp: ("dict comprehensions are not supported; write a dict display with constant"
                    " keys, a list comprehension, or a for loop that fills an array"),
    gast.Yield: "generators are not supported; build and return an array instead",
    gast.YieldFrom: "generators are not supported; build and return an array instead",
    gast.Await: "async code is not supported",
    gast.Try: ("try/except is not supported: derivatives cannot follow exceptions;"
               " test the condition with an if instead"),
    gast.With: ("with statements are not supported;"
                " move the context manager outside the differentiated function"),
    gast.Global: ("global statements are not supported;"
                  " pass the value in as an argument and return the new value"),
    gast.Nonlocal: ("nonlocal statements are not supported: a nested function cannot assign"
                    " to a variable of the function around it; return the new value instead"
                    " and assign it there"),
    gast.ClassDef: "class definitions are not supported inside a differentiated function",
    gast.AsyncFunctionDef: "async functions are not supported",
    gast.Delete: "del is not supported; let the variable go out of use instead",
    gast.Import: ("imports inside a differentiated function are not supported;"
                  " import at module level"),
    gast.ImportFrom: ("imports inside a differentiated function are not supported;"
                      " import at module level"),
    gast.Starred: "star-unpacking (*args) is not supported; pass the arguments explicitly",
    gast.Set: "sets are not supported; use tuples or arrays",
    gast.JoinedStr: "f-strings are not supported inside a differentiated function",
    gast.NamedExpr: "assignment expressions (:=) are not supported; assign on a separate line",
    gast.AsyncFor: "async loops are not supported",
    gast.AsyncWith: "async with is not supported",
    gast.Match: "match statements are not supported; use if/elif/else",
}


class FunctionSource:
    """A user function's tree, its location, and its free names resolved."""

    def __init__(self, fn):
        bound, given = None, fn
        if inspect.ismethod(fn) and isinstance(fn.__func__, types.FunctionType):
            bound, fn = fn.__self__, fn.__func__       # a bound method: self is a constant
        if not isinstance(fn, types.FunctionType):
            raise TypeError(f"cannot read the source of {fn!r}: s2s_ad transforms Python source, "
                            f"so the function must be a def function, a lambda or a bound "
                            f"method defined in a file")
        self.fn = fn
        reads.parsed(given, self)
        self.name = fn.__name__ if fn.__name__.isidentifier() else "lambda_"
        if fn.__name__ == "<lambda>":
            node, self.lines, self.first_lineno, self.filename = _lambda_source(fn)
            self.indent = 0
        else:
            node = self._read_def(fn)
        node.decorator_list = []
        body = node.body
        first = body[0] if body else None
        if isinstance(first, gast.Expr) and isinstance(first.value, gast.Constant) and isinstance(
                first.value.value, str):
            node.body = body[1:] or [gast.Pass()]
        self.node = node
        self._check_signature()
        fence(self)
        self._closure = _closure_values(fn)
        if bound is not None:
            if not node.args.args:
                raise self.error(node, f"{fn.__name__} is called as a method but takes no "
                                 f"parameter for the instance")
            self_param = node.args.args.pop(0).id
            self._closure[self_param] = bound
        # Values of the enclosing function's variables that the compiled code
        # takes as hidden arguments when it is the entry (see read_closure).
        self.hidden = ()
        self.locals = _assigned_names(node)
        desugar_nested(self)
        desugar(self)
        restore_nested(node)
        self.locals = _assigned_names(node)

    def _read_def(self, fn):
        try:
            lines, first = inspect.getsourcelines(fn)
        except (OSError, TypeError) as exc:
            raise TypeError(
                f"cannot read the source of {fn!r}: s2s_ad transforms Python "
                f"source, so the function must be defined in a file") from exc
        self.filename = inspect.getsourcefile(fn) or "<unknown>"
        self.lines = lines
        self.first_lineno = first
        text = textwrap.dedent("".join(lines))
        self.indent = len(lines[0]) - len(lines[0].lstrip())
        try:
            node = gast.parse(text).body[0]
        except SyntaxError:
            node = None
        if not isinstance(node, gast.FunctionDef):
            raise TypeError(f"cannot read {fn!r} as a def function: s2s_ad transforms functions "
                            f"defined with def or lambda in a file")
        return node

    # -- locations -------------------------------------------------------
    def loc(self, node):
        """(filename, lineno, col, text) of a node in the user's file."""
        rel = getattr(node, "lineno", 1) - 1
        lineno = self.first_lineno + rel
        text = self.lines[rel].rstrip("\n") if 0 <= rel < len(self.lines) else ""
        col = getattr(node, "col_offset", 0) + self.indent + 1
        return Loc(self.filename, lineno, col, text)

    def error(self, node, msg):
        loc = self.loc(node)
        return UnsupportedSyntaxError(msg, loc.filename, loc.lineno, loc.col, loc.text)

    # -- name resolution ---------------------------------------------------
    def resolve(self, node):
        """The object a free name or dotted attribute chain denotes.

        Returns ``(True, obj)`` when ``node`` is a free ``Name`` or an
        attribute chain rooted at one; ``(False, None)`` for expressions that
        involve local variables.
        """
        if isinstance(node, gast.Name):
            if node.id in self.locals:
                return False, None
            return True, self.lookup(node)
        if isinstance(node, gast.Attribute):
            ok, base = self.resolve(node.value)
            if not ok:
                return False, None
            try:
                obj = getattr(base, node.attr)
            except AttributeError:
                raise self.error(node, f"{_dotted(node)} does not exist") from None
            reads.read(self, _dotted(node), obj)
            return True, obj
        return False, None

    def lookup(self, node):
        name = node.id
        if name in self._closure:
            obj = self._closure[name]
        elif name in self.fn.__globals__:
            obj = self.fn.__globals__[name]
        elif hasattr(builtins, name):
            obj = getattr(builtins, name)
        else:
            raise self.error(node, f"name '{name}' is not defined")
        reads.read(self, name, obj)
        return obj

    def _check_signature(self):
        args = self.node.args
        # s2s_ad's own NumPy implementations (s2s_ad/rules/library) may take
        # ``*arrays`` and keyword-only options, as NumPy's functions do: the call
        # binds them (``call_library``: the ``*`` parameter is a tuple)
        library = self.fn.__module__.startswith("s2s_ad.rules.library")
        if args.kwarg or args.posonlyargs or (
                (args.vararg or args.kwonlyargs) and not library):
            raise self.error(self.node, "only plain positional parameters are supported "
                             "(no *args, **kwargs, keyword-only or positional-only parameters)")

    @property
    def param_names(self):
        args = self.node.args
        return ([a.id for a in args.args] + ([args.vararg.id] if args.vararg else [])
                + [a.id for a in args.kwonlyargs])

    @property
    def defaults(self):
        reads.read(self, "__defaults__", self.fn.__defaults__)
        return self.fn.__defaults__ or ()


def fence(src):
    """Reject every construct the compiler does not differentiate.  (The
    exception a ``raise`` builds is evaluated when the function is transformed,
    f-strings included: see ``stmt_Raise``.)"""
    raised = {id(n) for r in gast.walk(src.node) if isinstance(r, gast.Raise) and r.exc
              for n in gast.walk(r.exc)}
    for node in gast.walk(src.node):
        if node is src.node or id(node) in raised:
            continue
        msg = _UNSUPPORTED.get(type(node))
        if msg:
            raise src.error(node, msg)


def _assigned_names(fn_node):
    """The local names of a function (or lambda): its parameters, the names
    it assigns and the functions it defines, not those of nested scopes."""
    names = {a.id for a in fn_node.args.args}
    for node in scope_nodes(fn_node):
        if isinstance(node, gast.Name) and isinstance(node.ctx, (gast.Store, gast.Param)):
            names.add(node.id)
        elif isinstance(node, gast.FunctionDef):
            names.add(node.name)
    return names


def scope_nodes(fn_node):
    """The nodes of ``fn_node``'s own scope: nested ``def`` and ``lambda``
    nodes are included, their bodies are not (their default values are)."""
    todo = list(gast.iter_child_nodes(fn_node))
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, gast.FunctionDef):
            todo.extend(node.args.defaults)
        elif isinstance(node, gast.Lambda):
            todo.extend(node.args.defaults)
        else:
            todo.extend(gast.iter_child_nodes(node))


def nested_functions(fn_node):
    """The ``def`` and ``lambda`` nodes directly inside ``fn_node``'s scope."""
    return [n for n in scope_nodes(fn_node) if isinstance(n, (gast.FunctionDef, gast.Lambda))]


def desugar_nested(src):
    """Check and desugar the functions defined inside ``src``'s function.

    Each nested ``def`` gets its own single exit (desugared as a function of
    its own, innermost first); while the enclosing function is desugared
    their bodies are set aside, so that their returns are not taken for the
    enclosing function's.  :func:`restore_nested` puts them back.
    """
    for node in nested_functions(src.node):
        args = node.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
            raise src.error(node, "nested functions and lambdas take plain positional "
                            "parameters only (no *args, **kwargs, keyword-only or "
                            "positional-only parameters)")
        if isinstance(node, gast.FunctionDef):
            if node.decorator_list:
                raise src.error(node, "decorators on nested functions are not supported; "
                                "define the decorated function at module level")
            inner = copy.copy(src)
            inner.node = node
            inner.locals = src.locals | _assigned_names(node)
            desugar_nested(inner)
            desugar(inner)
            node.s2s_ad_body, node.body = node.body, [gast.Pass()]
        else:
            inner = copy.copy(src)
            inner.node = node
            inner.locals = src.locals | _assigned_names(node)
            desugar_nested(inner)


def restore_nested(fn_node):
    for node in gast.walk(fn_node):
        body = getattr(node, "s2s_ad_body", None)
        if body is not None:
            node.body = body
            del node.s2s_ad_body
            restore_nested(node)


def nested_source(src, node):
    """The source of the nested ``def`` or ``lambda`` ``node`` of ``src``: its
    names are those of ``src``'s scope (whose values the caller supplies)
    and its own locals."""
    inner = copy.copy(src)
    inner.node = node
    inner.name = node.name if isinstance(node, gast.FunctionDef) else "lambda_"
    inner.own = _assigned_names(node)
    inner.locals = src.locals | inner.own
    inner.hidden = ()
    return inner


def dynamic_value(v):
    """Whether a closed-over value is passed to compiled code as an argument
    (floats, numeric arrays, and containers of them) rather than built in as
    a constant (ints, bools, strings, functions, ...)."""
    if type(v) is float or isinstance(v, np.floating):
        return True
    if isinstance(v, np.ndarray):
        return v.dtype.kind in "fiub"
    if isinstance(v, (tuple, list, dict)) and v:
        from ..ir import pytree
        leaves = pytree.flatten(v)[0]
        return bool(leaves) and all(
            leaf is not v and not isinstance(leaf, (tuple, list, dict)) and dynamic_value(leaf)
            for leaf in leaves)
    return False


def closure_cells(fn):
    """(name, cell) of each variable ``fn`` (a function or bound method)
    closes over."""
    fn = getattr(fn, "__func__", fn)
    code = getattr(fn, "__code__", None)
    if code is None or not getattr(fn, "__closure__", None):
        return ()
    return tuple(zip(code.co_freevars, fn.__closure__))


def read_closure(cells):
    """``(names, values, key)``: the closed-over values that compiled code
    takes as hidden arguments, read now, and a key of the others (which it
    holds as constants, so a change to one means building again)."""
    names, values, key = [], [], []
    for name, cell in cells:
        try:
            v = cell.cell_contents
        except ValueError:
            key.append((name, "<unbound>"))
            continue
        if dynamic_value(v):
            names.append(name)
            values.append(v)
            key.append(name)
            continue
        try:
            hash(v)
            key.append((name, type(v), v))
        except TypeError:
            key.append((name, id(v)))
    return names, values, tuple(key)


_PARSED = {}      # file name -> (its text, its parsed module)


def _lambda_source(fn):
    """(FunctionDef equivalent to the lambda ``fn``, lines, first line, file).

    The lambda is found in its file's parsed source: on its first line, the
    one whose body holds the positions of its code (Python 3.11's
    ``co_positions``), so several lambdas on one line are told apart.
    """
    code = fn.__code__
    filename, first = code.co_filename, code.co_firstlineno
    where = f"the lambda {fn.__qualname__} (line {first} of {filename})"
    lines = linecache.getlines(filename, fn.__globals__)
    if not lines:
        raise TypeError(f"cannot read the source of {where}: Python keeps no source for it (it "
                        f"was typed at the interactive prompt, or made by exec or compile from "
                        f"a string). s2s_ad transforms Python source, so define the function "
                        f"in a file (as a def or a lambda) and import it")
    text = "".join(lines)
    cached = _PARSED.get(filename)
    if cached is None or cached[0] != text:
        try:
            cached = _PARSED[filename] = (text, gast.parse(text))
        except SyntaxError as exc:
            raise TypeError(f"cannot read the source of {where}: the file does not parse "
                            f"({exc.msg})") from None
    found = [n for n in gast.walk(cached[1]) if isinstance(n, gast.Lambda) and n.lineno == first]
    spans = [(a, c, b, d) for a, b, c, d in code.co_positions()
             if None not in (a, b, c, d) and (c, d) != (0, 0)]
    if spans:
        start = min((a, c) for a, c, _, _ in spans)
        end = max((b, d) for _, _, b, d in spans)
        found = [n for n in found if _start(n.body) <= start and end <= _end(n.body)]
        found.sort(key=lambda n: (tuple(-x for x in _start(n.body)), _end(n.body)))
        found = found[:1]
    if len(found) != 1:
        why = ("several lambdas start on that line, and this Python keeps no column "
               "positions to tell them apart" if found else "it is not in the file as it is now "
               "(was the file edited after it was imported?)")
        raise TypeError(f"cannot read the source of {where}: {why}; write it as a def")
    lam = copy.deepcopy(found[0])
    for n in gast.walk(lam):
        for attr in ("lineno", "end_lineno"):
            if getattr(n, attr, None) is not None:
                setattr(n, attr, getattr(n, attr) - (first - 1))
    ret = gast.copy_location(gast.Return(lam.body), lam.body)
    node = gast.copy_location(gast.FunctionDef("lambda_", lam.args, [ret], [], None, None, []),
                              lam)
    return node, lines[first - 1:], first, filename


def _start(node):
    return node.lineno, node.col_offset


def _end(node):
    return node.end_lineno, node.end_col_offset


def _closure_values(fn):
    cells = fn.__closure__ or ()
    out = {}
    for name, cell in zip(fn.__code__.co_freevars, cells):
        try:
            out[name] = cell.cell_contents
        except ValueError:
            pass
    return out


def _dotted(node):
    if isinstance(node, gast.Attribute):
        return _dotted(node.value) + "." + node.attr
    if isinstance(node, gast.Name):
        return node.id
    return "<expr>"


def is_user_function(obj):
    module = getattr(obj, "__module__", None) or ""
    ours = any(module == m or module.startswith(m + ".") for m in ("numpy", "s2s_ad"))
    if inspect.ismethod(obj) and isinstance(obj.__func__, types.FunctionType):
        return not ours and not isinstance(obj.__self__, type)    # a bound method
    return isinstance(obj, types.FunctionType) and not ours
