"""What module assembly calls: the entry VJP of the transformed function, the
rows of a Jacobian, and the VJPs of the user functions it calls.

Each returns the generated functions as a tree (a list of ``ast.FunctionDef``
with comment statements, see :mod:`s2s_ad.codegen.printer`), not text: module
assembly unparses the module once.
"""
import ast

from ...codegen import printer as codegen
from ...ir import (
    Const,
    Tup,
    Var,
    leaves_of,
    var_names,
)
from .common import grads_expr
from .writer import ReverseWriter


def helper_vjp_source(module, callee, in_names, seeds, ranks, fwd_name, bwd_name):
    """A called user function's VJP, split in ``fwd_name`` and ``bwd_name``.

    Returns (the two functions' tree, residual names) -- see
    :meth:`ReverseWriter.write_split`.
    """
    writer, cot, returns, seed_exprs = _helper_writer(module, callee, in_names, seeds, ranks)
    return writer.write_split(fwd_name, bwd_name, cot, returns, seed_exprs)


def helper_joint_source(module, callee, in_names, seeds, ranks, fname):
    """A called user function's VJP as one function: ``fname(params, cotangents)``
    runs the primal statements its adjoint reads, then the adjoint."""
    writer, cot, returns, seed_exprs = _helper_writer(module, callee, in_names, seeds, ranks)
    return writer.write(fname, cot, returns, seed_exprs, value_first=False)


def _helper_writer(module, callee, in_names, seeds, ranks):
    """(writer, cotangent parameters, return builder, seeds) of a called function's VJP."""
    writer = ReverseWriter(module, callee, set(in_names), set(seeds), list(ranks))
    cot = [callee.names.adjoint(s) for s in seeds]
    seed_exprs = list(zip(seeds, (codegen.name(c) for c in cot)))
    in_trees = [Var(n) for n in in_names]
    return writer, cot, lambda adj: ast.Return(grads_expr(callee, in_trees, adj)), seed_exprs


def gradient_source(module, helper, fname):
    """A gradient helper (``ad.grad(f)(x)`` written in user code, see
    :class:`~s2s_ad.ir.Gradient`) as reverse code: ``fname(params)`` runs
    ``f``'s primal sweep, seeds its differentiated output with 1.0, runs the
    adjoint sweep, and returns the helper's result -- one reverse pass, as
    a top-level ``ad.grad`` takes."""
    grad = helper.gradient
    fn = grad.fn
    values = list(leaves_of(fn.out_tree))
    seed = values[grad.seed]
    seeds = {seed.name} if isinstance(seed, Var) else set()
    ranks = module.argument_ranks(helper)
    writer = ReverseWriter(module, fn, set(grad.wrt), seeds, list(ranks) if ranks else None)
    seed_exprs = [(seed.name, ast.Constant(1.0))] if seeds else []
    return writer.write_gradient(fname, seed_exprs, values, grad.seed, list(grad.wrt),
                                 grad.outputs, helper.out_tree)


def rows_source(module, fn, argnums, fname, param_ranks=None, width=1):
    """The VJP of the transformed function for stacked cotangent rows (see
    :meth:`ReverseWriter.write_rows`): the rows of its Jacobian in one call.

    Returns the function's tree and the rows each adjoint sweep carries
    (``width``, or 1 where the sweep cannot be shared)."""
    leaves_ = list(leaves_of(fn.out_tree))
    wrt_trees = [fn.param_trees[i] for i in argnums]
    seeds = {a.name for a in leaves_ if isinstance(a, Var)}
    writer = ReverseWriter(module, fn, set(var_names(wrt_trees)), seeds, param_ranks)
    rows = [fn.names.fresh("b_outs") for _ in leaves_]
    seeds = [(a.name, r, fn.names.fresh("b_out")) for a, r in zip(leaves_, rows)
             if isinstance(a, Var)]
    tree = writer.write_rows(fname, rows, seeds, fn.out_tree, wrt_trees, width)
    return tree, writer.width


def entry_source(module, fn, argnums, fname, mode, has_aux, param_ranks=None,
                 element_grads=False):
    """The VJP of the transformed function itself.

    ``mode == "vjp"`` takes one cotangent per output leaf (after the
    primals); ``"grad"`` and ``"value_and_grad"`` seed the scalar output with
    1.0.  Each returns ``(value, grads)`` with one gradient per argnum, in the
    argument's structure; ``value`` is the output (``grad``: only the aux, or
    None, so that no work is spent on a value nobody reads).  With
    ``element_grads`` the gradient of a small argument split into scalars
    (``fn.elements``) is the tuple of its elements' gradients: nothing is
    allocated (the compiled per-sample loop of vmap writes them in place).
    """
    out = fn.out_tree
    diff_out = out.items[0] if has_aux else out
    leaves_ = list(leaves_of(diff_out))
    wrt_trees = [fn.param_trees[i] for i in argnums]
    if element_grads:
        wrt_trees = [Tup(tuple(Var(e) for e in fn.elements[t.name]))
                     if isinstance(t, Var) and t.name in fn.elements else t for t in wrt_trees]
    wrt = set(var_names(wrt_trees))
    seeds = {a.name for a in leaves_ if isinstance(a, Var)}
    writer = ReverseWriter(module, fn, wrt, seeds, param_ranks)
    if mode == "vjp":
        cot = [fn.names.fresh("b_out") for _ in leaves_]
        seed_exprs = [(a.name, codegen.name(c)) for a, c in zip(leaves_, cot) if isinstance(a, Var)]
    else:
        cot = []
        seed_exprs = [(leaves_[0].name, ast.Constant(1.0))] if isinstance(leaves_[0], Var) else []
    value = out
    if mode == "grad":
        value = out.items[1] if has_aux else Const(None)

    def returns(adj):
        return ast.Return(ast.Tuple([codegen.atom(value), grads_expr(fn, wrt_trees, adj)],
                                    ast.Load()))
    return writer.write(fname, cot, returns, seed_exprs)
