"""Arithmetic on per-thread arrays of static shape (``target="cuda"``).

Per-example code that builds small 1-d arrays -- ``np.zeros(n)`` filled in a
loop, ``y + h * k1`` in an integrator step, a helper returning ``np.zeros(2)``
filled in, and the adjoints the reverse sweep computes for them -- runs on
the device when each array's length is known when the kernel is built (from
the shapes of the example's arguments: ``np.zeros(x.shape[0])`` is static,
``np.zeros(int(x[0]))`` is not).  Each such array is a ``cuda.local.array``
(see :mod:`s2s_ad.api.cuda_local`, which finds the shapes), and the NumPy
that computes it becomes a loop over its elements:

* elementwise expressions (``+ - * / **``, ``np.sin``, ``np.square``, ...,
  scalars broadcast) and the runtime's adjoints of them (``rt.unbroadcast``
  to the same shape, ``rt.times_kept``, ``rt.like``, ``rt.dot_grad_a/b`` of
  a scalar cotangent, ``rt.sum_grad`` of a whole-array sum) write element
  ``k`` of a new local array;
* reductions to a scalar (``np.sum``, ``rt.sum_squares``, ``np.dot`` of 1-d
  arrays, the sum ``rt.unbroadcast`` makes to a scalar) accumulate in a loop;
* ``a += b`` on an array adds in place, element by element;
* an array pushed on a stack the CPU code keeps as a list (a ``while``
  loop's states, an integrator's ``y`` each step) is pushed element by
  element and popped back into a local array.

Each statement has one buffer per thread, reused each time it runs.  An
elementwise statement may overwrite the array it reads (element ``k`` reads
only element ``k``); an array assigned to another name after a loop made
it is copied into that name's own buffer (see ``rewrite_assign``).
"""
import ast
import copy

#: NumPy functions applied element by element (the device rewrite turns each
#: scalar call into ``math`` or a runtime helper).
ELEMENTWISE = {"exp", "log", "sin", "cos", "tan", "tanh", "sinh", "cosh", "sqrt", "log1p",
               "expm1", "arctan", "arcsin", "arccos", "arctanh", "arcsinh", "arccosh",
               "floor", "ceil", "fabs", "arctan2", "hypot", "log10", "log2", "abs",
               "absolute", "square", "maximum", "minimum", "fmax", "fmin"}
_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)


def _dotted(node):
    return ast.unparse(node.func) if isinstance(node, ast.Call) else None


def _combine(shapes):
    """The shape of an elementwise result of operands of ``shapes`` (None: a
    scalar, or operands of different shapes, which are not broadcast here)."""
    arrays = {s for s in shapes if s}
    if len(arrays) != 1:
        return None
    shape = arrays.pop()
    return shape if len(shape) == 1 else None


def _of(sh, fn, node, shapes):
    if isinstance(node, ast.Name):
        return shapes.get(node.id)
    if isinstance(node, ast.Constant):
        return None
    if isinstance(node, ast.Subscript):
        return slice_shape(sh, fn, node, shapes)
    return elementwise_shape(sh, fn, node, shapes)


def _is_slice(node):
    return isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and \
        isinstance(node.slice, ast.Slice) and node.slice.step is None


def slice_shape(sh, fn, node, shapes):
    """The shape of ``x[a:b]`` (a view) for a local 1-d ``x`` and bounds known
    when the kernel is built, else None."""
    whole = _is_slice(node) and shapes.get(node.value.id)
    if not whole or len(whole) != 1:
        return None
    bounds = []
    for b in (node.slice.lower, node.slice.upper):
        value = None if b is None else sh._int(fn, b)
        if b is not None and type(value) is not int:
            return None
        bounds.append(value)
    n = len(range(whole[0])[bounds[0]:bounds[1]])
    return (n,) if n else None


