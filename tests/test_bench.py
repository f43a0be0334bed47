"""Smoke test of the benchmark suite (benchmarks/): one workload at its tiny
size runs end to end, every gradient agrees with the hand-written one, the
JSON has its fields; a missing peer is a skipped column and a wrong
gradient is flagged, never timed silently.  No peer (JAX, PyTorch,
autograd) is needed."""
import json
import pathlib
import sys

import numpy as np
import pytest

ROOT = str(pathlib.Path(__file__).resolve().parents[1])
if ROOT not in sys.path:            # benchmarks/ is not installed; plain `pytest` too
    sys.path.insert(0, ROOT)

from benchmarks import core, rosen_loop, runner

QUIET = runner.Progress(enabled=False)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "out.json"
    result = runner.run_suite(["--quick", "--size", "tiny", "--only", "rosen_loop",
                               "--peers", "none", "--no-latency", "--json", str(out)],
                              progress=QUIET)
    return result, json.loads(out.read_text())


def test_gradients_agree_and_are_timed(tiny_run):
    impls = tiny_run[1]["workloads"]["rosen_loop"]["implementations"]
    for key in ("numpy", "numba", "hand", "s2s_ad", "s2s_ad_py"):
        cell = impls[key]
        assert cell["status"] == "ok", (key, cell)
        assert cell["max_rel_err"] <= core.RTOL
        assert 0 < cell["min_s"] <= cell["median_s"] <= cell["max_s"]
        assert cell["q1_s"] <= cell["median_s"] <= cell["q3_s"]
        assert cell["rounds"] >= 1 and cell["first_call_s"] > 0
    for key in core.PEERS:
        assert impls[key]["status"] == "skipped"


def test_json_has_the_fields(tiny_run):
    data = tiny_run[1]
    assert {"schema", "mode", "size", "rtol", "config", "machine", "workloads",
            "elapsed_s"} <= set(data)
    res = data["workloads"]["rosen_loop"]
    assert {"title", "size", "implementations", "ratios", "targets"} <= set(res)
    assert res["ratios"]["vs_hand"]["hand"] == pytest.approx(1.0)
    assert res["ratios"]["vs_numba_primal"]["s2s_ad"] > 0
    (target,) = res["targets"]
    assert target["name"] == "s2s_ad / hand" and target["limit"] == 1.3
    assert target["met"] is None          # not judged at the tiny size


def test_table_names_every_column(tiny_run):
    text = runner.render("rosen_loop", tiny_run[0]["workloads"]["rosen_loop"])
    for label in ("hand-written Numba grad", "s2s_ad jit(grad)", "PyTorch eager"):
        assert label in text
    assert "skipped: not selected (--peers)" in text


def test_missing_peer_is_skipped_and_wrong_gradient_is_flagged():
    wl = rosen_loop.build("tiny")

    def missing(args):
        raise core.Unavailable("jax is not installed")

    def wrong(args):
        return core.Impl("torch", lambda x: 1.01 * rosen_loop.analytic_grad(x), args)

    def broken(args):
        raise RuntimeError("boom")

    wl.peers = {"jax": missing, "torch": wrong, "autograd": broken}
    impls, cells = runner.build_and_check(wl, QUIET)
    assert cells["jax"].status == "skipped" and "not installed" in cells["jax"].reason
    assert cells["torch"].status == "WRONG" and cells["torch"].max_rel_err > 1e-3
    assert cells["autograd"].status == "error" and "boom" in cells["autograd"].reason
    core.measure(cells, impls, rounds=2, sample_s=1e-4, budget_s=0.05)
    res = {"title": wl.title, "size": wl.size, "ratios": runner.ratios(cells),
           "implementations": {k: c.to_json() for k, c in cells.items()},
           "targets": runner.judge([core.Target("torch", "hand", 2.0)], cells)}
    assert res["targets"][0]["met"] is False          # a WRONG column never meets a target
    text = runner.render(wl.name, res)
    assert "*** WRONG" in text and "ERROR: RuntimeError: boom" in text


def test_compare_is_normwise_and_checks_shapes():
    want = np.array([1.0, 0.0, -2.0])
    assert core.compare(want + 1e-12, want) < 1e-11
    assert core.compare(np.ones(2), want) == np.inf
    assert core.compare((want, want), (want,)) == np.inf
    assert core.compare(np.array([np.nan, 0, 0]), want) == np.inf


# -- derivative kinds other than "grad" (HVP, Hessian, Jacobian, per-sample) --------

