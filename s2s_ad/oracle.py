"""A differential oracle: every lowering that can compute a derivative must agree.

Given a function (its source in a real file), sample arguments and a
transform, :func:`check` computes the result through every *witness* --
every path through s2s_ad that can compute it -- and compares each with an
independent *reference* and with the plain NumPy witness:

* references: central finite differences in float64 (Jacobians column by
  column, gradients in full), and for batched transforms the per-example
  stack ``vmap(T(f))(xs) == stack([T(f)(x) for x in xs])`` (JAX's batching
  oracle) with each example's reference computed by finite differences;
* witnesses: the NumPy backend; ``ad.jit`` (Numba, which splits vectors of
  length <= 16 into scalars); the transform of a jitted function
  (``ad.grad(ad.jit(f))``); vector-mode ``jacfwd``/``jacrev`` (their width
  follows the input/output sizes); ``vmap`` forced to ``method="loop"`` and
  ``method="vectorize"``, serial and ``parallel=True``; ``jit`` outside and
  inside ``vmap`` (``ad.jit(ad.vmap(ad.grad(f)))``,
  ``ad.vmap(ad.jit(ad.grad(f)))``); transforms of ``vmap``
  (``ad.jacrev(ad.vmap(f))``, ``ad.jvp(ad.vmap(f), ...)``), whose
  block-diagonal results are checked to be block-diagonal; and what a tiered
  first call of ``ad.jit`` answers while Numba compiles (``jit[numpy
  tier]``, ``vjp(jit(f))[numpy tier]``, ``jvp(jit(f))[numpy tier]``,
  ``jit(vmap)[numpy tier]``, ``jit(jacrev(vmap))[numpy tier]``...: the
  cpu-target module run on NumPy, nothing
  compiled; family ``tier``); and, for a function that calls a transform
  itself (an inner ``ad.grad``, ``ad.hvp``, ``vjp_fn``), the same
  transform with those inner transforms lowered by forward-mode columns
  instead of reverse code (``grad[forward columns]``, see
  docs/nested_transforms.md); and, for a program with helper functions,
  reverse mode with every call of one recomputed in the backward sweep as
  ``ad.checkpoint`` does (``grad[checkpointed calls]``,
  ``jit(grad)[checkpointed calls]``, ``vmap[loop][checkpointed calls]``).

Tolerance (stated once, see :data:`FD_TOL` and :data:`WITNESS_TOL`): an
element ``a`` agrees with ``b`` when ``|a - b| <= atol * (1 + s) + rtol * |b|``
with ``s`` the largest magnitude in ``b``.  Finite differences are taken
at two step sizes; where they disagree with each other (a kink, a branch
within a step of the sample) the finite-difference comparison is skipped and
only witnesses are compared with each other.

A witness that raises a *documented* error (``ad.UnsupportedSyntaxError``,
``ad.NonDifferentiableError``, or a ``TypeError``/``ValueError`` raised
explicitly by s2s_ad's own argument checks) refuses; that is not a
disagreement.  Any other exception -- a ``NameError`` in generated code, a
Numba ``TypingError``, an ``AttributeError`` from the compiler -- is one, and
so is a witness that modifies the caller's arrays.

Example::

    from s2s_ad import oracle
    report = oracle.check(energy, (x, K), "vmap_grad", argnums=0, in_axes=(0, None))
    for d in report.disagreements:
        print(d)
"""
import contextlib
import dataclasses
import dis
import inspect
import os
import traceback
from typing import Any

import numpy as np

import s2s_ad as ad

from .oracle_reference import (  # noqa: F401  (FD_STEP: part of this module's surface)
    FD_STEP,
    FD_TOL,
    Unsmooth,
    call_plain,
    compare,
    leaves,
    reference,
    same,
    snapshot,
)

__all__ = ["check", "check_all", "Report", "Disagreement", "Witness", "TRANSFORMS",
           "FD_TOL", "WITNESS_TOL", "is_documented_error", "witnesses_for", "forward_columns"]

