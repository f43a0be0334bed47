"""The runtime's cached kernels are called by symbol, not linked into callers.

Numba links the LLVM module of every function a compiled function calls
into the caller's module, then optimises it and turns it into machine code
-- in every nested compile, and again in each caller that links it.  The
runtime's kernels (runtime/_nb_kernels.py, and the overload implementations
runtime/_nb_cached.py keeps in Numba's cache) are called through small
overload implementations, each a nested compile of its own: every kernel's
body was re-optimised and compiled to machine code once per overload that
calls it, then once more in the generated function at the top
(docs/compile_time.md §4).  A compile that calls a kernel only declares it
(MCJIT resolves the call to the kernel's code, already in the engine) and
passes it on to its callers, up to the outermost compile (the one a Python
call started: the generated function, or a ``vmap`` loop), which declares
them too.  Each kernel is a whole array operation (a product, a reduction,
NumPy's SIMD loop), so the call costs nothing next to its work.  Measured
cold compiles, side by side: session 19 (nested compiles declare, the
outermost links each kernel once) ``logsumexp_rows`` 0.81x, ``mlp_loss``
0.80x; session 22 (the outermost declares them too) ``logsumexp_rows``
0.63x, ``mlp_loss`` 0.73x, ``gmm_objective`` 0.87x more, steady state
unchanged.  ``S2S_AD_LINK_KERNELS=1`` links them into the outermost compile
as session 19 did.

The outermost compile's library remembers the kernels it calls, and its
cache entry's name says how many (``[calls N s2s_ad kernels]``): a process
loading it loads them first (each a cache entry of its own, 2-5 ms), and
a tiered first call that would wait long for them answers from NumPy while
they load (s2s_ad/backends/tiers.py).

A kernel compiled as a nested compile that calls other kernels (a
generated implementation calling the product kernel) is saved in Numba's
disk cache with those calls declared.  When a process loads it from disk,
the kernels it calls must be in the engine first (MCJIT aborts the process
on a symbol it cannot resolve).  So every kernel overload records, beside
the kernels, how to load it: a file named by the hash of its symbol,
holding where the kernel is (:func:`register`'s ``spec``) and its argument
types.  Loading a cached library first loads each kernel it declares; one
that cannot be loaded under the same symbol (its own cache entry was
removed and compiled again) makes the library's cache entry a miss, and
Numba compiles it again.

Only kernels that Numba caches on disk are treated this way (their symbols
are the same in every process that loads them); a kernel compiled in memory
is linked as before.  If Numba's internals differ (another version),
nothing is patched.
"""

import hashlib
import os
import pickle
import re
import threading
import weakref

from numba.core import caching, codegen, dispatcher
from numba.core.itanium_mangler import mangle_identifier

#: The kernel dispatchers, with how another process finds each (:func:`locate`).
_SPECS = weakref.WeakKeyDictionary()
#: Their compiled code libraries: linked by the outermost compile only.
_LIBRARIES = weakref.WeakSet()
#: Symbol -> (spec, argument types) of the kernel overloads this process has seen.
_SYMBOLS = {}
#: The folder of the kernels' load records, inside runtime/_nb_cached.folder().
SUBFOLDER = "links"
_LOCK = threading.RLock()
#: Kind of spec -> the function finding the kernel a spec names (set by the
#: kernels' modules, runtime/_nb_kernels.py and runtime/_nb_cached.py).
LOCATORS = {}
#: The folder of the generated kernels, or None (set by runtime/_nb_cached.py).
FOLDER = lambda: None   # noqa: E731
#: The package of the generated kernels' modules (runtime/_nb_cached.py).
GENERATED = "s2s_ad_runtime_generated"


def _mangled(module):
    """How Numba's symbols of the functions of ``module`` begin."""
    return "_ZN" + "".join(mangle_identifier(part) for part in module.split("."))


#: Every kernel's symbol begins with one of these.
_PREFIXES = (_mangled(f"{__package__}._nb_kernels"), _mangled(GENERATED))


