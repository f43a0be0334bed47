"""Shared test setup.

Generated modules and Numba's on-disk cache go to a fresh folder per test
session (unless ``S2S_AD_CACHE_DIR`` is set): Numba's cache does not notice
edits to the runtime helpers a cached function inlined, so a cache kept
across runs could test yesterday's runtime.
"""
import importlib.util
import os
import sys
import tempfile

import numpy as np
import pytest

# ad.jit's default is tiered execution: a first call answers from the NumPy
# module while Numba compiles in the background.  Most tests call a jitted
# function once and must check the compiled code (its numbers, its signatures,
# Numba's errors), not the NumPy tier, so the suite compiles eagerly unless
# S2S_AD_COMPILE says otherwise; tests/test_tiered.py asks for
# compile="tiered" itself and checks the library default in a process without
# the variable.  Set before s2s_ad is imported; subprocesses the tests start
# (the CLI, cache and fuzz tests, dask workers) inherit it.
os.environ.setdefault("S2S_AD_COMPILE", "eager")

# Numba's compile time is most of the suite's time, and half of it is LLVM's
# optimisation: the test processes compile at LLVM -O0 (the same semantics:
# no fast-math either way, so the same floating-point operations in the same
# order).  Only this process: subprocesses the tests start (the CLI, fresh
# processes loading the disk cache, dask workers) compile at Numba's default,
# as users do -- at -O0 Numba keeps unused dynamic globals in some functions
# and will not cache them.  `.ci/run` runs the slow tier at the default level.
# S2S_AD_TEST_OPT=3 runs the whole suite at Numba's default.
# Numba re-reads its configuration from the environment before a compile
# whenever a NUMBA_ variable changed since it last did (so the deletion below
# alone would put the level back to 3 at the first compile): the level is set
# on numba.config again after each such reload.
if "NUMBA_OPT" not in os.environ:
    os.environ["NUMBA_OPT"] = os.environ.get("S2S_AD_TEST_OPT", "0")
    import numba  # noqa: E402,F401  (reads NUMBA_OPT at import)
    from numba.core import config as _numba_config  # noqa: E402
    del os.environ["NUMBA_OPT"]
    _TEST_OPT = _numba_config.OPT
    _reload_config = _numba_config.reload_config

    def _reload_at_test_level():
        _reload_config()
        _numba_config.OPT = _TEST_OPT

    _numba_config.reload_config = _reload_at_test_level


def load_program(path):
    """Import a program file as a module named after it (once per session).

    s2s_ad reads source, so the programs tests transform live in real files.
    """
    name = path.stem
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def fd_jacobian(f, x, eps=1e-6):
    """Central-difference Jacobian of ``f`` at ``x``: shape ``out.shape + x.shape``."""
    out = np.asarray(f(x), dtype=float)
    jac = np.zeros(out.shape + np.shape(x))
    for i in np.ndindex(np.shape(x)):
        d = np.zeros_like(x)
        d[i] = eps
        jac[(...,) + i] = (np.asarray(f(x + d)) - np.asarray(f(x - d))) / (2 * eps)
    return jac


def pytest_configure(config):
    if "S2S_AD_CACHE_DIR" not in os.environ:
        folder = tempfile.mkdtemp(prefix="s2s_ad_test_cache_")
        os.environ["S2S_AD_CACHE_DIR"] = folder
        config._s2s_ad_cache = folder


def pytest_unconfigure(config):
    folder = getattr(config, "_s2s_ad_cache", None)
    if folder is not None:
        import shutil
        shutil.rmtree(folder, ignore_errors=True)
        del os.environ["S2S_AD_CACHE_DIR"]



def known_params(known_bugs, test, names, backends=(None,)):
    """``pytest.param`` per (program, backend), xfail(strict) where ``known_bugs`` says.

    ``known_bugs`` maps (test, program, backend or None for every backend) to
    the reason; when a fix lands the strict mark fails loudly.
    """
    out = []
    for name in names:
        for backend in backends:
            reason = known_bugs.get((test, name, backend)) or known_bugs.get((test, name, None))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            ident = name if backend is None else f"{name}-{backend}"
            args = (name,) if backend is None else (name, backend)
            out.append(pytest.param(*args, marks=marks, id=ident))
    return out


def is_float_tree(x):
    """Whether ``x`` (a pytree) holds float leaves only, at least one."""
    from s2s_ad.ir import pytree
    leaves = pytree.flatten(x)[0]
    return bool(leaves) and all(pytree.is_float_leaf(v) for v in leaves)


def as_float32(x):
    """``x`` (a pytree of arguments) with every float leaf in float32."""
    if isinstance(x, (tuple, list)):
        return type(x)(as_float32(v) for v in x)
    if isinstance(x, np.ndarray):
        return x.astype(np.float32)
    return np.float32(x) if isinstance(x, float) else x
