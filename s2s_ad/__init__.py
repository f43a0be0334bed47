"""s2s_ad: source-to-source automatic differentiation for numerical Python.

Reads the source of plain NumPy/``math`` functions, writes Python source for
their derivatives, and compiles it with Numba.  See ``API.md`` for the
contract and ``README.md`` for a tour.
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
from .api import Transformed, grad, jit, source, value_and_grad, vjp  # noqa: E402
from .batching import vmap  # noqa: E402
from .custom import custom_jvp, custom_vjp  # noqa: E402
from .diskcache import ShapeDtypeStruct, cache_info, clear_cache, precompile  # noqa: E402
from .errors import NonDifferentiableError, UnsupportedSyntaxError  # noqa: E402
from .jacobians import hessian, hvp, jacfwd, jacrev, jvp  # noqa: E402

__version__ = "0.1.0"

__all__ = ["grad", "value_and_grad", "vjp", "jvp", "jacfwd", "jacrev", "hessian", "hvp", "vmap",
           "jit", "custom_vjp", "custom_jvp", "precompile", "ShapeDtypeStruct", "cache_info",
           "clear_cache",
           "source", "stop_gradient", "runtime",
           "Transformed", "UnsupportedSyntaxError", "NonDifferentiableError"]
