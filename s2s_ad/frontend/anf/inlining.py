"""Calls lowered by inlining or as separate functions: local functions
(lambdas, nested defs) in place, user functions once per argument structure
(in place when they write into an argument), the library's implementations
of NumPy functions in place with constant options folded.
"""
import contextlib
import dataclasses
import inspect

import gast

from ...analyses.ranks import call_ranks, rank_of
from ...ir import (
    Call,
    Const,
    Prim,
    Tup,
    Var,
    tree_of,
    walk,
)
from .common import (
    LocalFn,
    StaticFn,
    _has_branches,
    _has_loops,
    _InlinedSource,
    _leaves,
    free_runtime_names,
)


class Inlining:
    """Calls of local functions, user functions and library implementations."""

    def local_callee(self, func):
        """The local function a call's ``func`` names (or is), or None."""
        if isinstance(func, gast.Lambda):               # (lambda z: ...)(x)
            return self.local_function(func)
        if isinstance(func, gast.Name) and func.id in self.src.locals:
            value = self.env.get(func.id)
            if isinstance(value, LocalFn):
                return value
        return None

    def call_local(self, fn, node):
        """A call of a nested ``def`` or ``lambda``, lowered in place.

        Its parameters are bound to the call's values and its free names to
        the defining function's variables (their values now, or when it was
        passed to the function calling it), as Python's closures read them.
        """
        args = [self.expr(a) for a in node.args]
        kwargs = {k.arg: self.expr(k.value) for k in node.keywords}
        if None in kwargs:
            raise self.error(node, "**kwargs in calls is not supported; pass arguments by name")
        params = [a.id for a in fn.node.args.args]
        values = self.bound_values(fn, args, kwargs, node)
        if fn.node in self.program._active:
            raise self.error(node, f"recursive call to '{fn.name}' is not supported; "
                             "write the recursion as a loop")
        env = fn.env if fn.env is not None else fn.owner.env
        child = type(self).__new__(type(self))
        child.__dict__.update(self.__dict__)     # this function's body, names, tables
        child.src, child.node = fn.src, fn.node
        child.env = {k: v for k, v in env.items() if k not in fn.src.own}
        child.env.update((p, self.passed(v)) for p, v in zip(params, values))
        start = len(self.body)
        try:
            if isinstance(fn.node, gast.Lambda):
                with self._lowering(fn.node):
                    return child.expr(fn.node.body)
            return self._lower_body(child, fn.node.body, fn.node).value
        finally:
            self._count_writes(start)    # it wrote into an array (a call for its effect)

    def bound_values(self, fn, args, kwargs, node):
        """The values of a call of ``fn`` (a module-level function or method, or
        a :class:`LocalFn`) in its parameters' order: positional ``args``,
        then ``kwargs``, then defaults (a function's, as constants)."""
        if isinstance(fn, LocalFn):
            name, params, defaults = fn.name, [a.id for a in fn.node.args.args], fn.defaults
            default = defaults.__getitem__
        else:
            name = fn.__name__
            params = list(fn.__code__.co_varnames[:fn.__code__.co_argcount])
            if inspect.ismethod(fn):
                params = params[1:]          # self.helper(x): self is a constant
            defaults = fn.__defaults__ or ()
            first = len(params) - len(defaults)

            def default(i):
                return self.constant(params[first + i], defaults[i], node)
        if len(args) > len(params):
            raise self.error(node, f"{name}() takes {len(params)} arguments, got {len(args)}")
        bound = self._bind(name, params, len(defaults), default, args, kwargs, node)
        return [bound[p] for p in params]

    def _bind(self, name, params, n_defaults, default, args, kwargs, node):
        """The call's values by parameter name: positional ``args``, then
        ``kwargs``, then ``default(i)`` for the i-th of the last
        ``n_defaults`` parameters (called only for the missing ones)."""
        bound = dict(zip(params, args))
        for k, v in kwargs.items():
            if k not in params or k in bound:
                raise self.error(node, f"bad keyword argument '{k}' in call to {name}()")
            bound[k] = v
        first_default = len(params) - n_defaults
        for i, p in enumerate(params):
            if p not in bound:
                if i < first_default:
                    raise self.error(node, f"{name}() is missing the argument '{p}'")
                bound[p] = default(i - first_default)
        return bound

    def passed(self, value):
        """``value`` as passed to another function: a local function carries
        its defining function's variables as they are now."""
        if isinstance(value, LocalFn) and value.env is None:
            return dataclasses.replace(value, env=dict(value.owner.env))
        return value

    def call_user(self, fn, args, kwargs, node, custom=None):
        if getattr(custom, "policy", None) == "everything_saveable":
            custom = None      # ad.checkpoint keeping everything: a plain call
        values = self.bound_values(fn, args, kwargs, node)
        src = self.program.source(fn)
        if custom is not None:       # never in place: its rule replaces its body
            return self.call_custom(custom, [self.passed(v) for v in values], node)
        if any(isinstance(v, LocalFn) for v in values):
            # apply(f, x) with f a nested def or lambda: lowered in place, so
            # that calls of f inside it see f's variables.
            return self.inline(fn, [self.passed(v) for v in values], node)
        if any(isinstance(v, Const) and (v.value is None or callable(v.value))
               for v in values):
            # helper(x, None), or a default None: in place, so that the body
            # reads the constant (``if w is None:`` takes its branch); and
            # helper(x, np.sin): the body calls the function it is passed.
            return self.inline(fn, values, node)
        if custom is None and self.loops and _has_loops(src):
            return self.inline(fn, values, node)
        trees = [tree_of(v) for v in values]
        callee = self.program.lower(fn, trees, node, self.src,
                                    [rank_of(leaf, self.ranks) for v in values
                                     for leaf in _leaves(v)])
        if self.program.arg_writes.get(callee.key) or _has_branches(callee):
            # A helper that writes into an array it is passed is lowered
            # into this function, so the write lands in the caller's array.
            return self.inline(fn, values, node)
        return self._emit_call(callee, values, node)

    def call_custom(self, custom, values, node):
        """A call of an ad.custom_vjp / ad.custom_jvp function: a call of its
        lowered body, marked with its rule.  A local function passed to it is
        bound into it (and into its rules) where it reads no run-time value
        of this function."""
        for v in values:
            if isinstance(v, LocalFn) and free_runtime_names(v):
                names = ", ".join(free_runtime_names(v))
                raise self.error(node, f"the function passed to {custom.fun.__name__}() reads "
                                 f"{names} of the calling function: a function passed to an "
                                 f"ad.{custom.kind} function may read only its own arguments "
                                 f"(pass {names} as another argument)")
        trees = [StaticFn(v) if isinstance(v, LocalFn) or _is_function(v) else tree_of(v)
                 for v in values]
        callee = self.program.lower_custom(custom, trees, node, self.src)
        writes = self.program.arg_writes.get(callee.key)
        if writes:
            loc = next(iter(writes.values()))
            raise self.error(node, f"{custom.fun.__name__}() writes into an array it is passed "
                             f"(line {loc.lineno}: '{loc.text.strip()}'), so it cannot be an "
                             f"ad.{custom.kind} function: write into a copy "
                             f"(np.copy) and return it")
        return self._emit_call(callee, [Tup(()) if _is_function(v) else v for v in values], node)

    def _emit_call(self, callee, values, node):
        leaves = [leaf for v in values for leaf in _leaves(v)]
        out = self._fresh_like(callee.out_tree)
        call = Call([t.name for t in _leaves(out)], callee, leaves, self.src.loc(node))
        self.body.append(call)
        for t, r in zip(call.targets, call_ranks(call, self.ranks)):
            self.note_rank(t, r)
        return out

    def inline(self, fn, values, node):
        """Lower a call's body into this function; returns the call's value.

        Used for a user function that loops, called inside a loop: lowered
        in place, its loops share this function's tape, so the adjoint does
        not allocate a stack per call (a separate fwd/bwd pair would); and
        for a user function with branches (see ``_has_branches``); and for
        one that writes into an array it is passed, so that the caller sees
        the write (and its derivative flows through it).
        """
        if fn in self.program._active:
            raise self.error(node, f"recursive call to '{fn.__name__}' is not supported; "
                             "write the recursion as a loop")
        values, writebacks = self.view_arguments(fn, values, node)
        src = self.program.source(fn)
        child = self._inlined(src, values)
        child.view_of, child.remade, child.effects = self.view_of, self.remade, 0
        ret = self._lower_body(child, src.node.body, fn)
        for name in child.arg_writes:           # the caller's arrays it wrote into
            self.note_write(Var(name), node)
        for array, index, copy in writebacks:
            self.emit_setitem(array, index, copy)
        if child.arg_writes:
            self.effects += 1
        return ret.value

    def call_library(self, impl, args, kwargs, node):
        """A call of a NumPy/SciPy function written in :mod:`s2s_ad.rules.library`:
        its implementation is lowered in place with the call's arguments bound
        (constant options select their branches); what goes wrong inside is
        reported at the user's call, naming the NumPy function."""
        name = getattr(self.src, "library_name", impl.name)
        if "out" in kwargs:
            raise self.error(node, f"{name}(..., out=...) writes into an array, which is not "
                             f"differentiated; assign the result instead (y = {name}(...))")
        try:
            bound = impl.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise self.error(node, f"{impl.name}(): {exc} (supported parameters: "
                             f"{', '.join(impl.signature.parameters)})") from None
        values = []
        for p, param in impl.signature.parameters.items():
            if param.kind is param.VAR_POSITIONAL:        # np.meshgrid(*xi): a tuple
                values.append(Tup(tuple(bound.arguments.get(p, ()))))
            else:
                values.append(bound.arguments[p] if p in bound.arguments
                              else self.constant(p, param.default, node))
        src = _InlinedSource(self.program.source(impl.fn), self.src, node, name)
        if self.program._active.count(impl.fn) > 32:    # constant options end a recursion
            raise self.error(node, f"{impl.name} calls itself too deeply")
        child = self._inlined(src, values)
        start = len(self.body)
        ret = self._lower_body(child, src.node.body, impl.fn)
        self._count_writes(start)       # np.add.at / np.put: a call for its effect
        return ret.value

    def _lower_body(self, child, body, key):
        """Lower ``body`` with ``child`` (a lowerer sharing this function's
        body) while ``key`` is on the stack of calls being lowered (which
        refuses recursion); returns the statement its ``return`` left last."""
        with self._lowering(key):
            for stmt in body:
                child.node = stmt
                child.stmt(stmt)
        return child.body.pop()

    @contextlib.contextmanager
    def _lowering(self, key):
        self.program._active.append(key)
        try:
            yield
        finally:
            self.program._active.pop()

    def _count_writes(self, start):
        """Count the statements lowered since ``start`` as a call for its
        effect when they write into an array."""
        if any(isinstance(p, Prim) and p.rule.name == "setitem" for p in walk(self.body[start:])):
            self.effects += 1

    def _inlined(self, src, values):
        """A lowerer for ``src`` lowered in place here: its parameters bound to
        ``values``; this function's body, names, tables and write tracking."""
        child = type(self).__new__(type(self))
        child.src, child.program, child.names = src, self.program, self.names
        child.consts, child.body, child.loops = self.consts, self.body, self.loops
        child.cse, child.views, child.ranks = self.cse, self.views, self.ranks
        child.writes, child.made_at = self.writes, self.made_at
        child.copied_from, child.outer_envs = self.copied_from, self.outer_envs + (self.env,)
        child.params, child.written = self.params, self.written
        child.arguments = {leaf.name for v in values for leaf in _leaves(v)
                           if isinstance(leaf, Var)}
        child.arg_writes = {}
        child.env = dict(zip(src.param_names, values))
        child.param_trees = list(values)
        return child


def _is_function(value):
    """A module-level function passed as a value (``fixed_point(update, a, x)``)."""
    return isinstance(value, Const) and callable(value.value) and not isinstance(
        value.value, type)
