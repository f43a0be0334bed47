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