def _parts(node):
    """The operands of an elementwise ``node``, or None when it is not one."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, _OPS):
        return [node.left, node.right]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return [node.operand]
    what = _dotted(node)
    if what and what.startswith("np.") and what[3:] in ELEMENTWISE and not node.keywords:
        return list(node.args)
    if what in ("np.copy", "rt.snapshot", "rt.writable") and len(node.args) == 1:
        return [node.args[0]]
    if what == "rt.times_kept" and len(node.args) >= 2:
        return node.args[:2]
    return None


def elementwise_shape(sh, fn, node, shapes):
    """The static 1-d shape of the array ``node`` computes element by
    element, else None.  ``sh``: the :class:`StaticShapes` analysis."""
    parts = _parts(node)
    if parts is not None:
        if any(sh.is_opaque(fn, p) for p in parts):
            return None          # an operand of unknown shape: not taken for a scalar
        return _combine([_of(sh, fn, p, shapes) for p in parts])
    what = _dotted(node)
    if what in ("rt.unbroadcast", "rt.like") and len(node.args) == 2:
        g, t = (_of(sh, fn, a, shapes) for a in node.args)
        if t and len(t) == 1 and g in (None, t) and not sh.is_opaque(fn, node.args[0]):
            return t                 # the same shape, or a scalar broadcast to it
    if what in ("rt.sum_grad", "rt.sum_grad_kept") and len(node.args) >= 2 and \
            (len(node.args) < 3 or ast.unparse(node.args[2]) == "None"):
        g, a = (_of(sh, fn, x, shapes) for x in node.args[:2])
        if g is None and a and len(a) == 1 and not sh.is_opaque(fn, node.args[0]):
            return a                 # the gradient of a whole-array sum: g everywhere
    if what in ("rt.dot_grad_a", "rt.dot_grad_b") and len(node.args) == 3:
        g, a, b = (_of(sh, fn, x, shapes) for x in node.args)
        if g is None and a and a == b and len(a) == 1 and not sh.is_opaque(fn, node.args[0]):
            return a
    return None


def same_array(node, shapes):
    """The array ``node`` is, unchanged (``rt.unbroadcast(g, t)`` or
    ``rt.like(g, t)`` of an array ``g`` of ``t``'s shape), else None."""
    if _dotted(node) in ("rt.unbroadcast", "rt.like") and len(node.args) == 2 and \
            all(isinstance(a, ast.Name) for a in node.args):
        g, t = node.args
        if shapes.get(g.id) and shapes.get(g.id) == shapes.get(t.id):
            return g
    return None


def element(node, k, shapes):
    """The expression of element ``k`` (a name) of the elementwise ``node``."""
    if isinstance(node, ast.Name):
        if shapes.get(node.id):
            return ast.Subscript(ast.Name(node.id, ast.Load()), ast.Name(k, ast.Load()),
                                 ast.Load())
        return ast.Name(node.id, ast.Load())
    what = _dotted(node)
    if _is_slice(node):
        return ast.Subscript(copy.deepcopy(node), ast.Name(k, ast.Load()), ast.Load())
    if isinstance(node, ast.BinOp):
        return ast.BinOp(element(node.left, k, shapes), node.op, element(node.right, k, shapes))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return ast.UnaryOp(node.op, element(node.operand, k, shapes))
    if what in ("np.copy", "rt.snapshot", "rt.writable", "rt.unbroadcast", "rt.like",
                "rt.sum_grad", "rt.sum_grad_kept"):
        return element(node.args[0], k, shapes)
    if what == "rt.times_kept":
        return ast.BinOp(element(node.args[0], k, shapes), ast.Mult(),
                         element(node.args[1], k, shapes))
    if what in ("rt.dot_grad_a", "rt.dot_grad_b"):
        other = node.args[2] if what == "rt.dot_grad_a" else node.args[1]
        return ast.BinOp(element(node.args[0], k, shapes), ast.Mult(),
                         element(other, k, shapes))
    if isinstance(node, ast.Call) and what.startswith("np."):
        return ast.Call(node.func, [element(a, k, shapes) for a in node.args], [])
    return copy.deepcopy(node)       # a scalar


def _loop(k, n, body, node):
    loop = ast.For(ast.Name(k, ast.Store()), ast.Call(ast.Name("range", ast.Load()),
                                                      [ast.Constant(n)], []),
                   body, [], lineno=node.lineno)
    for n_ in ast.walk(loop):
        ast.copy_location(n_, node)
    return loop


def _index(rw):
    """The element index of the current function's loops (one name: they never nest)."""
    names = rw.__dict__.setdefault("element_index", {})
    if rw.function not in names:
        names[rw.function] = _fresh(rw, "e")
    return names[rw.function]


def _fresh(rw, name):
    while name in rw.used:
        name += "_"
    rw.used.add(name)
    return name


def _mentions(node, name):
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))


