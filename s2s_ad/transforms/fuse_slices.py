"""fuse_slices: elementwise statements over slices as one loop nest (compiled code).

A stencil step ``B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + ...)``
is, in generated code, one statement per operation: a view per slice, a
new interior-sized array per sum and product, and a store; its adjoint is
the same shape of chain (a snapshot of the written region's cotangent,
scalings, ``rt.add_into`` into shifted slices).  Under Numba each of those
arrays is allocated and walked once per statement.  This pass, run on the
generated module for ``target="cpu"`` only (the NumPy module keeps its array
expressions), rewrites a maximal run of such statements as

    _fv1 = bB_1[1:-1, 1:-1]                   (the slices, as views)
    if rt.fusable(...) and rt.apart(...):
        _n0, _n1, _n2 = rt.shape3(_fv1)
        for _i0 in range(_n0):                (one nest, no temporaries)
            for _i1 in range(_n1):
                for _i2 in range(_n2):
                    bt12_at = rt.at3(_fv1, _i0, _i1, _i2)
                    ...
    else:
        (the statements as they were)

A run is the statements of one block that are elementwise in their array
operands: ``x = e`` and ``x += e`` (``x`` a temporary of the run), a store
``X[s] = e``, an add ``X[s] += e`` or ``rt.add_into(X[s], e)``, where ``e``
is built from slices with a basic index (at least one slice), views of the
block, other names (arrays of the run's shape or scalars: the guard checks
which at run time), numbers, ``+ - *``, ``/`` and ``**`` by a constant,
comparisons, ``np.where`` and a few ufuncs of scalars, ``rt.snapshot`` and
``rt.unbroadcast`` (to an operand's shape).  A view definition ``v = X[s]``
inside the run stays where it is (it copies nothing).

NumPy evaluates each statement over the whole array before the next, the
nest evaluates every statement at one element before the next element; the
two agree when no element is read after another element's write changed it.
So a run is cut where an array (a root: the name a view was sliced from)
would be written (stored into or added into) and also accessed through a
different slice; only adds, into any slices, may mix (they commute: the
rounding may differ).  Different roots may be one array at run time (the
same argument passed twice, a view of another): the guard's ``rt.apart``
checks every written slice against every other operand and falls back to
the statements as they were when two share memory, as it does when the
shapes differ (NumPy would broadcast) or an operand has more than three
axes.  A run is fused only when no temporary it defines is read outside it,
it writes something, and, when it adds into several slices of one array,
its statements make enough passes to pay for the chain of stores and loads
the nest makes (:meth:`_Run.scatter_only`).

Where the nest adds one value into several slices of one array, each
starting at constants (a stencil's adjoint: ``bB[:-2, 1:-1]``,
``bB[1:-1, 2:]``, ...), that chain is removed: the nest stores the value
once into a zero-padded buffer and ``rt.gather_add`` then adds into each
element of the array what reaches it from every slice, one vectorised pass
(:meth:`_Run._gathered`).

The same module run by plain Python (a tiered ``ad.jit``'s first call while
Numba compiles) takes the ``else`` branch: ``rt.fusable`` is False there.
"""
import ast
import copy
import re

from ..codegen import printer

# Not the transcendental ufuncs: on an array they run NumPy's SIMD kernels
# (runtime/elementwise.py), one element at a time several times slower.
_UNARY = {"sqrt", "abs", "absolute", "square", "negative"}
_BINARY = {"maximum", "minimum"}
_COMPARE = (ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq)
#: A run that adds into several slices of one array is fused only when its
#: statements make at least this many passes (see :meth:`_Run.scatter_only`).
SCATTER_PASSES = 7


def fuse_part(stmts):
    """``stmts`` (a part of a generated module, as trees) with the elementwise
    runs over slices of its functions fused; ``stmts`` itself when none is."""
    fused = [(_Function(s).run() or s) if isinstance(s, ast.FunctionDef) else s
             for s in stmts]
    return stmts if all(a is b for a, b in zip(fused, stmts)) else fused


def fuse_source(source):
    """``source`` (a module's text) with its runs fused: :func:`fuse_part` on
    its statements, printed again, or ``source`` itself when nothing fuses."""
    stmts = printer.parse(source.split("\n"))
    fused = fuse_part(stmts)
    return source if fused is stmts else printer.unparse(fused)


