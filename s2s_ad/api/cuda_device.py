"""The device module: a per-example module rewritten for ``numba.cuda.jit(device=True)``.

:func:`device_source` takes the A-normal-form source the CPU path compiles
for one example and returns the device text: scalar NumPy math becomes
``math`` calls (:data:`MATH`; :data:`KEPT` names stay), each stack a reverse
sweep allocates becomes a slice of the thread's float64 tape row (the tape
parameters are threaded through every function), shared arrays are read in
place, and a body a thread cannot run (array allocation, NumPy on arrays) is
an :class:`~s2s_ad.errors.UnsupportedSyntaxError` naming the user's line.
The kernel that calls it, its launch and the host side are :mod:`s2s_ad.api.cuda`.
"""
import ast
import re

from ..errors import UnsupportedSyntaxError
from .cuda_float32 import float32_constants
from .cuda_local import (
    StaticShapes,
    _appended,
    array_slots,
    augassign,
    pop_local,
    push_local,
    rewrite_assign,
    rewrite_return,
)

#: NumPy functions of one scalar and their device (``math``) equivalents.
MATH = {"exp": "exp", "log": "log", "sin": "sin", "cos": "cos", "tan": "tan",
        "tanh": "tanh", "sinh": "sinh", "cosh": "cosh", "sqrt": "sqrt", "log1p": "log1p",
        "expm1": "expm1", "arctan": "atan", "arcsin": "asin", "arccos": "acos",
        "arctanh": "atanh", "arcsinh": "asinh", "arccosh": "acosh", "floor": "floor",
        "ceil": "ceil", "fabs": "fabs", "arctan2": "atan2", "hypot": "hypot",
        "isnan": "isnan", "isinf": "isinf", "isfinite": "isfinite", "log10": "log10",
        "log2": "log2", "exp2": None, "abs": None, "absolute": None}
#: NumPy names device code may use as they are (scalar casts).
KEPT = {"float64", "float32", "int64", "int32", "bool_"}


