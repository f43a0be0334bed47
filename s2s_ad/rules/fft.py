"""``np.fft`` and the complex plumbing around it: ``np.real``, ``np.imag``,
``np.conj`` (and ``.real``/``.imag``/``.conj()``).

Every transform is linear (over the reals), so each is one declaration of
its VJP; its JVP is the transform of the tangent.  Complex cotangents follow
JAX's convention (runtime/fft.py): a C-linear map's VJP is its transpose, a
holomorphic function's is ``g * f'(z)`` -- so the real rules (``*``, ``+``,
``np.sum``, ``np.exp``...) carry complex values unchanged -- and a real
operand of a complex result gets the real part of its cotangent.  The
helpers print as ``rt.fft``... (runtime/fft.py), run by NumPy's pocketfft in
Python and in Numba's object mode under ``ad.jit`` (runtime/_nb_fft.py).

Batching: the transform of a batch is the same transform with every axis
counted from the end (a leading batch axis is then never transformed).
"""
import numpy as np

from ..ir import Const, Tup
from .internal import INTERNAL
from .linalg import batch_loop
from .registry import Rule, register


def _same_rank(args, params):
    return args[0]


def _value(atom):
    items = getattr(atom, "items", None)
    if items is not None:
        return tuple(_value(x) for x in items)
    return atom.value if isinstance(atom, Const) else atom


def _from_end(vz, s, name, default):
    """``s``'s axis parameter with every axis counted from the end (None if not static)."""
    rank = vz.rank(next(a for a in s.args if vz.is_b(a)), s.loc)
    value = _value(s.params.get(name, Const(default)))
    if rank is None or not all(isinstance(v, (int, type(None))) for v in
                               (value if isinstance(value, tuple) else (value,))):
        return None
    if value is None:                          # fftn's axes: the last len(s), or all
        size = _value(s.params.get("s", Const(None)))
        count = rank if size is None else len(size)
        return Tup(tuple(Const(k) for k in range(-count, 0)))
    if isinstance(value, tuple):
        return Tup(tuple(Const(k % rank - rank) for k in value))
    return Const(value % rank - rank)


def _batch(name, default):
    def batch(vz, s, body):
        """vmap: the same transform, its axes counted from the end."""
        axes = _from_end(vz, s, name, default)
        if axes is None:
            return batch_loop(vz, s, body)
        vz.emit(body, s.rule, list(s.args), dict(s.params, **{name: axes}), s.loc,
                s.targets[0])
    return batch


def _declare(name, fn, emit, axis, default, grad):
    size = "s" if axis == "axes" else "n"
    params = ("a", size, axis, "norm")
    every = ", ".join(params)
    return register(Rule(name=name, params=params, operands=("a",), emit=emit,
                         defaults={size: None, axis: default, "norm": None},
                         vjp={"a": f"{grad}(g, {every})"}, linear=True, rank=_same_rank,
                         batch=_batch(axis, default)), fn)


for _n in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft"):
    _declare(f"np.fft.{_n}", getattr(np.fft, _n), f"rt.{_n}", "axis", -1, f"rt.{_n}_grad")
for _n in ("fft", "ifft", "rfft", "irfft"):
    _declare(f"np.fft.{_n}n", getattr(np.fft, f"{_n}n"), f"rt.{_n}n", "axes", None,
             f"rt.{_n}n_grad")
    _declare(f"np.fft.{_n}2", getattr(np.fft, f"{_n}2"), f"rt.{_n}2", "axes", (-2, -1),
             f"rt.{_n}n_grad")

for _n, _back in (("fftshift", "ifftshift"), ("ifftshift", "fftshift")):
    register(Rule(name=f"np.fft.{_n}", params=("x", "axes"), operands=("x",),
                  emit=f"rt.{_n}", defaults={"axes": None},
                  vjp={"x": f"rt.{_n}_grad(g, x, axes)"}, linear=True, rank=_same_rank,
                  batch=_batch("axes", None)), getattr(np.fft, _n))


# -- complex plumbing: real-linear, elementwise ---------------------------------------------

