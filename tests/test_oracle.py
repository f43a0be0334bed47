"""The differential oracle (s2s_ad/oracle.py) over the corpora and random programs.

Every witness -- the NumPy backend, ``ad.jit``, transforms of jitted
functions, ``vmap`` forced to loop or vectorize, serial and parallel, ``jit``
inside and outside ``vmap`` -- must agree with central finite differences
(per example, for batched transforms) and with the NumPy witness.

* the corpora: every program of ``programs/control_flow.py`` and
  ``programs/small_arrays.py`` (and a few others) that is a function of float
  arrays and scalars, through the cheap (NumPy) witnesses for the transforms
  that apply, and through one compiled witness each (rotating over the
  compiled witnesses, so the corpus covers all of them); the same for
  ``programs/first_hour.py`` (comprehensions, local lambdas and defs, helpers
  writing in place, transforms inside transforms, keyword arguments, library
  and linalg functions);
* the NumPy tier (what a tiered first call of ``ad.jit`` answers while Numba
  compiles, witness family ``tier``): every program of the corpora through
  three of its transforms (rotating, :data:`TIER_TRANSFORMS`), the benchmark
  workloads through all three of theirs, each random program through one;
* random programs from ``s2s_ad.fuzz``: ``RANDOM_PROGRAMS`` through the NumPy
  witnesses (three transforms each, rotating), and ``NUMBA_PROGRAMS``
  through every compiled witness of one transform each (rotating);
* the oracle itself: a wrong witness, a witness that writes into its
  inputs and one that crashes are reported, naming the paths and the element.

Known compiler bugs are ``xfail(strict=True)`` in ``KNOWN_BUGS``; when the
fix lands the mark fails loudly and should be removed.
"""
import importlib
import pathlib
import sys

import numpy as np
import pytest
from conftest import load_program

import s2s_ad as ad
from s2s_ad import fuzz, oracle

HERE = pathlib.Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:      # benchmarks/ is not installed
    sys.path.insert(0, str(HERE.parent))
cf = load_program(HERE / "programs" / "control_flow.py")
sa = load_program(HERE / "programs" / "small_arrays.py")
vp = load_program(HERE / "programs" / "vectorize_programs.py")
nu = load_program(HERE / "programs" / "numpy_user_code.py")
fh = load_program(HERE / "programs" / "first_hour.py")
tf = load_program(HERE / "programs" / "tier_findings.py")

SEED = 2026
RANDOM_PROGRAMS = 150
NUMBA_PROGRAMS = 12
PY_TRANSFORMS = ("grad", "vjp", "jvp", "jacfwd", "jacrev", "hessian", "vmap", "vmap_grad",
                 "vmap_jacfwd", "vmap_jacrev", "value_and_grad", "vmap_jvp", "vmap_hessian",
                 "vmap_value_and_grad")
NUMBA_TRANSFORMS = ("vmap_grad", "jacrev", "vmap_jacrev", "grad", "vmap", "jacfwd",
                    "vmap_jacfwd", "vmap_jvp")

# (test, program) -> reason.  Only bugs with a reproducer in the oracle's report.
KNOWN_BUGS = {}

# Disagreements the oracle found in random programs, pinned to one check each:
# (program index, entry point, transform) -> reason (strict xfail until fixed), or
# None once fixed (then a plain regression test).
FINDINGS = {
    (37, "f", "jacrev"): None,          # f1: bx[2] += ... into a read-only sum_grad view
    (43, "g", "vjp"): None,             # f2: vjp_fn accumulated into the caller's cotangent
    (95, "f", "vmap_jacfwd"): None,     # f3: jacfwd(vmap(f)) had wrong diagonal blocks
}


def _marks(test, name):
    reason = KNOWN_BUGS.get((test, name))
    return [pytest.mark.xfail(strict=True, reason=reason)] if reason else []


def _assert_clean(report):
    assert not report.disagreements, "\n".join(map(str, report.disagreements))


# -- the corpora ---------------------------------------------------------------------


def _is_plain(a):
    return isinstance(a, (float, int)) or (isinstance(a, np.ndarray) and a.dtype.kind in "fi")


