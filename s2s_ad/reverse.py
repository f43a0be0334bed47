"""reverse: lowered function -> VJP source (primal sweep + adjoint sweep).

Receives a lowered :class:`~s2s_ad.ir.Function`, which of its parameters to
differentiate and which output leaves are seeded.  Writes one function that
runs the primal statements the adjoint needs (dead code is dropped), then the
adjoint of every active statement in reverse order, each from its rule's
template.  Adjoints are named after their primal (``x`` -> ``bx``); the first
contribution binds the name, later ones add to it; adjoints of broadcasting
operands are un-broadcast to the operand's shape by the rule; reading
``x[i]`` accumulates into ``bx[i]`` in place.  Gradients are returned with
their parameter's type and dtype (``rt.like``).

Calls to user functions become calls to their own VJP function, generated
once per (function, active inputs, active outputs) in the same module.
"""
import ast
import copy

from . import codegen
from .activity import analyse, diff_args, var_leaves
from .ir import Call, Const, Prim, Tup, Var


class Adjoints:
    """Adjoint variables of one function: name and whether we own the array."""

    def __init__(self, names, writer):
        self.names = names
        self.w = writer
        self.vars = {}     # primal name -> [adjoint name, owned]

    def get(self, var):
        entry = self.vars.get(var)
        return entry[0] if entry else None

    def bind(self, var, adj_name):
        self.vars[var] = [adj_name, False]

    def add(self, var, expr):
        entry = self.vars.get(var)
        if entry is None:
            adj = self.names.adjoint(var)
            self.vars[var] = [adj, not isinstance(expr, ast.Name)]
            self.w.node(ast.Assign([ast.Name(adj, ast.Store())], expr, lineno=0))
        else:
            entry[1] = True
            self.w.node(ast.Assign([ast.Name(entry[0], ast.Store())],
                                   ast.BinOp(codegen.name(entry[0]), ast.Add(), expr), lineno=0))

    def add_at(self, var, index, expr):
        """``bvar[index] += expr``, making ``bvar`` an array we own first."""
        entry = self.vars.get(var)
        if entry is None:
            adj = self.names.adjoint(var)
            entry = self.vars[var] = [adj, True]
            self.w.node(_assign(adj, _call("np.zeros_like", codegen.name(var))))
        elif not entry[1]:
            entry[1] = True
            self.w.node(_assign(entry[0], _call("np.copy", codegen.name(entry[0]))))
        target = ast.Subscript(ast.Name(entry[0], ast.Load()), index, ast.Store())
        self.w.node(ast.AugAssign(target, ast.Add(), expr))


def _assign(n, expr):
    return ast.Assign([ast.Name(n, ast.Store())], expr, lineno=0)


def _call(fname, *args):
    return ast.Call(codegen.name(fname), list(args), [])


class _Subst(ast.NodeTransformer):
    def __init__(self, env):
        self.env = env

    def visit_Name(self, node):
        return copy.deepcopy(self.env[node.id]) if node.id in self.env else node


def instantiate(template, env):
    """The template with its parameter names replaced, lightly simplified."""
    return simplify(_Subst(env).visit(copy.deepcopy(template)))


_FOLD = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
         ast.Mult: lambda a, b: a * b, ast.Div: lambda a, b: a / b}


def _num(e):
    return isinstance(e, ast.Constant) and type(e.value) in (int, float)


def simplify(e):
    """Fold constants, ``g * 1.0`` -> ``g``, ``g * -1.0`` -> ``-g``, ``x ** 1`` -> ``x``."""
    if isinstance(e, ast.Call):
        e.args = [simplify(a) for a in e.args]
    if isinstance(e, ast.UnaryOp):
        e.operand = simplify(e.operand)
        if isinstance(e.op, ast.USub) and _num(e.operand):
            return ast.Constant(-e.operand.value)
    if not isinstance(e, ast.BinOp):
        return e
    e.left, e.right = simplify(e.left), simplify(e.right)
    if _num(e.left) and _num(e.right) and type(e.op) in _FOLD:
        try:
            return ast.Constant(_FOLD[type(e.op)](e.left.value, e.right.value))
        except ZeroDivisionError:
            return e
    if isinstance(e.op, ast.Pow) and _num(e.right) and e.right.value == 1:
        return e.left
    if isinstance(e.op, ast.Mult):
        for a, b in ((e.left, e.right), (e.right, e.left)):
            if _num(b) and b.value == 1:
                return a
            if _num(b) and b.value == -1:
                return ast.UnaryOp(ast.USub(), a)
    return e