#: (rtol, atol) of a witness against the NumPy witness: the same algebra in a
#: different order, so only rounding separates them.  FD_TOL (against finite
#: differences) and FD_STEP are stated with the reference, in oracle_reference.
WITNESS_TOL = (1e-7, 1e-9)

#: Transforms of one function, and their batched forms.
TRANSFORMS = ("grad", "value_and_grad", "vjp", "jvp", "jacfwd", "jacrev", "hessian",
              "vmap", "vmap_grad", "vmap_value_and_grad", "vmap_jacfwd", "vmap_jacrev",
              "vmap_hessian", "vmap_jvp")
#: Witness families: ``python`` ones are cheap; ``tier`` ones (what a tiered
#: first call of ``ad.jit`` answers while Numba compiles: the cpu-target module
#: on NumPy) compile nothing but build the cpu target's code; ``numba`` ones
#: compile.
FAMILIES = ("python", "tier", "numba")

_PACKAGE = os.path.dirname(os.path.abspath(__file__))


# -- results ------------------------------------------------------------------------


@dataclasses.dataclass
class Disagreement:
    """One failed comparison: ``path`` against ``other`` (a witness or the reference)."""
    program: str
    transform: str
    path: str
    other: str
    kind: str                 # "value", "shape", "exception", "mutation", "block"
    detail: str
    index: Any = None
    got: Any = None
    want: Any = None

    def __str__(self):
        where = ""
        if self.index is not None:
            leaf, element = self.index
            where = f" at result leaf {leaf}, element {element}: {self.got!r} vs {self.want!r}"
        return (f"{self.program} [{self.transform}] {self.path} vs {self.other}: "
                f"{self.kind}{where}; {self.detail}")


@dataclasses.dataclass
class Report:
    """What :func:`check` found."""
    checks: int = 0
    disagreements: list = dataclasses.field(default_factory=list)
    refusals: list = dataclasses.field(default_factory=list)     # (transform, path, message)
    skipped: list = dataclasses.field(default_factory=list)      # (transform, why)

    def extend(self, other):
        self.checks += other.checks
        self.disagreements += other.disagreements
        self.refusals += other.refusals
        self.skipped += other.skipped
        return self


@dataclasses.dataclass(frozen=True)
class Witness:
    """A named path through s2s_ad: ``run(fn, args) -> result``."""
    name: str
    family: str
    run: Any


# -- documented errors --------------------------------------------------------------


def is_documented_error(exc):
    """Whether ``exc`` is one of the errors API.md documents (a refusal, not a bug).

    ``UnsupportedSyntaxError`` and ``NonDifferentiableError`` always are; a
    ``TypeError`` or ``ValueError`` only when s2s_ad raised it itself, with a
    ``raise`` statement in its own package (not generated code, NumPy or Numba).
    """
    if isinstance(exc, (ad.UnsupportedSyntaxError, ad.NonDifferentiableError)):
        return True
    if type(exc) not in (TypeError, ValueError):
        return False
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    inside = os.path.abspath(code.co_filename).startswith(_PACKAGE + os.sep) \
        and "s2s_ad_generated" not in code.co_filename
    # The instruction that raised, not the source line: the file may have
    # changed on disk since it was imported.
    op = next((i.opname for i in dis.get_instructions(code) if i.offset == tb.tb_lasti), "")
    return inside and op == "RAISE_VARARGS"


# -- witnesses ----------------------------------------------------------------------


def _tf(transform):
    return {"grad": ad.grad, "value_and_grad": ad.value_and_grad, "jacfwd": ad.jacfwd,
            "jacrev": ad.jacrev, "hessian": ad.hessian}[transform]


def _base(transform):
    return transform[5:] if transform.startswith("vmap_") else None