def _corpus():
    out = {}
    for module, corpus in ((cf, cf.CORPUS), (sa, sa.CORPUS)):
        for fn, make, argnums in corpus:
            if all(_is_plain(a) for a in make()):
                key = f"{module.__name__}.{fn.__name__}"
                while key in out:
                    key += "'"
                out[key] = (fn, make, argnums)
    for fn, make in cf.ARRAY_CORPUS:
        if all(_is_plain(a) for a in make()):
            floats = tuple(i for i, a in enumerate(make()) if not isinstance(a, int))
            out[f"control_flow.{fn.__name__}"] = (fn, make, floats[0] if len(floats) == 1
                                                  else floats)
    x, y = np.array([0.3, -0.7, 1.1]), np.array([0.5, 0.2, -0.4])
    for fn, args, argnums in ((vp.sin_dot, (x, y), (0, 1)), (vp.tanh_times, (x,), 0),
                              (vp.affine, (x, y), (0, 1)), (vp.looping, (x, y), (0, 1)),
                              (vp.two_outputs, (x, y), (0, 1)), (nu.uses_helper, (x,), 0)):
        out[f"{fn.__module__}.{fn.__name__}"] = (fn, lambda a=args: tuple(np.copy(v) for v in a),
                                                  argnums)
    return out


CORPUS = _corpus()


def _batched(args, argnums):
    """Three examples: the sample and two small relative perturbations of its first
    differentiated argument (batched, in_axes 0); every other argument shared."""
    first = argnums if isinstance(argnums, int) else argnums[0]
    axes = tuple(0 if i == first else None for i in range(len(args)))
    a = np.asarray(args[first], dtype=np.float64)
    stacked = np.stack([a, a * 1.004 + 0.001, a * 0.997 - 0.002])
    return tuple(stacked if i == first else v for i, v in enumerate(args)), axes


@pytest.mark.parametrize("name", [pytest.param(n, marks=_marks("corpus", n), id=n)
                                  for n in CORPUS])
def test_corpus_python_witnesses(name):
    _check_python_witnesses(CORPUS, name)


#: The transforms whose NumPy tier (what a tiered first call of ad.jit answers
#: while Numba compiles; witness family "tier") each program is checked
#: through: three per program, rotating, so that a corpus covers them all.
TIER_TRANSFORMS = ("jacrev", "grad", "jvp", "vjp", "jacfwd", "vmap_grad", "hessian",
                   "value_and_grad", "vmap_jacrev", "vmap")


def _tier_transforms(index, count=3):
    return {TIER_TRANSFORMS[(index + k) % len(TIER_TRANSFORMS)] for k in range(count)}


def _check_python_witnesses(corpus, name):
    fn, make, argnums = corpus[name]
    args = make()
    batched, axes = _batched(args, argnums)
    tier = _tier_transforms(3 * list(corpus).index(name))
    report = oracle.check_all(fn, args, argnums, axes, name=name, batched_args=batched,
                              families=("python",),
                              transforms=set(oracle.TRANSFORMS) - tier)
    report.extend(oracle.check_all(fn, args, argnums, axes, name=name, batched_args=batched,
                                   families=("python", "tier"), transforms=tier))
    _assert_clean(report)


NUMBA_WITNESSES = [(t, w.name) for t in ("grad", "vmap_grad", "jacrev", "jacfwd")
                   for w in oracle.witnesses_for(t, 0, (0,), families=("numba",))]


@pytest.mark.parametrize("name", [pytest.param(n, marks=_marks("corpus_numba", n), id=n)
                                  for n in CORPUS])
def test_corpus_one_compiled_witness(name):
    """One compiled witness per program, rotating, so the corpus covers all of them."""
    _check_one_compiled_witness(CORPUS, name)


def _check_one_compiled_witness(corpus, name):
    fn, make, argnums = corpus[name]
    args = make()
    transform, witness = NUMBA_WITNESSES[list(corpus).index(name) % len(NUMBA_WITNESSES)]
    out = fn(*make())
    if transform.endswith("grad") and (isinstance(out, tuple) or np.ndim(out) != 0):
        transform = transform.replace("grad", "jacrev")
    batched, axes = _batched(args, argnums)
    report = oracle.check(fn, batched if transform.startswith("vmap") else args, transform,
                          argnums, axes, name=name, only={witness, "python", "vmap[loop]"})
    _assert_clean(report)


