"""Shared test setup.

Generated modules and Numba's on-disk cache go to a fresh folder per test
session (unless ``S2S_AD_CACHE_DIR`` is set): Numba's cache does not notice
edits to the runtime helpers a cached function inlined, so a cache kept
across runs could test yesterday's runtime.
"""
import os
import tempfile


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

