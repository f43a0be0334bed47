"""Machine code only for compiled functions that something runs.

Every Numba compile ends by turning its LLVM module into machine code
(``NativeLowering`` asks for the function's address, which finalizes the
library: optimise, add the module to MCJIT's engine, emit code).  Most
compiles inside a compile are overload implementations (``@overload``,
``@register_jitable`` and Numba's own ``np.*`` overloads) and lowering-time
subroutines: they have no CPython wrapper, so nothing can call them from
Python, and their callers link their optimised LLVM module and compile it
again as part of their own code.  Their own machine code is never run:
0.1-1.1 s of a cold compile of the benchmark's workloads (docs/compile_time.md
§4, session 22).

Here such a library is finalized without it: its module is optimised as
before (what callers link is unchanged, so their code is what it was) but is
not added to the engine.  Two things the engine did for it are kept:

- Its environment (``NumbaEnv`` global, ``common`` linkage) is filled in once
  a caller's module, which carries a copy of the global, is in the engine
  (MCJIT resolves every copy of a ``common`` symbol to the first one
  emitted; :func:`_fill_environments`).
- Anything that does ask for its code (an address, a cache entry) gets it:
  :func:`materialize` adds the module then, as Numba would have done at the
  end of its compile.

Only libraries whose every function is without a CPython wrapper are
deferred (an ``njit`` function compiled inside another compile has one, and
may be called from Python later with the same types), on the CPU target.  If
Numba's internals differ (another version), nothing is patched.
"""

import ctypes
import threading
import weakref

from numba import _dynfunc
from numba.core import codegen, cpu

from . import _nb_link  # its patches first: these wrap them

#: Environment global name -> (library, environment) still to be written.
_PENDING = {}
_LOCK = threading.RLock()

_get_executable = cpu.CPUContext.get_executable
_finalize_final_module = codegen.CPUCodeLibrary._finalize_final_module
_finalize_specific = codegen.JITCodeLibrary._finalize_specific
_get_pointer_to_function = codegen.JITCodeLibrary.get_pointer_to_function
_serialize_object = codegen.CPUCodeLibrary.serialize_using_object_code


def _callable_from_python(library, fndesc):
    """Whether ``library`` defines the CPython wrapper of ``fndesc``."""
    try:
        library._final_module.get_function(fndesc.llvm_cpython_wrapper_name)
    except NameError:
        return False
    return True


def _patched_get_executable(self, library, fndesc, env):
    if (type(library) is not codegen.JITCodeLibrary or library._finalized
            or _callable_from_python(library, fndesc)):
        return _get_executable(self, library, fndesc, env)
    library._s2s_deferred = True
    name = self.get_env_name(fndesc)
    with _LOCK:
        _PENDING[name] = (weakref.ref(library), env)
    # What Numba does, without the address: the function object a no-wrapper
    # compile gets is the same (its address was 0, "no such symbol").
    return _get_executable_without_code(library, fndesc, env)


def _get_executable_without_code(library, fndesc, env):
    library._ensure_finalized()
    doc = "compiled wrapper for %r" % (fndesc.qualname,)
    return _dynfunc.make_function(fndesc.lookup_module(), fndesc.qualname.split(".")[-1],
                                  doc, 0, env, (library,))


def _patched_finalize_final_module(self):
    if not getattr(self, "_s2s_deferred", False):
        return _finalize_final_module(self)
    # Numba's _finalize_final_module, less adding the module to the engine
    # and emitting its code (materialize() does both when asked).
    self._finalize_dynamic_globals()
    self._verify_declare_only_symbols()
    self._final_module._CPUCodeLibrary__library = weakref.proxy(self)
    self._finalized = True
    return None


def materialize(library):
    """Emit ``library``'s code now if it was deferred (idempotent)."""
    if not getattr(library, "_s2s_deferred", False):
        return
    with _LOCK:
        if not library._s2s_deferred:
            return
        library._s2s_deferred = False
        cleanup = library._codegen._add_module(library._final_module)
        if cleanup:
            weakref.finalize(library, cleanup)
        _finalize_specific(library)
        _fill_environments(library._codegen._engine)


def _fill_environments(engine):
    """Write the environments whose global a finalized module now defines."""
    with _LOCK:
        done = []
        for name, (ref, env) in _PENDING.items():
            if ref() is None:
                done.append(name)
            elif engine.is_symbol_defined(name):
                address = engine.get_global_value_address(name)
                _write_pointer(address, env)
                done.append(name)
        for name in done:
            del _PENDING[name]


def _write_pointer(address, env):
    (ctypes.c_void_p * 1).from_address(address)[0] = ctypes.c_void_p(id(env))


def _patched_finalize_specific(self):
    _finalize_specific(self)
    if _PENDING:
        _fill_environments(self._codegen._engine)


def _patched_get_pointer_to_function(self, name):
    materialize(self)
    return _get_pointer_to_function(self, name)


def _patched_serialize_object(self):
    materialize(self)
    return _serialize_object(self)


PATCHED = _nb_link.install(
    (getattr(codegen.CPUCodeLibrary, "_finalize_dynamic_globals", None),
     getattr(codegen.CPUCodeLibrary, "_verify_declare_only_symbols", None),
     getattr(codegen.JITCPUCodegen, "_add_module", None),
     getattr(codegen.JitEngine, "is_symbol_defined", None),
     getattr(codegen.JitEngine, "get_global_value_address", None)),
    ((cpu.CPUContext, "get_executable", _patched_get_executable),
     (codegen.CPUCodeLibrary, "_finalize_final_module", _patched_finalize_final_module),
     (codegen.JITCodeLibrary, "_finalize_specific", _patched_finalize_specific),
     (codegen.JITCodeLibrary, "get_pointer_to_function", _patched_get_pointer_to_function),
     (codegen.CPUCodeLibrary, "serialize_using_object_code", _patched_serialize_object)))
