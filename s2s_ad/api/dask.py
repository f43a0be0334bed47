"""vmap on dask arrays: one task per chunk of the batch axis.

``Batched.__call__`` hands its call here when an argument leaf is a
``dask.array`` (this module is imported only then, and imports dask only
inside its functions, so ``import s2s_ad`` never imports dask).  The result
is the same pytree of ``dask.array`` s, lazy, chunked along the batch axis
like the inputs; :func:`batched_call` states the rules.

How a worker gets the compiled code.  A chunk runs a :class:`ChunkKernel`,
which calls an ordinary ``Batched`` (``parallel=False``: Dask's workers are
the parallelism).  In the calling process (the threaded scheduler) that is
the very object the user built, compiled once.  Pickled for another process,
a ``Batched`` travels as its *recipe* -- the user's function (by reference
when importable, else by value, as cloudpickle does) and the transforms
around it -- with a token and the text of the user's source file, never as
compiled code.  The first task in a worker process rebuilds the transform
from the recipe and keeps it under the token, so later tasks reuse it: the
generated module is written to the worker's cache folder under the same
content-hashed name the caller used, and Numba loads the compiled code from
its disk cache when that folder is shared (every worker of a
``LocalCluster`` on one machine, or ``S2S_AD_CACHE_DIR`` on a shared file
system), or compiles it once per worker process otherwise.
"""
import linecache
import os
import pickle
import sys
import threading
import uuid

import numpy as np

from ..ir import pytree
from .vmap import PLUGINS

INSTALL = ('s2s_ad needs dask to run on dask arrays: pip install "dask[array]" distributed '
           '(or pip install "s2s_ad[dask]")')


def is_dask_array(x):
    """Whether ``x`` is a dask array, without importing dask."""
    return type(x).__module__.startswith("dask.") and hasattr(x, "__dask_graph__")


def _dask_array():
    try:
        import dask.array as da
    except ImportError as error:       # a dask array without dask.array importable
        raise ImportError(INSTALL) from error
    return da


# -- the call -------------------------------------------------------------------

