"""scalings: a scalar factor of a matrix-vector product scales the vector.

``alpha * A @ x`` is ``(alpha * A) @ x`` in Python: a scaled copy of the
whole matrix, then the product, and in the gradient the matrix-sized
adjoint of the product scaled once more (``bA = outer(g, x) * alpha``).
``alpha * (A @ x)`` is the same number up to rounding and scales a vector
instead, in the primal and in every derivative (``bA = outer(g * alpha,
x)``).  This pass rewrites the lowered function that way, before any
derivative is taken (issue 22, ``docs/array_loops.md``):

    t = s * M          (or M * s, M / s)      u = M @ v
    y = t @ v          (or v @ t)       ->    y = s * u      (u * s, u / s)

when ``s`` is a scalar, ``M`` a matrix and ``v`` a vector (rank 1), and
``t`` is read by the product alone, in the same block, with nothing in
between writing into ``M`` or ``v``.  Matrix-matrix products are left as
they are (which side is smaller is not known before run time).
"""
from dataclasses import replace

from ..analyses.dce import read_counts
from ..analyses.ranks import infer, rank_of
from ..ir import Const, Prim, Rewriter, Var, walk


def _is_product(s):
    """A two-operand contraction (``Rule.contraction``: np.matmul, np.dot) with no options."""
    return isinstance(s, Prim) and s.rule.contraction and len(s.args) == 2 and not s.params


def move_scalings(fn, param_ranks=None):
    """``fn`` with scaled matrices in matrix-vector products rewritten (a new
    function; ``fn`` itself is left as it is), or ``fn`` when there are none."""
    if not any(_is_product(s) for s in walk(fn.body)):
        return fn
    ranks = infer(fn, param_ranks or [None] * len(fn.params))
    mover = _Mover(ranks, read_counts(fn.body), fn.names)
    body = mover.block(fn.body)
    if not mover.moved:
        return fn
    return replace(fn, body=body)


class _Mover(Rewriter):
    def __init__(self, ranks, counts, names):
        self.ranks, self.counts, self.names = ranks, counts, names
        self.moved = 0

    def block(self, stmts):
        out = super().block(stmts)
        k = 0
        while k < len(out):
            s = out[k]
            found = self._scaling(s)
            if found is not None:
                j = self._product(out, k, s)
                if j is not None:
                    out[j:j + 1] = self._rewrite(s, found, out[j])
                    del out[k]
                    self.moved += 1
                    continue
            k += 1
        return out

    def _scaling(self, s):
        """(position of the matrix, the matrix) when ``s`` scales a matrix by a scalar."""
        if not (isinstance(s, Prim) and len(s.targets) == 1 and len(s.args) == 2
                and not s.params):
            return None
        for m, operand in enumerate(s.rule.operands):
            if operand in s.rule.scales:
                matrix, scalar = s.args[m], s.args[1 - m]
                if isinstance(matrix, Var) and rank_of(matrix, self.ranks) == 2 and (
                        isinstance(scalar, Const) and type(scalar.value) in (int, float)
                        or isinstance(scalar, Var) and self.ranks.get(scalar.name) == 0):
                    return m, matrix
        return None

    def _product(self, body, k, scaling):
        """Index of the matrix-vector product reading the scaled matrix (its
        only read) after ``body[k]``, with nothing in between writing into
        an array or rebinding the scaling's operands."""
        t = scaling.targets[0]
        operands = {a.name for a in scaling.args if isinstance(a, Var)}
        if self.counts.get(t) != 1:
            return None
        for j in range(k + 1, len(body)):
            s = body[j]
            if _is_product(s) and t in [a.name for a in s.args if isinstance(a, Var)]:
                other = s.args[1] if s.args[0] == Var(t) else s.args[0]
                if s.args[0] == s.args[1] or rank_of(other, self.ranks) != 1:
                    return None
                return j
            if any(isinstance(x, Prim) and x.rule.mutates or
                   operands & set(getattr(x, "targets", ())) for x in walk([s])):
                return None      # a write (into M, v or a view of them) may change them
        return None

    def _rewrite(self, scaling, found, product):
        m, matrix = found
        t = Var(scaling.targets[0])
        u = self.names.temp()
        args = [matrix if a == t else a for a in product.args]
        new_product = Prim([u], product.rule, args, dict(product.params), product.loc)
        scaled = list(scaling.args)
        scaled[m] = Var(u)
        return [new_product, Prim(list(product.targets), scaling.rule, scaled,
                                  dict(scaling.params), scaling.loc)]
