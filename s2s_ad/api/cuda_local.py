"""Arrays of static shape in per-example device code (``target="cuda"``).

The transforms written inside a per-example function (``ad.grad(f)(x)``,
``ad.hvp``, ``ad.jacrev``, ``ad.hessian``, ``ad.vjp``; see
``transforms/nested.py``) build their results as small arrays: the unit
tangents ``rt.unit_like(x, j)``, the Jacobian storage ``rt.jac_zeros(out,
x)`` filled column by column, the argument packed again with
``np.array((x_0, x_1, ...))``.  Their shapes follow from the shapes of the
arguments, which are static once ``scalarize`` split the small arrays into
scalars.  :class:`StaticShapes` finds them, function by function, from the
entry's arguments down the calls; :func:`rewrite_assign` turns each into a
``cuda.local.array`` of that shape (per-thread memory, nothing allocated on
the heap).

A device function cannot return its own local array (its frame is gone
after the return): a function returning an array of static shape takes one
more argument per such result (``ret0``, ...), an array the caller
allocates, copies its result into it and returns that
(:func:`returned_slots`).  The entry writes such a result straight into
the kernel's output row for it.

A local array is one buffer per thread, reused each time its statement
runs: one created inside a loop must be used within the iteration, so an
array assigned to another name inside a loop (carried to the next
iteration) is refused.
"""
import ast


def _dotted(node):
    return ast.unparse(node.func) if isinstance(node, ast.Call) else None


def _size(shape):
    n = 1
    for k in shape:
        n *= k
    return n


class StaticShapes:
    """The static array shapes of each function of a generated module.

    ``shapes[f]``: name -> shape of the arrays of static shape ``f`` creates
    or receives; ``created[f]``: those it creates (local arrays, and the
    buffers it gives the functions it calls for their results), with the
    loop depth of their statement; ``returns[f]``: (whether ``f`` returns a
    tuple, the shape of each slot or of the one value; ``()`` a scalar);
    ``problem``: (function, why) when a function is called with arrays of
    different shapes (it has one set of local arrays).
    """

    def __init__(self, module, entry, entry_shapes):
        self.functions = {f.name: f for f in module.body if isinstance(f, ast.FunctionDef)}
        self.shapes, self.created, self.returns, self.params = {}, {}, {}, {}
        self.globals = dict(entry_shapes)       # the entry's array arguments (global memory)
        self.problem = None
        if entry in self.functions:
            self.run(entry, {p: s for p, s in entry_shapes.items()})
        self.shape_only = {f: _shape_only(fn) for f, fn in self.functions.items()}

    def run(self, name, param_shapes):
        """Analyse ``name`` for arguments of ``param_shapes`` (once per function)."""
        key = tuple(sorted(param_shapes.items()))
        if name in self.params:
            if self.params[name] != key and self.problem is None:
                self.problem = (self.functions[name], f"{name} is called with arrays of "
                                f"different shapes")
            return self.returns.get(name)
        self.params[name] = key
        fn = self.functions[name]
        shapes = dict(param_shapes)
        self.shapes[name], self.created[name] = shapes, {}
        self.returns[name] = None
        self._body(name, fn.body, shapes, 0)
        return self.returns[name]

    def _body(self, name, body, shapes, depth):
        for stmt in body:
            if isinstance(stmt, (ast.For, ast.While)):
                self._body(name, stmt.body, shapes, depth + 1)
                self._body(name, stmt.orelse, shapes, depth + 1)
            elif isinstance(stmt, ast.If):
                self._body(name, stmt.body, shapes, depth)
                self._body(name, stmt.orelse, shapes, depth)
            elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                self._assign(name, stmt, shapes, depth)
            elif isinstance(stmt, ast.Return) and stmt.value is not None:
                value = stmt.value
                if isinstance(value, ast.Tuple):
                    self.returns[name] = (True, tuple(self._shape(name, v, shapes) or ()
                                                      for v in value.elts))
                else:
                    self.returns[name] = (False, self._shape(name, value, shapes) or ())

    def _assign(self, name, stmt, shapes, depth):
        target, value = stmt.targets[0], stmt.value
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
                value.func.id in self.functions:
            callee = self.functions[value.func.id]
            params = [a.arg for a in callee.args.args]
            given = {p: shapes[a.id] for p, a in zip(params, value.args)
                     if isinstance(a, ast.Name) and a.id in shapes}
            out = self.run(value.func.id, given)
            names = target.elts if isinstance(target, ast.Tuple) else [target]
            slots = out[1] if out and out[0] else [out[1]] if out else []
            if len(slots) == len(names):
                for t, s in zip(names, slots):
                    if isinstance(t, ast.Name) and s:
                        shapes[t.id] = s
                        self.created[name][t.id] = depth     # the caller's buffer for it
            return
        if not isinstance(target, ast.Name):
            return
        shape = self._shape(name, value, shapes)
        if shape:
            shapes[target.id] = shape
            if not isinstance(value, ast.Name) and not _is_view(value):
                self.created[name][target.id] = depth
        elif target.id in shapes and target.id not in self.globals:
            shapes.pop(target.id)

    def _shape(self, name, node, shapes):
        """The static shape of ``node`` (None when a scalar or unknown)."""
        def of(n):
            return shapes.get(n.id) if isinstance(n, ast.Name) else None

        def size(n):
            s = of(n)
            return _size(s) if s else 1
        if isinstance(node, ast.Name):
            return of(node)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
            return of(node.operand)
        what = _dotted(node)
        if what == "np.array" and len(node.args) == 1 and isinstance(node.args[0], ast.Tuple) \
                and not node.keywords and all(of(e) is None for e in node.args[0].elts):
            return (len(node.args[0].elts),)
        if what in ("rt.grad_zeros", "rt.jac_zeros") and len(node.args) == 2:
            return (size(node.args[0]), size(node.args[1]))
        if what == "rt.flat" and node.args and len(of(node.args[0]) or ()) == 1:
            return of(node.args[0])
        if what in ("rt.zeros_like", "rt.unit_like") and node.args:
            return of(node.args[0])
        if what == "rt.broadcast_like" and len(node.args) == 2:
            return of(node.args[0]) or of(node.args[1]) if of(node.args[0]) or \
                of(node.args[1]) else None
        if what == "rt.jac_shape" and len(node.args) == 3:
            shape = (of(node.args[1]) or ()) + (of(node.args[2]) or ())
            return shape or None
        return None