# The "first hour" features (comprehensions, local lambdas and defs, helpers writing
# into their arguments, transforms inside transforms, keyword arguments, library
# functions), mixed with loops and branches: programs/first_hour.py.
def _first_hour():
    out = {}
    for fn, make, argnums in fh.CORPUS:
        key = f"first_hour.{fn.__name__}"
        while key in out:
            key += "'"
        out[key] = (fn, make, argnums)
    return out


FIRST_HOUR = _first_hour()


@pytest.mark.parametrize("name", [pytest.param(n, marks=_marks("first_hour", n), id=n)
                                  for n in FIRST_HOUR])
def test_first_hour_python_witnesses(name):
    _check_python_witnesses(FIRST_HOUR, name)


@pytest.mark.parametrize("name", [pytest.param(n, marks=_marks("first_hour_numba", n), id=n)
                                  for n in FIRST_HOUR])
def test_first_hour_one_compiled_witness(name):
    """One compiled witness per program, rotating over them as for the corpus."""
    _check_one_compiled_witness(FIRST_HOUR, name)


# Benchmark workloads whose primal is a function of float arrays/scalars (tiny sizes).
BENCHMARKS = ("rosen_loop", "ode_rk4", "newton_sqrt", "logsumexp_rows", "mlp_loss",
              "gmm_objective", "ba_objective")


@pytest.mark.parametrize("name", BENCHMARKS)
def test_benchmark_workload(name):
    work = importlib.import_module(f"benchmarks.{name}").build("tiny")
    args, argnums = tuple(work.args), work.argnums
    assert all(_is_plain(a) for a in args)
    batched, axes = _batched(args, argnums)
    report = oracle.check_all(work.primal, args, argnums, axes, name=name,
                              batched_args=batched, families=("python", "tier"),
                              transforms=("grad", "jvp", "vmap_grad"))
    _assert_clean(report)


# -- random programs -------------------------------------------------------------------


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return str(tmp_path_factory.mktemp("fuzz_programs"))


def _run_random(folder, index, families, transforms):
    program = fuzz.Program(SEED, index)
    got = fuzz.prepare(program, folder)
    if got is None:
        pytest.skip("no sample clear of ties")
    module, one, batch = got
    report = oracle.Report()
    for fname in ("f", "g"):
        report.extend(oracle.check_all(getattr(module, fname), one, program.argnums,
                                       program.in_axes, name=f"{program.name}.{fname}",
                                       batched_args=batch, families=families,
                                       transforms=transforms, seed=index))
    return report


@pytest.mark.parametrize("index", [pytest.param(i, marks=_marks("random", i), id=f"p{i}")
                                   for i in range(RANDOM_PROGRAMS)])
def test_random_program_python_witnesses(folder, index):
    """The NumPy witnesses of three transforms, one of them with its NumPy tier."""
    transforms = [PY_TRANSFORMS[(index + k) % len(PY_TRANSFORMS)] for k in range(3)]
    report = _run_random(folder, index, ("python",), set(transforms[1:]))
    report.extend(_run_random(folder, index, ("python", "tier"), {transforms[0]}))
    _assert_clean(report)


@pytest.mark.slow
@pytest.mark.parametrize("index", [pytest.param(i, marks=_marks("random_numba", i),
                                                id=f"p{i}")
                                   for i in range(1000, 1000 + NUMBA_PROGRAMS)])
def test_random_program_numba_witnesses(folder, index):
    transform = NUMBA_TRANSFORMS[index % len(NUMBA_TRANSFORMS)]
    _assert_clean(_run_random(folder, index, ("python", "numba"), {transform}))


@pytest.mark.parametrize("index, entry, transform", [
    pytest.param(*key, marks=[pytest.mark.xfail(strict=True, reason=reason)] if reason else [],
                 id=f"p{key[0]}-{key[1]}-{key[2]}") for key, reason in FINDINGS.items()])
