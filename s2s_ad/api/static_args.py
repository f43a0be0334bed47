"""``ad.jit(f, static_argnums=..., static_argnames=...)``, as in JAX.

A static argument is hashed, and the compiled code is built for its value
as a constant: one build per distinct value (ints, strings, tuples, None,
callables; floats too, which the build reads as arguments).  For each
distinct tuple of static values, a generated factory closes a def function
over ``f`` and those values::

    def static_f(fun, n):
        def f(x, y):
            return fun(x, n, y)
        return f

and that function (the *specialization*) is jitted like any other: a
closed-over int, string or function is built in as a constant.  Transforms
of a jitted function with static arguments (``ad.grad(ad.jit(f,
static_argnums=1))``) specialize it at each call and transform the
specialization, their ``argnums`` and ``in_axes`` counted, as in JAX, over
all the arguments, static ones included.
"""
import inspect
import threading
import types

from .. import backends

_FACTORIES = {}          # (name, parameters, static positions) -> generated factory
_LOCK = threading.Lock()


class StaticJit:
    """``ad.jit(fun, static_argnums=..., static_argnames=...)``."""

    __s2s_ad_object__ = "static_jit"

    def __init__(self, fun, static_argnums, static_argnames, compile):
        self.fun = fun
        self.base = getattr(fun, "fun", fun)      # ad.jit(f) or a custom_jvp: the def
        self.params = _positional(self.base)
        self.static = _static_positions(self.base, self.params, static_argnums,
                                        static_argnames)
        self.compile = compile           # the specialization -> its ad.jit
        self._specialized = {}           # static key -> the jitted specialization
        self._lock = threading.Lock()
        self.__name__ = getattr(self.base, "__name__", "f")
        self.__qualname__ = getattr(self.base, "__qualname__", self.__name__)
        self.__doc__ = getattr(self.base, "__doc__", None)
        self.__wrapped__ = fun
        if isinstance(self.base, types.FunctionType) and self.base is getattr(
                fun, "__s2s_ad_function__", fun):
            # Called inside a transformed function, it is lowered as the def it
            # wraps, its static arguments being the call's constants.
            self.__s2s_ad_function__ = self.base

    def __repr__(self):
        return (f"<s2s_ad jit of {self.__qualname__} with static arguments "
                f"{tuple(self.params[i] for i in self.static)}>")

    def __call__(self, *args, **kwargs):
        fn, dynamic, _ = self.specialize(args, kwargs)
        return fn(*dynamic)

    def specialize(self, args, kwargs):
        """(the jitted specialization for the call, the call's dynamic
        arguments in order, the positions built in).

        Built in are the static arguments and, as under JAX's jit (which
        sees only the arguments passed), the parameters the call leaves to
        their defaults."""
        values, passed = self._bind(args, kwargs)
        fixed = tuple(i for i in range(len(values)) if i in self.static or i not in passed)
        key = (fixed,) + tuple(_static_key(self.params[i], values[i]) if i in self.static
                               else (id(values[i]),) for i in fixed)
        fn = self._specialized.get(key)
        if fn is None:
            with self._lock:
                fn = self._specialized.get(key)
                if fn is None:
                    factory = _factory(self.__name__, self.params, fixed)
                    fn = self._specialized[key] = self.compile(
                        factory(self.fun, *(values[i] for i in fixed)))
        return fn, tuple(v for i, v in enumerate(values) if i not in fixed), fixed

    def _bind(self, args, kwargs):
        """Every positional parameter's value (the call's, else its default),
        and the positions the call passed."""
        try:
            bound = inspect.signature(self.base).bind(*args, **kwargs)
        except TypeError as error:
            raise TypeError(f"{self.__qualname__}(): {error}") from None
        passed = {self.params.index(p) for p in bound.arguments}
        bound.apply_defaults()
        return [bound.arguments[p] for p in self.params], passed

    def dynamic_position(self, i, what, fixed=None):
        """Argument ``i``'s position among the dynamic ones (a transform's
        ``argnums``); a static one is refused, as in JAX (``fixed``: the
        positions a call builds in, by default the static ones)."""
        fixed = self.static if fixed is None else fixed
        if i in self.static:
            raise ValueError(f"{what} refers to argument {i} ('{self.params[i]}') of "
                             f"{self.__qualname__}, which is static (static_argnums/"
                             f"static_argnames): a static argument is a constant of the "
                             f"compiled code and cannot be {_verb(what)}")
        if i in fixed:
            raise ValueError(f"{what} refers to argument {i} ('{self.params[i]}') of "
                             f"{self.__qualname__}, which the call does not pass (its "
                             f"default is built in); pass it positionally")
        return i - sum(s < i for s in fixed)

    def transform_with(self, make, describe):
        """A transform of this function: ``make(specialization, fixed)`` for
        each call's static values (``fixed``: the positions built in, see
        :meth:`specialize`; ``describe``: the transform's name)."""
        return StaticTransform(self, make, describe)



