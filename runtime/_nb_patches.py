"""A cheaper Numba error path for slice assignment (measured in docs/compile_time.md).

Numba lowers every ``a[...] = array`` (and ``a[...] += array``) with a call
that raises ``ValueError`` when the shapes differ; on the CPU its message is
built with f-strings, and compiling that string formatting (``str`` of
integers, ``join``, concatenation) cost 1-3 s of the first compile in every
process -- a third of a small gradient's compile, paid by nearly every
generated module (user code and adjoints assign into slices).  Here the same
error is raised with the shapes as arguments instead,

    ValueError('cannot assign slice of shape', (2, 2), 'from input of shape', (3,))

which Numba compiles without any string code.  The patch is process-wide
(it also applies to the user's own ``numba.njit`` functions compiled after
s2s_ad's runtime is imported); only the wording of this error changes.  If
Numba's internals differ (another version), nothing is patched.
"""

import numba
from numba.core import types
from numba.core.typing import templates

try:
    from numba.np import arrayobj
except ImportError:         # pragma: no cover  (another Numba layout: nothing to patch)
    arrayobj = None


@numba.njit
def _mismatch(src_shapes, index_shape):
    raise ValueError("cannot assign slice of shape", index_shape, "from input of shape",
                     src_shapes)


def _cheap_overload(src_shapes, index_shape):
    if (isinstance(src_shapes, types.UniTuple) and isinstance(index_shape, types.UniTuple)
            and src_shapes.dtype == index_shape.dtype
            and isinstance(src_shapes.dtype, types.Integer)):
        return lambda src_shapes, index_shape: _mismatch(src_shapes, index_shape)
    return None


def patch():
    """Replace Numba's CPU overload of ``raise_with_shape_context`` (once,
    before it was compiled); returns whether it was replaced."""
    stub = getattr(arrayobj, "raise_with_shape_context", None)
    done = False
    for func, fnty in getattr(templates.builtin_registry, "globals", ()):
        if func is not stub or stub is None:
            continue
        for template in getattr(fnty, "templates", ()):
            original = getattr(template, "_overload_func", None)
            if getattr(original, "__name__", "") == "ol_raise_with_shape_context_cpu" \
                    and not getattr(template, "_impl_cache", None):
                template._overload_func = staticmethod(_cheap_overload)
                done = True
    return done


PATCHED = patch()