def batched_call(batched, leaves, treedefs, axes, size):
    """``batched`` on arguments with dask array leaves, as dask arrays.

    Each batched leaf's batch axis becomes its first axis, chunked as the
    argument is (leaves chunked differently along the batch are aligned by
    Dask; a NumPy leaf takes the dask leaves' chunks); its other axes are
    rechunked to one chunk each, since one example must sit in one chunk.
    An unbatched (``in_axes=None``) array leaf becomes one single-chunk dask
    array: one key in the graph, sent once to each worker that needs it and
    shared by all its chunks.  Python scalars stay in the kernel.

    The output structure, shapes and dtypes come from a probe: the batched
    function run here on a one-example batch of made-up values (0.5 for
    floats, 0 for integers, the real values of NumPy leaves), or -- when
    that raises -- of the arguments' first example, computed.
    """
    da = _dask_array()
    if isinstance(size, float) and np.isnan(size):
        raise ValueError("vmap on dask arrays needs the batch axis's chunk sizes; call "
                         ".compute_chunk_sizes() on the argument first")
    if any(a is None for a in _broadcast_out(batched)):
        raise ValueError("vmap out_axes=None cannot be checked lazily on dask arrays; "
                         "use out_axes=0 and take element 0 of the result")
    moved = [da.moveaxis(x, a, 0) if a not in (None, 0) and is_dask_array(x)
             else np.moveaxis(x, a, 0) if a not in (None, 0) else x
             for x, a in zip(leaves, axes)]
    chunks = _batch_chunks(moved, axes)
    kernel = ChunkKernel(batched, treedefs, axes)
    arginds, where = [], []
    for k, (x, a) in enumerate(zip(moved, axes)):
        if a is None and not isinstance(x, np.ndarray) and not is_dask_array(x):
            where.append(("const", x))
            continue
        if a is None:
            arr = x.rechunk(-1) if is_dask_array(x) else da.from_array(x, chunks=x.shape)
            index = _dims(f"u{k}", arr.ndim)
        else:
            arr = (x.rechunk({i: -1 for i in range(1, x.ndim)}) if is_dask_array(x)
                   else da.from_array(x, chunks=(chunks,) + tuple(x.shape[1:])))
            index = ("b",) + _dims(f"c{k}", arr.ndim - 1)
        where.append(("arg", len(arginds) // 2))
        arginds += [arr, index]
    arginds += [da.arange(size, chunks=(chunks,)), ("b",)]    # each chunk's example indices
    kernel.where = where
    outs, out_tree = kernel.probe(moved, axes)
    kernel.out_tree = out_tree
    # One task per chunk returns the tuple of its output blocks; an
    # unbatched leaf's one block reaches every task as it is (concatenate=False
    # passes blocks in lists; nothing is copied per chunk).
    tuples = da.blockwise(kernel, ("b",), *arginds, concatenate=False, dtype=object,
                          meta=np.empty((0,), dtype=object), name=f"{kernel.__name__}-"
                          f"{kernel.token}")
    results = [tuples.map_blocks(_pick, k, dtype=o.dtype, meta=np.empty((0,) * o.ndim, o.dtype),
                                 chunks=(tuples.chunks[0],) + tuple((n,) for n in o.shape[1:]),
                                 new_axis=list(range(1, o.ndim)) or None,
                                 name=f"{kernel.__name__}-{k}-{kernel.token}")
               for k, o in enumerate(outs)]
    placed = [r if a == 0 else da.moveaxis(r, 0, a)
              for r, a in zip(results, _broadcast_out(batched, out_tree))]
    return pytree.unflatten(placed, out_tree)


def _pick(block, k):
    return block[k]


def _one_block(x):
    """The block of an argument with one chunk along each non-batch axis
    (blockwise with concatenate=False passes it in nested lists)."""
    while isinstance(x, list):
        x = x[0]
    return x


def _dims(stem, ndim):
    return tuple(f"{stem}_{j}" for j in range(ndim))


def _broadcast_out(batched, out_tree=None):
    from .vmap_common import _broadcast_axes
    spec = batched.out_axes
    if out_tree is None:
        return [spec] if not isinstance(spec, (tuple, list)) else list(_flat(spec))
    return _broadcast_axes(spec, out_tree, None)


def _flat(spec):
    for s in spec:
        yield from _flat(s) if isinstance(s, (tuple, list)) else (s,)


def _batch_chunks(moved, axes):
    """The batch-axis chunks: those of the first dask leaf that is batched."""
    for x, a in zip(moved, axes):
        if a is not None and is_dask_array(x):
            return x.chunks[0]
    # Only unbatched leaves are dask arrays: one chunk for the whole batch.
    size = next(np.shape(x)[0] for x, a in zip(moved, axes) if a is not None)
    return (size,)


# -- what one chunk runs --------------------------------------------------------

class ChunkKernel:
    """One chunk of a batched call: ``Batched`` on NumPy blocks, with every
    batch axis first (``in_axes`` entries 0 or None) and out_axes 0."""

    def __init__(self, batched, treedefs, axes):
        from .vmap import Batched
        # Kept on the user's object, so its calls share one token (see
        # reduce_batched) and a worker builds the transform once for all.
        self.batched = batched.__dict__.get("_chunked")
        if self.batched is None:
            self.batched = batched.__dict__.setdefault("_chunked", Batched(
                batched.fun, _zeroed(batched.in_axes), 0, batched.method, parallel=False))
        self.name = self.__name__ = batched.__name__
        self.treedefs, self.axes = treedefs, tuple(axes)
        self.token = uuid.uuid4().hex
        self.where, self.out_tree = None, None

    def __dask_tokenize__(self):
        return ("s2s_ad-chunk", self.token)

    def __call__(self, *blocks):
        *blocks, index = blocks
        leaves = [_one_block(blocks[v]) if kind == "arg" else v for kind, v in self.where]
        try:
            result = self.batched(*pytree.unflatten_all(leaves, self.treedefs))
        except Exception as exc:
            _name_chunk(exc, index)
            raise
        outs, tree = pytree.flatten(result)
        if tree != self.out_tree:
            raise ValueError(f"{self.name}: a chunk's result has a different structure than "
                             f"the first example's (examples {_range(index)})")
        return tuple(np.asarray(o) for o in outs)

    def probe(self, moved, axes):
        """Output leaves of a one-example batch, and the output structure."""
        fake = [_fake(x) if a is not None else _fake_whole(x) for x, a in zip(moved, axes)]
        try:
            result = self.batched(*pytree.unflatten_all(fake, self.treedefs))
        except Exception:
            real = [x[:1] if a is not None else x for x, a in zip(moved, axes)]
            real = [x.compute() if is_dask_array(x) else x for x in real]
            result = self.batched(*pytree.unflatten_all(real, self.treedefs))
        outs, tree = pytree.flatten(result)
        return [np.asarray(o) for o in outs], tree

    def __reduce__(self):
        return (_kernel, (self.token, self.batched, self.name, self.treedefs, self.axes,
                          self.where, self.out_tree))


_KERNELS = {}
_KERNELS_LOCK = threading.Lock()


def _kernel(token, batched, name, treedefs, axes, where, out_tree):
    with _KERNELS_LOCK:
        k = _KERNELS.get(token)
        if k is None:
            k = ChunkKernel.__new__(ChunkKernel)
            k.batched, k.name, k.treedefs, k.axes = batched, name, treedefs, axes
            k.__name__ = name
            k.token, k.where, k.out_tree = token, where, out_tree
            _KERNELS[token] = k
        return k


def _zeroed(spec):
    if isinstance(spec, (tuple, list)):
        return tuple(_zeroed(s) for s in spec)
    return None if spec is None else 0


def _fake(x):
    """A one-example batch shaped and typed like ``x`` (batch axis first)."""
    if is_dask_array(x) or not isinstance(x, np.ndarray):
        dtype = np.dtype(x.dtype)
        return np.full((1,) + tuple(x.shape[1:]), 0.5 if dtype.kind in "fc" else 0, dtype)
    return x[:1]


def _fake_whole(x):
    if is_dask_array(x):
        dtype = np.dtype(x.dtype)
        return np.full(x.shape, 0.5 if dtype.kind in "fc" else 0, dtype)
    return x


def _range(index):
    index = np.asarray(index)
    if index.size == 0:
        return "none"
    return f"{int(index[0])} to {int(index[-1])}"


def _name_chunk(exc, index):
    """Say which examples the failing chunk held, in the error itself."""
    note = f" (in the dask chunk holding examples {_range(index)} of the batch)"
    if exc.args and isinstance(exc.args[0], str):
        exc.args = (exc.args[0] + note,) + exc.args[1:]
    elif hasattr(exc, "add_note"):
        exc.add_note(note.strip(" ()"))


# -- Batched by recipe ---------------------------------------------------------

_REBUILT = {}
_REBUILT_LOCK = threading.Lock()


def reduce_batched(batched):
    """``Batched.__reduce__``: the recipe, a token, and the user's source text."""
    token = batched.__dict__.setdefault("_token", f"{os.getpid()}-{uuid.uuid4().hex}")
    # cloudpickle, whatever pickler ships this: it pickles the user's functions
    # by value when their module is registered with register_pickle_by_value
    # (distributed's plain-pickle first try would not).  Without dask (and so
    # without cloudpickle), plain pickle: user functions go by reference.
    try:
        import cloudpickle
    except ImportError:
        blob = pickle.dumps(recipe(batched))
    else:
        blob = cloudpickle.dumps(recipe(batched))
    return (rebuild_batched, (token, blob, _sources(batched)))


def recipe(obj):
    """A picklable description of a transform: class, settings, inner recipe."""
    from .core import Transformed
    from .jacobians import Jacobian
    from .vmap import Batched
    if isinstance(obj, Batched):
        return ("vmap", recipe(obj.fun), obj.in_axes, obj.out_axes, obj.method, obj.parallel)
    if isinstance(obj, Jacobian):
        argnums = obj.argnums[0] if obj.single else obj.argnums
        return ("jacobian", recipe(obj.fun), argnums, obj.mode, obj.holomorphic)
    if isinstance(obj, Transformed):
        settings = dict(argnums=obj.argnums, has_aux=obj.has_aux, target=obj.target,
                        options=obj.options, single=obj.single, layers=obj.layers,
                        units=obj.units, width=obj.width, holomorphic=obj.holomorphic,
                        unit_holomorphic=obj.unit_holomorphic)
        return ("transformed", obj.fun, obj.kind, settings)
    return ("function", obj)


def build(rec):
    """The transform a :func:`recipe` describes."""
    from .core import Transformed
    from .jacobians import Jacobian
    from .vmap import Batched
    kind = rec[0]
    if kind == "vmap":
        return Batched(build(rec[1]), *rec[2:])
    if kind == "jacobian":
        return Jacobian(build(rec[1]), *rec[2:])
    if kind == "transformed":
        return Transformed(rec[1], rec[2], **rec[3])
    return rec[1]


def rebuild_batched(token, rec, sources):
    """The transform for ``token``, built once per process."""
    with _REBUILT_LOCK:
        found = _REBUILT.get(token)
        if found is None:
            rec = pickle.loads(rec)       # cloudpickle's output loads with pickle
            for fun in _user_functions(rec):
                _refile(fun, sources)
            found = _REBUILT[token] = build(rec)
            found._token = token
        return found


#: The file name cloudpickle gives the code of a function it pickles by value.
_DYNAMIC = "<dynamic-code>"


def _sources(batched):
    """``{module: (file name, lines)}`` for the user's functions, so a worker
    can read the source of a function pickled by value (whose code no longer
    names its file) or defined in a file the worker does not have."""
    files = {}
    for fun in _user_functions(recipe(batched)):
        code = getattr(fun, "__code__", None)
        module = getattr(fun, "__module__", None)
        if code is not None and module not in files:
            lines = linecache.getlines(code.co_filename)
            if lines:
                files[module] = (code.co_filename, lines)
    return files


def _refile(fun, sources):
    """Point the functions of ``fun``'s module that were pickled by value back
    at their source file, and give linecache its text if the file is absent."""
    module = getattr(fun, "__module__", None)
    if module not in sources or not hasattr(fun, "__code__"):
        return
    filename, lines = sources[module]
    if not os.path.exists(filename):
        linecache.cache[filename] = (sum(map(len, lines)), None, lines, filename)
    for value in [fun] + list(getattr(fun, "__globals__", {}).values()):
        code = getattr(value, "__code__", None)
        if code is not None and code.co_filename == _DYNAMIC and \
                getattr(value, "__module__", None) == module:
            value.__code__ = _with_file(code, filename)


def _with_file(code, filename):
    consts = tuple(_with_file(c, filename) if hasattr(c, "co_filename") else c
                   for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def _user_functions(rec):
    if rec[0] in ("vmap", "jacobian"):
        yield from _user_functions(rec[1])
    else:
        fun = rec[1]
        yield getattr(fun, "__func__", getattr(fun, "fun", fun))   # a method; a custom rule


PLUGINS["dask"] = sys.modules[__name__]
