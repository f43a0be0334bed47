"""The public API: the transforms users call (layer ``api``, above the pipeline).

``core`` (``grad``, ``value_and_grad``, ``jit``, ``source``: the
:class:`~s2s_ad.api.core.Transformed` object), ``vmap`` (``ad.vmap``: the
per-sample loop and the vectorised batch), ``jacobians`` (``jacfwd``,
``jacrev``, ``hessian``, ``jvp``, ``hvp``, built from batched JVPs and VJPs),
``vjp_function`` (``vjp`` and the ``vjp_fn`` it returns, batched as rows),
``dask`` (batches of Dask arrays), ``cuda`` and ``cuda_jacobians``
(``ad.jit(ad.vmap(F), target="cuda")``).  Each module imports only the ones
before it in that list; ``dask`` and ``cuda_jacobians`` plug into ``vmap``
(``vmap.PLUGINS``) when imported here.

The public transforms carry ``__s2s_ad_transform__``, and the objects they
return ``__s2s_ad_object__``: that is how the front end recognises
``ad.grad(f)(x)`` written inside a transformed function without importing
this package (see ``s2s_ad.frontend.anf.transform_kind``).
"""
# (cuda_jacobians and dask install their vmap plugins when imported)
from . import (  # noqa: F401
    core,
    cuda,
    cuda_jacobians,
    dask,
    jacobians,
    linearize,
    vjp_function,
    vmap,
)

for _fn, _kind in ((core.grad, "grad"), (core.value_and_grad, "value_and_grad"),
                   (vjp_function.vjp, "vjp"), (jacobians.jacfwd, "jac"), (jacobians.jacrev, "jac"),
                   (jacobians.hessian, "hessian"), (jacobians.hvp, "hvp"),
                   (jacobians.jvp, "jvp"), (vmap.vmap, "vmap")):
    _fn.__s2s_ad_transform__ = _kind
del _fn, _kind