class _DeviceRewrite(ast.NodeTransformer):
    """The generated module rewritten for device code (see the module docstring)."""

    def __init__(self, source):
        self.lines = source.split("\n")
        self.taped = set()        # functions that take a tape (their own stacks or callees')
        self.keeping, self.tape_params = set(), {}
        self.stacks = set()

    def refuse(self, node, what, instead):
        text, line = _user_line(self.lines, node.lineno)
        if text and re.search(r"\bad\.(grad|value_and_grad|vjp|jacfwd|jacrev|hessian|hvp)\(",
                              text):
            instead = ("a transform written inside the per-example function runs on the "
                       "device when what it differentiates is scalars or 1-d arrays of "
                       "static length (kept in per-thread arrays); otherwise batch the "
                       "transform itself, as in ad.vmap(ad.hessian(f)) or ad.vmap(ad.grad(f))")
        raise UnsupportedSyntaxError(
            f"target='cuda': a GPU thread cannot run this line: {what}; {instead}, or use "
            f"target='cpu'", self.filename, line, 1, text)

    def visit_Module(self, node):
        functions = {f.name: f for f in node.body if isinstance(f, ast.FunctionDef)}
        own = {n for n, f in functions.items() if any(
            _is_call(c, "rt.float_stack") or _empty_list(c) for c in ast.walk(f))
            or set(_list_stacks(f)) & {a.arg for a in f.args.args}}
        calls = {n: {c.func.id for c in ast.walk(f) if isinstance(c, ast.Call)
                     and isinstance(c.func, ast.Name) and c.func.id in functions}
                 for n, f in functions.items()}
        self.taped = set(own)
        self.keeping, self.tape_params = _tape_params(functions)
        while True:
            more = {n for n, callees in calls.items() if callees & self.taped} - self.taped
            if not more:
                break
            self.taped |= more
        self.generic_visit(node)
        return node

    def _array_zeros(self, function, node):
        """Whether ``node`` is the zero adjoint of an array argument of the entry."""
        return function == self.entry and _is_call(node, "rt.zeros_like") and \
            isinstance(node.args[0], ast.Name) and node.args[0].id in self.arrays

    def visit_FunctionDef(self, node):
        self.function = node.name
        if self.local.problem and self.local.problem[0] is node:
            self.refuse(node, self.local.problem[1], "call it with arrays of one shape")
        self.lists = _list_stacks(node, returned=node.name != self.entry)
        # slices of the tape a forward function returned to this reverse sweep
        self.stacks = self.tape_params.get(node.name, set()) - set(self.lists)
        used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        self.used = used
        self.rets = [] if node.name == self.entry else [
            _fresh(f"ret{k}", used) for k in range(len(array_slots(self.local, node.name)))]
        # how often each name is assigned (an output row's name assigned again is copied)
        self.rebound = {}
        for n in ast.walk(node):
            for t in n.targets if isinstance(n, ast.Assign) else ():
                for m in ast.walk(t):
                    if isinstance(m, ast.Name) and isinstance(m.ctx, ast.Store):
                        self.rebound[m.id] = self.rebound.get(m.id, 0) + 1
        self.generic_visit(node)
        # a stack the forward function filled: popped from its end
        node.body[:0] = [ast.Assign([ast.Name(count, ast.Store())],
                                    _attr(f"{name}.shape[0]"), lineno=node.lineno)
                         for name, count in self.lists.items()
                         if name in {a.arg for a in node.args.args}]
        if node.name in self.taped:
            node.args.args += [ast.arg("tape"), ast.arg("tape_top"), ast.arg("need")]
        node.args.args += [ast.arg(r) for r in self.rets]
        if node.name == self.entry:
            node.args.args += [ast.arg(v) for v in self.outputs.values()]
        return node

    def visit_Assign(self, node):
        value = node.value
        if _is_call(value, "rt.debug_print"):
            return self.device_print(node, value)
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
                value.func.id in self.keeping and isinstance(node.targets[0], ast.Tuple):
            # its stacks stay taken until the reverse sweep: the tape taken past them
            node.targets[0].elts.append(ast.Name("tape_top", ast.Store()))
        if _empty_list(node) and node.targets[0].id in self.lists:
            # a stack the CPU code keeps as a list: slots of the tape (see runtime/device.py)
            name = node.targets[0].id
            take = ast.Call(_attr("rtd.list_take"), [ast.Name(n, ast.Load()) for n in
                                                     ("tape", "tape_top", "need")], [])
            return [ast.Assign([ast.Tuple([ast.Name(name, ast.Store()),
                                           ast.Name("tape_top", ast.Store())], ast.Store())],
                               take, lineno=node.lineno),
                    ast.Assign([ast.Name(self.lists[name], ast.Store())], ast.Constant(0),
                               lineno=node.lineno)]
        if self.nested and isinstance(value, ast.Constant) and value.value is None and \
                isinstance(node.targets[0], ast.Name) and self.lists:
            # a forward function's last column (e = None before its loop): no None on
            # the device, the loop defines it
            return []
        if isinstance(value, ast.List) and not value.elts:
            if self.nested:
                self.refuse(node, "reverse mode over a transform written inside the "
                            "per-example function keeps a list of arrays, one per column",
                            "differentiate that function in forward mode (ad.jacfwd, ad.jvp "
                            "of it), or batch the inner transform itself")
            self.refuse(node, "it keeps a list whose length is known only while it runs",
                        "write it with scalars and loops")
        stack = _stack_call(value, "pop", self.lists)
        if stack is not None and len(node.targets) == 1:
            count = self.lists[stack]
            array = pop_local(self, node, stack, count)       # an array: element by element
            if array is not None:
                return array
            like = self.visit(_load(node.targets[0]))
            pop = ast.Call(_attr("rtd.pop_as"), [ast.Name(stack, ast.Load()),
                                                 ast.Name(count, ast.Load()), like,
                                                 ast.Name("need", ast.Load())], [])
            return [ast.AugAssign(ast.Name(count, ast.Store()), ast.Sub(), ast.Constant(1)),
                    ast.Assign(node.targets, pop, lineno=node.lineno)]
        if _is_call(value, "rt.float_stack") and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            self.stacks.add(name)
            node.targets = [ast.Tuple([ast.Name(name, ast.Store()),
                                       ast.Name("tape_top", ast.Store())], ast.Store())]
            node.value = ast.Call(_attr("rtd.tape_take"),
                                  [ast.Name("tape", ast.Load()), ast.Name("tape_top", ast.Load()),
                                   self.visit(value.args[0]), ast.Name("need", ast.Load())], [])
            return node
        if self._array_zeros(self.function, value) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name):
            array, name = value.args[0].id, node.targets[0].id
            if self.arrays[array] != 1:
                self.refuse(node, f"the gradient of the {self.arrays[array]}-d array "
                            f"{array} is an array a thread would allocate",
                            f"pass {array} flattened to 1-d (index it as {array}[i * n + j])")
            # accumulated straight into the kernel's output row for it
            self.outputs[name] = f"{name}_out"
            return [ast.Expr(ast.Call(_attr("rtd.zero_fill"),
                                      [ast.Name(f"{name}_out", ast.Load())], [])),
                    ast.Assign([node.targets[0]], ast.Name(f"{name}_out", ast.Load()),
                               lineno=node.lineno)]
        local = rewrite_assign(self, node)       # arrays of static shape: per-thread arrays
        if local is not None:
            return local
        return self.generic_visit(node)

    def device_print(self, node, call):
        """``print(...)`` of the user's code: numba.cuda's own print (numbers and
        strings, one line per thread, in no set order between threads)."""
        if call.keywords:
            self.refuse(call, "print with sep= or end= (numba.cuda's print has neither)",
                        "print the values with the default separator")
        values = call.args[0].elts if isinstance(call.args[0], ast.Tuple) else []
        printed = ast.Call(ast.Name("print", ast.Load()), [self.visit(v) for v in values], [])
        return ast.Expr(printed, lineno=node.lineno)

    def visit_Expr(self, node):
        call = node.value
        if isinstance(call, ast.Call) and ast.unparse(call.func) == "rt.add_into" \
                and len(call.args) == 2:
            # a cotangent added into a slice in place: ``out += value``, which
            # the per-thread array lowering writes element by element
            target = call.args[0]
            target.ctx = ast.Store()
            return self.visit_AugAssign(ast.AugAssign(target, ast.Add(), call.args[1],
                                                      lineno=node.lineno))
        stack = _stack_call(node.value, "append", self.lists)
        if stack is None:
            return self.generic_visit(node)
        count = self.lists[stack]
        array = push_local(self, stack, count, node.value.args[0])
        if array is not None:
            return array
        push = ast.Call(_attr("rtd.push"), [ast.Name(stack, ast.Load()),
                                            ast.Name(count, ast.Load()),
                                            self.visit(node.value.args[0]),
                                            ast.Name("need", ast.Load())], [])
        return ast.Assign([ast.Name(count, ast.Store())], push, lineno=node.lineno)

    def visit_AugAssign(self, node):
        array = augassign(self, node)       # on a local array: element by element
        return array if array is not None else self.generic_visit(node)

    def visit_Return(self, node):
        self.generic_visit(node)
        if isinstance(node.value, ast.Tuple):
            # a stack returned to the reverse sweep: the slots it filled
            node.value.elts = [_attr(f"{e.id}[0:{self.lists[e.id]}]")
                               if isinstance(e, ast.Name) and e.id in self.lists else e
                               for e in node.value.elts]
            if self.function in self.keeping:
                node.value.elts.append(ast.Name("tape_top", ast.Load()))
        if self.rets:
            return rewrite_return(self, node, self.rets)
        copies = []
        if self.function == self.entry:
            # arrays of static shape returned: copied into the kernel's output rows for them
            def local(value, path):
                if isinstance(value, ast.Tuple):
                    value.elts = [local(v, path + (k,)) for k, v in enumerate(value.elts)]
                    return value
                if _is_call(value, "rt.like") and isinstance(value.args[0], ast.Name) and \
                        value.args[0].id not in self.outputs and \
                        self.local.shapes.get(self.entry, {}).get(value.args[0].id):
                    value = value.args[0]          # a local array of the argument's shape
                if isinstance(value, ast.Name) and value.id in \
                        self.local.shapes.get(self.entry, {}) and value.id not in self.arrays \
                        and value.id not in self.outputs:
                    out = self.outputs[value.id] = f"{value.id}_out"
                    copies.append(ast.Expr(ast.Call(_attr("rtd.copy_into"), [
                        ast.Name(out, ast.Load()), value, ast.Constant(1.0)], [])))
                    return ast.Call(_attr("rt.like"), [ast.Name(value.id, ast.Load())], [])
                return value
            node.value = local(node.value, ())
        if self.function == self.entry and self.outputs:
            self.returned = {}

            def strip(value, path):
                if isinstance(value, ast.Tuple):
                    value.elts = [strip(v, path + (k,)) for k, v in enumerate(value.elts)]
                    return value
                if _is_call(value, "rt.like") and isinstance(value.args[0], ast.Name) and \
                        value.args[0].id in self.outputs:
                    name = value.args[0].id
                    self.returned[path] = name
                    if self.rebound.get(name, 0) > 1:
                        # assigned a new (per-thread) array after its output row: copied
                        copies.append(ast.Expr(ast.Call(_attr("rtd.copy_into"), [
                            ast.Name(self.outputs[name], ast.Load()), ast.Name(name, ast.Load()),
                            ast.Constant(1.0)], [])))
                    return ast.Constant(None)
                return value
            node.value = strip(node.value, ())
        return copies + [node] if copies else node

    def visit_Subscript(self, node):
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id in self.stacks:
            node.slice = ast.Call(_attr("rtd.slot"), [ast.Name(node.value.id, ast.Load()),
                                                      node.slice], [])
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        func = node.func
        if isinstance(func, ast.Name) and func.id in self.taped:
            node.args += [ast.Name(n, ast.Load()) for n in ("tape", "tape_top", "need")]
        if isinstance(func, ast.Name) and func.id in ("max", "min") and len(node.args) >= 2 \
                and not node.keywords:
            # Python's max/min of scalars, two at a time: rtd.max2(rtd.max2(a, b), c)
            folded = node.args[0]
            for arg in node.args[1:]:
                folded = ast.Call(_attr(f"rtd.{func.id}2"), [folded, arg], [])
            return folded
        if isinstance(func, ast.Attribute) and func.attr in ("append", "pop"):
            self.refuse(node, "its reverse sweep keeps a list of values whose length is "
                        "known only while the loop runs",
                        "write the loop as `for i in range(n)` with n known before it")
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
                func.value.id == "np":
            name = func.attr
            if name in KEPT:
                return node
            if MATH.get(name):
                node.func = _attr(f"math.{MATH[name]}")
                return node
            if name in ("abs", "absolute") and len(node.args) == 1:
                node.func = ast.Name("abs", ast.Load())
                return node
            if name == "shape" and len(node.args) == 1:
                return ast.Attribute(node.args[0], "shape", ast.Load())   # a tuple, no array
            if name == "square" and len(node.args) == 1:
                return ast.BinOp(node.args[0], ast.Mult(), node.args[0])
            if name in ("maximum", "minimum", "fmax", "fmin") and len(node.args) == 2:
                node.func = _attr(f"rtd.{name}")      # NumPy's NaN rules, on scalars
                return node
            if name in ("zeros", "ones", "empty", "full"):
                self.refuse(node, f"np.{name} makes an array whose length is known only from "
                            f"the data, while the kernel runs",
                            "give it a length known when the kernel is built (a constant, or "
                            "an argument's shape such as x.shape[0]; 1-d arrays become "
                            "per-thread arrays), or pass the array in as an argument")
            self.refuse(node, f"it calls np.{name}, which needs arrays a thread would "
                        f"allocate (only arrays of small static length become scalars)",
                        "write it with scalars and loops, with the arrays as arguments")
        return node