def _jacobian_workload():
    """A 3 -> 2 map with its Jacobian: every new feature, nothing compiled."""
    def f(x):
        return np.array([x[0] * x[1], np.sin(x[2])])

    def jac(x):
        return np.array([[x[1], x[0], 0.0], [0.0, 0.0, np.cos(x[2])]])

    def broken_s2s_ad(ad, jit):
        def fn(x):
            raise NotImplementedError("jacfwd is not there yet")
        return fn

    x = np.array([0.5, -1.5, 0.25])
    v = np.array([1.0, 2.0, -1.0])

    def extra_jvp():                                 # checked against hand @ v
        return core.Impl("s2s_ad_jvp", lambda x, v: jac(x) @ v, (x, v), kind="jvp",
                         reference=lambda hand: hand[0] @ v)

    def extra_wrong():
        return core.Impl("s2s_ad_wrong", lambda x, v: jac(x) @ v + 1.0, (x, v), kind="jvp",
                         reference=lambda hand: hand[0] @ v)

    def jax_vec(args):
        return core.Impl("jax", jac, args)

    return core.Workload(
        name="toy_jac", title="toy", size="3 -> 2", kind="jacobian", args=(x,), argnums=0,
        primal=f, numba_primal=lambda x: f(x) * (1 + 1e-15), hand_grad=jac,
        oracle=lambda args, out: core.compare(out, jac(args[0])), oracle_name="closed form",
        oracle_tol=1e-12, s2s_ad=broken_s2s_ad,
        extra={"s2s_ad_jvp": extra_jvp, "s2s_ad_wrong": extra_wrong},
        labels={"hand": "hand Jacobian", "s2s_ad": "s2s_ad jit(jacfwd)"},
        peers={"jax": jax_vec},
        targets=[core.Target("jax", "s2s_ad_jvp", 1e9, scale=3),
                 core.Target("s2s_ad", "hand", 2.0)])


def test_other_kinds_extra_columns_and_scaled_targets():
    wl = _jacobian_workload()
    impls, cells = runner.build_and_check(wl, QUIET)
    # vector-valued primals are checked against NumPy's, normwise
    assert cells["numba"].status == "ok" and cells["numba"].max_rel_err < 1e-14
    assert cells["hand"].status == "ok" and cells["hand"].kind == "jacobian"
    assert cells["jax"].status == "ok" and cells["jax"].kind == "jacobian"
    # a failing s2s_ad column is an error cell, and the run goes on
    assert cells["s2s_ad"].status == "error" and "jacfwd is not there yet" in cells["s2s_ad"].reason
    # an extra column is checked against its own reference, from the hand-written result
    assert cells["s2s_ad_jvp"].status == "ok" and cells["s2s_ad_jvp"].kind == "jvp"
    assert cells["s2s_ad_wrong"].status == "WRONG" and "jvp differs" in cells["s2s_ad_wrong"].reason
    core.measure(cells, impls, rounds=2, sample_s=1e-4, budget_s=0.05)
    res = {"title": wl.title, "size": wl.size, "ratios": runner.ratios(cells),
           "implementations": {k: c.to_json() for k, c in cells.items()},
           "targets": runner.judge(wl.targets, cells)}
    assert res["implementations"]["hand"]["label"] == "hand Jacobian"
    assert res["implementations"]["s2s_ad"]["label"] == "s2s_ad jit(jacfwd)"
    scaled, missing = res["targets"]
    assert scaled["name"] == "jax / (3 x s2s_ad_jvp)"
    jax_t = cells["jax"].stats()["median"]
    jvp_t = cells["s2s_ad_jvp"].stats()["median"]
    assert scaled["value"] == pytest.approx(jax_t / (3 * jvp_t)) and scaled["met"] is True
    assert missing["met"] is False and missing["why"] == "not measured"
    text = runner.render(wl.name, res)
    assert "ERROR: NotImplementedError" in text and "*** WRONG" in text


def test_a_module_may_build_several_workloads():
    """per_sample_td0 builds one workload per theta size: each is its own entry."""
    result = runner.run_suite(["--quick", "--size", "tiny", "--only", "per_sample_td0",
                               "--peers", "none", "--no-latency"], progress=QUIET)
    names = list(result["workloads"])
    assert names == ["per_sample_td0[d=3]", "per_sample_td0[d=5]"]
    for res in result["workloads"].values():
        assert res["kind"] == "per-sample grad"
        impls = res["implementations"]
        for key in ("numpy", "numba", "hand"):
            assert impls[key]["status"] == "ok", (key, impls[key])
        assert impls["s2s_ad"]["label"] == "s2s_ad jit(vmap(grad))"
        assert impls["s2s_ad"]["status"] in ("ok", "error")      # never WRONG
    assert "per_sample_td0[d=5]" in "\n".join(runner.summary_lines(result))
