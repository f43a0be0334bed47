"""Rewrites that make an adjoint cheaper than its rule's template: sums of
elementwise values passed on with the summed axis kept (``rt.sum_grad_kept``),
constant factors moved onto the smaller operand, shape-only operands not kept,
counter increments recognised.
"""
import ast

from ...analyses.dce import read_counts
from ...codegen import printer as codegen
from ...ir import (
    Const,
    For,
    If,
    Prim,
    Var,
    While,
    all_blocks,
    walk,
)
from ...rules.registry import parse_template


def _kept_sums(fn, known):
    """Arrays whose only reader is one sum or mean and which a unary elementwise
    function with an array-valued partial made (``t = np.square(x)``, then
    ``np.sum(t, 1)``): the reduction's adjoint for them may stay unbroadcast
    (``rt.sum_grad_kept``), since the one adjoint reading it multiplies it
    into the partial, which has the full shape."""
    count = _use_counts(fn)
    summed = {s.args[0].name for s in walk(fn.body)
              if isinstance(s, Prim) and s.rule.kept_vjp and isinstance(s.args[0], Var)}
    out = set()
    for s in walk(fn.body):
        partial = _unary_partial(s)
        if partial is not None and (s.rule.operands[0] in partial or "out" in partial):
            t = s.targets[0]
            if t in summed and count.get(t) == 1 and known.get(t) not in (0, None):
                out.add(t)
    return out


def _row_sums(fn, act, known):
    """Matrices whose cotangent is only ever summed over rows: made by adding
    (or subtracting) a differentiated vector and a matrix that is not
    differentiated (``xc = x - means[j]``), and read only as the left
    operand of a product with a matrix (``xc @ L.T``).  The product's
    adjoint for them may sum its cotangent's rows first:
    ``sum_i (g @ B.T)[i] = (sum_i g[i]) @ B.T``."""
    count = _use_counts(fn)
    left = {a.name for s in walk(fn.body)
            if isinstance(s, Prim) and s.rule.row_sum_vjp and len(s.args) == 2
            and all(isinstance(a, Var) and known.get(a.name) == 2 for a in s.args)
            for p, a in zip(s.rule.operands, s.args) if p in s.rule.row_sum_vjp}
    out = set()
    for s in walk(fn.body):
        if isinstance(s, Prim) and s.rule.signs and \
                len(s.targets) == 1 and all(isinstance(a, Var) for a in s.args):
            t = s.targets[0]
            ranks = [known.get(a.name) for a in s.args]
            active = [a.name in act for a in s.args]
            if t in left and count.get(t) == 1 and sorted(ranks) == [1, 2] and \
                    not active[ranks.index(2)] and active[ranks.index(1)]:
                out.add(t)
    return out


def _same_shape(fn):
    """Values made by a unary elementwise function whose adjoint reads its
    operand (``t = np.square(x)``, not ``np.exp``, whose adjoint reads t):
    t -> x, which has t's shape (and, differentiated, t's float dtype)."""
    out = {}
    for s in walk(fn.body):
        partial = _unary_partial(s)
        if partial is not None and s.rule.operands[0] in partial and "out" not in partial:
            out[s.targets[0]] = s.args[0].name
    return out


def _shifted_same_shape(fn, known, act):
    """``t = a + s`` (or ``-``, ``*``, ``/``) with ``s`` a scalar and ``a`` an
    active array of ``t``'s rank: t -> a, which has t's shape and float dtype.

    ``np.sum(a + trace)``'s adjoint then takes its shape from ``a``, and the
    gradient no longer computes the full-size ``a + trace``, whose only use
    is the sum (see Statements._shapes_from_operands).  Chains follow through:
    ``np.sum(2.0 * a + s)`` takes its shape from ``a``.
    """
    out = {}
    for s in walk(fn.body):
        if not (isinstance(s, Prim) and s.rule.elementwise and s.rule.broadcast
                and len(s.targets) == 1 and len(s.args) == 2):
            continue
        rank = known.get(s.targets[0])
        arrays = [a for a in s.args if isinstance(a, Var) and known.get(a.name) == rank]
        scalars = [a for a in s.args if isinstance(a, Const) or (
            isinstance(a, Var) and known.get(a.name) == 0)]
        if rank and len(arrays) == 1 and len(scalars) == 1 and act.is_active(arrays[0]):
            out[s.targets[0]] = out.get(arrays[0].name, arrays[0].name)
    return out