class StaleEntry(Exception):
    """A cached library calls a kernel this process cannot load under the
    same symbol: the library's cache entry is treated as a miss."""


def register(kernel, spec):
    """Link ``kernel`` (a cached ``njit`` dispatcher) only into outermost
    compiles from now on; ``spec`` tells :func:`locate` how another process
    finds it."""
    if PATCHED and isinstance(getattr(kernel, "_cache", None), caching.Cache):
        _SPECS[kernel] = spec
    return kernel


def locate(spec):
    """The kernel dispatcher ``spec`` names (None where it is gone), found by
    the function its module gave :data:`LOCATORS` for the spec's kind."""
    kind, *rest = spec
    find = LOCATORS.get(kind)
    return None if find is None else find(*rest)


def _folder():
    where = FOLDER()
    return None if where is None else where / SUBFOLDER


def _entry_path(symbol):
    where = _folder()
    if where is None:
        return None
    return where / (hashlib.sha256(symbol.encode()).hexdigest()[:32] + ".pkl")


def _record(symbol, spec, args):
    """Remember how to load the kernel overload ``symbol``, here and on disk
    (written once; False if it cannot be written: then every caller links it,
    as before)."""
    _SYMBOLS[symbol] = (spec, args)
    path = _entry_path(symbol)
    if path is None:
        return False
    if path.exists():
        return True
    data = pickle.dumps((symbol, spec, args))
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError:
        return False
    return True


def _lookup(symbol):
    """(spec, argument types) of the kernel overload ``symbol``, or None."""
    found = _SYMBOLS.get(symbol)
    if found is not None:
        return found
    path = _entry_path(symbol)
    if path is None:
        return None
    try:
        name, spec, args = pickle.loads(path.read_bytes())
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError,
            ValueError, TypeError):
        return None
    return (spec, args) if name == symbol else None


def _load_callees(library):
    """Load every kernel the cached ``library`` calls that the engine does
    not hold yet (:class:`StaleEntry` if one cannot be)."""
    engine = library.codegen._engine
    callees = []
    for fn in library._shared_module.functions:
        name = fn.name
        if not name.startswith(_PREFIXES) or not fn.is_declaration:
            continue
        found = _lookup(name)
        if found is None:
            raise StaleEntry(name)  # MCJIT would abort on it: compile the caller again
        spec, args = found
        kernel = locate(spec)
        if kernel is None:
            raise StaleEntry(name)
        try:
            kernel.compile(args)
        except Exception as exc:    # noqa: BLE001  (the kernel's module changed under us)
            raise StaleEntry(name) from exc
        if not engine.is_symbol_defined(name):
            raise StaleEntry(name)
        callees.append(kernel.overloads[tuple(args)].library)
    # linked into the outermost compile that links this library
    library._s2s_kernels = tuple(callees)


# -- the patches ----------------------------------------------------------------

_add_overload = dispatcher.Dispatcher.add_overload
_add_linking_library = codegen.CPUCodeLibrary.add_linking_library
_finalize = codegen.CPUCodeLibrary.finalize
_compile_core = dispatcher._FunctionCompiler._compile_core
_STATE = threading.local()
_finalize_final_module = codegen.CPUCodeLibrary._finalize_final_module
_load_overload = caching.Cache.load_overload
_serialize = codegen.CPUCodeLibrary.serialize_using_object_code
#: Appended to the name of a library saved with declared calls of kernels.
_CALLS_KERNELS = " s2s_ad kernels]"


def _patched_add_overload(self, cres):
    spec = _SPECS.get(self)
    if spec is not None and not cres.objectmode:
        with _LOCK:
            if _record(cres.fndesc.mangled_name, spec, tuple(cres.signature.args)):
                _LIBRARIES.add(cres.library)
    return _add_overload(self, cres)


def _patched_compile_core(self, args, return_type):
    depth = getattr(_STATE, "depth", 0)
    _STATE.depth = depth + 1
    try:
        return _compile_core(self, args, return_type)
    finally:
        _STATE.depth = depth


