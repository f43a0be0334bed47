"""How the front end recognises s2s_ad's own transforms in user code (by the
markers the public objects carry) and who lowers those calls: the transforms
layer installs its handler (``s2s_ad.transforms.nested_calls``) with
:func:`install_transform_calls`; the front end never imports it.
"""



#: Lowers calls of transforms in user code (s2s_ad.transforms.nested_calls, which
#: installs itself when imported; the pipeline imports it before lowering).
transform_calls = None


def install_transform_calls(handler):
    """Called by the transforms layer: ``handler`` lowers ``ad.grad(f)(x)`` & co."""
    global transform_calls
    transform_calls = handler


def transform_kind(obj):
    """The transform ``obj`` is (``ad.grad`` -> "grad", ``ad.vmap`` -> "vmap"), or None.

    The public transforms carry ``__s2s_ad_transform__`` (set in s2s_ad.api)."""
    kind = getattr(obj, "__s2s_ad_transform__", None) if callable(obj) else None
    return kind if isinstance(kind, str) else None


def transformed_object(obj):
    """"transformed" for what ``ad.grad(f)``/``ad.jit(f)`` return, "jacobian" for
    ``ad.jacfwd(f)``/``ad.jacrev(f)``, else None (read from the class marker)."""
    kind = getattr(type(obj), "__s2s_ad_object__", None)
    return kind if isinstance(kind, str) else None
