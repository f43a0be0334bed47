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
runs: an array made inside a loop and assigned to another name (carried to
the next iteration, or kept past the loop) is copied into that name's own
buffer.  Arrays the per-example code makes itself (``np.zeros(n)``,
elementwise arithmetic) are lowered by :mod:`s2s_ad.api.cuda_arrays`.
"""
import ast

from .cuda_arrays import (
    ELEMENTWISE,
    elementwise_shape,
    lower_array,
    lower_augassign,
    lower_scalar,
    parsed_at,
    pop_array,
    push_array,
    refuse_array_call,
    refuse_unknown,
    same_array,
    slice_shape,
)


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
        self.ints = {}          # function -> name -> a static int or shape tuple (np.shape(x))
        self.stack_shapes = {}  # function -> list stack -> shape of the arrays pushed on it
        self.stack_returns = {}  # function -> slot of its returned tuple -> stack's shape
        #: function -> names that may hold arrays of unknown shape (never taken for scalars)
        self.opaque, self.opaque_returns = {}, {}
        self.problem = None
        if entry in self.functions:
            self.run(entry, {p: s for p, s in entry_shapes.items()})
        self.shape_only = {f: _shape_only(fn) for f, fn in self.functions.items()}

    def run(self, name, param_shapes, opaque=(), stacks=None):
        """Analyse ``name`` for arguments of ``param_shapes`` (once per function);
        ``opaque``: its parameters given arrays of unknown shape; ``stacks``:
        its parameters given stacks of arrays (a forward function's, for its
        reverse sweep), with the shape of the arrays on them."""
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
        self.ints[name], self.stack_shapes[name] = {}, dict(stacks or {})
        self.stack_returns[name] = {}
        self.opaque[name], self.opaque_returns[name] = set(opaque), ()
        self.returns[name] = None
        self._body(name, fn.body, shapes, 0)
        return self.returns[name]

    def _body(self, name, body, shapes, depth):
        for stmt in body:
            if isinstance(stmt, (ast.For, ast.While)):
                for _ in range(2):      # twice: values carried from the previous iteration
                    self._body(name, stmt.body, shapes, depth + 1)
                self._body(name, stmt.orelse, shapes, depth + 1)
            elif isinstance(stmt, ast.Expr) and _appended(stmt.value):
                stack = _appended(stmt.value)
                shape = self._shape(name, stmt.value.args[0], shapes)
                if shape and self.stack_shapes[name].get(stack, shape) == shape and \
                        stack not in self.opaque[name]:
                    self.stack_shapes[name][stack] = shape
                elif shape or self.is_opaque(name, stmt.value.args[0]):
                    # arrays of different shapes, or of one not known, on one
                    # stack (a loop-carried array whose length changes)
                    self.stack_shapes[name].pop(stack, None)
                    self.opaque[name].add(stack)
            elif isinstance(stmt, ast.If):
                self._body(name, stmt.body, shapes, depth)
                self._body(name, stmt.orelse, shapes, depth)
            elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                self._assign(name, stmt, shapes, depth)
            elif isinstance(stmt, ast.Return) and stmt.value is not None:
                value = stmt.value
                if isinstance(value, ast.Tuple):
                    self.stack_returns[name] = {
                        k: self.stack_shapes[name][v.id] for k, v in enumerate(value.elts)
                        if isinstance(v, ast.Name) and v.id in self.stack_shapes[name]}
                    self.returns[name] = (True, tuple(self._shape(name, v, shapes) or ()
                                                      for v in value.elts))
                    self.opaque_returns[name] = tuple(self.is_opaque(name, v)
                                                      for v in value.elts)
                else:
                    self.returns[name] = (False, self._shape(name, value, shapes) or ())
                    self.opaque_returns[name] = (self.is_opaque(name, value),)

    def _assign(self, name, stmt, shapes, depth):
        target, value = stmt.targets[0], stmt.value
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
                value.func.id in self.functions:
            callee = self.functions[value.func.id]
            params = [a.arg for a in callee.args.args]
            given = {p: shapes[a.id] for p, a in zip(params, value.args)
                     if isinstance(a, ast.Name) and a.id in shapes}
            stacks = {p: self.stack_shapes[name][a.id] for p, a in zip(params, value.args)
                      if isinstance(a, ast.Name) and a.id in self.stack_shapes[name]}
            out = self.run(value.func.id, given, {p for p, a in zip(params, value.args)
                                                  if self.is_opaque(name, a)}, stacks)
            names = target.elts if isinstance(target, ast.Tuple) else [target]
            for k, shape in self.stack_returns.get(value.func.id, {}).items():
                if k < len(names) and isinstance(names[k], ast.Name):
                    self.stack_shapes[name][names[k].id] = shape
            slots = out[1] if out and out[0] else [out[1]] if out else []
            unknown = self.opaque_returns.get(value.func.id, ())
            for k, t in enumerate(names):
                if isinstance(t, ast.Name):
                    hidden = len(slots) != len(names) or k >= len(unknown) or unknown[k]
                    (self.opaque[name].add if hidden else self.opaque[name].discard)(t.id)
            if len(slots) == len(names):
                for t, s in zip(names, slots):
                    if isinstance(t, ast.Name) and s:
                        shapes[t.id] = s
                        self.created[name][t.id] = depth     # the caller's buffer for it
            return
        if not isinstance(target, ast.Name):
            return
        value = same_array(value, shapes) or value
        ints = self.ints[name]
        static = self._int(name, value)
        if static is not None:
            ints[target.id] = static
        else:
            ints.pop(target.id, None)
        popped = _popped(value)
        shape = self.stack_shapes[name].get(popped) if popped else \
            self._shape(name, value, shapes)
        hidden = not shape and (self.is_opaque(name, value) or popped in self.opaque[name])
        (self.opaque[name].add if hidden else self.opaque[name].discard)(target.id)
        if shape:
            shapes[target.id] = shape
            if not isinstance(value, ast.Name) and not _is_view(value) or \
                    self.created[name].get(getattr(value, "id", None), 0) > 0:
                # made here, or copied here from an array made inside a loop
                self.created[name][target.id] = depth
        elif target.id in shapes and target.id not in self.globals:
            shapes.pop(target.id)

    def is_opaque(self, name, node):
        """Whether ``node`` may be an array of unknown shape: what a runtime or
        NumPy call this analysis does not know returns, and what is computed
        from it.  Such values are never taken for scalars."""
        opaque, shapes = self.opaque.get(name, set()), self.shapes.get(name, {})
        if isinstance(node, ast.Name):
            return node.id in opaque
        if isinstance(node, (ast.Constant, ast.Attribute)) or \
                self._shape(name, node, shapes):
            return False
        if isinstance(node, ast.Subscript):
            if isinstance(node.slice, ast.Slice):
                return True             # a slice of length not known when the kernel is built
            base = node.value
            return not (isinstance(base, ast.Name) and len(shapes.get(base.id) or ()) == 1) \
                and self.is_opaque(name, base)
        what = _dotted(node)
        if isinstance(node, ast.Call) and what not in _SCALAR_CALLS and \
                not (what in _LIKE_CALLS and len(node.args) >= 2) and \
                not (what or "").startswith("math.") and \
                what not in ("np." + f for f in ELEMENTWISE | _CASTS) and \
                not (isinstance(node.func, ast.Name) and node.func.id in _BUILTINS):
            return True
        if what in _LIKE_CALLS:                 # the shape of their last argument
            return self.is_opaque(name, node.args[-1])
        return any(self.is_opaque(name, c) for c in ast.iter_child_nodes(node)
                   if isinstance(c, ast.expr) and c is not getattr(node, "func", None))

    def _int(self, name, node):
        """The static int (or shape tuple) ``node`` is, else None."""
        ints, shapes = self.ints.get(name, {}), self.shapes.get(name, {})
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.Name):
            return ints.get(node.id)
        if _dotted(node) == "np.shape" and len(node.args) == 1 and \
                isinstance(node.args[0], ast.Name):
            return shapes.get(node.args[0].id)
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            whole = self._int(name, node.value)
            k = node.slice.value
            if isinstance(whole, tuple) and type(k) is int and -len(whole) <= k < len(whole):
                return whole[k]
        if isinstance(node, ast.Tuple):
            parts = [self._int(name, e) for e in node.elts]
            if all(type(p) is int for p in parts):
                return tuple(parts)
        return None

    def _shape(self, name, node, shapes):
        """The static shape of ``node`` (None when a scalar or unknown)."""
        def of(n):
            if isinstance(n, ast.Name):
                return shapes.get(n.id)
            return elementwise_shape(self, name, n, shapes)

        def size(n):
            s = of(n)
            return _size(s) if s else 1
        if isinstance(node, ast.Name):
            return of(node)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)) \
                and isinstance(node.operand, ast.Name):
            return of(node.operand)
        what = _dotted(node)
        if what in ("np.zeros", "np.ones", "np.empty") and len(node.args) == 1 and \
                not node.keywords:                   # float arrays (no dtype=)
            n = self._int(name, node.args[0])
            return (n,) if type(n) is int else n if isinstance(n, tuple) and n else None
        created = elementwise_shape(self, name, node, shapes) or \
            slice_shape(self, name, node, shapes)
        if created:
            return created
        if what == "np.array" and len(node.args) == 1 and isinstance(node.args[0], ast.Tuple) \
                and not node.keywords and all(of(e) is None for e in node.args[0].elts):
            return (len(node.args[0].elts),)
        if what in ("rt.grad_zeros", "rt.jac_zeros") and len(node.args) == 2:
            return (size(node.args[0]), size(node.args[1]))
        if what == "rt.flat" and node.args and len(of(node.args[0]) or ()) == 1:
            return of(node.args[0])
        if what in ("rt.zeros_like", "rt.unit_like") and node.args:
            return of(node.args[0])
        if what in ("np.zeros_like", "np.ones_like", "np.empty_like") and len(node.args) == 1 \
                and not node.keywords:
            return of(node.args[0])
        if what == "rt.broadcast_like" and len(node.args) == 2:
            return of(node.args[0]) or of(node.args[1]) if of(node.args[0]) or \
                of(node.args[1]) else None
        if what == "rt.jac_flat" and len(node.args) == 3:
            return (size(node.args[1]), size(node.args[2]))
        if what == "rt.jac_shape" and len(node.args) == 3:
            shape = (of(node.args[1]) or ()) + (of(node.args[2]) or ())
            return shape or None
        return None


#: Calls returning scalars whatever their operands (whole-array reductions).
_SCALAR_CALLS = {"np.sum", "rt.sum_squares", "np.dot", "np.inner", "rt.sum", "rt.dot",
                 "rt.inner", "np.shape",
                 "rt.float_stack", "rt.flat_size", "len", "rt.pop_as"}
#: Calls returning a value of their last argument's shape.
_LIKE_CALLS = {"rt.like", "rt.zeros_like", "rt.unbroadcast", "rt.sum_grad",
               "rt.sum_grad_kept"}
_CASTS = {"float64", "float32", "int64", "int32", "bool_"}
_BUILTINS = {"int", "float", "abs", "max", "min", "range", "bool", "len"}

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
    return _dotted(node) in ("rt.jac_shape", "rt.broadcast_like", "rt.flat") or \
        isinstance(node, ast.Subscript)


def _appended(node):
    """The list ``s`` of ``s.append(x)``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr == "append" and isinstance(node.func.value, ast.Name) and \
            len(node.args) == 1:
        return node.func.value.id
    return None


