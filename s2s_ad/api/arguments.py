"""Arguments of transformed functions: arity and keyword checks, argnums,
which arguments are differentiable, the keys a build is cached under (shapes,
dtypes, small static lengths), list outputs, unit tangents.
"""
import inspect
import operator

import numpy as np

from ..ir import pytree
from ..transforms import scalarize


def _hashable(v):
    return tuple(sorted(v.items())) if isinstance(v, dict) else v


def _unit_like(x, t):
    """The unit tangent of scalar argument ``x`` (grad of grad: d/dx of df/dx)."""
    if pytree.is_container(x) or np.ndim(x) != 0:
        raise TypeError(f"grad requires its function to return a scalar, but "
                        f"{t.fun.__qualname__}'s inner gradient is taken with respect to an "
                        f"argument of shape {np.shape(x)}, so it returns an array; use "
                        f"ad.jacfwd or ad.hessian")
    if pytree.is_complex_leaf(x) and not _holomorphic_unit(x, t):
        raise TypeError(f"the inner gradient of {t.fun.__qualname__} is taken with respect to a "
                        f"complex argument without holomorphic=True: it is not a holomorphic "
                        f"function of that argument, so differentiating it again needs "
                        f"ad.vjp or ad.jvp directly (or holomorphic=True on both gradients)")
    return type(x)(1.0) if isinstance(x, np.generic) else 1.0


def _holomorphic_unit(x, t):
    """Whether the gradient behind a unit tangent was taken with holomorphic=True."""
    flags = getattr(t, "unit_holomorphic", ())
    return bool(flags) and all(flags)


def fast_key(args, argnums):
    """The key of a call whose fast path may be remembered (each argument's
    :func:`_signature`), or None: an argument needs the checked path, or a
    differentiated one is not a float."""
    key = tuple(map(_signature, args))
    if None in key or any(key[i] != 0 and key[i][1] != "f" for i in argnums):
        return None
    return key


def _signature(a):
    """Rank and dtype kind of a plain array (and a small one's length), 0 for
    a Python float, (0, "i") for a Python int, else None.

    float32 arrays take the checked path (their results' dtypes are
    checked, see :meth:`Transformed._numpy_dtypes`).
    """
    t = type(a)
    if t is np.ndarray:
        if a.dtype == np.float32:
            return None
        n = _small_length(a)                    # compiled code may specialise on it
        return (a.ndim, a.dtype.kind) if n is None else (1, a.dtype.kind, n)
    if t is int:
        return (0, "i")        # a loop count or an index: never differentiated
    return 0 if t is float else None


def _small_length(x):
    """The length of a 1-D array short enough to be split into scalars, else None."""
    return x.shape[0] if x.ndim == 1 and x.shape[0] <= scalarize.SMALL else None


def _small_lengths(leaves):
    """The length of each small 1-D float array leaf (None for others), or ()."""
    out = tuple(_small_length(x) if type(x) is np.ndarray and x.dtype.kind == "f" else None
                for x in leaves)
    return out if any(n is not None for n in out) else ()


def _output_lists(out_tree, layers, width=1):
    """The result's structure with list displays marked, or None without lists."""
    from ..ir import Tup

    def has_list(t):
        return isinstance(t, Tup) and (t.is_list or hasattr(t, "container")
                                       or any(has_list(x) for x in t.items))
    if not has_list(out_tree):
        return None
    tree = out_tree
    for depth, (argnums, output) in enumerate(layers, 1):
        if argnums != "vmap" and output == "pair":
            if depth == len(layers) and width > 1:
                tree = Tup((tree, Tup((tree,) * width)))
            else:
                tree = Tup((tree, tree))
    return tree


def _with_lists(value, tree):
    """``value`` (nested tuples from generated code) with ``tree``'s lists as
    lists, and its dicts and NamedTuples (:class:`~s2s_ad.frontend.anf.Record`) rebuilt."""
    from ..ir import Tup
    if not isinstance(tree, Tup) or not isinstance(value, tuple):
        return value
    items = [_with_lists(v, t) for v, t in zip(value, tree.items)]
    if hasattr(tree, "container"):
        return tree.container(items)
    return list(items) if tree.is_list else tuple(items)


def _type_key(x):
    """What compiled code is specialised on: type, dtype, rank, and the
    length of a small 1-D array (see scalarize)."""
    ndim = getattr(x, "ndim", None)
    key = (type(x), getattr(x, "dtype", None), ndim)
    n = _small_length(x) if ndim is not None else None
    return key if n is None else key + (n,)


def _as_dtype(x, dtype):
    """A float scalar or array in ``dtype`` (other values as they are)."""
    if dtype is None or dtype.kind != "f":
        return x
    if type(x) is float or isinstance(x, np.floating):
        return dtype.type(x)
    if isinstance(x, np.ndarray) and x.dtype.kind == "f" and x.dtype != dtype:
        return x.astype(dtype)
    return x


