"""The :class:`Program`: every function lowered for one request, each once per
argument structure, and the local functions (lambdas, nested defs) it met.
"""

from ...ir.names import Names
from .. import custom
from ..parse import (
    FunctionSource,
    closure_cells,
    read_closure,
)
from .lowerer import Lowerer


class Program:
    """Every function lowered for one request, each once per argument structure."""

    def __init__(self):
        self.functions = {}
        self.arg_writes = {}          # function key -> {param leaf: Loc of a write into it}
        self.entry_writes = False     # the entry function, run as Python, writes into an argument
        self._active = []
        #: nested blocks being lowered (a branch on run-time values, a loop body):
        #: 0 where a statement runs on every call (``stmt_Raise``)
        self.run_time_blocks = 0
        self.module_names = Names()   # functions and constants share the module namespace
        self.consts = {}
        self._sources = {}
        #: inner gradients by forward-mode columns, not reverse code (the CUDA target)
        self.nested_columns = False

    def source(self, fn):
        """The parsed and fenced source of ``fn`` (parsed once)."""
        if fn not in self._sources:
            self._sources[fn] = FunctionSource(fn)
        return self._sources[fn]

    def const_name(self, base, obj):
        """The module-level name bound to ``obj`` in the generated module."""
        for name, value in self.consts.items():
            if value is obj:
                return name
        name = self.module_names.fresh(base)
        self.consts[name] = obj
        return name

    def lower(self, fn, trees, call_node=None, caller=None, ranks=None, known=(), tag=None):
        """``ranks``: the rank of each parameter leaf where known (the entry's,
        from the arguments; a helper's, from its call), so that ``np.ndim``
        and the library functions that depend on it specialise; ``known``:
        (position, value) of the entry's parameter leaves known before the run
        (None, strings); ``tag``: the custom rule or checkpoint ``fn`` is
        lowered for (the same ``fn`` called plainly is another function)."""
        ranks = tuple(ranks) if ranks is not None and any(
            r is not None for r in ranks) else None
        key = (fn, tuple(trees)) + ((ranks,) if ranks is not None else ()) + \
            ((tuple(known),) if known else ()) + ((tag,) if tag is not None else ())
        if key in self.functions:
            return self.functions[key]
        if fn in self._active:
            raise caller.error(call_node, f"recursive call to '{fn.__name__}' is not supported; "
                               "write the recursion as a loop")
        self._active.append(fn)
        try:
            src = self.source(fn)
            if caller is None and closure_cells(fn):
                # The entry's closed-over arrays and floats are hidden
                # parameters after its own, read at each call (see api).
                src.hidden = tuple(read_closure(closure_cells(fn))[0])
                src.locals = src.locals | set(src.hidden)
            lowerer = Lowerer(src, trees, self, ranks=ranks, known=known)
            lowered = lowerer.run()
            written = lowerer.written_params()
            if caller is None:
                self.entry_writes = bool(lowerer.arg_writes)
                if written:
                    # The entry function writes into an argument: the generated
                    # code copies it first, so the caller's array never changes
                    # (the derivative is that of the function of the input values).
                    lowered = Lowerer(src, trees, self, copies=written, ranks=ranks,
                                      known=known).run()
            self.arg_writes[key] = lowerer.arg_writes
            lowered.name = self.module_names.fresh(src.name)
            lowered.key = key
        finally:
            self._active.pop()
        self.functions[key] = lowered
        return lowered

    def lower_custom(self, custom_fn, trees, call_node=None, caller=None):
        """Lower a custom_vjp/custom_jvp function (its body), marked with its rule."""
        return custom.lower_custom(self, custom_fn, trees, call_node, caller)