def witnesses_for(transform, argnums, in_axes=None, families=FAMILIES):
    """The witnesses that can compute ``transform`` (see the module doc)."""
    out = []

    def add(name, family, run):
        if family in families:
            out.append(Witness(name, family, run))

    if transform in ("grad", "value_and_grad", "jacfwd", "jacrev", "hessian"):
        t = _tf(transform)
        add("python", "python", lambda f, a: t(f, argnums)(*a))
        if transform in ("grad", "jacrev"):
            add(f"{transform}[no mixed mode]", "python",
                lambda f, a: _without_mixed_mode(f, lambda: t(f, argnums)(*a)))
        add(f"{transform}[forward columns]", "python",
            lambda f, a: _forward_columns(f, lambda: t(f, argnums)(*a)))
        if transform != "jacfwd":
            add(f"{transform}[checkpointed calls]", "python",
                lambda f, a: _checkpointed_calls(f, lambda: t(f, argnums)(*a)))
            add(f"jit({transform})[checkpointed calls]", "numba",
                lambda f, a: _checkpointed_calls(f, lambda: ad.jit(t(f, argnums))(*a)))
        add("jit", "numba", lambda f, a: ad.jit(t(f, argnums))(*a))
        add("jit[numpy tier]", "tier",
            lambda f, a: _numpy_tier(lambda: ad.jit(t(f, argnums), compile="tiered")(*a)))
        add(f"{transform}(jit(f))", "numba", lambda f, a: t(ad.jit(f), argnums)(*a))
        if transform == "hessian":
            add("jacrev(jacrev)", "python",
                lambda f, a: ad.jacrev(ad.jacrev(f, argnums), argnums)(*a))
        return out
    if transform == "vjp":
        add("python", "python", lambda f, a, cot: _vjp(f, a, cot))
        add("vjp(jit(f))", "numba", lambda f, a, cot: _vjp(ad.jit(f), a, cot))
        add("vjp(jit(f))[numpy tier]", "tier",
            lambda f, a, cot: _numpy_tier(lambda: _vjp(ad.jit(f, compile="tiered"), a, cot)))
        return out
    if transform == "jvp":
        add("python", "python", lambda f, a, t: ad.jvp(f, tuple(a), tuple(t)))
        add("jvp(jit(f))", "numba", lambda f, a, t: ad.jvp(ad.jit(f), tuple(a), tuple(t)))
        add("jvp(jit(f))[numpy tier]", "tier",
            lambda f, a, t: _numpy_tier(lambda: ad.jvp(ad.jit(f, compile="tiered"), tuple(a),
                                                       tuple(t))))
        return out
    if transform == "vmap_jvp":          # a transform of the batched function
        add("jvp(vmap)", "python",
            lambda f, a, t: ad.jvp(ad.vmap(f, in_axes), tuple(a), tuple(t)))
        add("jvp(jit(vmap))", "numba",
            lambda f, a, t: ad.jvp(ad.jit(ad.vmap(f, in_axes)), tuple(a), tuple(t)))
        return out
    base = _base(transform) if transform != "vmap" else "primal"
    inner = (lambda f: f) if base == "primal" else (lambda f: _tf(base)(f, argnums))
    axes = in_axes
    for method in ("loop", "vectorize"):
        add(f"vmap[{method}]", "python",
            lambda f, a, m=method: ad.vmap(inner(f), axes, method=m)(*a))
        add(f"jit(vmap[{method}])", "numba",
            lambda f, a, m=method: ad.jit(ad.vmap(inner(f), axes, method=m))(*a))
    add("jit(vmap[loop], parallel=True)", "numba",
        lambda f, a: ad.jit(ad.vmap(inner(f), axes, method="loop"), parallel=True)(*a))
    add("vmap(jit)", "numba", lambda f, a: ad.vmap(ad.jit(inner(f)), axes)(*a))
    if base in ("grad", "value_and_grad", "jacrev", "hessian"):
        add("vmap[loop][checkpointed calls]", "python", lambda f, a: _checkpointed_calls(
            f, lambda: ad.vmap(inner(f), axes, method="loop")(*a)))
    add("jit(vmap)[numpy tier]", "tier",
        lambda f, a: _numpy_tier(lambda: ad.jit(ad.vmap(inner(f), axes), compile="tiered")(*a)))
    if base == "primal":
        add("jit(vmap)", "numba", lambda f, a: ad.jit(ad.vmap(f, axes))(*a))
    if base in ("jacfwd", "jacrev"):
        # The transform of the batched function: block-diagonal in the batch.
        add(f"{base}(vmap)", "python",
            lambda f, a: _diagonal(_tf(base)(ad.vmap(f, axes), argnums)(*a), a, argnums, axes))
        add(f"jit({base}(vmap))", "numba",
            lambda f, a: _diagonal(ad.jit(_tf(base)(ad.vmap(f, axes), argnums))(*a), a,
                                   argnums, axes))
        add(f"jit({base}(vmap))[numpy tier]", "tier",
            lambda f, a: _diagonal(_numpy_tier(lambda: ad.jit(
                _tf(base)(ad.vmap(f, axes), argnums), compile="tiered")(*a)), a, argnums, axes))
    return out


