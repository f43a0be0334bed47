"""Generated overload implementations kept in Numba's disk cache.

The overloads generate their implementations as text, specialised on the
argument types (runtime/_nbutil.compile_impl).  Text exec'd in memory has no
source file, so Numba compiles it again in every process: 8-20 nested
compiles, 1-4 s of a gradient's first compile (docs/compile_time.md §4).
Here each such source is written to a module file named by the hash of its
text, its globals, the runtime's source and the compile flags it inherits,
in a ``s2s_ad_generated`` folder inside the folder where Numba caches the
runtime's own kernels (runtime/_nb_kernels.py: ``__pycache__`` beside the
runtime, or Numba's cache folder), and compiled there as an
``@njit(cache=True)`` kernel; the overload returns a one-line
implementation with the same signature that calls it.  A later compile, in
any process, loads the kernel's machine code instead of typing and lowering
it again.  Like the runtime's kernels, they are shared by every generated
module and process on the machine; ``s2s-ad cache info|clear`` counts and
removes them with those (:func:`cache_files`).

The kernel is the same function compiled from the same text, with the
fast-math and error-model flags its caller's compile would have given the
implementation, so results are unchanged; those flags and LLVM's
optimisation level (``NUMBA_OPT``: the test suite compiles at 0) are part of
the file's name, since Numba's cache does not tell them apart.  Files are written once (to a
temporary file, then linked into place; processes writing the same one at
once keep the first) and never rewritten: Numba's index of a kernel stays
valid as long as the file's time stamp.
"""

import ast
import hashlib
import importlib.util
import os
import sys
import threading
import types as pytypes
from pathlib import Path

import numba
from numba.core import targetconfig

from . import _nb_kernels as kernels
from . import _nb_link

_KERNELS = {}
#: The kernel dispatcher of each module file and compile options.
_DISPATCHERS = {}
_DIGEST = {}
_SUBFOLDER = "s2s_ad_generated"
#: Implementations shorter than this (body lines) stay inline.
_MIN_LINES = 3


def folder():
    """The folder of the generated kernels' files (None: Numba keeps no cache
    of the runtime's kernels, so these are compiled in memory too)."""
    parent = getattr(getattr(kernels.dot, "_cache", None), "_cache_path", None)
    return None if parent is None else Path(parent) / _SUBFOLDER


def cache_files():
    """The runtime's kernels in Numba's cache (runtime/_nb_kernels.py), and
    these generated ones: their module files and Numba's index and code files
    of them (``__pycache__`` beside them, or Numba's cache folder)."""
    out = kernels.cache_files()
    where = folder()
    if where is None:
        return out
    from numba.core import caching, config
    places = [(where, ".py"), (where / "__pycache__", (".nbi", ".nbc", ".pyc")),
              (where / _nb_link.SUBFOLDER, ".pkl")]
    if config.CACHE_DIR:
        sub = caching._CacheLocator.get_suitable_cache_subpath(str(where / "rt.py"))
        places.append((Path(config.CACHE_DIR) / sub, (".nbi", ".nbc")))
    for place, ends in places:
        try:
            names = sorted(os.listdir(place))
        except OSError:
            continue
        out += [str(place / n) for n in names
                if (n.startswith("rt_") or place.name == _nb_link.SUBFOLDER) and n.endswith(ends)]
    return out


def source_digest():
    """The hash of the runtime's source files (once per process): compiled code
    inlines runtime helpers, and Numba's cache checks only its own file."""
    if "digest" not in _DIGEST:
        h = hashlib.sha256()
        for path in sorted(Path(__file__).parent.glob("*.py")):
            h.update(path.name.encode())
            h.update(path.read_bytes())
        _DIGEST["digest"] = h.hexdigest()
    return _DIGEST["digest"]


def cached_impl(src, scope):
    """The implementation of ``impl`` in ``src`` that calls a cached kernel,
    or ``None`` where it cannot be cached (no folder, not inside a Numba
    compile, object mode, ``*args``, fewer than ``_MIN_LINES`` lines,
    globals that are not module-level functions, a file that cannot be
    written)."""
    flags = targetconfig.ConfigStack.top_or_none()
    if flags is None or "objmode" in src:
        return None
    params = _params(src)
    if params is None:
        return None
    options = {"fastmath": set(flags.fastmath.flags) or False,
               "error_model": flags.error_model}
    imports = _imports(scope)
    if imports is None:
        return None
    key = (src, imports, tuple(sorted(options["fastmath"] or ())),
           options["error_model"], int(numba.config.OPT))
    impl = _KERNELS.get(key)
    if impl is None:
        where = folder()
        if where is None:
            return None
        name = "rt_" + hashlib.sha256(repr(key[1:]).encode() + src.encode()
                                      + source_digest().encode()).hexdigest()[:20]
        path = _write(where, f"{name}.py", _HEADER + imports + src + "\n")
        kernel = None if path is None else _compile(path, name, options)
        if kernel is None:
            return None
        scope = {"kernel": kernel}
        exec(compile(f"def impl({params[0]}):\n    return kernel({params[1]})\n",  # noqa: S102
                     "<s2s_ad.runtime cached>", "exec"), scope)
        impl = _KERNELS[key] = scope["impl"]
    return impl