def _like_arg(g, arg, scalars=True):
    """NumPy scalar arguments get NumPy scalar gradients of their type (not
    with ``scalars=False``: a batched gradient is an array), and None, which
    holds no leaves as in JAX, gets None.

    (Numba returns every float scalar as a Python float, which would turn a
    float32 gradient into a float64 one.)
    """
    if arg is None:
        return None
    if type(arg) is float and type(g) is np.float64:   # see backends._numpy_floats
        return float(g)
    if type(arg) is complex and type(g) is np.complex128:
        return complex(g)
    if scalars and isinstance(arg, np.generic):
        return type(arg)(g)
    if pytree.is_container(arg):
        g_leaves, tree = pytree.flatten(g)
        return pytree.unflatten([_like_arg(a, b, scalars) for a, b in
                                 zip(g_leaves, pytree.flatten(arg)[0])], tree)
    return g


def _describe_value(value):
    if pytree.is_container(value):
        return (f"a {type(value).__name__} of {len(value)} values (to return extra values "
                f"alongside the loss, pass has_aux=True and return (loss, aux))")
    return f"an array of shape {np.shape(value)}"


def _normalize_argnums(fun, argnums):
    single = isinstance(argnums, int) and not isinstance(argnums, bool)
    items = (argnums,) if single else argnums
    if not isinstance(items, tuple) or not items or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in items):
        raise TypeError(f"argnums must be an int or a non-empty tuple of ints, got {argnums!r}")
    n = _arg_count(fun)
    out = []
    for i in items:
        if n is not None and not -n <= i < n:
            raise ValueError(f"argnums={argnums!r} is out of range: {fun.__qualname__} takes "
                             f"{n} positional arguments")
        out.append(operator.index(i) % n if n else i)
    return tuple(out), single


def _layered_arg_count(fun, layers, width=1):
    """Arguments of ``fun`` after forward-mode layers (each adds one per tangent;
    the last adds ``width`` per differentiated argument)."""
    n = _arg_count(fun)
    if n is None:
        return None
    for depth, (argnums, _) in enumerate(layers, 1):
        if argnums != "vmap":          # a batching layer adds no arguments
            n += len(argnums) * (width if depth == len(layers) else 1)
    return n


def _arg_count(fun):
    try:
        params = inspect.signature(fun).parameters.values()
    except (TypeError, ValueError):
        return None
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


def _check_arity(fun, args):
    """``args`` completed with the parameters' default values, or a TypeError."""
    n = _arg_count(fun)
    defaults = getattr(fun, "__defaults__", None) or ()
    if n is None or len(args) == n:
        return args
    if n - len(defaults) <= len(args) < n:
        return tuple(args) + tuple(defaults[len(args) - n:])
    least = n - len(defaults)
    takes = f"{n}" if least == n else f"from {least} to {n}"
    raise TypeError(f"{fun.__qualname__}() takes {takes} positional argument"
                    f"{'s' if n != 1 else ''} but {len(args)} were given")


def _with_keywords(fun, args, kwargs, argnums=()):
    """The positional arguments of a call with keyword arguments, each in its
    parameter's place (defaults fill the gaps).  As in JAX, an argument passed
    by keyword is never differentiated: ``argnums`` must be passed positionally."""
    needed = [i for i in argnums if isinstance(i, int) and i >= len(args)]
    if needed:
        raise TypeError(f"differentiating with respect to argnums={tuple(argnums)} requires at "
                        f"least {max(needed) + 1} positional arguments, but {len(args)} were "
                        f"passed (the others by keyword, which is never differentiated)")
    try:
        bound = inspect.signature(fun).bind(*args, **kwargs)
    except TypeError as error:
        raise TypeError(f"{fun.__qualname__}(): {error}") from None
    params = list(inspect.signature(fun).parameters.values())
    out = []
    for p in params[:_arg_count(fun)]:
        if p.name in bound.arguments:
            out.append(bound.arguments[p.name])
        elif p.default is not p.empty:
            out.append(p.default)
    if len(bound.arguments) > len(out):
        raise TypeError(f"{fun.__qualname__}(): keyword-only and variadic parameters are not "
                        f"supported by transforms; make them positional")
    return tuple(out)


def _check_whole(args, nums, what):
    """Each argument is differentiated whole (all its float leaves) or not at
    all: one that mixes floats with other values, or holds what is neither a
    number nor an array, is a TypeError rather than a silently zero derivative."""
    for i, a in enumerate(args):
        leaves = pytree.flatten(a)[0]
        bad = [v for v in leaves if v is not None and pytree.rank(v) is None]
        if bad:
            raise TypeError(f"{what}: argument {i} holds {pytree.describe(bad[0])}; arguments "
                            f"are floats, ints, bools, NumPy arrays, or tuples, lists, dicts "
                            f"and NamedTuples of them")
        if i not in nums and any(map(pytree.is_inexact_leaf, leaves)):
            other = next(v for v in leaves if not pytree.is_inexact_leaf(v))
            raise TypeError(f"{what}: argument {i} mixes float values with "
                            f"{pytree.describe(other)}; an argument is differentiated whole, "
                            f"so pass its integer or boolean parts as a separate argument")
