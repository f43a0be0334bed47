"""Issue 17, last items: np.pad / split family / tile / repeat /
scipy.special.betaln (written in NumPy, s2s_ad/rules/library/blocks.py) in every
mode against finite differences, and the errors for functions with no rule."""
import numpy as np
import pytest
from conftest import fd_jacobian

import s2s_ad as ad
from s2s_ad.testing import check_jvp, check_vjp
from tests.programs import issue17_final as prog
from tests.programs import library_cases as lib

RNG = np.random.default_rng(1717)
X = RNG.uniform(0.2, 1.8, (3, 4))          # away from kinks; betaln needs x > 0

CASES = ["pad_constant", "pad_widths", "pad_fill", "pad_edge", "pad_reflect",
         "pad_symmetric_wrap", "pad_vector", "split_sections", "split_indices",
         "array_split_uneven", "hv_split", "tiles", "tile_rank", "repeats", "repeat_flat",
         "betaln"]


@pytest.mark.parametrize("name", CASES)
def test_values_are_numpys(name):
    f = getattr(prog, name)
    np.testing.assert_allclose(ad.vmap(f, method="loop")(X[None])[0], f(X), rtol=1e-13)


@pytest.mark.parametrize("name", CASES)
def test_grad_of_weighted_sum(name):
    f = getattr(prog, name)
    w = RNG.uniform(-1.0, 1.0, np.shape(f(X)))

    def weighted(x):
        return np.sum(f(x) * w)
    np.testing.assert_allclose(ad.grad(weighted)(X), np.tensordot(w, fd_jacobian(f, X),
                                                                   axes=np.ndim(w)),
                               rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", CASES)
def test_vjp_and_jvp(name):
    f = getattr(prog, name)
    check_vjp(f, (X,))
    check_jvp(f, (X,))


@pytest.mark.parametrize("name", CASES)
def test_jacrev(name):
    f = getattr(prog, name)
    np.testing.assert_allclose(ad.jacrev(f)(X), fd_jacobian(f, X), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("method", ["loop", "vectorize"])
@pytest.mark.parametrize("name", CASES)
def test_vmap(name, method):
    f = getattr(prog, name)
    xs = RNG.uniform(0.2, 1.8, (2, 3, 4))
    np.testing.assert_allclose(ad.vmap(f, method=method)(xs), np.stack([f(x) for x in xs]),
                               rtol=1e-12)
    jac = ad.vmap(ad.jacrev(f), method=method)(xs)
    np.testing.assert_allclose(jac, np.stack([fd_jacobian(f, x) for x in xs]),
                               rtol=1e-6, atol=1e-8)


@pytest.fixture(scope="module")
def jit_grad():
    return ad.jit(ad.grad(prog.loss))


@pytest.mark.slow
def test_every_case_in_one_compiled_loss(jit_grad):
    """All cases in one loss, one Numba compile: gradient vs finite differences."""
    np.testing.assert_allclose(jit_grad(X), fd_jacobian(prog.loss, X), rtol=1e-6,
                               atol=1e-8)
    np.testing.assert_allclose(ad.jit(prog.loss)(X), prog.loss(X), rtol=1e-12)


# -- what NumPy refuses is refused, never a wrong shape ----------------------------------

@pytest.mark.parametrize("name", ["uneven_split", "wide_reflect"])
@pytest.mark.parametrize("target", ["python", "cpu"])
def test_invalid_lengths_raise(name, target, jit_grad):
    f = getattr(prog, name)
    g = ad.grad(lambda x: np.sum(f(x)))
    if target == "cpu":
        g = ad.jit(g)
    with pytest.raises(ValueError):
        g(X)


def test_refused_options_name_the_users_line():
    with pytest.raises(SyntaxError, match=r"np.pad.*reflect_type='odd'") as e:
        ad.grad(lambda x: np.sum(prog.odd_reflect(x)))(X)
    assert e.value.filename.endswith("issue17_final.py")
    with pytest.raises(SyntaxError, match=r"np.pad.*mode='mean' is not supported"):
        ad.grad(lambda x: np.sum(np.pad(x, 1, mode="mean")))(X)


def test_split_returns_a_tuple():
    def pieces(x):
        return np.split(x, 2, axis=1)
    out, tangents = ad.jvp(pieces, (X,), (np.ones_like(X),))
    assert isinstance(out, tuple) and len(out) == 2 and isinstance(tangents, tuple)
    np.testing.assert_array_equal(out[1], X[:, 2:])


# -- errors: the unsupported table's reason; the call before the attribute ----------------

def test_no_rule_shows_the_tables_reason():
    from s2s_ad.rules.table import UNSUPPORTED
    with pytest.raises(ad.NonDifferentiableError) as e:
        ad.grad(lib.no_rule)(X[0])
    assert "np.spacing()" in str(e.value) and UNSUPPORTED["np.spacing"] in str(e.value)
    assert e.value.filename.endswith("library_cases.py")


def test_unsupported_call_is_reported_before_its_attribute():
    from s2s_ad.rules.table import UNSUPPORTED
    with pytest.raises(ad.NonDifferentiableError) as e:
        ad.grad(lib.unsupported_call)(X[0])
    msg = str(e.value)
    assert "np.vander()" in msg and UNSUPPORTED["np.vander"] in msg
    assert msg.index("np.vander") < msg.index(".flat")
    assert e.value.filename.endswith("library_cases.py")


def test_functions_with_a_library_implementation_are_not_listed_unsupported():
    from s2s_ad.rules import library
    from s2s_ad.rules.table import UNSUPPORTED
    assert not set(UNSUPPORTED) & set(library.IMPLEMENTATIONS)
    for name in ("np.pad", "np.split", "np.array_split", "np.hsplit", "np.vsplit", "np.tile",
                 "np.repeat", "scipy.special.betaln"):
        assert name in library.IMPLEMENTATIONS


# -- the README's architecture section stays in sync with the source ---------------------

def test_readme_declarations_and_coverage_are_current():
    import pathlib
    import re

    from s2s_ad import rules
    from s2s_ad.rules import library
    root = pathlib.Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text()
    blocks = re.findall(r"```python\n((?:elementwise|_decl|linear)\(.*?)```", readme, re.S)
    assert len(blocks) == 3
    sources = {"elementwise": "s2s_ad/rules/elementwise.py", "_decl": "s2s_ad/rules/linalg.py",
               "linear": "s2s_ad/rules/arrays.py"}
    for block in blocks:
        kind = block.split("(")[0]
        assert block in (root / sources[kind]).read_text(), f"README shows a stale {kind}(...)"
    from s2s_ad.rules.library import stats  # noqa: F401  (registered at first use otherwise)
    assert (f"Coverage: {len(rules.RULES)} rules and {len(library.IMPLEMENTATIONS)} functions "
            f"written in NumPy") in readme.replace("\n", " ")