def _attr(node, module):
    """``name`` when ``node`` is ``module.name``, else None."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
            and node.value.id == module:
        return node.attr
    return None


def _basic_index(index, loop_vars):
    """Whether ``index`` is basic with at least one slice: slices (any bounds),
    integer constants and loop variables."""
    parts = index.elts if isinstance(index, ast.Tuple) else [index]
    if not any(isinstance(p, ast.Slice) for p in parts):
        return False
    for p in parts:
        if isinstance(p, ast.Slice):
            if p.step is not None and not (isinstance(p.step, ast.Constant)
                                           and p.step.value in (None, 1)):
                return False
        elif isinstance(p, ast.Constant):
            if type(p.value) is not int:
                return False
        elif not (isinstance(p, ast.Name) and p.id in loop_vars):
            return False
    return True


def _names(node):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


class _Function:
    def __init__(self, fn):
        self.fn = fn
        self.reads = {}
        for n in ast.walk(fn):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                self.reads[n.id] = self.reads.get(n.id, 0) + 1
        self.taken = _names(fn) | {a.arg for a in fn.args.args}
        self.count = 0
        self.changed = False
        self.index = [self.fresh(f"_i{k}") for k in range(3)]
        self.sizes = [self.fresh(f"_n{k}") for k in range(3)]
        self.locals = {}

    def local(self, name):
        """The nest's scalar for the run's temporary ``name``."""
        if name not in self.locals:
            self.locals[name] = self.fresh(f"{name}_at")
        return self.locals[name]

    def run(self):
        fn = copy.copy(self.fn)
        fn.body = self.block(self.fn.body, set())
        return fn if self.changed else None

    def fresh(self, stem):
        name = stem
        while name in self.taken:
            name += "_"
        self.taken.add(name)
        return name

    def block(self, stmts, loop_vars):
        out, views, run = [], {}, None
        for s in stmts:
            view = self.view_def(s, views, loop_vars)
            if view is not None:
                target, root, key = view
                if run is not None and (target in run.touched
                                        or _names(s.value) & set(run.defined)):
                    out += self.close(run)
                    run = None
                self.forget(views, {target})
                views[target] = (root, key)
                out.append(s)
                continue
            if printer.is_comment(s):
                (run.stmts if run is not None else out).append(s)
                continue
            if run is None:
                run = _Run(self, views, loop_vars)
            if run.add(s):
                continue
            head, tail = run.split()
            out += self.close(head)
            run = _Run(self, views, loop_vars)
            for t in tail:          # temporaries after the last write start the next run
                if printer.is_comment(t):
                    run.stmts.append(t)
                elif not run.add(t):
                    out += self.close(run) + [t]
                    run = _Run(self, views, loop_vars)
            if run.add(s):
                continue
            out += self.close(run)
            run = _Run(self, views, loop_vars)
            if run.add(s):
                continue
            run = None
            out.append(self.nested(s, loop_vars))
            self.forget(views, {n.id for n in ast.walk(s)
                                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)})
        if run is not None:
            out += self.close(run)
        return out

    def nested(self, s, loop_vars):
        if not isinstance(s, (ast.For, ast.While, ast.If)):
            return s
        s = copy.copy(s)
        inner = set(loop_vars)
        if isinstance(s, ast.For) and isinstance(s.target, ast.Name):
            inner.add(s.target.id)
        s.body = self.block(s.body, inner)
        s.orelse = self.block(s.orelse, inner) if s.orelse else s.orelse
        return s

    @staticmethod
    def forget(views, names):
        """Drop the views that ``names`` rebinds: by name, root, or a name in an index."""
        for v in [v for v, (root, key) in views.items()
                  if v in names or root in names
                  or any(set(re.findall(r"[A-Za-z_]\w*", k)) & names for k in key)]:
            del views[v]

    @staticmethod
    def view_def(s, views, loop_vars):
        """(target, root, key) when ``s`` is ``v = X[basic index]``."""
        if not (isinstance(s, ast.Assign) and len(s.targets) == 1
                and isinstance(s.targets[0], ast.Name) and isinstance(s.value, ast.Subscript)
                and isinstance(s.value.value, ast.Name)
                and _basic_index(s.value.slice, loop_vars)):
            return None
        base = s.value.value.id
        root, key = views.get(base, (base, ()))
        return s.targets[0].id, root, key + (ast.unparse(s.value.slice),)

    def close(self, run):
        trailing = []       # comments that introduce what follows the run
        while run.stmts and printer.is_comment(run.stmts[-1]):
            trailing.insert(0, run.stmts.pop())
        return self.fused(run) + trailing

    def fused(self, run):
        stmts = [s for s in run.stmts if not printer.is_comment(s)]
        live_out = any(self.reads.get(n, 0) > run.reads.get(n, 0) for n in run.defined)
        if not run.writes or len(stmts) < 2 or live_out \
                or not any(key for _, key in run.operands) or run.scatter_only():
            return run.stmts
        self.changed = True
        return run.emit()


class _Run:
    """One run of elementwise statements being collected."""

    def __init__(self, fn, views, loop_vars):
        self.fn, self.views, self.loop_vars = fn, views, loop_vars
        self.stmts, self.body = [], []
        self.defined = {}         # temporary -> its alias group (a set shared by aliases)
        self.reads = {}           # name -> reads in the run's statements
        self.touched = set()      # every name the run reads or defines
        self.access = {}          # root -> {key: set of "read" | "store" | "add"}
        self.operands = {}        # (root, key) -> the name the nest indexes
        self.hoisted = []         # (name, subscript) views made for the run
        self.shapes = []          # names read for their shape alone
        self.writes = 0
        self.wrote = {}           # id of a statement -> whether it writes
        # adds into slices: (index in body, root, key, the slice's name, the
        # value added, the alias group of that value or None); see _gathers
        self.adds = []
        self.starts = {}          # (root, key) of a slice of a root itself -> see _starts

    # -- collecting --------------------------------------------------------------

    def add(self, s):
        saved = (copy.deepcopy(self.defined), copy.deepcopy(self.access), dict(self.operands),
                 list(self.hoisted), list(self.shapes), list(self.adds), self.fn.count,
                 self.writes)
        body = self.statement(s)
        if body is None or not self.consistent():
            (self.defined, self.access, self.operands, self.hoisted, self.shapes,
             self.adds, self.fn.count, self.writes) = saved
            return False
        self.wrote[id(s)] = self.writes > saved[-1]
        self.stmts.append(s)
        self.body.append(body)
        for n in ast.walk(s):
            if isinstance(n, ast.Name):
                self.touched.add(n.id)
                if isinstance(n.ctx, ast.Load):
                    self.reads[n.id] = self.reads.get(n.id, 0) + 1
        return True

    def split(self):
        """This run up to its last write, and the statements after it (which
        define temporaries alone: the next run may take them)."""
        last = max((k for k, s in enumerate(self.stmts) if self.wrote.get(id(s))), default=-1)
        head = _Run(self.fn, self.views, self.loop_vars)
        for s in self.stmts[:last + 1]:
            if printer.is_comment(s):
                head.stmts.append(s)
            else:
                head.add(s)
        return head, self.stmts[last + 1:]

    def scatter_only(self):
        """Whether the run adds into several slices of one array and makes
        fewer than :data:`SCATTER_PASSES` passes as statements (arrays
        computed, stores, adds).  A nest adding into ``b[2:]``, ``b[1:-1]``
        and ``b[:-2]`` at one element each is a chain from one element's store
        to the next one's load, which LLVM does not vectorise; the statements
        are vectorised passes, faster when there are few of them (measured,
        medians side by side: the 1-D Jacobi adjoint, six passes, 0.043 ms as
        statements, 0.061 ms as a nest; the 2-D five-point one, eight passes,
        0.42 ms against 0.26 ms).  An array the nest gathers into
        (:meth:`_gathers`) makes no chain and does not count."""
        gathered = self._gathers()
        scatter = any(len(keys) > 1 and set().union(*keys.values()) == {"add"}
                      for root, keys in self.access.items() if root not in gathered)
        made = sum(1 for s in self.stmts if isinstance(s, ast.Assign)
                   and isinstance(s.targets[0], ast.Name) and not isinstance(s.value, ast.Name))
        return scatter and made + self.writes < SCATTER_PASSES

    def consistent(self):
        """No root both written and accessed through two different slices,
        unless every access to it is an add."""
        for keys in self.access.values():
            modes = set().union(*keys.values())
            if len(keys) > 1 and modes & {"store"}:
                return False
            if len(keys) > 1 and "add" in modes and modes != {"add"}:
                return False
        return True

    def statement(self, s):
        """The nest's statement for ``s``, or None when ``s`` cannot join."""
        if isinstance(s, ast.Assign) and len(s.targets) == 1:
            target = s.targets[0]
            if isinstance(target, ast.Name):
                return self.assign(target.id, s.value)
            if isinstance(target, ast.Subscript):
                return self.write(target, s.value, "store")
            return None
        if isinstance(s, ast.AugAssign) and isinstance(s.op, (ast.Add, ast.Sub, ast.Mult)):
            if isinstance(s.target, ast.Subscript):
                if isinstance(s.op, ast.Add):
                    return self.write(s.target, s.value, "add")
                return self.write(s.target, ast.BinOp(s.target, s.op, s.value), "store")
            if isinstance(s.target, ast.Name):
                name = s.target.id
                if name not in self.defined or len(self.defined[name]) > 1:
                    return None       # not the run's, or shared: an in-place op on an alias
                value = self.element(s.value)
                if value is None:
                    return None
                self.defined[name] = {name}      # a new value: a group of its own
                return ast.AugAssign(ast.Name(self.local(name), ast.Store()), s.op, value[0])
            return None
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) \
                and _attr(s.value.func, "rt") == "add_into" and len(s.value.args) == 2 \
                and not s.value.keywords:
            return self.write(s.value.args[0], s.value.args[1], "add")
        return None

    def assign(self, name, value):
        if name in self.views or any(name == root for root in self.access) \
                or any(name == root for root, _ in self.views.values()):
            return None
        got = self.element(value)
        if got is None or not got[1]:
            return None
        for group in self.defined.values():
            group.discard(name)
        alias = value
        if isinstance(value, ast.Call) and _attr(value.func, "rt") == "unbroadcast":
            alias = value.args[0]         # the cotangent itself when the shapes agree
        if isinstance(alias, ast.Name) and alias.id in self.defined:
            group = self.defined[alias.id]
            group.add(name)
            self.defined[name] = group
        else:
            self.defined[name] = {name}
        return ast.Assign([ast.Name(self.local(name), ast.Store())], got[0])

    def write(self, target, value, mode):
        got = self.element(value)
        if got is None:
            return None
        if not (isinstance(target, ast.Subscript)
                or isinstance(target, ast.Name) and target.id in self.views):
            return None
        operand = self.operand(target, mode)
        if operand is None:
            return None
        self.writes += 1
        idx = self.index()
        if mode == "add":
            root, key = next(rk for rk, n in self.operands.items() if n == operand)
            group = self.defined.get(value.id) if isinstance(value, ast.Name) else None
            self.adds.append((len(self.body), root, key, operand, got[0], group))
            got = (ast.BinOp(self.at(operand), ast.Add(), got[0]), True)
        return ast.Expr(ast.Call(_rt("put3"), [ast.Name(operand, ast.Load()), *idx, got[0]], []))

    def operand(self, node, mode):
        """The name the nest indexes for the slice or name ``node``, its access
        recorded; None when ``node`` is neither."""
        if isinstance(node, ast.Subscript):
            if not (isinstance(node.value, ast.Name) and _basic_index(node.slice, self.loop_vars)):
                return None
            base = node.value.id
            if base in self.defined or _names(node.slice) & set(self.defined):
                return None
            root, key = self.views.get(base, (base, ()))
            key = key + (ast.unparse(node.slice),)
            if len(key) == 1:
                self.starts.setdefault((root, key), _starts(node.slice))
            same = [v for v, rk in self.views.items() if rk == (root, key)]
            if (root, key) not in self.operands and same:
                self.operands[(root, key)] = same[0]      # a view of the block already
            if (root, key) not in self.operands:
                name = self.fn.fresh(f"_fv{self.fn.count + 1}")
                self.fn.count += 1
                self.hoisted.append((name, node))
                self.operands[(root, key)] = name
        elif isinstance(node, ast.Name) and node.id not in self.defined:
            if node.id in self.views:
                root, key = self.views[node.id]
            else:
                root, key = node.id, ()
            self.operands.setdefault((root, key), node.id)
        else:
            return None
        self.access.setdefault(root, {}).setdefault(key, set()).add(mode)
        return self.operands[(root, key)]

    def element(self, e):
        """(the value of ``e`` at one element, whether ``e`` reads an array of
        the run), or None when ``e`` is not elementwise."""
        if isinstance(e, ast.Constant):
            if type(e.value) in (int, float, bool):
                return e, False
            return None
        if isinstance(e, ast.Name):
            if e.id in self.defined:
                return ast.Name(self.local(e.id), ast.Load()), True
            name = self.operand(e, "read")
            return self.at(name), e.id in self.views
        if isinstance(e, ast.Subscript):
            name = self.operand(e, "read")
            return None if name is None else (self.at(name), True)
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd)):
            return self._map(e, lambda a: ast.UnaryOp(e.op, a), [e.operand])
        if isinstance(e, ast.BinOp):
            if isinstance(e.op, (ast.Div, ast.Pow)):
                if not (isinstance(e.right, ast.Constant) and type(e.right.value) in (int, float)
                        and (isinstance(e.op, ast.Pow) or e.right.value != 0)):
                    return None
            elif not isinstance(e.op, (ast.Add, ast.Sub, ast.Mult)):
                return None
            return self._map(e, lambda a, b: ast.BinOp(a, e.op, b), [e.left, e.right])
        if isinstance(e, ast.Compare) and len(e.ops) == 1 and isinstance(e.ops[0], _COMPARE):
            return self._map(e, lambda a, b: ast.Compare(a, e.ops, [b]),
                             [e.left, e.comparators[0]])
        if isinstance(e, ast.Call) and not e.keywords:
            np_name, rt_name = _attr(e.func, "np"), _attr(e.func, "rt")
            if np_name == "where" and len(e.args) == 3:
                return self._map(e, lambda c, a, b: ast.IfExp(c, a, b), e.args)
            if (np_name in _UNARY and len(e.args) == 1) or (np_name in _BINARY
                                                             and len(e.args) == 2):
                return self._map(e, lambda *a: ast.Call(e.func, list(a), []), e.args)
            if rt_name == "snapshot" and len(e.args) == 1:
                return self.element(e.args[0])
            if rt_name == "unbroadcast" and len(e.args) == 2 \
                    and isinstance(e.args[1], ast.Name):
                got = self.element(e.args[0])
                shape = e.args[1].id
                if got is None or not got[1]:
                    return None
                if shape not in self.defined:
                    if shape not in self.views:
                        return None       # perhaps a scalar: a sum, not the identity
                    self.shapes.append(shape)
                return got
        return None

    def _map(self, e, build, args):
        got = [self.element(a) for a in args]
        if any(g is None for g in got):
            return None
        return build(*[g[0] for g in got]), any(g[1] for g in got)

    # -- printing ----------------------------------------------------------------

    def local(self, name):
        return self.fn.local(name)

    def index(self):
        return [ast.Name(i, ast.Load()) for i in self.fn.index]

    def at(self, name):
        return ast.Call(_rt("at3"), [ast.Name(name, ast.Load()), *self.index()], [])

    def _gathers(self):
        """The roots the run only adds into, through two slices of the root
        itself or more, each starting at constants (``bB[:-2, 1:-1]``,
        ``bB[1:-1, 2:]``), one value into all of them (a stencil of equal
        weights: one alias group): root -> [(index in body, starts, slice
        name, value, group)].  Their adds are gathered (see
        :meth:`_gathered`).  With several values each would need a buffer of
        its own, which costs more than the chain it removes (measured on the
        3-D heat stencil's adjoint, four buffers for seven slices: 1.9x
        slower than the scatter)."""
        out = {}
        for root, keys in self.access.items():
            if len(keys) < 2 or set().union(*keys.values()) != {"add"}:
                continue
            starts = {key: self.starts.get((root, key)) for key in keys}
            if any(v is None for v in starts.values()) or \
                    len({len(v) for v in starts.values()}) != 1:
                continue
            adds = [(k, starts[key], name, value, group)
                    for k, r, key, name, value, group in self.adds if r == root]
            if len({id(a[4]) for a in adds}) == 1 and adds[0][4] is not None:
                out[root] = adds
        return out

    def _gathered(self, body):
        """Rewrite ``body`` (the nest's statements) so that each root of
        :meth:`_gathers` is added into after the nest, once per element.

        The nest stores the value added into the slices (once, not once per
        slice) in the interior of a zero-padded buffer; ``rt.gather_add``
        then adds, at each element of the slices' box, what the buffer holds
        for it from each slice.  A scatter into shifted slices is a chain
        from one element's store to the next one's load, which LLVM does not
        vectorise; the gather reads the buffer and writes each element once.
        The sums' rounding order changes, as it does for the adds in a nest.
        Returns (statements before the nest, after it)."""
        before, after = [], []
        for root, adds in self._gathers().items():
            axes = range(len(adds[0][1]))
            lo = [min(a[1][d] for a in adds) for d in axes]
            spans = [max(a[1][d] for a in adds) - lo[d] for d in axes]
            first, _, window, value, _ = adds[0]
            self.fn.count += 1
            full = self.fn.fresh(f"_gz{self.fn.count}")
            inner = self.fn.fresh(f"_gv{self.fn.count}")
            before.append(ast.Assign(
                [ast.Tuple([ast.Name(full, ast.Store()), ast.Name(inner, ast.Store())],
                           ast.Store())],
                ast.Call(_rt("gather_buffer"), [ast.Name(window, ast.Load()), _ints(spans)], [])))
            body[first] = ast.Expr(ast.Call(_rt("put3"), [
                ast.Name(inner, ast.Load()), *self.index(), value], []))
            for k, *_ in adds[1:]:
                body[k] = None
            shifts = [_ints([spans[d] - (starts[d] - lo[d]) for d in axes])
                      for _, starts, *_ in adds]
            after.append(ast.Expr(ast.Call(_rt("gather_add"), [
                ast.Name(root, ast.Load()), _ints(lo), _ints(spans), ast.Name(full, ast.Load()),
                ast.Tuple(shifts, ast.Load())], [])))
        if before:
            before.insert(0, printer.comment(
                "one value added into shifted slices of one array: stored once, then "
                "gathered (each element written once)"))
        return before, after

    def emit(self):
        out = [ast.Assign([ast.Name(name, ast.Store())], node) for name, node in self.hoisted]
        arrays = list(dict.fromkeys(self.operands.values()))
        first = next(n for (root, key), n in self.operands.items() if key)
        checked = [first] + [n for n in dict.fromkeys(arrays + self.shapes) if n != first]
        tests = [ast.Call(_rt("fusable"), [ast.Name(n, ast.Load()) for n in checked], [])]
        written = {root for root, keys in self.access.items()
                   if set().union(*keys.values()) & {"store", "add"}}
        pairs = []
        items = list(self.operands.items())
        for a, ((root_a, _), name_a) in enumerate(items):
            for (root_b, _), name_b in items[a + 1:]:
                if root_a == root_b or not ({root_a, root_b} & written):
                    continue
                modes = set().union(*self.access[root_a].values(), *self.access[root_b].values())
                if modes == {"add"}:
                    continue
                pairs.append(ast.Call(_rt("apart"), [ast.Name(name_a, ast.Load()),
                                                     ast.Name(name_b, ast.Load())], []))
        test = ast.BoolOp(ast.And(), tests + pairs) if pairs else tests[0]
        body = list(self.body)
        before, after = self._gathered(body)
        body = iter(body)
        nest = [s if printer.is_comment(s) else next(body) for s in self.stmts]
        nest = _live([s for s in nest if s is not None], set(self.fn.locals.values()))
        for i, n in reversed(list(zip(self.fn.index, self.fn.sizes))):
            nest = [ast.For(ast.Name(i, ast.Store()),
                            ast.Call(ast.Name("range", ast.Load()), [ast.Name(n, ast.Load())], []),
                            nest, [])]
        shape = ast.Assign([ast.Tuple([ast.Name(n, ast.Store()) for n in self.fn.sizes],
                                      ast.Store())],
                           ast.Call(_rt("shape3"), [ast.Name(first, ast.Load())], []))
        fused = [printer.comment("the statements below as one loop nest over their slices, "
                                 "no temporaries (fuse_slices)"), shape, *before, *nest, *after]
        out.append(ast.If(test, fused, list(self.stmts)))
        return out


