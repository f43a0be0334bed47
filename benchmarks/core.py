"""What every workload shares: implementations, peers, checking, timing.

A workload module (``rosen_loop``, ``ode_rk4``, ...) describes one problem:
its inputs, the user's plain Python function, a hand-written Numba gradient
(the reference every other gradient is checked against) and factories for
the peers.  This module turns that description into a list of
:class:`Impl` -- callables with their arguments already converted -- checks
every gradient against the reference, and times them round-robin.

Nothing here needs JAX, PyTorch or autograd: a peer that is not installed
is a skipped column, never an error.
"""
import gc
import math
import os
import statistics
import time
import types
from dataclasses import dataclass, field

import numpy as np

#: Relative tolerance of the gradient check (see :func:`compare`).
RTOL = 1e-8

#: Column order of the implementations, and their labels.
LABELS = {
    "numpy": "NumPy primal",
    "numba": "Numba primal",
    "hand": "hand-written Numba grad",
    "s2s_ad": "s2s_ad jit(grad)",
    "s2s_ad_py": "s2s_ad grad (NumPy)",
    "jax": "JAX jit(grad)",
    "jax_lax": "JAX jit(grad), lax loops",
    "torch": "PyTorch eager",
    "autograd": "HIPS autograd",
}
PEERS = ("jax", "jax_lax", "torch", "autograd")


class Unavailable(Exception):
    """A peer that is not installed, or cannot express the workload."""


@dataclass
class Impl:
    """One column: a callable, its (converted) arguments, what it computes.

    ``kind`` is ``"primal"`` (returns the function's value), or names the
    derivative it returns (``"grad"``: one gradient per differentiated
    argument; ``"hvp"``, ``"hessian"``, ``"jacobian"``, ...); None means the
    workload's own kind (:attr:`Workload.kind`).  ``to_numpy`` turns what
    ``fn`` returns into a tuple of NumPy arrays for the check.
    ``reference``, for a derivative column that does not compute what the
    hand-written column does (an HVP column in a Hessian workload), is what
    it is checked against instead: the expected value, or a function of the
    hand-written result (a tuple of arrays) that returns it.
    """
    key: str
    fn: object
    args: tuple
    kind: str = None
    to_numpy: object = None
    note: str = ""
    reference: object = None

    @property
    def label(self):
        return LABELS.get(self.key, self.key)


@dataclass
class Cell:
    """The outcome for one implementation of one workload."""
    key: str
    kind: str
    status: str                  # ok | WRONG | error | skipped
    reason: str = ""
    first_call_s: float = None
    max_rel_err: float = None
    samples: list = field(default_factory=list)
    number: int = 0
    note: str = ""
    label: str = ""              # the workload's label for the column (else LABELS)

    def stats(self):
        if not self.samples:
            return {}
        return summarize(self.samples)

    def to_json(self):
        out = {"label": self.label or LABELS.get(self.key, self.key), "kind": self.kind,
               "status": self.status}
        for name in ("reason", "note"):
            if getattr(self, name):
                out[name] = getattr(self, name)
        if self.first_call_s is not None:
            out["first_call_s"] = self.first_call_s
        if self.max_rel_err is not None:
            out["max_rel_err"] = self.max_rel_err
        if self.samples:
            out.update({f"{k}_s": v for k, v in self.stats().items()})
            out["rounds"] = len(self.samples)
            out["calls_per_round"] = self.number
        return out


# -- peers --------------------------------------------------------------------

