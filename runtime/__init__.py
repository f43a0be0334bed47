"""s2s_ad runtime: the helpers generated derivative code calls as rt.NAME.

Every public function is a plain NumPy function (the "python" backend)
and also has a nopython implementation registered with
numba.extending.overload, so the same names work inside @numba.njit code.
"""

# Importing the _nb_* modules registers the Numba overloads of the helpers.
from . import (  # noqa: F401
    _nb_einsum,
    _nb_elementwise,
    _nb_fft,
    _nb_lazy,
    _nb_linalg,
    _nb_linsolve,
    _nb_matfun,
    _nb_patches,
    _nb_plumbing,
    _nb_reduction_grads,
    _nb_reductions,
    _nb_scans,
    _nb_shapes,
    _nb_special,
)
from . import accumulate as _accumulate
from . import batch_index as _batch_index
from . import bessel as _bessel
from . import fft as _fft
from . import fused as _fused
from . import index_arrays as _index_arrays
from . import linalg as _linalg
from . import scans as _scans
from . import selection as _selection
from . import special as _special
from ._nb_cached import cache_files as kernel_cache_files  # noqa: F401  (s2s-ad cache)
from ._nb_cached import source_digest  # noqa: F401  (the backends' cache keys)
from ._nb_link import declared_kernels  # noqa: F401  (the backends' warm first call)
from .batching import broadcast_batch, lift, take, take_grad
from .batching import broadcast_like as batch_broadcast_like
from .batching import dot as bdot
from .batching import dot_grad as bdot_grad
from .batching import inner as binner
from .batching import inner_grad as binner_grad
from .batching import matmul as bmatmul
from .batching import outer as bouter
from .batching import outer_grad as bouter_grad
from .batching import unbroadcast as batch_unbroadcast
from .control import (
    copy_into,
    float_stack,
    lanes,
    range_last,
    rows_like,
    set_row,
    snapshot,
    stack_like,
    trip_count,
    zeros_lanes,
)
from .elementwise import (  # SIMD kernels for compiled code on large arrays
    arccos,
    arccosh,
    arcsin,
    arcsinh,
    arctan,
    arctanh,
    clip,
    cos,
    cosh,
    exp,
    exp2,
    expm1,
    log,
    log1p,
    log2,
    log10,
    sin,
    sinh,
    tan,
    tanh,
)
from .linalg import (
    dot,
    dot_grad_a,
    dot_grad_b,
    inner,
    inner_grad_a,
    inner_grad_b,
    matmul,
    matmul_grad_a,
    matmul_grad_b,
)
from .nesting import (
    check_gradient,
    flat,
    flat_size,
    grad_zeros,
    jac_flat,
    jac_shape,
    jac_zeros,
    unit_like,
)
from .plumbing import (
    astype,
    broadcast_like,
    like,
    reshape_like,
    unbroadcast,
    writable,
    zeros_like,
)
from .printing import debug_print
from .reductions import (
    add_minmax_grad,
    amax,
    amin,
    broadcast_total,
    mean,
    mean_grad,
    mean_grad_kept,
    minmax_grad,
    prod,
    prod_grad,
    sum,
    sum_grad,
    sum_grad_kept,
    sum_squares,
    times_kept,
)
from .scatter import add_at, index_add, put_grad, put_into, take_at, written
from .shapes import index_grad, ndim, split_grad, squeeze, stack_grad, transpose_grad

__all__ = [  # noqa: RUF022 - grouped by topic
    "unbroadcast", "broadcast_like", "zeros_like", "like", "reshape_like", "astype",
    "writable",
    "sum", "sum_squares", "mean", "prod", "amax", "amin",
    "sum_grad", "mean_grad", "sum_grad_kept", "mean_grad_kept", "times_kept", "prod_grad",
    "broadcast_total",
    "minmax_grad",
    "add_minmax_grad",
    "dot", "matmul", "inner",
    "dot_grad_a", "dot_grad_b", "matmul_grad_a", "matmul_grad_b",
    "inner_grad_a", "inner_grad_b",
    "squeeze", "ndim", "transpose_grad", "split_grad", "stack_grad", "index_grad",
    "clip",
    "exp", "expm1", "exp2", "log", "log1p", "log2", "log10", "sin", "cos", "tan", "arcsin",
    "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh",
    "range_last", "snapshot", "index_add", "written", "add_at", "take_at", "put_into",
    "put_grad", "rows_like", "set_row", "lanes", "zeros_lanes",
    "copy_into", "stack_like", "trip_count", "float_stack", "debug_print",
    "lift", "broadcast_batch", "take", "bdot", "bmatmul", "binner", "bouter",
    "batch_broadcast_like", "take_grad", "bdot_grad", "binner_grad", "bouter_grad",
    "batch_unbroadcast",
    "flat_size", "unit_like", "jac_zeros", "grad_zeros", "flat", "jac_shape", "jac_flat",
    "check_gradient",
]

# The modules that list their public names in EXPORTS, each name exported as is:
# product adjoints added in place into a slice of an adjoint (accumulate.py); the
# matrix functions (np.linalg and friends); scans and permutations along an axis
# (cumsum, cumprod, argsort, take_along_axis); special functions; selection;
# Bessel functions; np.fft and the cotangents of np.real / np.imag / np.conj;
# batched indexing (ad.vmap's vectorized lowering of index arrays); index arrays
# under ad.jit; fused loops over equally shaped slices (s2s_ad/transforms/fuse_slices.py).
for _module in (_accumulate, _linalg, _scans, _special, _selection, _bessel, _fft,
                _batch_index, _index_arrays, _fused):
    globals().update((_n, getattr(_module, _n)) for _n in _module.EXPORTS)
    __all__ += list(_module.EXPORTS)
del _module
