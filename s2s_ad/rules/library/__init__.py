"""NumPy and SciPy functions written as plain differentiable Python.

Each module here implements NumPy/SciPy functions over primitives that
already have rules (``np.var`` as a mean of squared deviations, ``np.flip``
as a reversed slice), the way JAX writes ``jnp.var`` over its primitives.
``@implements(np.var)`` registers an implementation; the front end
(:mod:`s2s_ad.frontend.anf`) lowers a call of ``np.var`` by inlining it with the
call's arguments bound, so constant options (``axis=None``,
``keepdims=True``) select their branch while lowering and the generated code
holds only the primitives the call needs.  Every transform (grad, jvp,
vmap, jit) then follows from the primitives' rules.

An implementation's parameters carry NumPy's names and defaults; a keyword
it does not list is refused at the user's line.  Helpers marked
``@static`` run while lowering, on constant arguments only (axes, index
tuples).  See docs/library.md.
"""
from . import (  # noqa: E402,F401  (registers)
    blocks,
    builtins,
    elementwise,
    indexing,
    linalg,
    numeric,
    shapes,
    sorting,
    special,
    statistics,
)
from .registry import (
    IMPLEMENTATIONS,
    METHODS,
    Implementation,
    helper,
    implements,
    is_helper,
    static,
)
from .registry import lookup as _lookup


def lookup(obj):
    """The implementation standing for ``obj``, or None.

    ``scipy.stats.norm``'s (library/stats.py) are registered at the first
    lookup of a ``scipy.stats`` method, so that importing s2s_ad does not
    import scipy.stats."""
    impl = _lookup(obj)
    if impl is None and _is_scipy_stats(getattr(obj, "__self__", None)):
        from . import stats  # noqa: F401  (registers)
        impl = _lookup(obj)
    return impl


def _is_scipy_stats(owner):
    return owner is not None and (type(owner).__module__ or "").startswith("scipy.stats")


__all__ = ["IMPLEMENTATIONS", "METHODS", "Implementation", "helper", "implements", "is_helper",
           "lookup", "static"]