def test_pinned_finding(folder, index, entry, transform):
    program = fuzz.Program(SEED, index, extras=False)     # as the finding was made
    module, one, batch = fuzz.prepare(program, folder)
    args = batch if transform.startswith("vmap") else one
    _assert_clean(oracle.check(getattr(module, entry), args, transform, program.argnums,
                               program.in_axes, name=f"{program.name}.{entry}",
                               families=("python",), seed=index))


def test_numpy_tier_finding_a_branch_local_array_in_jacobian_rows():
    # ad.jit(ad.jacrev(f))'s rows function snapshotted an array that only one
    # branch assigns: UnboundLocalError when run on NumPy (Numba read an
    # undefined value, never used).
    for name in ("first_hour.inplace_view", "first_hour.inplace_view'"):
        fn, make, argnums = FIRST_HOUR[name]
        _assert_clean(oracle.check(fn, make(), "jacrev", argnums, name=name,
                                   families=("python", "tier")))


def test_numpy_tier_finding_a_widened_loop_left_empty(folder):
    # A widened adjoint sweep left a loop whose statements had all become
    # unused shared partials with only comments in its body: IndentationError.
    program = fuzz.Program(SEED, 2)
    module, one, _ = fuzz.prepare(program, folder)
    report = oracle.check(module.g, one, "jacrev", program.argnums, name=program.name,
                          families=("python", "tier"), seed=2)
    assert report.checks and not any(w == "jit[numpy tier]" for _, w, _ in report.refusals)
    _assert_clean(report)


def test_numpy_tier_finding_arrays_a_loop_writes_into_and_jacobian_rows():
    # ad.jit(ad.jacrev(f)) with more rows than one adjoint sweep carries: the
    # sweeps after the first found the arrays each loop iteration had written
    # into restored to their old values by the first (and the last
    # iteration's values copied into the first's array), so every row after
    # the first sweep was wrong -- compiled too (found by the fuzzer, seed 11,
    # program 55, through jit(jacrev(vmap))).
    x = np.linspace(-0.8, 0.9, 20)                 # 20 rows: two sweeps of 10
    _assert_clean(oracle.check(tf.rows_of_arrays_written_in_a_loop, (x,), "jacrev", 0,
                               name="rows_of_arrays_written_in_a_loop",
                               families=("python", "tier")))


def test_numpy_tier_finding_a_product_adjoint_added_in_place_in_a_widened_sweep():
    # rt.add_matmul_grad_b(bK[b], ...) writes into its first argument; the
    # widened sweep (several rows at once) did not know, so every row got
    # the sum of all rows' K-gradients: off-diagonal blocks in the batch,
    # compiled too (found by the fuzzer, seed 11, program 72).
    x = np.array([[0.14, -1.67], [0.52, -0.32], [0.84, -0.84]])
    K = np.random.default_rng(72).normal(size=(3, 2, 2))
    _assert_clean(oracle.check(tf.quadratic_form, (x, K, np.array([0.5, -0.3, 0.9])),
                               "vmap_jacrev", (0, 1, 2), (0, 0, 0), name="quadratic_form",
                               families=("python", "tier")))


def test_programs_are_deterministic():
    assert fuzz.Program(7, 3).source() == fuzz.Program(7, 3).source()
    assert fuzz.Program(7, 3).source() != fuzz.Program(7, 4).source()
    inst = fuzz.Program(7, 3).source(instrument=True)
    assert "_MARGINS" in inst


def test_first_hour_statements_leave_the_other_programs_as_they_were():
    """The first-hour statements come from a stream of their own: a program
    without them is the one the generator made before they existed."""
    programs = [fuzz.Program(7, i) for i in range(40)]
    with_extras = [p for p in programs if p.extras]
    assert 0 < len(with_extras) < len(programs)
    for p in programs:
        plain = fuzz.Program(7, p.index, extras=False)
        assert not plain.extras
        assert (p.source() == plain.source()) == (not p.extras)
    text = "".join(p.source() for p in with_extras)
    for feature in (" for ", "lambda", "ad.", "x_axpy(", "np.linalg.", "scale="):
        assert feature in text


