"""parse: user function -> gast tree with resolved names, fenced.

Receives a Python function object.  Guarantees: the returned
:class:`FunctionSource` holds the function's ``gast.FunctionDef`` (decorators
and docstring removed), its file name and line offset, and resolves every free
name to the object it denotes (NumPy/``math`` functions under any import
alias, user functions, constants, closure cells).  Syntax the compiler cannot
differentiate has been rejected with :class:`UnsupportedSyntaxError` pointing
at the user's line.
"""
import builtins
import inspect
import textwrap
import types

import gast

from .desugar import desugar
from .errors import UnsupportedSyntaxError
from .ir import Loc

_UNSUPPORTED = {
    gast.Lambda: "lambda functions are not supported; define a module-level function instead",
    gast.ListComp: "comprehensions are not supported; write a for loop that fills an array",
    gast.SetComp: "comprehensions are not supported; write a for loop that fills an array",
    gast.DictComp: "comprehensions are not supported; write a for loop that fills an array",
    gast.GeneratorExp: "generator expressions are not supported; write a for loop",
    gast.Yield: "generators are not supported; build and return an array instead",
    gast.YieldFrom: "generators are not supported; build and return an array instead",
    gast.Await: "async code is not supported",
    gast.Try: ("try/except is not supported: derivatives cannot follow exceptions;"
               " test the condition with an if instead"),
    gast.With: ("with statements are not supported;"
                " move the context manager outside the differentiated function"),
    gast.Global: ("global statements are not supported;"
                  " pass the value in as an argument and return the new value"),
    gast.Nonlocal: ("nonlocal statements are not supported;"
                    " pass the value in as an argument and return the new value"),
    gast.ClassDef: "class definitions are not supported inside a differentiated function",
    gast.FunctionDef: ("nested function definitions are not supported;"
                       " define the helper at module level"),
    gast.AsyncFunctionDef: "async functions are not supported",
    gast.Delete: "del is not supported; let the variable go out of use instead",
    gast.Import: ("imports inside a differentiated function are not supported;"
                  " import at module level"),
    gast.ImportFrom: ("imports inside a differentiated function are not supported;"
                      " import at module level"),
    gast.Raise: ("raise is not supported inside a differentiated function;"
                 " check inputs before calling it"),
    gast.Assert: ("assert is not supported inside a differentiated function;"
                  " check inputs before calling it"),
    gast.Starred: "star-unpacking (*args) is not supported; pass the arguments explicitly",
    gast.Dict: "dictionaries are not supported; use tuples or arrays",
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
        if not isinstance(fn, types.FunctionType):
            raise TypeError(f"cannot read the source of {fn!r}: s2s_ad transforms Python source, "
                            f"so the function must be a def function defined in a file")
        self.fn = fn
        self.name = fn.__name__
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
        if not isinstance(node, gast.FunctionDef) or fn.__name__ == "<lambda>":
            raise TypeError(f"{fn!r} is not a def function: s2s_ad transforms functions "
                            f"defined with def (write the lambda as a def)")
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
        self.locals = _assigned_names(node)
        desugar(self)
        self.locals = _assigned_names(node)

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
                return True, getattr(base, node.attr)
            except AttributeError:
                raise self.error(node, f"{_dotted(node)} does not exist") from None
        return False, None

    def lookup(self, node):
        name = node.id
        if name in self._closure:
            return self._closure[name]
        if name in self.fn.__globals__:
            return self.fn.__globals__[name]
        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise self.error(node, f"name '{name}' is not defined")

    def _check_signature(self):
        args = self.node.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
            raise self.error(self.node, "only plain positional parameters are supported "
                             "(no *args, **kwargs, keyword-only or positional-only parameters)")

    @property
    def param_names(self):
        return [a.id for a in self.node.args.args]

    @property
    def defaults(self):
        return self.fn.__defaults__ or ()


def fence(src):
    """Reject every construct the compiler does not differentiate."""
    for node in gast.walk(src.node):
        if node is src.node:
            continue
        msg = _UNSUPPORTED.get(type(node))
        if msg:
            raise src.error(node, msg)


def _assigned_names(fn_node):
    names = {a.id for a in fn_node.args.args}
    for node in gast.walk(fn_node):
        if isinstance(node, gast.Name) and isinstance(node.ctx, (gast.Store, gast.Param)):
            names.add(node.id)
    return names


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
    return isinstance(obj, types.FunctionType) and not ours