class ReverseWriter:
    """Writes the VJP function of one lowered function into a module."""

    def __init__(self, module, fn, wrt, seeds):
        self.module = module
        self.fn = fn
        self.wrt = wrt            # parameter leaf names to differentiate
        self.seeds = seeds        # output leaf names that receive a cotangent
        self.act = analyse(fn, wrt, seeds)

    def write(self, fname, cot_params, returns, seed_exprs):
        """Print ``def fname(params + cot_params)`` returning ``returns(adj)``."""
        fn, w = self.fn, codegen.Writer()
        adj = Adjoints(fn.names, w)
        w.indent = 1
        for var, expr in seed_exprs:
            if expr is None:
                continue
            if isinstance(expr, ast.Name) and adj.get(var) is None:
                adj.bind(var, expr.id)
            else:
                adj.add(var, expr)
        for s in reversed(fn.body):
            if isinstance(s, Prim):
                self._prim(s, adj, w)
            elif isinstance(s, Call):
                self._call(s, adj, w)
        back = w.lines
        ret = returns(adj)
        reads = set().union(_names_in(ret), *(_names_in(n) for n in w.nodes))
        out = codegen.Writer()
        codegen.def_line(out, fname, fn.params + cot_params)
        out.indent = 1
        for s in self._forward(reads):
            out.loc(s.loc)
            out.node(codegen.stmt(s, self.module.fn_names))
        out.lines.extend(back)
        out.node(ret)
        out.blank()
        return out.text()

    def _forward(self, reads):
        """The primal statements whose values something later reads."""
        needed, kept = set(reads), []
        for s in reversed(self.fn.body):
            if isinstance(s, (Prim, Call)) and needed.intersection(s.targets):
                kept.append(s)
                needed.update(var_leaves(s.args))
                if isinstance(s, Prim):
                    needed.update(var_leaves(s.params.values()))
        return kept[::-1]

    def _prim(self, s, adj, w):
        (target,) = s.targets if len(s.targets) == 1 else (None,)
        g = adj.get(target) if target in self.act else None
        if g is None:
            return
        w.loc(s.loc, "adjoint of: ")
        env = {"g": codegen.name(g), "out": codegen.name(target)}
        env.update((p, codegen.atom(a)) for p, a in zip(s.rule.operands, s.args))
        env.update((p, codegen.atom(v)) for p, v in s.params.items())
        for arg, param in diff_args(s):
            if isinstance(arg, Tup):
                self._sequence(s, arg, param, env, adj)
            elif self.act.is_active(arg):
                if s.rule.name == "getitem":
                    adj.add_at(arg.name, codegen.atom(s.params["index"]), env["g"])
                else:
                    others = [a for a in s.args if a is not arg and isinstance(a, Var)]
                    template = s.rule.template(param, broadcast=bool(others))
                    adj.add(arg.name, instantiate(template, env))

    def _sequence(self, s, arg, param, env, adj):
        build = s.rule.vjp[param]
        statics = {k: v.value for k, v in s.params.items() if isinstance(v, Const)}
        for i, item in enumerate(arg.items):
            if self.act.is_active(item):
                adj.add(item.name, build(i, arg.items, env["g"], statics, codegen.atom))

    def _call(self, s, adj, w):
        outs = [t for t in s.targets if t in self.act and adj.get(t) is not None]
        ins = [i for i, a in enumerate(s.args) if self.act.is_active(a)]
        if not outs or not ins:
            return
        w.loc(s.loc, "adjoint of: ")
        callee = s.callee
        in_names = [callee.params[i] for i in ins]
        out_leaves = list(var_leaves([callee.out_tree]))
        out_mask = tuple(t in outs for t in s.targets)
        seeds = [leaf for leaf, m in zip(out_leaves, out_mask) if m]
        vjp_name = self.module.helper_vjp(callee, tuple(in_names), tuple(seeds))
        # A cotangent lands directly in its adjoint's name when it is the first.
        fresh = {}
        for i in ins:
            var = s.args[i].name
            if adj.get(var) is None and var not in fresh:
                fresh[var] = self.fn.names.adjoint(var)
        results = [fresh.pop(s.args[i].name, None) or self.fn.names.temp() for i in ins]
        args = [codegen.atom(a) for a in s.args] + [codegen.name(adj.get(t)) for t in outs]
        unpack = ast.Tuple([ast.Name(r, ast.Store()) for r in results], ast.Store())
        w.node(ast.Assign([unpack], ast.Call(codegen.name(vjp_name), args, []), lineno=0))
        for i, r in zip(ins, results):
            var = s.args[i].name
            if adj.get(var) is None:
                adj.vars[var] = [r, True]
            else:
                adj.add(var, codegen.name(r))