def _numpy_tier(run):
    """``run()`` as a tiered first call of ``ad.jit`` answers while Numba
    compiles: the generated cpu-target module (small vectors split into
    scalars, the runtime's transcendental helpers) run on plain NumPy;
    nothing is compiled (see s2s_ad.backends.tiers.numpy_tier)."""
    from .backends import tiers
    with tiers.numpy_tier():
        return run()


class _NotApplicable(Exception):
    """The witness has nothing to compare for this program."""


def _module_text(f):
    """The source of the module defining ``f`` (a witness reads it to see
    whether it applies); the witness does not apply where there is none."""
    try:
        return inspect.getsource(inspect.getmodule(f))
    except (OSError, TypeError):
        raise _NotApplicable() from None


def _forward_columns(f, run):
    """``run()`` with the transforms written inside ``f`` (an inner
    ``ad.grad``, ``ad.hvp``, ``vjp_fn``...) lowered by forward-mode columns
    (see :func:`forward_columns`), for programs that call one."""
    text = _module_text(f)
    if not any(f"ad.{name}(" in text for name in _INNER):
        raise _NotApplicable()
    with forward_columns():
        return run()


@contextlib.contextmanager
def forward_columns():
    """Builds inside lower every transform written inside a transformed function
    by forward-mode columns instead of reverse code (``S2S_AD_NESTED=columns``,
    which the build cache's key reads)."""
    with _setting("S2S_AD_NESTED", "columns"):
        yield


def _checkpointed_calls(f, run):
    """``run()`` with every call of a helper function recomputed in the
    backward sweep, as if each were wrapped in ``ad.checkpoint``
    (``S2S_AD_REMAT=calls``), for programs that define a helper."""
    text = _module_text(f)
    if text.count("\ndef ") < 2:
        raise _NotApplicable()
    with _setting("S2S_AD_REMAT", "calls"):
        return run()


@contextlib.contextmanager
def _setting(name, value):
    saved = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if saved is None:
            del os.environ[name]
        else:
            os.environ[name] = saved


#: The transforms whose inner lowering ``_forward_columns`` switches.
_INNER = ("grad", "value_and_grad", "vjp", "hvp")


def _without_mixed_mode(f, run):
    """``run()`` with the compiler's mixed-mode pass (forward mode through scalar
    ``while`` loops inside reverse mode) switched off, for programs with a ``while``."""
    from . import pipeline
    text = _module_text(f)
    if "while" not in text:
        raise _NotApplicable()
    saved = pipeline.PASSES
    pipeline.PASSES = [(name, (lambda st: "") if name == "mixed" else step)
                       for name, step in saved]
    try:
        return run()
    finally:
        pipeline.PASSES = saved


def _vjp(f, a, cot):
    out, pull = ad.vjp(f, *a)
    return (out, pull(cot))


class _NotBlockDiagonal(Exception):
    pass


