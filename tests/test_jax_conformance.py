"""JAX's documentation and tests, ported as a JAX user ports them, give JAX's numbers.

The corpus is ``tests/jax_conformance/``: each file JAX code ending in
``CASES`` (see ``tests/jax_conformance/conformance.py`` for the port and
the lowerings).  JAX itself, in float64, is the reference; every case runs
under every lowering that applies to it, and a deliberate difference is a
refusal with its documented error at the user's line, or a case whose
reference is the JAX expression computing what the Python code means.
"""
import pathlib
import sys
import tempfile

import pytest

import s2s_ad as ad

HERE = pathlib.Path(__file__).resolve().parent / "jax_conformance"
sys.path.insert(0, str(HERE))
import conformance  # noqa: E402

jax = pytest.importorskip("jax")
FILES = sorted(p for p in HERE.glob("*.py") if p.name != "conformance.py")
PORTED = pathlib.Path(tempfile.mkdtemp(prefix="s2s_ad_conformance_"))
MODULES = {p.stem: conformance.load(p, PORTED) for p in FILES}
#: Compiled by Numba: the slow tier (about a second of compile per case).
SLOW = {"jit"}


def _params():
    for stem, (reference, _) in MODULES.items():
        for c in reference.CASES:
            for lowering in conformance.LOWERINGS:
                if c.lowerings and lowering not in c.lowerings:
                    continue
                expr = conformance.lowered(conformance.translate(c.expr), lowering)
                if expr is None or ((c.refused or c.raises) is not None and lowering != "python"):
                    continue
                marks = [pytest.mark.slow] if lowering in SLOW else []
                yield pytest.param(stem, c, lowering, expr, marks=marks,
                                   id=f"{stem}-{c.name}-{lowering.replace(' ', '_')}")


_EXPECTED = {}


def expected(stem, c):
    key = (stem, c.name)
    if key not in _EXPECTED:
        reference = MODULES[stem][0]
        _EXPECTED[key] = conformance.plain(eval(c.reference or c.expr, vars(reference)))
    return _EXPECTED[key]


@pytest.mark.parametrize("stem, c, lowering, expr", list(_params()))
def test_case(stem, c, lowering, expr):
    reference, ported = MODULES[stem]
    if isinstance(ported, Exception):
        raise ported
    if c.raises is not None:
        with pytest.raises(c.raises):
            eval(c.expr, vars(reference))
    if c.refused is not None or c.raises is not None:
        with pytest.raises(c.refused or c.raises) as info:
            conformance.evaluate(ported, c, lowering)
        assert "s2s_ad" + "/" not in str(info.value), info.value    # not blamed on s2s_ad
        return
    try:
        result = conformance.evaluate(ported, c, lowering)
    except ValueError as error:
        if lowering == "vmap method=vectorize" and "method='loop'" in str(error):
            pytest.skip(f"the forced lowering refuses, as documented: {error}")
        raise
    got = conformance.plain(result)
    problem = conformance.mismatch(got, expected(stem, c), c.tol)
    assert not problem, f"{c.expr} [{lowering}]: {problem}"


def test_the_corpus_is_large_enough():
    """Issue 38: at least 150 cases from JAX's docs and tests."""
    assert sum(len(m.CASES) for m, _ in MODULES.values()) >= 150


def test_the_port_is_mechanical():
    text = conformance.translate("import jax\nimport jax.numpy as jnp\nfrom jax import grad\n"
                                 "y = jax.jit(jax.grad(f))(jnp.ones(3))\n")
    assert text == ("import s2s_ad as ad\nimport numpy as np\nfrom s2s_ad import grad\n"
                    "y = ad.jit(ad.grad(f))(np.ones(3))\n")
    assert conformance.lowered("grad(f)(x)", "jit") == "ad.jit(grad(f))(x)"
    assert conformance.lowered("jvp(f, (x,), (v,))", "jit") == "jvp(ad.jit(f), (x,), (v,))"
    assert conformance.lowered("vmap(g)(xs)", "vmap method=loop") == \
        "vmap(g, method='loop')(xs)"
    assert conformance.lowered("grad(f)(x)", "vmap method=loop") is None
    assert ad.grad is not None


def _oracle_params():
    for stem, (reference, _) in MODULES.items():
        for fn, args, argnums in getattr(reference, "ORACLE", ()):
            yield pytest.param(stem, fn, args, argnums, ("python", "tier"), id=f"{stem}-{fn}")
            yield pytest.param(stem, fn, args, argnums, ("numba",), id=f"{stem}-{fn}-numba",
                               marks=pytest.mark.slow)


@pytest.mark.parametrize("stem, fn, args, argnums, families", list(_oracle_params()))
def test_oracle(stem, fn, args, argnums, families):
    """The corpus's functions under every transform, each witness against finite
    differences and against the NumPy witness (s2s_ad.oracle)."""
    from s2s_ad import oracle
    ported = MODULES[stem][1]
    if isinstance(ported, Exception):
        raise ported
    report = oracle.check_all(getattr(ported, fn), eval(args, vars(ported)), argnums,
                              name=f"{stem}.{fn}", families=families)
    assert report.checks > 0
    assert not report.disagreements, "\n".join(map(str, report.disagreements))
