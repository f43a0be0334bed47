"""compile: generated source -> callable functions (layer ``backends``).

Two backends share one generated module: ``python`` runs it as plain
Python/NumPy (the reference, and the debugging view); ``cpu`` compiles every
function in it with ``numba.njit`` (nopython mode only: code Numba cannot
compile is an error, never an object-mode fallback).  The module is written
to a file named by the hash of its text and constants, so tracebacks show
real lines and Numba's disk cache (``cache=True``) survives new processes.

Also here: ``tiers`` (the first call answers from NumPy while Numba compiles),
``fastcall`` (per-call plans for compiled batched code), ``diskcache``
(``ad.precompile``, ``ad.cache_info``, ``ad.clear_cache``).  The CUDA kernels
are built by ``s2s_ad.api.cuda``.
"""
import hashlib
import linecache
import os
import re
import sys
import threading
import types
import warnings
from pathlib import Path

import numpy as np

TARGETS = ("python", "cpu", "cuda")


def cache_dir():
    """The private folder generated modules are written to, or ``None`` when
    it cannot be used (then everything is compiled in memory).

    ``$S2S_AD_CACHE_DIR/generated``, by default ``~/.cache/s2s_ad/generated``.
    Folders this creates are private to the user (mode 0700); an existing
    ``generated`` folder must belong to the user and is made private, since
    what is in it is executed.
    """
    if _STATE["memory"]:
        return None
    path = cache_path()
    root = path.parent
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.mkdir(mode=0o700, exist_ok=True)
        info = path.stat()
        if hasattr(os, "getuid") and info.st_uid != os.getuid():
            raise PermissionError(f"{path} belongs to another user")
        if info.st_mode & 0o077:
            path.chmod(0o700)
    except OSError as error:
        _in_memory(path, error)
        return None
    return path


