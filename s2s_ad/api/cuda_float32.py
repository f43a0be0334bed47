"""float32 end to end in device code (``target="cuda"`` with float32 inputs).

Numba types a Python float constant as float64 and ``float32 * 2`` as
float64 (NumPy's rules), so generated code such as ``0.5 * h`` or ``2 * x``
would compute in float64 even when every input is float32 -- slow on GPUs,
whose float64 units are few.  When a kernel's floats are float32, the
device module is rewritten so that such constants are float32:

* every float constant becomes ``np.float32(c)``;
* an integer constant becomes ``np.float32(c)`` where it is an operand of
  arithmetic whose other operand is known to be a float (an integer
  exponent stays: ``x ** 2`` is float32 already).

"Known to be a float" is a small forward analysis of the A-normal form,
across the module's functions: float arguments of the entry, float
constants, ``math`` functions, elements of float arrays (arguments, tapes,
``cuda.local.array``), arithmetic with a float, and what functions return
from those.  A name it cannot classify is left alone, so an integer (an
index) is never turned into a float; at worst an operation stays float64.
"""
import ast

#: ``math`` functions whose result is not a float in Numba.
_NOT_FLOAT = {"floor", "ceil", "isnan", "isinf", "isfinite", "trunc"}


def _const(value):
    return ast.Call(ast.parse("np.float32", mode="eval").body, [ast.Constant(value)], [])


class _Floats:
    """The names known to hold floats (``scalars``) and float arrays
    (``arrays``) in each function."""

    def __init__(self, module, entry, float_params, float_arrays):
        self.functions = {f.name: f for f in module.body if isinstance(f, ast.FunctionDef)}
        self.scalars = {f: set() for f in self.functions}
        self.arrays = {f: set() for f in self.functions}
        self.returns = {f: {} for f in self.functions}     # slot -> "scalar" / "array"
        if entry in self.functions:
            self.scalars[entry] |= set(float_params)
            self.arrays[entry] |= set(float_arrays)
        for _ in range(8):                      # to a fixed point (call depth is small)
            before = self._state()
            for name, fn in self.functions.items():
                self._function(name, fn)
            if self._state() == before:
                break

    def _state(self):
        return (sum(map(len, self.scalars.values())), sum(map(len, self.arrays.values())),
                sum(map(len, self.returns.values())))

    def kind(self, fn, node):
        """"scalar", "array" or None (not known to be a float)."""
        scalars, arrays = self.scalars[fn], self.arrays[fn]
        if isinstance(node, ast.Constant):
            return "scalar" if isinstance(node.value, float) else None
        if isinstance(node, ast.Name):
            return "scalar" if node.id in scalars else "array" if node.id in arrays else None
        if isinstance(node, ast.Subscript):
            base = self.kind(fn, node.value)
            return "scalar" if base == "array" else None
        if isinstance(node, ast.BinOp):
            kinds = {self.kind(fn, node.left), self.kind(fn, node.right)}
            return "scalar" if "scalar" in kinds else None
        if isinstance(node, ast.UnaryOp) and not isinstance(node.op, ast.Not):
            return self.kind(fn, node.operand)
        if isinstance(node, ast.IfExp):
            kinds = {self.kind(fn, node.body), self.kind(fn, node.orelse)}
            return "scalar" if "scalar" in kinds else None
        if isinstance(node, ast.Call):
            func = ast.unparse(node.func)
            if func.startswith("math.") and func[5:] not in _NOT_FLOAT:
                return "scalar"
            if func in ("np.float32", "np.float64"):
                return "scalar"
            if func == "cuda.local.array":
                return "array"
            if func in ("abs", "max", "min") or func.startswith("rt."):
                kinds = {self.kind(fn, a) for a in node.args}
                return "scalar" if "scalar" in kinds and func != "rt.flat_size" else None
            if func == "rtd.pop_as" and len(node.args) == 4:
                return self.kind(fn, node.args[2])
        return None

    def _function(self, name, fn):
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                self._assign(name, node.targets[0], node.value)
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and \
                    self.kind(name, node.value) == "scalar":
                self.scalars[name].add(node.target.id)
            elif isinstance(node, ast.Return) and node.value is not None:
                values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
                for k, v in enumerate(values):
                    kind = self.kind(name, v)
                    if kind:
                        self.returns[name][k if isinstance(node.value, ast.Tuple) else None] \
                            = kind
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                    node.func.id in self.functions:
                callee = self.functions[node.func.id]
                for param, arg in zip(callee.args.args, node.args):
                    kind = self.kind(name, arg)
                    if kind == "scalar":
                        self.scalars[node.func.id].add(param.arg)
                    elif kind == "array":
                        self.arrays[node.func.id].add(param.arg)

    def _assign(self, name, target, value):
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
                value.func.id in self.functions:
            slots = self.returns[value.func.id]
            targets = target.elts if isinstance(target, ast.Tuple) else [target]
            for k, t in enumerate(targets):
                kind = slots.get(k if isinstance(target, ast.Tuple) else None)
                if isinstance(t, ast.Name) and kind:
                    (self.scalars if kind == "scalar" else self.arrays)[name].add(t.id)
            return
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Call) and \
                ast.unparse(value.func) in ("rtd.tape_take", "rtd.list_take"):
            self.arrays[name].add(target.elts[0].id)          # a stack: a slice of the tape
            return
        if isinstance(target, ast.Name):
            kind = self.kind(name, value)
            if kind:
                (self.scalars if kind == "scalar" else self.arrays)[name].add(target.id)


class _Cast(ast.NodeTransformer):
    def __init__(self, floats):
        self.floats = floats
        self.fn = None

    def visit_FunctionDef(self, node):
        self.fn = node.name
        self.generic_visit(node)
        return node

    def visit_Constant(self, node):
        if isinstance(node.value, float):
            return _const(node.value)
        return node

    def visit_BinOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Pow):
            return node                  # float32 ** int is float32
        for side, other in (("left", node.right), ("right", node.left)):
            value = getattr(node, side)
            if isinstance(value, ast.Constant) and type(value.value) is int and \
                    self.floats.kind(self.fn, other) == "scalar":
                setattr(node, side, _const(float(value.value)))
        return node

    def visit_Call(self, node):
        if ast.unparse(node.func) == "np.float32":
            return node                  # already cast
        self.generic_visit(node)
        return node


def float32_constants(tree, entry, float_params, float_arrays):
    """``tree`` (the device module) with its constants float32 where they meet
    floats (see the module docstring)."""
    floats = _Floats(tree, entry, float_params, float_arrays)
    return _Cast(floats).visit(tree)
