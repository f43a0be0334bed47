"""s2s_ad: source-to-source automatic differentiation for numerical Python.

Reads the source of plain NumPy/``math`` functions, writes Python source for
their derivatives, and compiles it with Numba.  ``README.md`` is the tour:
its "Architecture" section lists the layers, ``ir`` < ``rules`` < ``analyses``
< ``codegen`` < ``frontend`` < ``transforms`` < ``backends`` < ``pipeline`` <
``api`` < the tools at the top level (``testing``, ``oracle``, ``fuzz``,
``cli``, ``bench``), each importing only downward (``tests/test_layers.py``
checks it).
"""
import importlib.util
import os
import sys


def _bind_runtime():
    """Make ``s2s_ad.runtime`` importable from a source checkout.

    Installed, the top-level ``runtime/`` folder *is* ``s2s_ad/runtime``
    (see pyproject.toml); in a checkout it sits beside this package.
    """
    here = os.path.dirname(os.path.abspath(__file__))
    if os.path.isdir(os.path.join(here, "runtime")):
        return
    folder = os.path.join(os.path.dirname(here), "runtime")
    spec = importlib.util.spec_from_file_location(
        __name__ + ".runtime", os.path.join(folder, "__init__.py"),
        submodule_search_locations=[folder])
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)


_bind_runtime()

from . import runtime  # noqa: E402
from ._stop import stop_gradient  # noqa: E402
from .api.core import Transformed, grad, jit, source, value_and_grad  # noqa: E402
from .api.jacobians import hessian, hvp, jacfwd, jacrev, jvp  # noqa: E402
from .api.linearize import linearize  # noqa: E402
from .api.vjp_function import vjp  # noqa: E402
from .api.vmap import vmap  # noqa: E402
from .backends.diskcache import ShapeDtypeStruct, cache_info, clear_cache, precompile  # noqa: E402
from .errors import NonDifferentiableError, UnsupportedSyntaxError  # noqa: E402
from .frontend.custom import checkpoint, checkpoint_policies, custom_jvp, custom_vjp  # noqa: E402
from .ir import pytree  # noqa: E402,F401  (ad.pytree.flatten / unflatten for tests and tools)

__version__ = "0.1.0"

jacobian = jacrev          # JAX's name for reverse-mode Jacobians (jax.jacobian is jax.jacrev)
remat = checkpoint         # JAX's other name for jax.checkpoint

__all__ = ["grad", "value_and_grad", "vjp", "jvp", "jacfwd", "jacrev", "jacobian", "hessian",
           "linearize", "hvp", "vmap",
           "jit", "custom_vjp", "custom_jvp", "checkpoint", "checkpoint_policies", "remat",
           "precompile", "ShapeDtypeStruct", "cache_info",
           "clear_cache",
           "source", "stop_gradient", "runtime",
           "Transformed", "UnsupportedSyntaxError", "NonDifferentiableError"]