def cache_path():
    """Where :func:`cache_dir` keeps generated modules (nothing is created)."""
    root = Path(os.environ.get("S2S_AD_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "s2s_ad"))
    return root / "generated"


def on_disk():
    """Whether generated modules are files (so Numba's disk cache can keep them)."""
    return cache_dir() is not None


_STATE = {"memory": False}
_LOCK = threading.Lock()


def _in_memory(path, error):
    """Compile in memory from now on, saying so once."""
    with _LOCK:
        if _STATE["memory"]:
            return
        _STATE["memory"] = True
    warnings.warn(f"s2s_ad cannot use its cache folder {path} ({error}); generated code "
                  f"is compiled in memory in this process and not kept across processes "
                  f"(set S2S_AD_CACHE_DIR to a writable folder to keep it)",
                  RuntimeWarning, stacklevel=4)


def module_name(source, consts, stem):
    """``stem`` and the hash of the module's text and constants, and of the runtime
    it is compiled against."""
    digest = hashlib.sha256((source + _fingerprint(consts) + _runtime_fingerprint()
                             + _COMPILE_FLAGS).encode()).hexdigest()[:20]
    return f"{stem}_{digest}"


#: The njit flags every module is compiled with (see :func:`load`): Numba's disk
#: cache does not key on them, so they name the module too.
_COMPILE_FLAGS = "error_model=numpy"


def _runtime_fingerprint():
    """The hash of the runtime's source files: Numba's disk cache checks only the
    generated module's own file, so compiled code that inlined an older runtime
    helper must not be found under the same name."""
    from .. import runtime
    return runtime.source_digest()


def _fingerprint(consts):
    h = hashlib.sha256()
    for name, value in sorted(consts.items()):
        h.update(name.encode())
        if isinstance(value, np.ndarray):
            h.update(f"{value.dtype}{value.shape}".encode())
            h.update(np.ascontiguousarray(value).tobytes())
        else:
            qualname = getattr(value, "__qualname__", repr(value))
            h.update(f"{getattr(value, '__module__', '')}.{qualname}"
                     .encode())
    return h.hexdigest()


def write_module(source, consts, stem):
    """The path of a cache file holding exactly ``source``, or ``None`` when
    the cache folder cannot be used.

    A file already there is used only when its text is ``source``; a
    truncated, edited or foreign one is replaced.  Writers go through a
    temporary file and an atomic rename, so processes and threads writing
    the same module at once leave one whole file.
    """
    folder = cache_dir()
    if folder is None:
        return None
    path = folder / f"{module_name(source, consts, stem)}.py"
    try:
        if _text(path) != source:
            tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_text(source)
            os.replace(tmp, path)
    except OSError as error:
        _in_memory(folder, error)
        return None
    return path


def _text(path):
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return None


def generated_function(source, consts, stem, name, owner):
    """The function ``name`` of a generated module of Python source that a
    transform reads as it reads a user's (written to a cache file, so
    ``inspect`` finds its lines); ``owner`` (an object the function stands
    for) keeps modules of equal text apart."""
    path = write_module(source, consts, stem)
    module = import_file(
        path, f"s2s_ad_generated.{module_name(source, consts, stem)}.{id(owner)}", consts,
        source)
    return getattr(module, name)


def import_file(path, modname, consts=(), source=None, reuse=False):
    """Run a generated module as ``modname`` with ``consts`` bound first.

    ``source`` is the text to run: it is compiled from memory (under the
    file's name, for tracebacks and Numba's cache), so what runs is what
    was generated whatever happens to the file meanwhile.  ``path`` may be
    ``None`` (in-memory compilation); without ``source`` the file is read.
    The module is in ``sys.modules`` under that name while it runs and
    after, so Numba's disk cache can import it again by name.

    ``reuse``: return the module already imported under ``modname``, if
    any.  Imports hold one lock, so another thread never sees a module
    that is in ``sys.modules`` but still running.
    """
    with _IMPORTING:
        if reuse and modname in sys.modules:
            return sys.modules[modname]
        return _run_module(path, modname, consts, source)


_IMPORTING = threading.RLock()


def _run_module(path, modname, consts, source):
    if source is None:
        source = Path(path).read_text()
    filename = str(path) if path is not None else f"<s2s_ad generated {modname}>"
    if path is None:
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    module = types.ModuleType(modname)
    module.__file__ = filename
    module.__dict__.update(consts)
    sys.modules[modname] = module
    exec(compile(source, filename, "exec"), module.__dict__)
    return module


def _numpy_floats(fn, like_numba=False):
    """``fn`` with its Python float arguments as ``np.float64``: generated code
    running in Python then follows NumPy's float64 semantics (``1.0 / 0.0`` is
    inf, ``(-1.0) ** 0.5`` nan), as compiled code does (see ``error_model``).

    ``like_numba``: float64 scalars in the result come back as Python floats,
    as Numba returns them (the NumPy stand-in for a cpu build, see tiers)."""
    if like_numba:
        def call(*args):
            return _python_floats(fn(*_float64_scalars(args)))
    else:
        def call(*args):
            return fn(*_float64_scalars(args))
    call.__name__, call.__qualname__, call.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    call.__wrapped__ = fn
    return call


#: Array dtypes a Python float does not promote (NumPy's weak scalars) where an
#: ``np.float64`` would: with one of them among the arguments, floats stay Python's.
_NARROW = frozenset(map(np.dtype, (np.float32, np.float16, np.complex64)))


def _float64_scalars(args):
    """``args`` with Python floats as ``np.float64``, unless that would change
    NumPy's type promotion (a float32 array among them)."""
    if any(getattr(a, "dtype", None) in _NARROW for a in args):
        return args
    return [np.float64(a) if type(a) is float else a for a in args]


def _numpy_math():
    """``math`` for generated code run in Python: its float functions as NumPy's
    ufuncs (``math.log(0.0)`` is -inf, ``math.sqrt(-1.0)`` nan, as compiled
    code gives them), everything else (``floor``, ``gamma``...) ``math``'s own."""
    import math
    space = types.SimpleNamespace(**{k: getattr(math, k) for k in dir(math)
                                     if not k.startswith("_")})
    for name in ("sqrt", "exp", "expm1", "log1p", "log2", "log10", "sin", "cos", "tan",
                 "sinh", "cosh", "tanh", "fabs", "copysign", "fmod"):
        setattr(space, name, getattr(np, name))
    for name in ("asin", "acos", "atan", "asinh", "acosh", "atanh", "atan2"):
        setattr(space, name, getattr(np, "arc" + name[1:]))
    space.pow = np.power

    def log(x, base=None):
        return np.log(x) if base is None else np.log(x) / np.log(base)

    def hypot(*xs):
        return np.hypot(*xs) if len(xs) == 2 else math.hypot(*xs)
    space.log, space.hypot = log, hypot
    return space


_NUMPY_MATH = _numpy_math()


def _python_floats(value):
    if type(value) is np.float64:
        return float(value)
    if type(value) is tuple:
        return tuple(map(_python_floats, value))
    return value


def load(source, consts, functions, stem, target="python", options=None, superword=False,
         like_numba=False):
    """Import the generated module and return it, compiled for ``target``.

    ``like_numba`` (``target="python"``): the module stands in for compiled
    code, and returns float64 scalars as Python floats as Numba does.

    ``superword``: compile with LLVM's SLP vectorizer (see :func:`_superword`).
    """
    if target not in TARGETS:
        raise ValueError(f"target must be one of {TARGETS}, got {target!r}")
    options = dict(options or {})
    path = write_module(source, consts, stem)
    name = f"s2s_ad_generated.{module_name(source, consts, stem)}.{target}"
    module = import_file(path, name, consts, source)
    if target == "cpu":
        import numba
        # error_model="numpy": float division by zero (and 0.0 ** -1, math.log(0.0))
        # gives inf/nan as NumPy's float64 does, not ZeroDivisionError (and no
        # zero checks are compiled in)
        njit_options = {"cache": options.get("cache", True) and path is not None,
                        "fastmath": options.get("fastmath", False), "error_model": "numpy"}
        if options.get("parallel"):
            njit_options["parallel"] = True
        for name in functions:
            dispatcher = _explained(numba.njit(**njit_options)(getattr(module, name)), source,
                                    module.__file__)
            setattr(module, name, _superword(dispatcher) if superword else dispatcher)
    elif target == "python":
        if isinstance(getattr(module, "math", None), types.ModuleType):
            module.math = _NUMPY_MATH
        for name in functions:
            setattr(module, name, _numpy_floats(getattr(module, name), like_numba))
    # target "cuda": the module stays plain Python here (it runs one example
    # on the host to learn the result's layout); s2s_ad.api.cuda compiles its
    # device version and the kernel around it.
    return module


def in_disk_cache(dispatcher, sig):
    """The size in bytes of the entry Numba's disk cache holds for
    ``dispatcher`` compiled for ``sig`` (argument types), read from its index
    without loading the code (at least 1); 0 when there is none."""
    path = _entry_path(dispatcher, sig)
    try:
        return 0 if path is None else max(1, os.path.getsize(path))
    except OSError:
        return 0


def disk_entry(dispatcher, sig):
    """``(size, kernels)`` of the entry Numba's disk cache holds for
    ``dispatcher`` compiled for ``sig``: its size in bytes (at least 1), and
    how many of the runtime's kernels it calls by symbol (runtime/_nb_link.py),
    each of which a process loading the entry loads too.  ``(0, 0)`` when
    there is none.  The entry is read once, not loaded."""
    from .. import runtime
    path = _entry_path(dispatcher, sig)
    try:
        data = b"" if path is None else path.read_bytes()
    except OSError:
        data = b""
    return (max(1, len(data)), runtime.declared_kernels(data)) if data else (0, 0)


def _entry_path(dispatcher, sig):
    cache = getattr(dispatcher, "_cache", None)
    try:
        if not getattr(cache, "_enabled", False):
            return None
        key = cache._index_key(sig, dispatcher.targetctx.codegen())
        data = cache._cache_file._load_index().get(key)
        if data is None:
            return None
        return Path(cache._cache_file._data_path(data))
    except Exception:        # noqa: BLE001  (Numba's internals moved: compile as usual)
        return None


_FAILED = threading.local()     # the error a nested compile already explained


def _explained(dispatcher, source, filename):
    """``dispatcher``, whose compile errors name the user's line.

    Numba reports what it cannot compile (a typing error, or an internal
    error while lowering) against the generated file; the error raised
    instead is an :class:`~s2s_ad.UnsupportedSyntaxError` at the user's line
    that the generated statement comes from (each block of generated code
    follows a ``# <user's line>  [line N]`` comment), with Numba's reason.
    """
    compile_for = dispatcher.compile

    def compile(sig):
        outermost = not getattr(_FAILED, "depth", 0)
        _FAILED.depth = getattr(_FAILED, "depth", 0) + 1
        try:
            return compile_for(sig)
        except Exception as error:       # Numba's typing errors and internal assertions
            explained = getattr(_FAILED, "error", None)
            if explained is not None:    # a callee's, which Numba wrapped
                raise explained from explained.__cause__
            _FAILED.error = _numba_error(error, source, filename, dispatcher.py_func.__name__)
            raise _FAILED.error from error
        finally:
            _FAILED.depth -= 1
            if outermost:
                _FAILED.error = None
    dispatcher.compile = compile
    return dispatcher


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_COMMENT = re.compile(r"^\s*# (?:adjoint of: |restore: )?(.*?)  \[line (\d+)\]$")


def _numba_error(error, source, filename, function):
    """The UnsupportedSyntaxError for Numba failing to compile ``function``."""
    from ..errors import UnsupportedSyntaxError
    text = _ANSI.sub("", str(error))
    own = re.findall(r"(s2s_ad[.:][^\n]*)", text)
    reason = own[0] if own else next(
        (line.strip() for line in text.splitlines()
         if line.strip() and not line.startswith("Failed in nopython mode")),
        f"an internal error in Numba ({type(error).__name__})")
    signature = re.search(r">>> ([^\n]*)", text)
    if signature and not own:
        reason += f" {signature.group(1).strip()}"
    user_file = re.search(r"\(([^()]*):\d+\)\.$", source.split("\n", 1)[0])
    line = _generated_line(error, text, filename)
    where = _user_line(source, line) if line else None
    msg = (f"under ad.jit, Numba cannot compile this line ({reason}); run it without ad.jit, "
           f"or write it with operations Numba supports")
    if where is None:
        return UnsupportedSyntaxError(f"{msg} (in the generated function {function})",
                                      user_file.group(1) if user_file else None)
    text_line, lineno = where
    return UnsupportedSyntaxError(msg, user_file.group(1) if user_file else None, lineno, 1,
                                  text_line)


def _generated_line(error, text, filename):
    """The line of the generated file Numba failed at, or None."""
    base = re.escape(Path(filename).name)
    found = re.findall(rf'File "[^"]*{base}", line (\d+)', text)
    if found:
        return int(found[-1])
    tb = error.__traceback__
    line = None
    while tb is not None:        # an internal error while lowering: Numba's current location
        loc = getattr(tb.tb_frame.f_locals.get("self"), "loc", None)
        if str(getattr(loc, "filename", "")).endswith(Path(filename).name):
            line = loc.line
        tb = tb.tb_next
    return line


def _user_line(source, line):
    """(text, number) of the user's line the generated ``line`` comes from."""
    lines = source.split("\n")
    for k in range(min(line, len(lines)) - 1, -1, -1):
        m = _COMMENT.match(lines[k])
        if m:
            return m.group(1), int(m.group(2))
    return None


_SLP = threading.RLock()     # a sweep compiles the functions it calls inside its own compile


def _superword(dispatcher):
    """``dispatcher``, compiling with LLVM's SLP (superword-level parallelism)
    vectorizer on.

    Numba turns it off for all code (its ``SLP_VECTORIZE`` setting) since
    LLVM miscompiled some integer code with it; the vector-mode adjoint
    sweeps that ask for it are float arithmetic repeated once per cotangent
    on neighbouring elements (see :mod:`s2s_ad.transforms.widen`), where it packs the
    K copies of a statement into SIMD instructions.  Numba reads the setting
    each time it builds LLVM's pass pipeline, so it is switched on only
    while this dispatcher (and what it calls) compiles.
    """
    from numba.core import config
    compile_for = dispatcher.compile

    def compile(sig):
        with _SLP:
            before = config.SLP_VECTORIZE
            config.SLP_VECTORIZE = True
            try:
                return compile_for(sig)
            finally:
                config.SLP_VECTORIZE = before
    dispatcher.compile = compile
    return dispatcher