def lower_array(rw, node, name, shape, alloc):
    """``name = value`` for a ``value`` of static 1-d ``shape`` (statements),
    else None.  ``alloc(name)``: the statements allocating a local array."""
    value = node.value
    shapes = rw.local.shapes.get(rw.function, {})
    what = _dotted(value)
    if what in ("np.zeros", "np.ones", "np.empty"):
        fill = {"np.zeros": "0.0", "np.ones": "1.0"}.get(what)
        return alloc(name) + (parsed_at(f"rtd.fill({name}, {fill})", node) if fill else [])
    if len(shape) != 1 or elementwise_shape(rw.local, rw.function, value, shapes) != shape:
        return None
    into = _fresh(rw, f"{name}_new") if _mentions(value, name) else name
    k = _index(rw)
    store = ast.Assign([ast.Subscript(ast.Name(into, ast.Load()), ast.Name(k, ast.Load()),
                                      ast.Store())],
                       rw.visit(element(value, k, shapes)), lineno=node.lineno)
    out = alloc(into) + [_loop(k, shape[0], [store], node)]
    if into != name:
        out += parsed_at(f"{name} = {into}", node)
    return out


def refuse_unknown(rw, node):
    """Refuse ``node`` when it computes elementwise with a local array and a
    value whose shape is not known when the kernel is built (what a NumPy
    or runtime call this module does not model returned, e.g. ``np.sort``):
    it could be an array, so it is not taken for a scalar."""
    sh, fn = rw.local, rw.function
    shapes = sh.shapes.get(fn, {})
    parts = _parts(node.value)
    if parts and any(_of(sh, fn, p, shapes) for p in parts):
        for p in parts:
            if sh.is_opaque(fn, p):
                rw.refuse(node, f"it computes with {ast.unparse(p)}, an array whose shape "
                          f"is not known when the kernel is built",
                          "compute it with scalars and loops over arrays of static length")


#: Runtime functions of arrays that make arrays (or need NumPy's) in CPU code:
#: left to them, a GPU thread would allocate (the simulator would run them).
ARRAY_RUNTIME = {"rt.dot", "rt.inner", "rt.matmul", "rt.outer", "rt.dot_grad_a",
                 "rt.dot_grad_b", "rt.matmul_grad_a", "rt.matmul_grad_b", "rt.sum_grad",
                 "rt.sum_grad_kept", "rt.times_kept", "rt.unbroadcast", "rt.sum_squares"}


def refuse_array_call(rw, node):
    """Refuse ``node`` when it calls one of :data:`ARRAY_RUNTIME` on a local or
    argument array and was not lowered (a 2-d array, operands of different
    shapes): a GPU thread would allocate."""
    value = node.value
    shapes = rw.local.shapes.get(rw.function, {})
    if _dotted(value) in ARRAY_RUNTIME:
        for a in value.args:
            if isinstance(a, ast.Name) and shapes.get(a.id):
                rw.refuse(node, f"it computes with the array {a.id} of shape "
                          f"{shapes[a.id]} beyond elementwise arithmetic and sums of 1-d "
                          f"arrays (NumPy would allocate)",
                          "write it with scalars and loops (1-d arrays of static length "
                          "in elementwise arithmetic become per-thread arrays); pass 2-d "
                          "arrays flattened")


