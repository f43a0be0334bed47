"""Dead-code elimination that tells values from shapes (issue 22).

:func:`dce.keep` keeps every statement whose result something later reads.
An adjoint sweep often reads a primal array for its shape alone
(``rt.sum_grad(g, B)``, ``rt.unbroadcast(g, A[:-2])``): the gradient of a
linear stencil ``B[1:-1] = c * (A[:-2] + A[1:-1] + A[2:])`` in a time loop,
with the loss a sum of the outputs, reads neither ``A`` nor ``B``'s values.
An element or slice write cannot change an array's shape, so such a read
needs the array's definition (``B = B.copy()``) but none of the writes into
it, nor what they store: :func:`keep_values` drops them, and with them the
whole primal time loop.

Two sets of live names: ``values`` (their values are read) and ``shapes``
(only their shapes, dtypes or lengths).  Walking backwards:

* an element write into ``a`` is kept when ``a``'s value, or that of any
  name looking into the same memory (``roots``: view -> the arrays it may
  look into), is live; a write into something that is not an array
  (``is_array``) is kept whenever ``a`` is live at all;
* any other statement is kept when a target is live; its operands' values
  become live, except that a view or copy (``x[i:]``, ``x.reshape(...)``,
  ``np.copy(x)``: ``Rule.shaped_by_first``) or a metadata read (``np.shape(x)``, ``len(x)``) needs
  only the shape of ``x`` when its own value is not needed (metadata reads:
  ever);
* branch conditions and loop bounds are values.
"""
from ..ir import Call, For, If, Prim, Return, Var, While, var_names
from .dce import reads


class _Live:
    """Live names: values and shapes, with the memory roots of the values."""

    def __init__(self, values, shapes, roots):
        self.roots = roots
        self.values, self.shapes = set(), set(shapes)
        self.value_roots = set()
        self.add_values(values)

    def add_values(self, names):
        for n in names:
            if n not in self.values:
                self.values.add(n)
                self.value_roots |= self.roots.get(n, {n})

    def copy(self):
        out = _Live((), self.shapes, self.roots)
        out.values, out.value_roots = set(self.values), set(self.value_roots)
        return out

    def update(self, other):
        self.add_values(other.values)
        self.shapes |= other.shapes

    def covers(self, other):
        return other.values <= self.values and other.shapes <= self.shapes

    def any(self, names):
        return bool(names & self.values or names & self.shapes)


def keep_values(body, values, shapes, roots, is_array, extra_defs=None, loops=()):
    """Ids of the statements of ``body`` needed for ``values`` (names whose
    values are read afterwards) and ``shapes`` (names read for their shape).

    ``roots``: each view's name -> the arrays it may look into; ``is_array(name)``:
    whether a name is an array (whose element writes keep its shape);
    ``extra_defs`` and ``loops`` as in :func:`dce.keep`.
    """
    kept = set()
    ctx = (kept, extra_defs or {}, set(loops), is_array)
    _keep(body, _Live(values, set(shapes) - set(values), roots), ctx)
    return kept


def _keep(body, live, ctx):
    kept, extra, loops, is_array = ctx
    for s in reversed(body):
        if isinstance(s, Return):
            kept.add(id(s))
            live.add_values(reads(s))
        elif isinstance(s, Prim) and s.rule.mutates:
            a = s.args[0].name
            needed = a in live.values or live.roots.get(a, {a}) & live.value_roots \
                or (a in live.shapes and not is_array(a)) \
                or live.any(set(extra.get(id(s), ())))
            if needed:
                kept.add(id(s))
                live.add_values(reads(s))
        elif isinstance(s, (Prim, Call)):
            names = set(s.targets) | set(extra.get(id(s), ()))
            if not live.any(names) and not (isinstance(s, Prim) and s.rule.effect):
                continue
            kept.add(id(s))
            first = s.args[0] if isinstance(s, Prim) and s.args else None
            if isinstance(first, Var) and (s.rule.metadata or (
                    s.rule.shaped_by_first and not names & live.values)):
                rest = set(var_names(list(s.args[1:]) + list(s.params.values())))
                live.add_values(rest)
                if first.name not in rest:
                    live.shapes.add(first.name)
            else:
                live.add_values(reads(s))
        elif isinstance(s, If):
            after = live.copy()
            live_in = _keep(s.body, after.copy(), ctx)
            live_in.update(_keep(s.orelse, after.copy(), ctx))
            if _any_kept(s.body, kept) or _any_kept(s.orelse, kept):
                kept.add(id(s))
                live.update(live_in)
                live.add_values(var_names([s.cond]))
        elif isinstance(s, (For, While)):
            inner = live.copy()
            needed = id(s) in loops or _needs(s.body, inner, ctx)
            while needed:     # until the names live around the back edge settle
                live_in = _keep(s.body, inner.copy(), ctx)
                if isinstance(s, While):
                    live_in.add_values(var_names([s.cond]))
                    live_in = _keep(s.test, live_in, ctx)
                if inner.covers(live_in):
                    break
                inner.update(live_in)
            if needed and (_any_kept(s.body, kept) or id(s) in loops):
                kept.add(id(s))
                live.update(inner)
                if isinstance(s, For):
                    live.add_values(var_names([s.start, s.stop, s.step]))
        else:
            raise TypeError(s)
    return live


def _needs(body, live, ctx):
    """Whether anything in a loop body is needed for ``live`` (a dry run)."""
    trial = set()
    _keep(body, live.copy(), (trial,) + ctx[1:])
    return bool(trial)


def _any_kept(body, kept):
    return any(id(s) in kept for s in body)
