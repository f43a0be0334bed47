"""The disk cache of generated modules and compiled code: what is in it,
clearing it, and filling it ahead of time (``ad.precompile``).

Generated modules are files in :func:`s2s_ad.backends.cache_dir`
(``<stem>_<hash>.py``); Numba keeps the machine code it compiles from them
beside them, in ``__pycache__`` (one ``.nbi`` index per function and one
``.nbc`` file per compiled signature).  A new process that generates the
same module loads that machine code instead of compiling, so a cache filled
by :func:`precompile` (or ``s2s-ad compile``) in a deployment or CI image
makes the first call of every process fast.
"""
import os
from dataclasses import dataclass

import numpy as np

from .. import backends, runtime
from ..ir import pytree
from . import tiers

#: The file kinds the cache holds: generated modules, Numba's index files and
#: compiled code, the pipeline's kept builds (``s2s_ad.api.buildcache``), and
#: temporary files of writes in progress.
_MODULE, _INDEX, _CODE, _BUILD, _TMP = ".py", ".nbi", ".nbc", ".build", ".tmp"


def cache_info():
    """What the disk cache holds, as a dict.

    ``path`` (the folder), ``exists``, ``modules`` (generated module files),
    ``functions`` (compiled functions, Numba index files), ``compiled``
    (compiled entries: one per function and argument types), ``builds``
    (the pipeline's output kept per request, so that a new process skips
    the transformation) and ``bytes`` (their total size); and the runtime's
    cached kernels in Numba's cache (runtime/_nb_kernels.py): ``kernels`` (compiled entries),
    ``kernel_bytes`` and ``kernel_folders``.  Nothing is created.
    """
    path = backends.cache_path()
    info = {"path": str(path), "exists": path.is_dir(), "modules": 0, "functions": 0,
            "compiled": 0, "builds": 0, "bytes": 0, "kernels": 0, "kernel_bytes": 0,
            "kernel_folders": []}
    for entry in _entries(path):
        kind = _kind(entry.name)
        if kind is None or kind == _TMP:
            continue
        info[{_MODULE: "modules", _INDEX: "functions", _CODE: "compiled",
              _BUILD: "builds"}[kind]] += 1
        info["bytes"] += _size(entry)
    files = runtime.kernel_cache_files()
    info["kernels"] = sum(f.endswith(_CODE) for f in files)
    info["kernel_bytes"] = sum(_file_size(f) for f in files)
    info["kernel_folders"] = sorted({os.path.dirname(f) for f in files})
    return info


def clear_cache():
    """Remove every generated module and compiled entry from the disk cache.

    Only the cache's own files are removed (generated modules, Numba's
    ``.nbi``/``.nbc`` files, kept builds, leftover temporary files), never the folder
    itself or anything else in it.  Processes running now keep what they
    have loaded; a process that needs a removed entry compiles it again.
    The runtime's cached kernels (runtime/_nb_kernels.py) are removed from
    Numba's cache too; the next process that needs one compiles it again.
    Returns ``{"path", "files", "bytes", "kernel_files", "kernel_bytes"}``:
    what was removed.
    """
    path = backends.cache_path()
    _check_owner(path)
    removed = {"path": str(path), "files": 0, "bytes": 0}
    for entry in _entries(path):
        if _kind(entry.name) is None:
            continue
        size = _size(entry)
        try:
            os.unlink(entry.path)
        except FileNotFoundError:         # removed meanwhile (another clear)
            continue
        removed["files"] += 1
        removed["bytes"] += size
    removed["kernel_files"] = removed["kernel_bytes"] = 0
    for file in runtime.kernel_cache_files():
        size = _file_size(file)
        try:
            os.unlink(file)
        except FileNotFoundError:
            continue
        removed["kernel_files"] += 1
        removed["kernel_bytes"] += size
    return removed


def _file_size(path):
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0


def _entries(path):
    """The plain files in the cache folder and its ``__pycache__``."""
    for folder in (path, path / "__pycache__"):
        try:
            with os.scandir(folder) as it:
                yield from (e for e in it if e.is_file(follow_symlinks=False))
        except (FileNotFoundError, NotADirectoryError):
            continue


def _kind(name):
    """The cache file kind of ``name`` (see _MODULE ...), or None for another file."""
    for kind in (_MODULE, _INDEX, _CODE, _BUILD, _TMP):
        if name.endswith(kind):
            return kind
    return None


