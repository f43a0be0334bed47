"""The registry of library implementations (see :mod:`s2s_ad.rules.library`)."""
import inspect
import types
from dataclasses import dataclass
from typing import Any

import numpy as np

IMPLEMENTATIONS: dict = {}   # canonical name -> Implementation
_BY_OBJECT: dict = {}        # id(NumPy/SciPy callable) -> Implementation
METHODS: dict = {}           # array method name -> Implementation


@dataclass
class Implementation:
    """A NumPy/SciPy function written in Python over ruled primitives."""
    name: str            # as users write it: "np.var", "scipy.special.expit"
    fn: Any              # the implementation (a def function in s2s_ad/rules/library/)
    obj: Any             # the NumPy/SciPy callable it stands for
    signature: Any = None
    doc: str = ""

    @property
    def where(self):
        """``s2s_ad/rules/library/statistics.py``: the file that holds it."""
        module = self.fn.__module__.replace(".", "/")
        return module + ".py"


def implements(obj, name=None, *, methods=(), also=()):
    """Register the decorated function as the implementation of ``obj``.

    ``name`` defaults to ``np.<obj.__name__>``; ``methods`` are array methods
    that call it (``x.var()``); ``also`` are other callables it stands for
    (``np.amax`` for ``np.max``).
    """
    def register(fn):
        full = name or f"np.{obj.__name__}"
        if full in IMPLEMENTATIONS:
            raise ValueError(f"library function {full} declared twice")
        doc = (inspect.getdoc(fn) or "").split("\n\n")[0].replace("\n", " ")
        impl = Implementation(full, fn, obj, inspect.signature(fn), doc)
        IMPLEMENTATIONS[full] = impl
        for o in (obj, *also):
            if _bound_method(o) is not None:
                BOUND_METHODS[_bound_method(o)] = impl
            elif o is not None:
                _BY_OBJECT[id(o)] = impl
        for m in methods:
            METHODS[m] = impl
        return fn
    return register


#: (id of the owner, method name) -> Implementation: ``np.add.at``,
#: ``scipy.stats.norm.logpdf``.
BOUND_METHODS: dict = {}


def _bound_method(obj):
    """``(id(np.add), "at")`` for the bound method ``np.add.at``, and
    ``(id(scipy.stats.norm), "logpdf")`` for ``scipy.stats.norm.logpdf`` (a new
    object at each attribute access, so never found by identity), else None."""
    owner = getattr(obj, "__self__", None)
    if isinstance(owner, np.ufunc) or (inspect.ismethod(obj) and not isinstance(owner, type)):
        return id(owner), obj.__name__
    return None


def lookup(obj):
    """The implementation standing for ``obj``, or None."""
    key = _bound_method(obj)
    if key is not None:
        return BOUND_METHODS.get(key)
    return _BY_OBJECT.get(id(obj))


def static(fn):
    """Mark a helper that runs while lowering, on constant arguments only
    (normalising an axis, building an index tuple)."""
    fn.__s2s_ad_static__ = True
    return fn


def is_helper(obj):
    """A plain function of a library module (a helper an implementation calls)."""
    return (isinstance(obj, types.FunctionType) and
            (getattr(obj, "__module__", None) or "").startswith("s2s_ad.rules.library.") and
            not getattr(obj, "__s2s_ad_static__", False))


_HELPERS: dict = {}


def helper(fn):
    """An :class:`Implementation` wrapping a library helper (inlined like one)."""
    if fn not in _HELPERS:
        _HELPERS[fn] = Implementation(fn.__name__, fn, None, inspect.signature(fn))
    return _HELPERS[fn]
