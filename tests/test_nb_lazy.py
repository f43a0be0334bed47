"""Machine code only where it runs (runtime/_nb_lazy.py): the overload
implementations and register_jitable helpers a compile pulls in are linked
into their callers without code of their own; what needs their environment
or their address still gets it."""
import gc

import numba
import numpy as np
import pytest
from numba.core import codegen
from numba.extending import overload, register_jitable
from s2s_ad.runtime import _nb_lazy


@register_jitable
def _helper(x):
    print("helper sees", x)             # boxes x: needs the helper's environment
    if x > 100.0:
        raise ValueError("too big", x)
    return x * 2.0 + np.sum(np.ones(3))


def _outer(x):
    pass


@overload(_outer)
def _outer_impl(x):
    def impl(x):
        print("overload sees", x)
        return _helper(x) + 1.0
    return impl


@numba.njit
def _through_overload(x):
    return _outer(x)


@numba.njit
def _direct(x):
    return _helper(x) - 1.0


def _deferred(name):
    return [lib for lib in gc.get_objects() if type(lib) is codegen.JITCodeLibrary
            and lib.name == name and getattr(lib, "_s2s_deferred", False)]


def test_patched():
    assert _nb_lazy.PATCHED


def test_environment_reaches_inlined_helpers(capsys):
    # Without the environments written after the caller's code is emitted,
    # the first print raises "missing Environment".
    assert _through_overload(3.0) == 10.0
    assert _direct(5.0) == 12.0
    out = capsys.readouterr().out
    assert "overload sees 3.0" in out and "helper sees 3.0" in out
    assert "helper sees 5.0" in out
    assert not [name for name in _nb_lazy._PENDING if "_helper" in name or "_outer" in name]


def test_errors_raised_inside_helpers():
    with pytest.raises(ValueError, match="too big"):
        _through_overload(300.0)


def test_helpers_have_no_code_until_asked():
    @register_jitable
    def twice_plus(x):
        return 2.0 * x + 0.5

    @numba.njit
    def caller(x):
        return twice_plus(x)

    assert caller(1.0) == 2.5
    libs = _deferred("test_helpers_have_no_code_until_asked.<locals>.twice_plus")
    assert libs
    for lib in libs:
        name = next(fn.name for fn in lib._final_module.functions
                    if not fn.is_declaration and fn.name.startswith("_ZN"))
        assert lib.get_pointer_to_function(name) != 0     # emitted when asked for
        assert not lib._s2s_deferred
    assert caller(2.0) == 4.5       # the caller's copy and the emitted one coexist

    @numba.njit
    def another(x):
        return twice_plus(x) + 1.0
    assert another(1.0) == 3.5


def test_functions_python_calls_keep_their_code():
    @numba.njit
    def inner(x):
        return x + 1.0

    @numba.njit
    def caller(x):
        return inner(x) * 2.0

    assert caller(1.0) == 4.0
    assert inner(1.0) == 2.0     # compiled inside caller's compile, called from Python