def load_jax():
    """``(jax, jax.numpy, jax.lax)`` with float64 on, or Unavailable."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    # One XLA thread, like every other column (see README: 2-core machines).
    os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                          "intra_op_parallelism_threads=1")
    try:
        import jax
        import jax.numpy as jnp
        from jax import lax
    except ImportError as exc:
        raise Unavailable(f"jax is not installed ({exc})") from None
    jax.config.update("jax_enable_x64", True)
    return jax, jnp, lax


def load_torch():
    try:
        import torch
    except ImportError as exc:
        raise Unavailable(f"torch is not installed ({exc})") from None
    torch.set_num_threads(1)
    return torch


def load_autograd():
    """``(autograd, autograd.numpy)`` or Unavailable."""
    try:
        import autograd
        import autograd.numpy as anp
    except ImportError as exc:
        raise Unavailable(f"autograd is not installed ({exc})") from None
    return autograd, anp


def jax_ready(out):
    """Block on every array of a JAX result (JAX dispatches asynchronously)."""
    import jax
    return jax.block_until_ready(out)


def as_tuple(out):
    """A gradient result as a tuple of NumPy arrays."""
    if not isinstance(out, (tuple, list)):
        out = (out,)
    return tuple(np.asarray(_plain(o), dtype=np.float64) for o in out)


def _plain(x):
    detach = getattr(x, "detach", None)      # torch tensors
    return detach().numpy() if detach is not None else x


def rebind(entry, helpers=(), wrap=None, **names):
    """Copies of ``entry`` and the ``helpers`` it calls, with globals replaced.

    The copies share one globals dict: the module's, with ``names`` (e.g.
    ``np=autograd.numpy``) and each helper's name bound to its copy, passed
    through ``wrap`` when given.  This runs the user's own code on another
    array library, or under ``numba.njit`` -- where a user with a helper
    decorates both -- without touching the module's names.
    """
    scope = dict(entry.__globals__, **names)

    def copy(fn):
        new = types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__,
                                 fn.__closure__)
        return wrap(new) if wrap else new
    for h in helpers:
        scope[h.__name__] = copy(h)
    return copy(entry)


def njit_program(entry, *helpers):
    """``entry`` under ``numba.njit``, with the helpers it calls jitted too."""
    import numba
    return rebind(entry, helpers, wrap=numba.njit)


# -- checking -----------------------------------------------------------------

def compare(got, want):
    """Largest relative error over the leaves, normwise per leaf.

    Each leaf's error is max|got - want| / max|want|: elementwise relative
    error would flag entries that are zero up to rounding.  A shape mismatch
    is an infinite error.
    """
    got, want = as_tuple(got), as_tuple(want)
    if len(got) != len(want):
        return math.inf
    worst = 0.0
    for g, w in zip(got, want):
        if g.shape != w.shape:
            return math.inf
        scale = float(np.max(np.abs(w))) if w.size else 0.0
        err = float(np.max(np.abs(g - w))) if w.size else 0.0
        if not np.all(np.isfinite(g)):
            return math.inf
        worst = max(worst, err / scale if scale > 0 else err)
    return worst


# -- timing -------------------------------------------------------------------

def summarize(times):
    """median, quartiles and extremes of per-call times (seconds)."""
    if len(times) == 1:
        t = times[0]
        return {"median": t, "q1": t, "q3": t, "min": t, "max": t}
    q1, median, q3 = statistics.quantiles(times, n=4, method="inclusive")
    return {"median": median, "q1": q1, "q3": q3, "min": min(times), "max": max(times)}


def _sample(fn, args, number):
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter()
        for _ in range(number):
            fn(*args)
        return (time.perf_counter() - start) / number
    finally:
        if gc_was_enabled:
            gc.enable()


def measure(cells, impls, *, rounds, sample_s, budget_s, progress=None):
    """Time each implementation, interleaved round-robin; fills ``cells``.

    Every implementation has been called once already (the check).  One
    more call warms it up and calibrates how many back-to-back calls
    (``number``) make a sample of about ``sample_s`` seconds.  Then each
    round takes one sample of every implementation, in an order rotated
    from round to round, so that drift in the machine's state hits every
    column alike.  An implementation whose samples would exceed
    ``budget_s`` takes part in fewer rounds (at least 3); one slower than
    ``budget_s / 3`` a call keeps its calibration call as a sample and takes
    ``budget_s`` worth of single calls (at least one).
    """
    keys = [k for k in impls if cells[k].status in ("ok", "WRONG")]
    plan = {}
    for k in keys:
        impl = impls[k]
        t = _sample(impl.fn, impl.args, 1)
        if t > budget_s / 3:
            cells[k].samples.append(t)
            plan[k] = (1, max(1, min(rounds, int(budget_s / t))))
        else:
            number = max(1, int(sample_s / max(t, 1e-9)))
            plan[k] = (number, min(rounds, max(3, int(budget_s / (t * number)))))
        cells[k].number = plan[k][0]
    total = max((n for _, n in plan.values()), default=0)
    for r in range(total):
        if progress:
            progress(f"round {r + 1}/{total}")
        order = keys[r % len(keys):] + keys[:r % len(keys)] if keys else []
        for k in order:
            number, n = plan[k]
            if len(cells[k].samples) < n:
                impl = impls[k]
                cells[k].samples.append(_sample(impl.fn, impl.args, number))


# -- workloads ----------------------------------------------------------------

@dataclass
class Target:
    """A ratio the project promises: ``num`` time / (``scale`` x ``den`` time)
    <= ``limit`` (``scale``: e.g. a Hessian against 100 HVPs)."""
    num: str
    den: str
    limit: float
    scale: float = 1.0

    @property
    def name(self):
        if self.scale == 1:
            return f"{self.num} / {self.den}"
        return f"{self.num} / ({self.scale:g} x {self.den})"


@dataclass
class Workload:
    """One problem at one size, as a workload module's ``build`` returns it.

    ``primal`` is the user's plain Python function and ``argnums`` the
    arguments differentiated; ``numba_primal`` the same function under
    ``numba.njit``; ``hand_grad`` the hand-written Numba gradient (returning
    one array per differentiated argument, a tuple when several).
    ``oracle(args, grads)`` checks the hand-written gradient independently
    (analytic formula or finite differences) and returns its relative error,
    to be at most ``oracle_tol``.  ``peers`` maps a peer's key to a factory
    ``(args) -> Impl`` that raises :class:`Unavailable` when it cannot run.

    A workload whose derivative is not a gradient (an HVP, a Hessian, a
    Jacobian, per-sample gradients) says so in ``kind``; then ``hand_grad``
    is the hand-written version of *that* derivative, ``s2s_ad`` builds
    s2s_ad's version, and ``primal`` is what the NumPy primal column runs
    (for per-sample gradients: the user's function in a loop over the
    samples), called on ``primal_args`` when those differ from ``args``.
    """
    name: str
    title: str
    size: str
    args: tuple
    argnums: object
    primal: object
    numba_primal: object
    hand_grad: object
    oracle: object
    oracle_name: str
    oracle_tol: float
    peers: dict
    targets: list
    numba_note: str = ""
    #: peers (or s2s_ad's NumPy column) that take seconds per call at full size
    #: (eager, one Python-level operation per scalar): left out of ``--quick`` runs
    slow_peers: tuple = ()
    #: what the derivative columns compute: "grad", "hvp", "hessian",
    #: "jacobian", "per-sample grad", ... (the JSON's "kind")
    kind: str = "grad"
    #: the primal columns' arguments, when they differ from ``args`` (an HVP's
    #: tangent is not an argument of the function)
    primal_args: tuple = None
    #: ``(ad, jit) -> callable`` on ``args``: s2s_ad's derivative as a user
    #: writes it, compiled when ``jit``; None: ``ad.grad(primal, argnums)``
    s2s_ad: object = None
    #: more columns, shown after s2s_ad's: key -> factory ``() -> Impl``
    #: (an Impl with a ``reference`` is checked against that)
    extra: dict = field(default_factory=dict)
    #: column labels that differ from :data:`LABELS` (key -> label)
    labels: dict = field(default_factory=dict)

    def label(self, key):
        return self.labels.get(key) or LABELS.get(key, key)

    def derivative(self, ad, jit=True):
        """s2s_ad's derivative column: a callable on ``args``."""
        if self.s2s_ad is not None:
            return self.s2s_ad(ad, jit)
        fn = ad.grad(self.primal, self.argnums)
        return ad.jit(fn) if jit else fn


def workloads(built):
    """What a module's ``build`` returned, as a list (a module may build one
    workload or several, e.g. one per problem size)."""
    return list(built) if isinstance(built, (list, tuple)) else [built]