def _rt(name):
    return ast.Attribute(ast.Name("rt", ast.Load()), name, ast.Load())


def _live(stmts, locals_):
    """``stmts`` without the assignments to the nest's scalars ``locals_`` that
    nothing reads (copies of a value whose adds were gathered)."""
    while True:
        read = {n.id for s in stmts for n in ast.walk(s)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        keep = [s for s in stmts if not (isinstance(s, ast.Assign)
                                         and isinstance(s.targets[0], ast.Name)
                                         and s.targets[0].id in locals_
                                         and s.targets[0].id not in read)]
        if len(keep) == len(stmts):
            return stmts
        stmts = keep


def _ints(values):
    return ast.Tuple([ast.Constant(v) for v in values], ast.Load())


def _starts(index):
    """The start of each axis of the slice ``index`` of a root itself, when
    every part is a slice starting at a constant >= 0 with no step, at most
    three; else None."""
    parts = index.elts if isinstance(index, ast.Tuple) else [index]
    starts = []
    for p in parts:
        if not isinstance(p, ast.Slice) or p.step is not None:
            return None
        if p.lower is None:
            starts.append(0)
        elif isinstance(p.lower, ast.Constant) and type(p.lower.value) is int \
                and p.lower.value >= 0:
            starts.append(p.lower.value)
        else:
            return None
    return tuple(starts) if len(starts) <= 3 else None