#: Operands of runtime calls that read only their operand's shape.
SHAPE_OPERANDS = {"rt.grad_zeros": (0, 1), "rt.jac_zeros": (0, 1), "rt.unit_like": (0,),
                  "rt.flat_size": (0,), "rt.jac_shape": (1, 2), "rt.zeros_like": (0,)}


def _shape_only(function):
    """The arrays ``np.array((x_0, x_1, ...))`` of ``function`` read only for
    their shape (the arguments packed again for the nested transforms'
    storage): on the device the shape is a constant and they are not built."""
    packed = {n.targets[0].id for n in ast.walk(function) if isinstance(n, ast.Assign)
              and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
              and _dotted(n.value) == "np.array"}
    allowed = set()
    for n in ast.walk(function):
        operands = SHAPE_OPERANDS.get(_dotted(n), ())
        for k in operands:
            if k < len(n.args) and isinstance(n.args[k], ast.Name):
                allowed.add(id(n.args[k]))
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and \
                isinstance(n.targets[0], ast.Name) and n.targets[0].id in packed:
            allowed.add(id(n.targets[0]))
    return {name for name in packed if all(
        id(n) in allowed for n in ast.walk(function) if isinstance(n, ast.Name) and n.id == name)}


def _is_view(node):
    """Whether ``node`` reads an array in place (no storage of its own)."""
    return _dotted(node) in ("rt.jac_shape", "rt.broadcast_like", "rt.flat")


#: Most elements of one local array (per-thread memory is small and slow past
#: the registers): larger arrays are an error naming the user's line.
LOCAL_LIMIT = 1024


def array_slots(shapes, function):
    """(slot index, or None for a single value; shape) of each array of static
    shape ``function`` returns."""
    out = shapes.returns.get(function)
    if not out:
        return []
    is_tuple, slots = out
    if is_tuple:
        return [(k, s) for k, s in enumerate(slots) if s]
    return [(None, slots)] if slots else []


def _stmts(text, node):
    tree = ast.parse(text).body
    for stmt in tree:
        for n in ast.walk(stmt):
            ast.copy_location(n, node)
    return tree


