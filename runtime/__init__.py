"""s2s_ad runtime: the helpers generated derivative code calls as rt.NAME.

Every public function is a plain NumPy function (the "python" backend);
when Numba is importable, each also gets a nopython implementation via
numba.extending.overload, so the same names work inside @numba.njit code.
"""

from .control import range_last, snapshot
from .linalg import (dot, dot_grad_a, dot_grad_b, inner, inner_grad_a,
                     inner_grad_b, matmul, matmul_grad_a, matmul_grad_b)
from .plumbing import like, reshape_like, unbroadcast, zeros_like
from .reductions import (amax, amin, mean, mean_grad, minmax_grad, prod,
                         prod_grad, sum, sum_grad)
from .shapes import (index_grad, split_grad, squeeze, stack_grad,
                     transpose_grad)

try:
    import numba  # noqa: F401 - only probing whether Numba is available
except ImportError:  # pragma: no cover - the python backend needs no Numba
    pass
else:
    # Importing these modules registers the overloads with Numba.
    from . import _nb_linalg, _nb_plumbing, _nb_reduction_grads  # noqa
    from . import _nb_reductions, _nb_shapes  # noqa

__all__ = [
    "unbroadcast", "zeros_like", "like", "reshape_like",
    "sum", "mean", "prod", "amax", "amin",
    "sum_grad", "mean_grad", "prod_grad", "minmax_grad",
    "dot", "matmul", "inner",
    "dot_grad_a", "dot_grad_b", "matmul_grad_a", "matmul_grad_b",
    "inner_grad_a", "inner_grad_b",
    "squeeze", "transpose_grad", "split_grad", "stack_grad", "index_grad",
    "range_last", "snapshot",
]