def _with_callees(kernel):
    """``kernel``'s library and those of the kernels it calls, each before
    the ones it calls."""
    out = (kernel,)
    for callee in getattr(kernel, "_s2s_kernels", ()):
        out += _with_callees(callee)
    return out


def _patched_add_linking_library(self, library):
    if library in _LIBRARIES:
        kernels = _with_callees(library)
    else:
        _add_linking_library(self, library)
        kernels = getattr(library, "_s2s_kernels", ())
    if kernels:     # called by symbol until the outermost compile links them
        self._s2s_kernels = getattr(self, "_s2s_kernels", ()) + kernels


#: Link the kernels into the outermost compile (session 19's behaviour)
#: instead of calling them by symbol: ``S2S_AD_LINK_KERNELS=1``.
LINK_KERNELS = os.environ.get("S2S_AD_LINK_KERNELS", "") not in ("", "0")


def _patched_finalize(self):
    if getattr(_STATE, "depth", 0) <= 1 and LINK_KERNELS:
        # Each kernel after every kernel that calls it (its last place): LLVM
        # links a kernel's definition only where the module already calls it.
        kernels = getattr(self, "_s2s_kernels", ())
        for library in reversed(dict.fromkeys(reversed(kernels))):
            _add_linking_library(self, library)
        self._s2s_kernels = ()  # their code is in this library's module now
    return _finalize(self)


def _patched_serialize(self):
    name, kind, data = _serialize(self)
    if getattr(self, "_s2s_kernels", ()):
        # What tells a loading process to look, and how many to load.
        name += f" [calls {len(set(self._s2s_kernels))}{_CALLS_KERNELS}"
    return name, kind, data


_DECLARED = re.compile(rb" \[calls (\d+)" + re.escape(_CALLS_KERNELS.encode()))


def declared_kernels(data):
    """How many kernels the library saved in ``data`` (a cache entry's bytes)
    calls by symbol, which a process loading it loads first; 0 for none."""
    found = _DECLARED.search(data)
    return int(found.group(1)) if found else 0


def _patched_finalize_final_module(self):
    # A library read from Numba's cache (its object code and the bitcode for
    # linking are set; nothing is in the engine yet) that calls kernels: its
    # kernels first.  (Libraries without the mark are not scanned: a look at
    # every function costs a warm first call 5-10 ms.)
    if self.name.endswith(_CALLS_KERNELS) \
            and getattr(self, "_compiled_object", None) is not None \
            and getattr(self, "_shared_module", None) is not None:
        with _LOCK:
            _load_callees(self)
    return _finalize_final_module(self)


def _patched_load_overload(self, sig, target_context):
    try:
        return _load_overload(self, sig, target_context)
    except StaleEntry:
        return None     # compiled again, calling the kernels as they are now


def install(needed, patches):
    """Set each ``(owner, name, function)`` of ``patches`` if every one of
    ``needed`` (Numba attributes the patches rely on) exists; returns whether
    they were set (another Numba layout: nothing is patched)."""
    if any(part is None for part in needed):
        return False        # pragma: no cover
    for owner, name, function in patches:
        setattr(owner, name, function)
    return True


PATCHED = install(
    (getattr(codegen.CPUCodeLibrary, "_unserialize", None),
     getattr(codegen, "JitEngine", None),
     getattr(getattr(codegen, "JitEngine", None), "is_symbol_defined", None)),
    ((dispatcher.Dispatcher, "add_overload", _patched_add_overload),
     (codegen.CPUCodeLibrary, "add_linking_library", _patched_add_linking_library),
     (codegen.CPUCodeLibrary, "finalize", _patched_finalize),
     (dispatcher._FunctionCompiler, "_compile_core", _patched_compile_core),
     (codegen.CPUCodeLibrary, "_finalize_final_module", _patched_finalize_final_module),
     (caching.Cache, "load_overload", _patched_load_overload),
     (codegen.CPUCodeLibrary, "serialize_using_object_code", _patched_serialize)))