def _batch_same(vz, s, body):
    """vmap of an elementwise function of one operand: itself on the batch."""
    vz.emit(body, s.rule, list(s.args), dict(s.params), s.loc, s.targets[0])


register(Rule(name="np.real", params=("val",), operands=("val",), emit="np.real",
              vjp={"val": "rt.real_grad(g, val)"}, linear=True, rank=_same_rank,
              batch=_batch_same), np.real, attribute="real")
register(Rule(name="np.imag", params=("val",), operands=("val",), emit="np.imag",
              vjp={"val": "rt.imag_grad(g, val)"}, linear=True, rank=_same_rank,
              batch=_batch_same), np.imag, attribute="imag")
register(Rule(name="np.conj", params=("x",), operands=("x",), emit="np.conj",
              vjp={"x": "rt.conj_grad(g, x)"}, linear=True, rank=_same_rank,
              batch=_batch_same), np.conj, methods=("conj", "conjugate"))


# -- np.abs's derivative helpers (its declaration is in elementwise.py) -----------------------

def _internal(rule):
    INTERNAL[rule.emit] = rule
    return rule


#: np.abs's cotangent and tangent (np.abs is declared in elementwise.py): each is the
#: other's transpose in its first operand; their derivatives in x are rt.abs_curv's
#: (zero for real x), whose own derivatives have no rule (third derivatives of |z|).
_internal(Rule(name="rt.abs_vjp", params=("c", "x"), operands=("c", "x"), emit="rt.abs_vjp",
               vjp={"c": "rt.abs_jvp(g, x)", "x": "rt.abs_curv(c, g, x)"},
               jvp={"c": "rt.abs_vjp(dc, x)", "x": "rt.abs_curv(c, dx, x)"}))
_internal(Rule(name="rt.abs_jvp", params=("t", "x"), operands=("t", "x"), emit="rt.abs_jvp",
               vjp={"t": "rt.abs_vjp(g, x)", "x": "rt.abs_curv(g, t, x)"},
               jvp={"t": "rt.abs_jvp(dt, x)", "x": "np.real(t * rt.abs_curv(1.0, dx, x))"}))
_internal(Rule(name="rt.abs_curv", params=("a", "b", "x"), operands=("a", "b", "x"),
               emit="rt.abs_curv", nondiff=True, undiff=("a", "b", "x")))

# The adjoints' own adjoints (second derivatives): each adjoint is linear in g, and its
# transpose is the transform itself; the operand it is shaped like has no derivative.
for _n in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft"):
    _internal(Rule(name=f"rt.{_n}_grad", params=("g", "a", "n", "axis", "norm"),
                   operands=("g", "a"), emit=f"rt.{_n}_grad",
                   defaults={"n": None, "axis": -1, "norm": None},
                   vjp={"g": f"rt.{_n}(g, n, axis, norm)"}, linear=True, piecewise=("a",)))
for _n in ("fft", "ifft", "rfft", "irfft"):
    _internal(Rule(name=f"rt.{_n}n_grad", params=("g", "a", "s", "axes", "norm"),
                   operands=("g", "a"), emit=f"rt.{_n}n_grad",
                   defaults={"s": None, "axes": None, "norm": None},
                   vjp={"g": f"rt.{_n}n(g, s, axes, norm)"}, linear=True, piecewise=("a",)))
for _n in ("fftshift", "ifftshift"):
    _internal(Rule(name=f"rt.{_n}_grad", params=("g", "x", "axes"), operands=("g", "x"),
                   emit=f"rt.{_n}_grad", defaults={"axes": None},
                   vjp={"g": f"rt.{_n}(g, axes)"}, linear=True, piecewise=("x",)))
for _n, _t in (("real", "np.real(g)"), ("imag", "np.imag(g)"), ("conj", "np.conj(g)")):
    _operand = "x" if _n == "conj" else "val"
    _internal(Rule(name=f"rt.{_n}_grad", params=("g", _operand), operands=("g", _operand),
                   emit=f"rt.{_n}_grad", vjp={"g": _t}, linear=True, piecewise=(_operand,)))