def test_in_place_statements_leave_the_other_programs_as_they_were():
    """The in-place statements (writes into arrays an earlier adjoint reads)
    come from a stream of their own: ``inplace=False`` gives back the program
    the generator made before they existed; ``inplace=True`` gives every
    program some; by default a share of the programs has them."""
    programs = [fuzz.Program(7, i) for i in range(40)]
    assert 0 < sum(p.inplace for p in programs) < len(programs)
    for p in programs:
        plain = fuzz.Program(7, p.index, inplace=False)
        assert (p.source() == plain.source()) == (not p.inplace)
    text = "".join(fuzz.Program(7, i, inplace=True).source() for i in range(40))
    for feature in ("[1:] = ", "] = ", " += ", " *= ", "tail", "p_shift(", "while k",
                    "np.tanh(", "np.sqrt(", "1.0 / (1.0 + "):
        assert feature in text, feature


def test_cli_summary_line(tmp_path, capsys):
    status = fuzz.main(["--programs", "3", "--seed", "5", "--witnesses", "python",
                        "--out", str(tmp_path / "failures"), "--quiet"])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    n, k, d = (int(part.split()[0]) for part in last.split(", "))
    assert last == f"{n} programs, {k} checks, {d} disagreements"
    assert k > 0 and status == (1 if d else 0)


# -- the oracle can fail -----------------------------------------------------------------


def _quad(x, K):
    return x @ K @ x + np.sum(np.sin(x))


X = np.array([0.3, -0.7, 1.1])
K = np.array([[1.0, 0.2, -0.3], [0.1, 0.5, 0.4], [-0.2, 0.3, 0.8]])


def test_catches_a_wrong_derivative():
    wrong = oracle.Witness("grad*1.001", "python",
                           lambda f, a: ad.grad(f)(*a) * np.array([1.0, 1.001, 1.0]))
    report = oracle.check(_quad, (X, K), "grad", 0, name="quad", extra_witnesses=[wrong])
    assert len(report.disagreements) >= 1
    d = report.disagreements[0]
    assert (d.path, d.other, d.kind) == ("grad*1.001", "finite differences", "value")
    assert d.index == (0, (1,)) and abs(d.got / d.want - 1.001) < 1e-6
    assert "quad [grad] grad*1.001 vs finite differences" in str(d)


def test_catches_a_batched_witness_that_differs_per_example():
    def swapped(f, a):
        g = ad.vmap(ad.grad(f), (0, None))(*a)
        return g[::-1]
    xs = np.stack([X, X * 0.5, X - 0.1])
    report = oracle.check(_quad, (xs, K), "vmap_grad", 0, (0, None), name="quad",
                          families=("python",),
                          extra_witnesses=[oracle.Witness("swapped", "python", swapped)])
    bad = [d for d in report.disagreements if d.path == "swapped"]
    assert bad and bad[0].other == "stack of per-example finite differences"
    assert bad[0].index[1][0] == 0


def test_catches_mutation_and_internal_errors():
    def writes(f, a):
        a[0][0] += 1.0
        return ad.grad(f)(*a)

    def crashes(f, a):
        return undefined_name  # noqa: F821 -- an internal NameError

    report = oracle.check(_quad, (X.copy(), K), "grad", 0, name="quad",
                          extra_witnesses=[oracle.Witness("writes", "python", writes),
                                           oracle.Witness("crashes", "python", crashes)])
    kinds = {(d.path, d.kind) for d in report.disagreements}
    assert ("writes", "mutation") in kinds and ("crashes", "exception") in kinds


def test_documented_errors_are_refusals():
    def nondiff(x):
        return np.sum(np.floor(x) * x)
    report = oracle.check(nondiff, (X,), "grad", 0, families=("python",))
    assert all(d.kind != "exception" for d in report.disagreements)
    try:
        ad.grad(_quad, argnums=5)(X, K)
    except (TypeError, ValueError) as exc:
        assert oracle.is_documented_error(exc)
    assert not oracle.is_documented_error(NameError("name '_t1' is not defined"))