def rewrite_assign(rw, node):
    """``node`` rewritten when it creates or reshapes an array of static shape
    (statements), else None.  ``rw``: the device rewrite (its ``local``
    analysis, ``function``, ``floats``, ``refuse`` and ``visit``)."""
    sh, fn = rw.local, rw.function
    shapes = sh.shapes.get(fn, {})
    if len(node.targets) != 1:
        return None
    target, value = node.targets[0], node.value

    def of_(n):
        return shapes.get(n.id, ()) if isinstance(n, ast.Name) else ()
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
            value.func.id in sh.functions:
        slots = array_slots(sh, value.func.id)
        if not slots:
            return None
        names = target.elts if isinstance(target, ast.Tuple) else [target]
        node = rw.generic_visit(node)
        allocs = []
        for k, shape in slots:
            name = names[0 if k is None else k].id
            allocs += _alloc(rw, node, name, shape)
            node.value.args.append(ast.Name(name, ast.Load()))
        return allocs + [node]
    if isinstance(target, ast.Subscript) and isinstance(value, ast.Name) and of_(value):
        # a column of Jacobian storage: copied element by element (nothing allocated)
        return _stmts(f"rtd.copy_into({ast.unparse(rw.visit(target))}, {value.id}, 1.0)", node)
    if not isinstance(target, ast.Name):
        return None
    name, what = target.id, _dotted(value)

    def of(n):
        return shapes.get(n.id, ()) if isinstance(n, ast.Name) else ()
    if isinstance(value, ast.Name):
        if sh.created.get(fn, {}).get(value.id, 0) > 0:
            rw.refuse(node, f"the array {value.id}, made inside a loop, is kept past its "
                      f"iteration (a thread has one buffer for it)",
                      "write the loop with scalars")
        return None
    if what == "rt.flat_size" and isinstance(value.args[0], ast.Name) and \
            value.args[0].id in shapes:
        return [ast.Assign([target], ast.Constant(_size(of(value.args[0]))),
                           lineno=node.lineno)]
    if what == "rt.sum" and len(value.args) == 1 and not value.keywords and \
            isinstance(value.args[0], ast.Name) and value.args[0].id not in shapes:
        return [ast.Assign([target], value.args[0], lineno=node.lineno)]   # of a scalar
    if what == "rt.flat" and len(of(value.args[0])) <= 1:
        return [ast.Assign([target], value.args[0], lineno=node.lineno)]   # already flat
    if what == "rt.jac_shape":
        J, out, x = value.args
        view = {(0, 0): "{J}[0, 0]", (0, 1): "{J}[0]", (1, 0): "{J}[:, 0]",
                (1, 1): "{J}"}.get((len(of(out)), len(of(x))))
        if view is None:
            rw.refuse(node, "a Jacobian of arrays of more than one dimension is kept whole",
                      "differentiate 1-d arrays or scalars")
        return _stmts(f"{name} = " + view.format(J=ast.unparse(J)), node)
    shape = sh._shape(fn, value, shapes)
    if not shape:
        return None
    if what == "rt.broadcast_like":
        t, x = value.args
        if of(t) == shape:
            return [ast.Assign([target], t, lineno=node.lineno)]
        return _alloc(rw, node, name, shape) + _stmts(
            f"rtd.fill({name}, {ast.unparse(rw.visit(t))})", node)
    if isinstance(value, ast.UnaryOp):
        sign = "-1.0" if isinstance(value.op, ast.USub) else "1.0"
        return _alloc(rw, node, name, shape) + _stmts(
            f"rtd.copy_into({name}, {value.operand.id}, {sign})", node)
    if what == "np.array":
        if name in sh.shape_only.get(fn, ()):
            return []                     # read for its shape only, a constant here
        return _alloc(rw, node, name, shape) + [
            ast.Assign([ast.Subscript(ast.Name(name, ast.Load()), ast.Constant(k), ast.Store())],
                       rw.visit(e), lineno=node.lineno)
            for k, e in enumerate(value.args[0].elts)]
    if what in ("rt.grad_zeros", "rt.jac_zeros", "rt.zeros_like"):
        return _alloc(rw, node, name, shape) + _stmts(f"rtd.fill({name}, 0.0)", node)
    if what == "rt.unit_like":
        if len(shape) != 1:
            rw.refuse(node, "a unit tangent of a 2-d array", "differentiate 1-d arrays")
        return _alloc(rw, node, name, shape) + _stmts(
            f"rtd.fill({name}, 0.0)\n{name}[{ast.unparse(rw.visit(value.args[1]))}] = 1.0",
            node)
    return None


def _alloc(rw, node, name, shape):
    if _size(shape) > LOCAL_LIMIT:
        rw.refuse(node, f"it keeps an array of shape {shape} per thread (more than "
                  f"{LOCAL_LIMIT} elements)", "differentiate fewer elements per example")
    return _stmts(f"{name} = cuda.local.array({shape!r}, np.{rw.floats})", node)


def rewrite_return(rw, node, names):
    """The copies of the arrays of static shape a device function returns into
    the arrays its caller gave for them (``names``, one per array slot)."""
    slots = array_slots(rw.local, rw.function)
    copies = []
    for (k, _), ret in zip(slots, names):
        value = node.value if k is None else node.value.elts[k]
        copies += _stmts(f"rtd.copy_into({ret}, {ast.unparse(value)}, 1.0)", node)
        if k is None:
            node.value = ast.Name(ret, ast.Load())
        else:
            node.value.elts[k] = ast.Name(ret, ast.Load())
    return copies + [node]
