"""Numba overloads of the np.fft helpers and complex plumbing in fft.py.

Numba has no np.fft: each transform and adjoint runs its Python helper (so
NumPy's pocketfft) in object mode, its result typed at compile time from the
operand types (rank kept; complex64/float32 for single-precision operands,
as NumPy 2 gives).  The call costs a few microseconds of object-mode
transition on top of the transform; it does not run on the CUDA target.
``real_grad``, ``imag_grad``, ``conj_grad``, ``abs_vjp``, ``abs_jvp`` and ``abs_curv``
are nopython code specialised on whether the operand is complex.
"""

import numpy as np
from numba import objmode, types  # noqa: F401  (objmode: named by the generated source)
from numba.core.errors import TypingError
from numba.extending import overload, register_jitable
from numba.np.numpy_support import from_dtype

from . import fft
from ._nbutil import compile_impl, dtype_src, grad_dtype, np_dtype


def _single(dt):
    return dt in (np.float32, np.complex64)


def _complex_of(dt):
    return np.dtype(np.complex64 if _single(dt) else np.complex128)


def _real_of(dt):
    return np.dtype(np.float32 if _single(dt) else np.float64)


def _primal_dtype(name, a):
    dt = np_dtype(a)
    if "shift" in name:
        return dt
    return _real_of(dt) if name.startswith(("irfft", "hfft")) else _complex_of(dt)


def _grad_dtype(name, g, a):
    if not np.issubdtype(np_dtype(a), np.complexfloating):
        return grad_dtype(a)
    r = np_dtype(g) if "shift" in name else _complex_of(np_dtype(g))
    return np.result_type(np_dtype(a), r)


def _array(x, name, what):
    if not isinstance(x, types.Array):
        raise TypingError(f"s2s_ad.runtime.{name} under Numba: {what} must be an array, got {x}")
    return x


def _objmode(name, params, dtype_of, array):
    """Overload ``fft.<name>``: the Python helper in object mode, typed by ``dtype_of``."""
    py = getattr(fft, name)

    required = params[:array + 1]
    sig = ", ".join(required + [f"{p}={d!r}" for p, d in zip(params[array + 1:], _DEFAULTS[name])])

    def build(*args):
        ref = _array(args[array], name, params[array])
        dt = dtype_of(*args[:array + 1])
        out = types.Array(from_dtype(dt), ref.ndim, "C")
        src = (f"def impl({sig}):\n"
               f"    with objmode(r=OUT):\n"
               f"        r = np.ascontiguousarray(py({', '.join(params)}), {dtype_src(dt)})\n"
               f"    return r\n"
               f"# {name} -> {out}")
        return compile_impl(src, {"OUT": out, "py": py, "objmode": objmode})

    typer = compile_impl(f"def impl({sig}):\n    return build({', '.join(params)})\n"
                         f"# typing {name}", {"build": build})
    overload(py)(typer)


_AXIS = [None, -1, None]        # n, axis, norm
_AXES = [None, None, None]      # s, axes, norm
_DEFAULTS = {}
for _n in ("fft", "ifft", "rfft", "irfft"):
    _DEFAULTS[_n] = _DEFAULTS[_n + "_grad"] = _AXIS
    _DEFAULTS[_n + "n"] = _DEFAULTS[_n + "n_grad"] = _AXES
    _objmode(_n, ["a", "n", "axis", "norm"], lambda a, _n=_n: _primal_dtype(_n, a), 0)
    _objmode(_n + "n", ["a", "s", "axes", "norm"], lambda a, _n=_n: _primal_dtype(_n, a), 0)
    _DEFAULTS[_n + "2"] = [None, (-2, -1), None]
    _objmode(_n + "2", ["a", "s", "axes", "norm"], lambda a, _n=_n: _primal_dtype(_n, a), 0)
    _objmode(_n + "_grad", ["g", "a", "n", "axis", "norm"],
             lambda g, a, _n=_n: _grad_dtype(_n, g, a), 1)
    _objmode(_n + "n_grad", ["g", "a", "s", "axes", "norm"],
             lambda g, a, _n=_n: _grad_dtype(_n, g, a), 1)
