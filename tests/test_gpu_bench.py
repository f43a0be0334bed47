"""benchmarks/gpu/run.py without a GPU: the targets and the table from rows,
the agreement check, and the clean skip (``--dry-run`` runs the whole script
under the simulator; it takes a minute and a half, so it is not a test)."""
import numpy as np
import pytest

from benchmarks.gpu import run
from s2s_ad.api.cuda import simulated


def _row(ours, jax=None, torch=None, hand=None):
    impls = {"s2s_ad": {"median_s": ours, "first_s": 1.0, "agrees": True}}
    for name, t in (("jax", jax), ("torch", torch), ("hand", hand)):
        if t == "differs":
            impls[name] = {"agrees": False, "max_rel_err": 0.5, "first_s": 1.0}
        elif t is not None:
            impls[name] = {"median_s": t, "agrees": True}
    return {"workload": "w", "key": "w", "impls": impls}


def test_targets_compare_with_the_fastest_peer_and_the_hand_kernel():
    assert run.targets(_row(1.0, jax=2.0, torch=1.5, hand=0.6)) == [
        ("as fast as the fastest of JAX and torch.func", True),
        ("within 2x of the hand-written kernel", True)]
    assert [m for _, m in run.targets(_row(1.0, jax=0.9, torch=3.0, hand=0.4))] == [False, False]
    # a peer whose result differs is not timed, so it is not a target
    assert [m for _, m in run.targets(_row(1.0, jax="differs", torch=3.0))] == [True]
    assert [m for _, m in run.targets(_row(1.0, jax=2.0), dry=True)] == [None]


def test_table_marks_differing_results_and_dry_runs():
    text = run.table([_row(0.002, jax="differs", torch=0.004, hand=0.001)], dry=True)
    assert "| w | 2.00 | n/a | DIFFERS (5.0e-01) | 4.00 | 1.00 | 1.00 |" in text
    assert "the times mean nothing" in text
    row = _row(0.002, jax=0.003)
    row["impls"]["s2s_ad"]["kernels_s"] = 0.0005       # the kernels alone, on a GPU
    assert "| w | 2.00 | 0.50 | 3.00 | n/a | - | 1.00 |" in run.table([row], dry=False)


def test_agreement_is_relative_to_the_largest_magnitude():
    want = [np.array([[1000.0, 1e-3]])]
    assert run._agree([want[0] * (1 + 1e-4)], want, np.float32)[0]
    assert not run._agree([want[0] + np.array([[0.0, 5.0]])], want, np.float32)[0]
    assert not run._agree([np.zeros((2, 2))], want, np.float64)[0]      # wrong shape


@pytest.mark.skipif(simulated() or run.gpu_missing() is None, reason="kernels can run here")
def test_without_a_gpu_it_says_so_and_succeeds(capsys):
    assert run.main([]) == 0
    assert "GPU benchmarks skipped" in capsys.readouterr().out


@pytest.mark.skipif(simulated() or run.gpu_missing() is None, reason="kernels can run here")
def test_benchmarks_target_cuda_runs_the_gpu_script(capsys):
    from benchmarks.runner import main
    assert main(["--target", "cuda"]) == 0
    assert "GPU benchmarks skipped: no usable NVIDIA GPU" in capsys.readouterr().out
