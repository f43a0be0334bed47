"""print in the per-example function of ``ad.jit(ad.vmap(f), target="cuda")``
(issue 38): numba.cuda's own print, one line per example; see docs/jax_idioms.md."""
import numpy as np
import pytest
from cuda_support import nvvm, ptx_only, runs  # noqa: F401

import s2s_ad as ad


def printing(x):
    y = np.sin(x)
    print("y is", y)
    return y * 2


def printing_sep(x):
    print("x", x, sep=",")
    return x


X = np.array([0.1, 0.2, 0.3])


@runs
def test_print_in_the_per_example_function(capsys):
    f = ad.jit(ad.vmap(printing), target="cuda")
    f(X)
    capsys.readouterr()
    np.testing.assert_allclose(f(X), 2 * np.sin(X), rtol=1e-14)
    lines = capsys.readouterr().out.splitlines()
    # One line per example, the threads in any order, and example 0 once more: each
    # call runs it on the host first to learn the result's layout.
    want = [f"y is {v}" for v in np.sin(X)] + [f"y is {np.sin(X[0])}"]
    assert sorted(lines) == sorted(want)


@runs
def test_print_with_sep_is_refused_at_the_users_line():
    with pytest.raises(ad.UnsupportedSyntaxError, match="sep=") as info:
        ad.jit(ad.vmap(printing_sep), target="cuda")(X)
    assert "print(" in info.value.text


@ptx_only
@pytest.mark.usefixtures("nvvm")
def test_print_compiles_to_ptx():
    ptx = ad.jit(ad.vmap(printing), target="cuda").compile_ptx(X)
    assert "vprintf" in ptx