for _n in ("hfft", "ihfft"):
    _DEFAULTS[_n] = _DEFAULTS[_n + "_grad"] = _AXIS
    _objmode(_n, ["a", "n", "axis", "norm"], lambda a, _n=_n: _primal_dtype(_n, a), 0)
    _objmode(_n + "_grad", ["g", "a", "n", "axis", "norm"],
             lambda g, a, _n=_n: _grad_dtype(_n, g, a), 1)
for _n in ("fftshift", "ifftshift"):
    _DEFAULTS[_n] = _DEFAULTS[_n + "_grad"] = [None]
    _objmode(_n, ["x", "axes"], lambda x, _n=_n: _primal_dtype(_n, x), 0)
    _objmode(_n + "_grad", ["g", "x", "axes"], lambda g, x, _n=_n: _grad_dtype(_n, g, x), 1)
del _n


# -- complex plumbing (nopython) -------------------------------------------------------------

def _is_complex(ty):
    return np.issubdtype(np_dtype(ty), np.complexfloating) if isinstance(
        ty, (types.Array, types.Number)) else False


@overload(fft.real_grad)
def _real_grad(g, val):
    if not _is_complex(val):
        return lambda g, val: np.real(g)
    if isinstance(val, types.Array):
        return compile_impl(f"def impl(g, val):\n    return (np.real(g) + 0j).astype("
                            f"{dtype_src(np_dtype(val))})")
    return lambda g, val: complex(np.real(g))


@overload(fft.imag_grad)
def _imag_grad(g, val):
    if _is_complex(val):
        if isinstance(val, types.Array):
            return compile_impl(f"def impl(g, val):\n    return (-1j * np.real(g)).astype("
                                f"{dtype_src(np_dtype(val))})")
        return lambda g, val: -1j * np.real(g)
    if isinstance(val, types.Array):
        return compile_impl(f"def impl(g, val):\n    return np.zeros(val.shape, "
                            f"{dtype_src(grad_dtype(val))})")
    return lambda g, val: 0.0


@overload(fft.conj_grad)
def _conj_grad(g, x):
    if _is_complex(x):
        return lambda g, x: np.conj(g)
    return lambda g, x: np.real(g)


@overload(fft.abs_jvp)
def _abs_jvp(t, x):
    if _is_complex(x):
        if isinstance(x, types.Array):
            def impl(t, x):
                m = np.abs(x)
                return np.real(np.conj(x) * t) / (m + (m == 0))
            return impl

        def scalar(t, x):
            m = abs(x)
            return (x.conjugate() * t).real / (m if m != 0 else 1.0)
        return scalar
    if isinstance(x, types.Array):
        return lambda t, x: np.sign(x) * t
    return lambda t, x: _sign(x) * t


@overload(fft.abs_curv)
def _abs_curv(a, b, x):
    if _is_complex(x):
        def impl(a, b, x):
            m = np.abs(x)
            m = m + (m == 0)
            return np.real(a) * (np.conj(b) - np.conj(x) * np.real(np.conj(x) * b) / (m * m)) / m
        return impl
    if isinstance(x, types.Array):
        return compile_impl(f"def impl(a, b, x):\n    return np.zeros(x.shape, "
                            f"{dtype_src(grad_dtype(x))})")
    return lambda a, b, x: 0.0


@overload(fft.abs_vjp)
def _abs_vjp(c, x):
    if _is_complex(x):
        if isinstance(x, types.Array):
            def impl(c, x):
                m = np.abs(x)
                return np.real(c) * np.conj(x) / (m + (m == 0))
            return impl

        def scalar(c, x):
            m = abs(x)
            return np.real(c) * x.conjugate() / (m if m != 0 else 1.0)
        return scalar
    if isinstance(x, types.Array):
        return lambda c, x: np.sign(x) * c
    return lambda c, x: _sign(x) * c


@register_jitable
def _sign(x):
    """np.sign of a real scalar, in plain comparisons (so it compiles for CUDA too)."""
    return 1.0 if x > 0 else (-1.0 if x < 0 else (0.0 if x == 0 else x))