def _diagonal(jac, args, argnums, axes):
    """``jac(vmap(f))`` (out (B, ...) by in (B, ...) for batched inputs) reduced to the
    leaves of the per-example stack ``vmap(jac(f))`` returns; off-diagonal blocks
    must be zero.  Leaves come output-major, one per differentiated argument."""
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    out = []
    for k, block in enumerate(leaves(jac)):
        i = nums[k % len(nums)]
        if axes[i] is None:
            out.append(block)
            continue
        size = np.shape(args[i])[0]
        out_rank = block.ndim - np.ndim(args[i])
        moved = np.moveaxis(block, out_rank, 1)            # (B, B, out..., in...)
        off = moved.copy()
        for b in range(size):
            off[b, b] = 0.0
        if np.any(off != 0.0):
            raise _NotBlockDiagonal(f"off-diagonal block of the Jacobian for argument {i} "
                                    f"is nonzero (max {np.max(np.abs(off)):.3g})")
        out.append(np.stack([moved[b, b] for b in range(size)]))
    return out


# -- the check ----------------------------------------------------------------------


def _examples(args, in_axes):
    size = next(np.shape(a)[ax] for a, ax in zip(args, in_axes) if ax is not None)
    return [tuple(a if ax is None else np.take(np.asarray(a), b, axis=ax)
                  for a, ax in zip(args, in_axes)) for b in range(size)]


def _stack(results):
    first = results[0]
    if isinstance(first, (tuple, list)):
        return type(first)(_stack([r[k] for r in results]) for k in range(len(first)))
    return np.stack([np.asarray(r, dtype=np.float64) for r in results])


def check(fn, args, transform, argnums=0, in_axes=None, *, name=None, families=FAMILIES,
          only=None, extra_witnesses=(), seed=0):
    """Run ``transform`` of ``fn`` at ``args`` through every witness; return a :class:`Report`.

    ``argnums`` as for ``ad.grad`` (an int or a tuple).  Batched transforms
    (``vmap``, ``vmap_grad``, ...) take batched ``args`` and ``in_axes`` (a
    tuple of 0 / None per argument).  ``families`` selects witness families
    (``"python"``, ``"tier"``, ``"numba"``); ``only`` is an optional set of witness names;
    ``extra_witnesses`` are more :class:`Witness` objects (a user's own lowering,
    or a deliberately wrong one to test the oracle itself).
    """
    name = name or getattr(fn, "__qualname__", repr(fn))
    report = Report()
    args = tuple(args)
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    rng = np.random.default_rng(seed)
    ws = [w for w in witnesses_for(transform, argnums, in_axes, families)
          if only is None or w.name in only] + list(extra_witnesses)
    extra = None
    if transform == "vjp":
        extra = _random_like(call_plain(fn, args), rng)
    elif transform in ("jvp", "vmap_jvp"):
        extra = tuple(rng.standard_normal(np.shape(a)) if np.ndim(a) else
                      float(rng.standard_normal()) for a in args)
    try:
        if transform.startswith("vmap"):
            base = _base(transform) or "vmap"
            tangents = _examples(extra, in_axes) if extra is not None else None
            per = [reference(fn, ex, base, nums, single, tangents and tangents[b])
                   for b, ex in enumerate(_examples(args, in_axes))]
            ref = _stack(per)
            ref_name = "stack of per-example " + \
                ("f(x)" if base == "vmap" else "finite differences")
        else:
            ref = reference(fn, args, transform, nums, single, extra)
            ref_name = "finite differences of ad.grad (python)" if transform == "hessian" \
                else "finite differences"
    except Unsmooth:
        ref, ref_name = None, None
        report.skipped.append((transform, "finite differences disagree at two steps"))
    except Exception as exc:              # noqa: BLE001 -- e.g. ad.grad refusing (hessian)
        ref, ref_name = None, None
        report.skipped.append((transform, f"no reference: {type(exc).__name__}: {exc}"))
    first = None                       # (name, result) of the first witness that ran
    for w in ws:
        before = snapshot(args)
        extra_before = snapshot(extra)
        try:
            got = w.run(fn, args) if extra is None else w.run(fn, args, extra)
        except _NotApplicable:
            continue
        except _NotBlockDiagonal as exc:
            report.checks += 1
            report.disagreements.append(Disagreement(name, transform, w.name, "vmap(f)",
                                                     "block", str(exc)))
            continue
        except Exception as exc:          # noqa: BLE001 -- every exception is classified
            report.checks += 1
            _check_inputs(report, name, transform, w, (args, extra), (before, extra_before))
            if is_documented_error(exc):
                report.refusals.append((transform, w.name, f"{type(exc).__name__}: {exc}"))
            else:
                tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
                report.disagreements.append(Disagreement(
                    name, transform, w.name, "documented errors", "exception", tb[:400]))
            args, extra = before, extra_before
            continue
        report.checks += 1
        if _check_inputs(report, name, transform, w, (args, extra), (before, extra_before)):
            args, extra = before, extra_before
        if ref is not None:
            report.checks += 1
            bad = compare(got, ref, FD_TOL)
            if bad:
                kind, index, g, want, detail = bad
                report.disagreements.append(Disagreement(name, transform, w.name, ref_name,
                                                         kind, detail, index, g, want))
                continue
        if first is None:
            first = (w.name, got)
            continue
        report.checks += 1
        bad = compare(got, first[1], WITNESS_TOL)
        if bad:
            kind, index, g, want, detail = bad
            report.disagreements.append(Disagreement(name, transform, w.name, first[0],
                                                     kind, detail, index, g, want))
    return report