def _popped(node):
    """The list ``s`` of ``s.pop()``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr == "pop" and isinstance(node.func.value, ast.Name) and not node.args:
        return node.func.value.id
    return None


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


def _written_into(sh, fn):
    """Names function ``fn`` writes elements of (``a[i] = v``, ``a[i] += v``)."""
    cache = sh.__dict__.setdefault("_written_into", {})
    if fn not in cache:
        cache[fn] = {t.value.id for node in ast.walk(sh.functions[fn])
                     if isinstance(node, (ast.Assign, ast.AugAssign))
                     for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                     if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)}
    return cache[fn]


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
        return parsed_at(f"rtd.copy_into({ast.unparse(rw.visit(target))}, {value.id}, 1.0)", node)
    if not isinstance(target, ast.Name):
        return None
    name, what = target.id, _dotted(value)

    def of(n):
        return shapes.get(n.id, ()) if isinstance(n, ast.Name) else ()
    value = same_array(value, shapes) or value
    if isinstance(value, ast.Name):
        created = sh.created.get(fn, {})
        if of(value) and (created.get(value.id, 0) > 0 or value.id in created and
                          name in _written_into(sh, fn)):
            # made inside a loop, where its buffer is written again each
            # iteration, or copied into a name written into: a thread's tapes
            # hold values, not arrays, so the copy keeps the value the
            # adjoint sweep reads (``u_1 = u`` before a loop writing ``u_1``)
            return _alloc(rw, node, name, of(value)) + parsed_at(
                f"rtd.copy_into({name}, {value.id}, 1.0)", node)
        return [ast.Assign([target], value, lineno=node.lineno)] \
            if value is not node.value else None
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
        return parsed_at(f"{name} = " + view.format(J=ast.unparse(J)), node)
    if what == "rt.jac_flat":
        g, out, x = value.args
        view = {(0, 0): "{J}[0, 0] = {g}", (0, 1): "rtd.copy_into({J}[0], {g}, 1.0)",
                (1, 0): "rtd.copy_into({J}[:, 0], {g}, 1.0)",
                (1, 1): "rtd.copy_into({J}, {g}, 1.0)"}.get((len(of(out)), len(of(x))))
        if view is None:
            rw.refuse(node, "a Jacobian of arrays of more than one dimension is kept whole",
                      "differentiate 1-d arrays or scalars")
        return _alloc(rw, node, name, sh._shape(fn, value, shapes)) + parsed_at(
            view.format(J=name, g=ast.unparse(rw.visit(g))), node)
    refuse_unknown(rw, node)
    reduced = lower_scalar(rw, node)          # np.sum, np.dot of local arrays
    if reduced is not None:
        return reduced
    shape = sh._shape(fn, value, shapes)
    if not shape:
        refuse_array_call(rw, node)
        return None
    if what == "rt.broadcast_like":
        t, x = value.args
        if of(t) == shape:
            return [ast.Assign([target], t, lineno=node.lineno)]
        return _alloc(rw, node, name, shape) + parsed_at(
            f"rtd.fill({name}, {ast.unparse(rw.visit(t))})", node)
    if isinstance(value, ast.UnaryOp) and isinstance(value.operand, ast.Name):
        sign = "-1.0" if isinstance(value.op, ast.USub) else "1.0"
        return _alloc(rw, node, name, shape) + parsed_at(
            f"rtd.copy_into({name}, {value.operand.id}, {sign})", node)
    if what == "np.array":
        if name in sh.shape_only.get(fn, ()):
            return []                     # read for its shape only, a constant here
        return _alloc(rw, node, name, shape) + [
            ast.Assign([ast.Subscript(ast.Name(name, ast.Load()), ast.Constant(k), ast.Store())],
                       rw.visit(e), lineno=node.lineno)
            for k, e in enumerate(value.args[0].elts)]
    if what in ("rt.grad_zeros", "rt.jac_zeros", "rt.zeros_like", "np.zeros_like"):
        return _alloc(rw, node, name, shape) + parsed_at(f"rtd.fill({name}, 0.0)", node)
    if what in ("np.ones_like", "np.empty_like"):
        fill = "1.0" if what == "np.ones_like" else "0.0"
        return _alloc(rw, node, name, shape) + parsed_at(f"rtd.fill({name}, {fill})", node)
    if what == "rt.unit_like":
        if len(shape) != 1:
            rw.refuse(node, "a unit tangent of a 2-d array", "differentiate 1-d arrays")
        return _alloc(rw, node, name, shape) + parsed_at(
            f"rtd.fill({name}, 0.0)\n{name}[{ast.unparse(rw.visit(value.args[1]))}] = 1.0",
            node)
    lowered = lower_array(rw, node, name, shape, lambda n: _alloc(rw, node, n, shape))
    if lowered is None:
        refuse_array_call(rw, node)
    return lowered


def augassign(rw, node):
    """``a += b`` on a local array (statements), else None."""
    return lower_augassign(rw, node)


def push_local(rw, stack, count, value):
    """``stack.append(value)`` of a local array (statements), else None."""
    return push_array(rw, stack, count, value)


def pop_local(rw, node, stack, count):
    """``x = stack.pop()`` of a local array (statements), else None."""
    shape = rw.local.stack_shapes.get(rw.function, {}).get(stack)
    return pop_array(rw, node, stack, count, lambda n: _alloc(rw, node, n, shape))


def _alloc(rw, node, name, shape):
    if _size(shape) > LOCAL_LIMIT:
        rw.refuse(node, f"it keeps an array of shape {shape} per thread (more than "
                  f"{LOCAL_LIMIT} elements)", "differentiate fewer elements per example")
    return parsed_at(f"{name} = cuda.local.array({shape!r}, np.{rw.floats})", node)


def rewrite_return(rw, node, names):
    """The copies of the arrays of static shape a device function returns into
    the arrays its caller gave for them (``names``, one per array slot)."""
    slots = array_slots(rw.local, rw.function)
    copies = []
    shapes = rw.local.shapes.get(rw.function, {})
    for (k, _), ret in zip(slots, names):
        value = node.value if k is None else node.value.elts[k]
        value = same_array(value, shapes) or value      # rt.like(b, x): b itself
        copies += parsed_at(f"rtd.copy_into({ret}, {ast.unparse(value)}, 1.0)", node)
        if k is None:
            node.value = ast.Name(ret, ast.Load())
        else:
            node.value.elts[k] = ast.Name(ret, ast.Load())
    return copies + [node]


class SimulatorCuda:
    """``cuda`` for the device functions under Numba's CUDA simulator.

    The simulator runs each thread of a block as a Python thread and, for
    each device-function call, swaps the function's global ``cuda`` for the
    launch's fake module (which has ``cuda.local``) and back on return.  The
    device functions of one module share their globals, so one thread
    returning puts the real module back while another still runs and then
    finds no ``cuda.local``.  This stand-in, which the simulator does not
    swap, always answers from the running launch's fake module.

    Its ``local.array`` behaves as on a GPU, where a local array is one
    buffer per statement of the thread, not a new array each time the
    statement runs (as in the simulator): each (thread, statement) gets one
    buffer for the launch, filled with NaN when first made, so code that
    kept an array past the next run of its statement reads what that run
    wrote, as a GPU would, and tests under the simulator see it.
    """

    def __getattr__(self, name):
        from numba import cuda
        from numba.cuda.simulator import kernel
        context = kernel._kernel_context
        if name == "local" and context is not None:
            return _ReusedLocal(context)
        return getattr(context if context is not None else cuda, name)


class _ReusedLocal:
    def __init__(self, context):
        self.buffers = context.__dict__.setdefault("_s2s_ad_local", {})

    def array(self, shape, dtype):
        import sys
        import threading

        import numpy as np
        caller = sys._getframe(1)
        key = (threading.get_ident(), caller.f_code, caller.f_lineno)
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        buffer = self.buffers.get(key)
        if buffer is None or buffer.shape != shape:
            buffer = self.buffers[key] = np.empty(shape, dtype)
            if buffer.dtype.kind == "f":
                buffer.fill(np.nan)
        return buffer