def _empty_list(node):
    """Whether ``node`` is ``name = []``."""
    return isinstance(node, ast.Assign) and isinstance(node.value, ast.List) and \
        not node.value.elts and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)


def _stack_call(node, method, stacks):
    """The stack of ``node`` when it is ``stack.append(x)`` or ``stack.pop()``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr == method and isinstance(node.func.value, ast.Name) and \
            node.func.value.id in stacks and len(node.args) == (method == "append") and \
            not node.keywords:
        return node.func.value.id
    return None


def _list_stacks(function, returned=True):
    """The lists of ``function`` that are stacks -- created empty, then only
    pushed (``s.append(x)`` statements) and popped (``x = s.pop()``), or
    returned (``returned``: a forward function's, to its reverse sweep), or
    parameters only popped (that reverse sweep's) -- each with a fresh name
    for its count."""
    created = {n.targets[0].id for n in ast.walk(function) if _empty_list(n)}
    # a reverse sweep's stack given by the forward function (popped only)
    created |= {a.arg for a in function.args.args}
    allowed = set()
    for n in ast.walk(function):
        if _empty_list(n):
            allowed.add(id(n.targets[0]))
        elif returned and isinstance(n, ast.Return) and isinstance(n.value, ast.Tuple):
            # a forward function's stack, returned to its reverse sweep (not the entry's)
            allowed |= {id(e) for e in n.value.elts if isinstance(e, ast.Name)}
        elif isinstance(n, ast.Expr) and _stack_call(n.value, "append", created):
            allowed.add(id(n.value.func.value))
        elif isinstance(n, ast.Assign) and len(n.targets) == 1 and \
                _stack_call(n.value, "pop", created):
            allowed.add(id(n.value.func.value))
    used = {n.id for n in ast.walk(function) if isinstance(n, ast.Name)}
    stacks = {}
    params = {a.arg for a in function.args.args}
    for name in sorted(created):
        uses = [n for n in ast.walk(function) if isinstance(n, ast.Name) and n.id == name]
        if name in params and not any(_stack_call(n.value, "pop", {name}) for n in
                                      ast.walk(function) if isinstance(n, ast.Assign)):
            continue
        if all(id(n) in allowed for n in uses):
            count = f"{name}_len"
            while count in used:
                count += "_"
            stacks[name] = count
            used.add(count)
    return stacks


def _tape_params(functions):
    """The functions returning stacks (slices of the tape, which stay taken
    until the reverse sweep: they return their ``tape_top`` too), and, for
    each function, its parameters given such stacks (the reverse sweep's,
    passed on by the caller).  A stack may pass through several functions
    (a forward function returning its callee's stacks)."""
    held = {name: {n.targets[0].id for n in ast.walk(f) if _empty_list(n) or (
        isinstance(n, ast.Assign) and len(n.targets) == 1 and
        isinstance(n.targets[0], ast.Name) and _is_call(n.value, "rt.float_stack"))}
        for name, f in functions.items()}
    returned, params = {}, {}
    while True:
        before = (sum(map(len, held.values())), sum(map(len, returned.values())),
                  sum(map(len, params.values())))
        for name, f in functions.items():
            held[name] |= params.get(name, set())
            for n in ast.walk(f):
                if isinstance(n, ast.Return) and isinstance(n.value, ast.Tuple):
                    returned[name] = {k for k, e in enumerate(n.value.elts)
                                      if isinstance(e, ast.Name) and e.id in held[name]}
                if isinstance(n, ast.Assign) and len(n.targets) == 1 and \
                        isinstance(n.targets[0], ast.Tuple) and isinstance(n.value, ast.Call) \
                        and isinstance(n.value.func, ast.Name):
                    elts = n.targets[0].elts
                    held[name] |= {elts[k].id for k in returned.get(n.value.func.id, ())
                                   if k < len(elts) and isinstance(elts[k], ast.Name)}
            for n in ast.walk(f):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and \
                        n.func.id in functions:
                    callee = [a.arg for a in functions[n.func.id].args.args]
                    params.setdefault(n.func.id, set()).update(
                        p for p, a in zip(callee, n.args)
                        if isinstance(a, ast.Name) and a.id in held[name])
        if before == (sum(map(len, held.values())), sum(map(len, returned.values())),
                      sum(map(len, params.values()))):
            return {name for name, slots in returned.items() if slots}, params


def _fresh(name, used):
    """``name``, or with underscores after it, not in ``used`` (then added)."""
    while name in used:
        name += "_"
    used.add(name)
    return name


def _load(target):
    """A copy of an assignment target, read."""
    node = ast.parse(ast.unparse(target), mode="eval").body
    return node


def _is_call(node, dotted):
    return isinstance(node, ast.Call) and ast.unparse(node.func) == dotted


def _attr(dotted):
    return ast.parse(dotted, mode="eval").body


_COMMENT = re.compile(r"^\s*# (?:adjoint of: |restore: )?(.*?)  \[line (\d+)\]$")


def _user_line(lines, lineno):
    for k in range(min(lineno, len(lines)) - 1, -1, -1):
        m = _COMMENT.match(lines[k])
        if m:
            return m.group(1), int(m.group(2))
    return None, None


def _late_pushes(tree):
    """Pushes of loop-carried arrays moved to where the iteration is done with them.

    The CPU sweep pushes a carried array at the top of the loop body, by
    reference: what it pops is the array as the later writes left it, and
    the restores of those writes, run in reverse, give each adjoint the
    values of its own statement.  A thread's tape holds values, so a push at
    the top would keep the values from before the body's writes.  A carried
    array the body writes into is pushed instead just before the body
    rebinds it (or at the end of the body), after its writes: the restores
    then give the same values as on the CPU.
    """
    for loop in ast.walk(tree):
        if not isinstance(loop, (ast.For, ast.While)):
            continue
        body = loop.body
        k = 0
        while k < len(body) and isinstance(body[k], ast.Expr) and \
                _appended(body[k].value) is not None:
            k += 1
        for push in list(body[:k]):
            name = push.value.args[0]
            if not isinstance(name, ast.Name):
                continue
            rest = body[body.index(push) + 1:]
            if not any(isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
                       and t.value.id == name.id for s in rest for n in ast.walk(s)
                       if isinstance(n, (ast.Assign, ast.AugAssign))
                       for t in (n.targets if isinstance(n, ast.Assign) else [n.target])):
                continue
            body.remove(push)
            at = next((j for j, s in enumerate(body) if isinstance(s, ast.Assign) and
                       any(isinstance(t, ast.Name) and t.id == name.id for t in s.targets)),
                      len(body))
            body.insert(at, push)
    return tree


def device_source(source, entry, arrays=None, shapes=None, floats="float64", float_args=()):
    """The generated per-example module rewritten as device code, and whether
    its entry takes a tape.  ``arrays``: the entry's array arguments and
    their ranks; ``shapes``: their shapes; ``floats``: the dtype of the
    per-thread arrays (see :mod:`s2s_ad.api.cuda_local`); ``float_args``: the
    entry's float arguments (for float32 constants, :mod:`s2s_ad.api.cuda_float32`)."""
    tree = _late_pushes(ast.parse(source))
    rewrite = _DeviceRewrite(source)
    rewrite.entry, rewrite.arrays = entry, dict(arrays or {})
    rewrite.local, rewrite.floats = StaticShapes(tree, entry, dict(shapes or {})), floats
    rewrite.nested = "rt.unit_like(" in source       # transforms written inside it
    rewrite.outputs, rewrite.returned = {}, {}
    m = re.search(r"\(([^()]*):\d+\)\.$", source.split("\n", 1)[0])
    rewrite.filename = m.group(1) if m else None
    tree = rewrite.visit(tree)
    if floats == "float32":
        tree = float32_constants(tree, entry, [a for a in float_args if a not in rewrite.arrays],
                                 [a for a in float_args if a in rewrite.arrays])
    body = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            node.decorator_list = [_attr("cuda.jit(device=True)")]
            body.append(node)
    head = [line for line in source.split("\n")[:3] if line.startswith("#")]
    text = "\n\n\n".join(ast.unparse(f) for f in body)
    text = _with_comments(text, source)
    return ("\n".join(head) + "\n# Device functions: numba.cuda.jit(device=True).\n"
            "import math\n\nimport numpy as np\nfrom numba import cuda\n\n"
            "from s2s_ad import runtime as rt\nfrom s2s_ad.runtime import device as rtd\n\n\n"
            + text + "\n"), entry in rewrite.taped, {
                path: name for name in rewrite.outputs
                for path, returned in rewrite.returned.items() if returned == name}


def _with_comments(text, source):
    """The user's-line comments of ``source`` put back before the statements
    they introduce (``ast.unparse`` drops comments)."""
    original = source.split("\n")
    comments, pending = {}, []
    for line in original:
        stripped = line.strip()
        if stripped.startswith("#") and _COMMENT.match(line):
            pending.append(stripped)
        elif stripped and pending:
            comments.setdefault(_key(stripped), []).append(pending)
            pending = []
    out = []
    for line in text.split("\n"):
        stripped = line.strip()
        queue = comments.get(_key(stripped))
        if queue:
            indent = line[:len(line) - len(line.lstrip())]
            out += [indent + c for c in queue.pop(0)]
        out.append(line)
    return "\n".join(out)


def _key(line):
    """A statement's text, normalised across the rewrite (stack and call changes)."""
    return re.sub(r"\W", "", line.split("=")[0] if "rt.float_stack" in line else line)[:60]