def _check_inputs(report, name, transform, w, now, before):
    """Report (and return True) when witness ``w`` changed the arguments or the
    tangents/cotangent it was given -- whether it returned or raised."""
    (args, extra), (args0, extra0) = now, before
    changed = [f"the caller's argument {i}" for i, (a, b) in enumerate(zip(args, args0))
               if not same(a, b)]
    if not same(extra, extra0):
        changed.append("the tangents" if transform.endswith("jvp") else "the cotangent")
    if changed:
        report.disagreements.append(Disagreement(
            name, transform, w.name, "its inputs", "mutation",
            f"the witness modified {', '.join(changed)} in place"))
    return bool(changed)


def _random_like(out, rng):
    if isinstance(out, (tuple, list)):
        return type(out)(_random_like(o, rng) for o in out)
    if np.ndim(out) == 0:
        return float(rng.standard_normal())
    return rng.standard_normal(np.shape(out))


def check_all(fn, args, argnums=0, in_axes=None, *, name=None, transforms=None,
              families=FAMILIES, batched_args=None, seed=0):
    """:func:`check` for every transform that applies to ``fn`` at ``args``.

    Scalar outputs get ``grad``, ``value_and_grad`` and ``hessian`` (small
    inputs only); every output gets ``vjp``, ``jvp``, ``jacfwd`` and
    ``jacrev``.  With ``batched_args`` and ``in_axes``, the ``vmap_*``
    transforms run too.  ``vjp``/``jvp`` need every argument to be a float.
    """
    out = call_plain(fn, args)
    scalar = not isinstance(out, (tuple, list, dict)) and np.ndim(out) == 0
    all_float = all(_is_float(a) for a in args)
    size = sum(int(np.size(args[i])) for i in ((argnums,) if isinstance(argnums, int)
                                               else argnums))
    chosen = []
    for t in TRANSFORMS:
        if transforms is not None and t not in transforms:
            continue
        if t in ("grad", "value_and_grad", "vmap_grad", "vmap_value_and_grad") and not scalar:
            continue
        if t in ("hessian", "vmap_hessian") and (not scalar or size > 6):
            continue
        if t in ("vjp", "jvp", "vmap_jvp") and not all_float:
            continue
        if t.startswith("vmap") and batched_args is None:
            continue
        chosen.append(t)
    report = Report()
    for t in chosen:
        a = batched_args if t.startswith("vmap") else args
        report.extend(check(fn, a, t, argnums, in_axes, name=name, families=families,
                            seed=seed))
    return report


def _is_float(a):
    if isinstance(a, float):
        return True
    return isinstance(a, np.ndarray) and a.dtype.kind == "f"