class StaticTransform:
    """A transform of a :class:`StaticJit` (or of another such transform):
    each call specializes it for its static values and calls the transform
    of the specialization."""

    __s2s_ad_object__ = "static_transform"

    def __init__(self, inner, make, describe):
        self.inner = inner
        self.make = make
        self.describe = describe
        self.params, self.static = inner.params, inner.static
        self.__qualname__ = inner.__qualname__
        self._built = {}
        self._lock = threading.Lock()

    def __repr__(self):
        return f"<s2s_ad {self.describe} of {self.inner!r}>"

    def __call__(self, *args, **kwargs):
        fn, dynamic, _ = self.specialize(args, kwargs)
        return fn(*dynamic)

    def specialize(self, args, kwargs):
        """As :meth:`StaticJit.specialize`, the specialization transformed."""
        fn, dynamic, fixed = self.inner.specialize(args, kwargs)
        t = self._built.get(fn)
        if t is None:
            with self._lock:
                t = self._built.get(fn)
                if t is None:
                    t = self._built[fn] = self.make(fn, fixed)
        return t, dynamic, fixed

    dynamic_position = StaticJit.dynamic_position
    transform_with = StaticJit.transform_with


def _verb(what):
    return "batched" if "in_axes" in what else "differentiated"


def _positional(fun):
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        raise TypeError(f"jit with static arguments needs a function with a signature, got "
                        f"{fun!r}") from None
    if any(p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params):
        raise TypeError(f"{fun.__qualname__}: keyword-only and variadic parameters are not "
                        f"supported by transforms; make them positional")
    return [p.name for p in params]


def _static_positions(fun, params, nums, names):
    """The static parameters' positions, sorted; from ``static_argnums`` and
    ``static_argnames`` (each also naming the other, as in JAX)."""
    nums = () if nums is None else (nums,) if isinstance(nums, int) else tuple(nums)
    names = () if names is None else (names,) if isinstance(names, str) else tuple(names)
    positions = set()
    for i in nums:
        if not isinstance(i, int) or isinstance(i, bool):
            raise TypeError(f"static_argnums must be an int or a tuple of ints, got {nums!r}")
        if not -len(params) <= i < len(params):
            raise ValueError(f"static_argnums={nums!r} is out of range: {fun.__qualname__} "
                             f"takes {len(params)} arguments")
        positions.add(i % len(params))
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"static_argnames must be a string or a tuple of strings, got "
                            f"{names!r}")
        if name not in params:
            raise ValueError(f"static_argnames names '{name}', which is not a parameter of "
                             f"{fun.__qualname__} (its parameters: {', '.join(params)})")
        positions.add(params.index(name))
    return tuple(sorted(positions))


def _static_key(name, value):
    """What a build is kept under for a static value; ``ValueError`` (as JAX's)
    for one that cannot be hashed."""
    try:
        hash(value)
    except TypeError as error:
        raise ValueError(f"Non-hashable static arguments are not supported: the static "
                         f"argument '{name}' is {type(value).__name__} {value!r} ({error}); "
                         f"pass a hashable value (a tuple, not a list or an array), or make "
                         f"the argument dynamic") from None
    return type(value), value


def _factory(name, params, static):
    """The generated factory of specializations (see the module docstring)."""
    key = (name, tuple(params), static)
    with _LOCK:
        made = _FACTORIES.get(key)
        if made is None:
            made = _FACTORIES[key] = _generate(name, params, static)
    return made


def _generate(name, params, static):
    own = name if name.isidentifier() else "specialized"
    fixed = [params[i] for i in static]
    dynamic = [p for i, p in enumerate(params) if i not in static]
    fun = "fun" if "fun" not in params else "static_fun"
    inner = own if own not in params + [fun] else "specialized"
    factory = f"static_{own}"
    text = (f'"""Generated by s2s_ad: {name} with its static arguments '
            f'({", ".join(fixed)}) built in."""\n\n\n'
            f"def {factory}({', '.join([fun] + fixed)}):\n"
            f"    def {inner}({', '.join(dynamic)}):\n"
            f"        return {fun}({', '.join(params)})\n"
            f"    return {inner}\n")
    path = backends.write_module(text, {}, factory)
    module = backends.import_file(
        path, f"s2s_ad_generated.{backends.module_name(text, {}, factory)}", {}, text)
    return getattr(module, factory)


def is_static(fun):
    """Whether ``fun`` is a :class:`StaticJit` or a transform of one."""
    return getattr(type(fun), "__s2s_ad_object__", None) in ("static_jit", "static_transform")


def remap_argnums(static, argnums, fixed=None, what="argnums"):
    """``argnums`` (an int or a tuple of ints over all the arguments) counted
    over the dynamic arguments only (``fixed``: the positions built in, see
    :meth:`StaticJit.specialize`)."""
    n = len(static.params)
    items = (argnums,) if isinstance(argnums, int) else argnums
    if not isinstance(items, tuple) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in items):
        raise TypeError(f"{what} must be an int or a non-empty tuple of ints, got {argnums!r}")
    for i in items:
        if not -n <= i < n:
            raise ValueError(f"{what}={argnums!r} is out of range: {static.__qualname__} takes "
                             f"{n} arguments")
    out = tuple(static.dynamic_position(i % n, f"{what}={argnums!r}", fixed) for i in items)
    return out[0] if isinstance(argnums, int) else out


def remap_in_axes(static, in_axes, fixed):
    """vmap's ``in_axes`` (one per argument passed) without the entries of the
    positions built in (which must be None: a static argument is not batched)."""
    if not isinstance(in_axes, (tuple, list)):
        return in_axes
    for i in fixed:
        if i < len(in_axes) and in_axes[i] is not None:
            static.dynamic_position(i, f"in_axes[{i}]={in_axes[i]!r}", fixed)
    kept = [a for i, a in enumerate(in_axes) if i not in fixed]
    return type(in_axes)(kept)


def dynamic_only(values, fixed):
    """``values`` (one per argument, as jvp's tangents) without those at the
    positions built in."""
    return tuple(v for i, v in enumerate(values) if i not in fixed)