def _size(entry):
    try:
        return entry.stat(follow_symlinks=False).st_size
    except FileNotFoundError:
        return 0


def _check_owner(path):
    if path.is_dir() and hasattr(os, "getuid") and path.stat().st_uid != os.getuid():
        raise PermissionError(f"the s2s_ad cache folder {path} belongs to another user; "
                              f"not clearing it")


@dataclass(frozen=True)
class ShapeDtypeStruct:
    """The type of an argument, for :func:`precompile`: its shape and dtype.

    As ``jax.ShapeDtypeStruct``.  Compiled code depends on the dtype and the
    rank (and, for 1-D arrays of at most 16 elements, the length), not on
    the other sizes; ``shape=()`` stands for a scalar (a Python ``float`` or
    ``int`` for float64 and int64, else a NumPy scalar of the dtype).
    """
    shape: tuple
    dtype: np.dtype = np.dtype(np.float64)

    def __post_init__(self):
        shape = (self.shape,) if isinstance(self.shape, int) else tuple(self.shape)
        if not all(isinstance(n, (int, np.integer)) and n >= 0 for n in shape):
            raise ValueError(f"ShapeDtypeStruct shape must be non-negative ints, got "
                             f"{self.shape!r}")
        object.__setattr__(self, "shape", tuple(int(n) for n in shape))
        object.__setattr__(self, "dtype", np.dtype(self.dtype))
        if self.dtype.kind not in "fib":
            raise TypeError(f"ShapeDtypeStruct dtype must be a float, int or bool dtype, got "
                            f"{self.dtype}")

    def example(self, rng):
        """A value of this type: floats from [0.5, 1.5), integers 1 (a scalar)
        or 0 (an array: safe as an index), booleans False."""
        if self.dtype.kind == "f":
            value = rng.uniform(0.5, 1.5, self.shape).astype(self.dtype)
        else:
            value = np.full(self.shape, 1 if not self.shape and self.dtype.kind == "i" else 0,
                            dtype=self.dtype)
        if self.shape:
            return value
        if self.dtype == np.float64:
            return float(value)
        if self.dtype == np.int64:
            return int(value)
        return value[()]

    def __str__(self):
        return f"{self.dtype}[{','.join(map(str, self.shape))}]" if self.shape else \
            str(self.dtype)


def precompile(fun, *args, **kwargs):
    """Compile ``fun`` (an ``ad.jit``-ed function or transform) for arguments
    like ``args`` into the disk cache, and return ``fun``.

    Each argument is an example value, or a :class:`ShapeDtypeStruct` (also
    inside tuples, lists and dicts) standing for values of that shape and
    dtype.  ``fun`` runs once on them, waiting for its compiled code (with
    tiered execution too), so every compiled function its calls need --
    the transform, a ``vmap`` loop, the choice between Numba and NumPy --
    is built as a real call would build it, and Numba's machine code is
    saved.  A later process calling ``fun`` with arguments of the same types
    loads it instead of compiling.  Values made for specs are floats in
    [0.5, 1.5), integers 1 (scalars) or 0 (arrays), booleans False; pass real
    arrays where the function needs others (a positive definite matrix, ...).
    """
    target = getattr(fun, "target", None)
    if target not in ("cpu", "cuda"):
        raise TypeError(f"precompile needs a function compiled with ad.jit (it fills the disk "
                        f"cache of compiled code), got {fun!r}; write "
                        f"ad.precompile(ad.jit(...), ...)")
    if not backends.on_disk():
        raise RuntimeError(f"precompile: the s2s_ad cache folder {backends.cache_path()} cannot "
                           f"be used, so compiled code would not be kept; set "
                           f"S2S_AD_CACHE_DIR to a writable folder")
    rng = np.random.default_rng(0)
    values = [_example(a, rng) for a in args]
    with tiers.eager():           # wait for compiled code, whatever ad.jit's compile=
        fun(*values, **kwargs)
    return fun


def _example(arg, rng):
    """``arg`` with each ShapeDtypeStruct (a leaf of its pytree) made a value."""
    leaves, tree = pytree.flatten(arg)
    return pytree.unflatten([x.example(rng) if isinstance(x, ShapeDtypeStruct) else x
                             for x in leaves], tree)