def _names_in(node):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def grads_expr(fn, wrt_trees, adj):
    """``rt.like(bx, x)`` per differentiated leaf, in the parameters' structure."""
    def one(tree):
        if isinstance(tree, Tup):
            return ast.Tuple([one(t) for t in tree.items], ast.Load())
        b = adj.get(tree.name)
        if b is None:
            return _call("rt.zeros_like", codegen.name(tree.name))
        return _call("rt.like", codegen.name(b), codegen.name(tree.name))
    return ast.Tuple([one(t) for t in wrt_trees], ast.Load())


def helper_vjp_source(module, callee, in_names, seeds, fname):
    """The VJP of a called user function: (params..., b_outs...) -> in cotangents."""
    writer = ReverseWriter(module, callee, set(in_names), set(seeds))
    cot = [callee.names.adjoint(s) for s in seeds]
    seed_exprs = list(zip(seeds, (codegen.name(c) for c in cot)))
    in_trees = [Var(n) for n in in_names]
    return writer.write(fname, cot, lambda adj: ast.Return(grads_expr(callee, in_trees, adj)),
                        seed_exprs)


def entry_source(module, fn, argnums, fname, mode, has_aux):
    """The VJP of the transformed function itself.

    ``mode == "vjp"``: takes one cotangent per output leaf (after the
    primals); ``mode == "grad"``: seeds the scalar output with 1.0.  Both
    return ``(out, grads)`` with ``grads`` a tuple with one entry per
    argnum, in the argument's structure.
    """
    out = fn.out_tree
    diff_out = out.items[0] if has_aux else out
    leaves = list(_atom_leaves(diff_out))
    wrt_trees = [fn.param_trees[i] for i in argnums]
    wrt = set(var_leaves(wrt_trees))
    seeds = {a.name for a in leaves if isinstance(a, Var)}
    writer = ReverseWriter(module, fn, wrt, seeds)
    if mode == "grad":
        cot = []
        seed_exprs = [(leaves[0].name, ast.Constant(1.0))] if isinstance(leaves[0], Var) else []
    else:
        cot = [fn.names.fresh("b_out") for _ in leaves]
        seed_exprs = [(a.name, codegen.name(c)) for a, c in zip(leaves, cot) if isinstance(a, Var)]

    def returns(adj):
        return ast.Return(ast.Tuple([codegen.atom(out), grads_expr(fn, wrt_trees, adj)], ast.Load()))
    return writer.write(fname, cot, returns, seed_exprs)


def _atom_leaves(tree):
    if isinstance(tree, Tup):
        yield from tree.leaves()
    else:
        yield tree

