"""compile: generated source -> callable functions.

Two backends share one generated module: ``python`` runs it as plain
Python/NumPy (the reference, and the debugging view); ``cpu`` compiles every
function in it with ``numba.njit`` (nopython mode only: code Numba cannot
compile is an error, never an object-mode fallback).  The module is written
to a file named by the hash of its text and constants, so tracebacks show
real lines and Numba's disk cache (``cache=True``) survives new processes.
"""
import hashlib
import importlib.util
import os
import sys
import threading
from pathlib import Path

import numpy as np

TARGETS = ("python", "cpu", "cuda")


def cache_dir():
    root = os.environ.get("S2S_AD_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "s2s_ad")
    path = Path(root) / "generated"
    path.mkdir(parents=True, exist_ok=True)
    return path


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
    """Write ``source`` to the cache (once) and return its path."""
    digest = hashlib.sha256((source + _fingerprint(consts)).encode()).hexdigest()[:20]
    path = cache_dir() / f"{stem}_{digest}.py"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(source)
        os.replace(tmp, path)
    return path


def import_file(path, modname, consts=()):
    """Run the module file ``path`` as ``modname`` with ``consts`` bound first.

    The module is in ``sys.modules`` under that name while it runs and
    after, so Numba's disk cache can import it again by name.
    """
    spec = importlib.util.spec_from_file_location(modname, path)
    module = importlib.util.module_from_spec(spec)
    module.__dict__.update(consts)
    sys.modules[modname] = module
    spec.loader.exec_module(module)
    return module


def load(source, consts, functions, stem, target="python", options=None, superword=False):
    """Import the generated module and return it, compiled for ``target``.

    ``superword``: compile with LLVM's SLP vectorizer (see :func:`_superword`).
    """
    if target not in TARGETS:
        raise ValueError(f"target must be one of {TARGETS}, got {target!r}")
    options = dict(options or {})
    path = write_module(source, consts, stem)
    module = import_file(path, f"s2s_ad_generated.{path.stem}.{target}", consts)
    if target == "cpu":
        import numba
        njit_options = {"cache": options.get("cache", True),
                        "fastmath": options.get("fastmath", False)}
        if options.get("parallel"):
            njit_options["parallel"] = True
        for name in functions:
            dispatcher = numba.njit(**njit_options)(getattr(module, name))
            setattr(module, name, _superword(dispatcher) if superword else dispatcher)
    elif target == "cuda":
        raise ValueError("target='cuda' compiles batched functions (ad.vmap); "
                         "use target='cpu' for this function")
    return module


_SLP = threading.RLock()     # a sweep compiles the functions it calls inside its own compile


def _superword(dispatcher):
    """``dispatcher``, compiling with LLVM's SLP (superword-level parallelism)
    vectorizer on.

    Numba turns it off for all code (its ``SLP_VECTORIZE`` setting) since
    LLVM miscompiled some integer code with it; the vector-mode adjoint
    sweeps that ask for it are float arithmetic repeated once per cotangent
    on neighbouring elements (see :mod:`s2s_ad.widen`), where it packs the
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