def lower_scalar(rw, node):
    """``name = value`` for a scalar ``value`` reduced from local arrays
    (statements), else None."""
    target, value = node.targets[0], node.value
    sh, fn = rw.local, rw.function
    shapes = sh.shapes.get(fn, {})
    what = _dotted(value)
    if not isinstance(target, ast.Name) or what is None:
        return None

    def of(n):
        return _of(sh, fn, n, shapes)
    terms = None
    if what in ("np.sum", "rt.sum") and len(value.args) == 1 and not value.keywords:
        terms = value.args[0]
    elif what == "rt.sum_squares" and len(value.args) == 1 and not value.keywords:
        terms = ast.BinOp(value.args[0], ast.Mult(), value.args[0])
    elif what in ("np.dot", "rt.dot", "np.inner", "rt.inner") and len(value.args) == 2 and \
            of(value.args[0]) and of(value.args[0]) == of(value.args[1]):
        terms = ast.BinOp(value.args[0], ast.Mult(), value.args[1])
    elif what == "rt.unbroadcast" and len(value.args) == 2 and of(value.args[1]) is None:
        terms = value.args[0]            # summed down to a scalar
    shape = terms is not None and of(terms)
    if not shape or len(shape) != 1:
        return None
    acc, k = _fresh(rw, f"{target.id}_sum"), _index(rw)
    add = ast.AugAssign(ast.Name(acc, ast.Store()), ast.Add(),
                        rw.visit(element(terms, k, shapes)), lineno=node.lineno)
    return [ast.Assign([ast.Name(acc, ast.Store())], ast.Constant(0.0), lineno=node.lineno),
            _loop(k, shape[0], [add], node),
            ast.Assign([target], ast.Name(acc, ast.Load()), lineno=node.lineno)]


def lower_augassign(rw, node):
    """``a += b`` (``-=``, ``*=``, ``/=``) on a local 1-d array, element by
    element (statements), else None."""
    shapes = rw.local.shapes.get(rw.function, {})
    target = node.target
    shape = (isinstance(target, ast.Name) or _is_slice(target)) and \
        _of(rw.local, rw.function, target, shapes)
    if not shape or len(shape) != 1 or not isinstance(node.op, _OPS):
        return None
    value = _of(rw.local, rw.function, node.value, shapes)
    if value not in (None, shape) or rw.local.is_opaque(rw.function, node.value):
        return None
    k = _index(rw)
    step = ast.AugAssign(ast.Subscript(rw.visit(copy.deepcopy(target)), ast.Name(k, ast.Load()),
                                       ast.Store()), node.op,
                         rw.visit(element(node.value, k, shapes)), lineno=node.lineno)
    return [_loop(k, shape[0], [step], node)]


def push_array(rw, stack, count, value):
    """``stack.append(value)`` of a local 1-d array: its elements, one slot each."""
    shapes = rw.local.shapes.get(rw.function, {})
    shape = _of(rw.local, rw.function, value, shapes)
    if not shape or len(shape) != 1:
        return None
    k = _index(rw)
    item = ast.unparse(rw.visit(element(value, k, shapes)))
    return parsed_at(f"for {k} in range({shape[0]}):\n"
                  f"    {count} = rtd.push({stack}, {count}, {item}, need)", value)


def pop_array(rw, node, stack, count, alloc):
    """``x = stack.pop()`` (or ``x[a:b] = stack.pop()``) of an array
    :func:`push_array` pushed."""
    shape = rw.local.stack_shapes.get(rw.function, {}).get(stack)
    target = node.targets[0]
    if not shape or len(shape) != 1 or not (isinstance(target, ast.Name) or _is_slice(target)):
        return None
    k = _index(rw)
    into = ast.unparse(target)
    return (alloc(target.id) if isinstance(target, ast.Name) else []) + parsed_at(
        f"for {k} in range({shape[0] - 1}, -1, -1):\n    {count} -= 1\n"
        f"    {into}[{k}] = rtd.pop_as({stack}, {count}, 0.0, need)", node)


def parsed_at(text, node):
    """The statements of ``text``, placed at ``node``'s line (for errors)."""
    tree = ast.parse(text).body
    for stmt in tree:
        for n in ast.walk(stmt):
            ast.copy_location(n, node)
    return tree
