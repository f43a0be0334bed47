"""transform (compiled code): indexing with index arrays of two or more dimensions.

Receives a lowered function and its parameters' ranks; returns it with
every ``x[index]`` and ``x[index] = v`` whose index is one array of known
rank two or more -- a boolean mask over several axes (``x[x > 0]`` for a
matrix), an N-d integer array -- or integer arrays of one shape on the
leading axes, one of them N-d (``x[i2d, j2d]``), written with the runtime helpers of
``runtime/index_arrays.py``, which Numba compiles (its own ``x[mask]``
takes a 1-D mask only, and no N-d integer index is differentiated):

    y = x[m]          ->  y = rt.index_take(x, m)
    x[m] = v          ->  t = rt.index_put(x, m, v); x[:] = t

The write stays a write into ``x``'s storage (every alias sees it), and
``x[m] += v`` is the read and the write above.  Functions it calls are
rewritten too.  Only the compiled targets use it: NumPy indexes with any
array itself.
"""
from dataclasses import replace

from .. import rules
from ..analyses import ranks as rank_inference
from ..ir import Const, Prim, Rewriter, Tup, Var
from ..rules.internal import INDEX_PUT, INDEX_TAKE


def lower(program, fn, param_ranks, cache=None):
    """``fn`` with its N-d index arrays as helper calls (``fn`` itself when it has none)."""
    cache = {} if cache is None else cache
    key = (fn.key, tuple(param_ranks))
    if key not in cache:
        cache[key] = fn            # a guard while rewriting (recursion)
        rw = _Rewrite(program, fn, param_ranks, cache)
        body = rw.block(fn.body)
        gradient = fn.gradient
        if gradient is not None:           # what its reverse code differentiates, too
            inner = lower(program, gradient.fn, param_ranks, cache)
            rw.changed |= inner is not gradient.fn
            gradient = replace(gradient, fn=inner)
        cache[key] = replace(fn, body=body, key=("index_arrays",) + tuple(fn.key),
                             gradient=gradient) if rw.changed else fn
    return cache[key]


class _Rewrite(Rewriter):
    def __init__(self, program, fn, param_ranks, cache):
        self.program, self.fn, self.cache = program, fn, cache
        self.ranks = rank_inference.infer(fn, list(param_ranks))
        self.changed = False

    def _array_index(self, index):
        """One array of rank 2 or more, or integers and index arrays (no slices), one of
        them of rank 2 or more (``x[i2d, j2d]``)."""
        if isinstance(index, Tup):
            ranks = [rank_inference.rank_of(p, self.ranks) for p in index.items]
            return all(isinstance(p, Var) or (isinstance(p, Const) and type(p.value) is int)
                       for p in index.items) and None not in ranks and max(ranks) >= 2
        return isinstance(index, Var) and (rank_inference.rank_of(index, self.ranks) or 0) >= 2

    def stmt_Prim(self, s, out):
        getitem, setitem = rules.RULES["getitem"], rules.RULES["setitem"]
        index = s.params.get("index")
        if s.rule is getitem and self._array_index(index):
            self.changed = True
            out.append(Prim(list(s.targets), INDEX_TAKE, [s.args[0]], {"index": index}, s.loc))
        elif s.rule is setitem and self._array_index(index):
            self.changed = True
            x, value = s.args
            new = self.fn.names.temp()
            out.append(Prim([new], INDEX_PUT, [x, value], {"index": index}, s.loc))
            out.append(Prim([], setitem, [x, Var(new)], {"index": Const(slice(None))}, s.loc))
        else:
            out.append(s)

    def stmt_Call(self, s, out):
        ranks = [rank_inference.rank_of(a, self.ranks) for a in s.args]
        callee = lower(self.program, s.callee, ranks, self.cache)
        if callee is not s.callee:
            self.changed = True
            s = replace(s, callee=callee)
        out.append(s)