def _params(src):
    """``impl``'s parameters as written, and as the names passed on (or None)."""
    for node in ast.parse(src).body:
        if isinstance(node, ast.FunctionDef) and node.name == "impl":
            args = node.args
            if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
                return None
            if node.end_lineno - node.lineno < _MIN_LINES:
                return None     # a line or two: typed as fast as the call of a kernel
            return ast.unparse(args), ", ".join(a.arg for a in args.args)
    return None


def _imports(scope):
    """The import statements binding the globals ``src`` is given, so that its
    file is a module of its own (Numba's cache imports it by name to rebuild
    a loaded function's environment); None where one is not a module-level
    function (a closure, a type, a constant): not cached."""
    lines = ["import numpy as np\n"]
    for name, value in sorted(scope.items()):
        module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", "")
        if (name == "np" or not isinstance(qualname, str) or not qualname.isidentifier()
                or getattr(sys.modules.get(module), qualname, None) is not value):
            return None
        lines.append(f"from {module} import {qualname} as {name}\n")
    return "".join(lines) + "\n\n"


_HEADER = ("# An overload implementation generated by s2s_ad's runtime, compiled as a\n"
           "# cached Numba kernel (runtime/_nb_cached.py).  Safe to delete.\n")
_PACKAGE = _nb_link.GENERATED


def _register_package():
    """Make ``s2s_ad_runtime_generated.rt_<hash>`` importable from :func:`folder`."""
    where = folder()
    if where is not None and _PACKAGE not in sys.modules:
        package = pytypes.ModuleType(_PACKAGE)
        package.__path__ = [str(where)]
        sys.modules[_PACKAGE] = package


def _write(where, filename, src):
    """``where/filename`` holding exactly ``src``, written once (None if it cannot be)."""
    path = where / filename
    try:
        if path.read_text() == src:
            return path
    except (OSError, UnicodeDecodeError):
        pass
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        where.mkdir(exist_ok=True)
        tmp.write_text(src)
        try:
            os.link(tmp, path)          # never replaces a file another process wrote
        except FileExistsError:
            if path.read_text() != src:     # a truncated or foreign file: replace it
                os.replace(tmp, path)
        except OSError:                 # no hard links here
            os.replace(tmp, path)
    except OSError:
        return None
    finally:
        try:
            tmp.unlink()
        except OSError:
            pass
    return path


def load_kernel(name, options):
    """The kernel of the module file ``rt_<hash>.py`` named ``name``, compiled
    with ``options`` (None if the file is gone): how a process that loads a
    caller from Numba's cache finds the kernels it calls (runtime/_nb_link.py)."""
    where = folder()
    if where is None or not (where / f"{name}.py").exists():
        return None
    return _compile(where / f"{name}.py", name, options)


def _compile(path, name, options):
    """``impl`` of the module file ``path`` as a cached ``njit`` kernel (None
    if the module cannot be imported), one dispatcher per file and options."""
    spec = ("generated", name, tuple(sorted(
        (key, tuple(sorted(value)) if isinstance(value, set) else value)
        for key, value in options.items())))
    kernel = _DISPATCHERS.get(spec)
    if kernel is None:
        kernel = _DISPATCHERS[spec] = _dispatcher(path, name, options)
        if kernel is not None:
            _nb_link.register(kernel, spec)
    return kernel


def _dispatcher(path, name, options):
    modname = f"{_PACKAGE}.{name}"
    module = sys.modules.get(modname)
    if module is None:
        try:
            spec = importlib.util.spec_from_file_location(modname, path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        except Exception:       # noqa: BLE001  (a file changed under us: compiled in memory)
            return None
        sys.modules[modname] = module
    options = {key: set(value) if isinstance(value, tuple) else value
               for key, value in options.items()}
    try:
        return numba.njit(cache=True, **options)(module.impl)
    except RuntimeError:            # Numba cannot cache beside it: compiled per process
        return numba.njit(**options)(module.impl)


_register_package()
_nb_link.LOCATORS["generated"] = lambda name, options: load_kernel(name, dict(options))
_nb_link.FOLDER = folder
