"""An open finding of the in-place fuzz run (seed 46, program 7609): the
derivative of ``jacrev(ad.vmap(f, in_axes=(0, 0)))`` with respect to the
second argument ``K`` is 0.0 where finite differences give 0.0045.  The
test fails (strict xfail) until the bug is fixed; then it passes and the
marker must go."""
import pathlib

import pytest
from conftest import load_program

from s2s_ad import oracle

prog = load_program(pathlib.Path(__file__).resolve().parent / "programs" / "fuzz_46_7609.py")


@pytest.mark.xfail(strict=True, reason="open: jacrev(vmap) drops the K derivative "
                   "(docs/oracle.md, runs table, 2026-12-07)")
def test_jacrev_of_vmap_agrees_with_finite_differences():
    report = oracle.check(prog.f, prog.ARGS, "vmap_jacrev", argnums=(0, 1), in_axes=(0, 0),
                          only={"jacrev(vmap)"}, seed=7609)
    assert not report.disagreements, "\n".join(map(str, report.disagreements))