def _times_kept(partial):
    """``rt.times_kept(g, partial)``: a kept reduction's cotangent ``g`` scales
    the rows of an elementwise partial.  A constant factor of the partial
    (``2.0 * x``, np.square's) scales ``g`` instead, which is small, so the
    full-size product is computed once; the product is made in place when the
    partial is a new array."""
    g = codegen.name("g")
    if isinstance(partial, ast.BinOp) and isinstance(partial.op, ast.Mult):
        for c, rest in ((partial.left, partial.right), (partial.right, partial.left)):
            if isinstance(c, ast.Constant) and isinstance(c.value, (int, float)):
                g, partial = ast.BinOp(g, ast.Mult(), c), rest
                break
    fresh = not isinstance(partial, ast.Name)
    return ast.Call(codegen.name("rt.times_kept"), [g, partial],
                    [ast.keyword("temporary", ast.Constant(True))] if fresh else [])


def _unary_partial(s):
    """The names the partial derivative of ``s`` reads, if ``s`` is a unary
    elementwise primitive of a variable (else None)."""
    if isinstance(s, Prim) and s.rule.elementwise and not s.rule.vjp and \
            len(s.targets) == 1 and len(s.args) == 1 and isinstance(s.args[0], Var):
        return codegen.names_in(parse_template(s.rule.partials[s.rule.operands[0]]))
    return None


def _use_counts(fn):
    """How many statements of ``fn`` use each name: its reads (see dce.reads),
    less those of values nothing reads after their loop.  A name a loop
    carries only because the user's variable outlives it (``sq = Lx * Lx``
    in a loop body), which only the loop's header lists, is not used by the
    header, nor is a value by its copy into such a name: neither has an
    adjoint."""
    count = read_counts(fn.body)
    unread = {h for s in walk(fn.body) if isinstance(s, (For, While))
              for h in s.carried if count.get(h) == 1}
    for h in unread:
        count[h] = 0
    for s in walk(fn.body):
        if isinstance(s, Prim) and s.rule.name == "copy" and s.targets[0] in unread and \
                isinstance(s.args[0], Var):
            count[s.args[0].name] -= 1
    return count


def _outside_loops(body):
    """The statements of ``body``, those in branches included, not in inner loops."""
    for s in body:
        yield s
        if isinstance(s, If):
            yield from _outside_loops(s.body)
            yield from _outside_loops(s.orelse)


def _increments(fn):
    """Element increments ``t = x[i]; ...; u = t + v; x[i] = u`` (``x[i] += v``):
    id of the write -> ``t``.

    The adjoint of such a write reads ``bu = bx[i]`` and leaves ``bx[i]``
    alone: zeroing it and adding ``bt`` (= ``bu``) back when the read is
    reached is the same value.  Only when ``t`` and ``u`` are read nowhere
    else, the three statements are in one block, and nothing between the
    read and the write can write into an array (or call a function).
    """
    counts = _use_counts(fn)
    found = {}
    for body in all_blocks(fn.body):
        for k, st in enumerate(body):
            if not (isinstance(st, Prim) and st.rule.mutates and st.rule.name == "setitem"
                    and isinstance(st.args[1], Var)):
                continue
            x, u = st.args
            for j in range(k - 1, -1, -1):
                add = body[j]
                if not isinstance(add, Prim) or add.rule.mutates:
                    break
                if add.targets != [u.name]:
                    continue
                if add.rule.signs != (1, 1) or counts.get(u.name) != 1:
                    break
                t = next((a for a in add.args if isinstance(a, Var) and counts.get(a.name) == 1
                          and _reads_element(body[:j], a.name, x.name, st.params["index"])),
                         None)
                if t is not None:
                    found[id(st)] = t.name
                break
    return found


def _reads_element(body, name, array, index):
    """Whether ``name`` is ``array[index]``, read in ``body`` with only pure
    statements after it."""
    for st in reversed(body):
        if isinstance(st, Prim) and st.targets == [name]:
            return st.rule.name == "getitem" and st.args[0] == Var(array) and \
                st.params.get("index") == index
        if not isinstance(st, Prim) or st.rule.mutates:
            return False
    return False
