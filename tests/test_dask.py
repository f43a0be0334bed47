"""ad.vmap on dask arrays (docs/dask.md): lazy, chunked along the batch axis.

Results are checked against the in-memory NumPy ``vmap`` (checked against
per-example loops in test_vmap) and, for the per-sample gradient, against a
closed form and central differences.  Numba builds cost seconds, so the
jitted functions are built once at module scope; most cases use the python
target.  The LocalCluster tests start 2 worker processes with 1 thread each.
"""
import os
import pathlib
import sys

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
from conftest import load_program

import s2s_ad as ad
from s2s_ad.api import dask as dask_support

P = load_program(pathlib.Path(__file__).parent / "programs" / "dask_programs.py")

RNG = np.random.default_rng(0)
THETA = np.array([0.3, -0.2, 0.5])
X = RNG.standard_normal((23, 3))
JIT_GRAD = ad.jit(ad.vmap(ad.grad(P.tanh_loss), in_axes=(None, 0)))
JIT_VALUE_AND_GRAD = ad.jit(ad.vmap(ad.value_and_grad(P.mlp_loss), in_axes=(None, 0, 0)))


def threads(x):
    with dask.config.set(scheduler="threads"):
        return dask.compute(x)[0]


def closed_form_grad(theta, x):
    t = np.tanh(x * theta)
    return 2 * t * (1 - t ** 2) * x


def test_jitted_per_sample_grad_is_lazy_chunked_and_right():
    xd = da.from_array(X, chunks=(5, 3))
    out = JIT_GRAD(THETA, xd)
    assert isinstance(out, da.Array)
    assert out.chunks == ((5, 5, 5, 5, 3), (3,))
    got = threads(out)
    np.testing.assert_allclose(got, JIT_GRAD(THETA, X), rtol=1e-12)
    np.testing.assert_allclose(got, closed_form_grad(THETA, X), rtol=1e-10)


def test_per_sample_grad_matches_finite_differences():
    got = threads(JIT_GRAD(THETA, da.from_array(X[:4], chunks=2)))
    eps = 1e-6
    for b in range(4):
        for j in range(3):
            e = np.zeros(3)
            e[j] = eps
            fd = (P.tanh_loss(THETA + e, X[b]) - P.tanh_loss(THETA - e, X[b])) / (2 * eps)
            assert abs(got[b, j] - fd) < 1e-7


def test_nothing_runs_until_compute(monkeypatch):
    calls = []
    run = dask_support.ChunkKernel.__call__

    def counted(self, *blocks):
        calls.append(np.array(blocks[-1]))             # the chunk's example indices
        return run(self, *blocks)
    monkeypatch.setattr(dask_support.ChunkKernel, "__call__", counted)
    out = JIT_GRAD(THETA, da.from_array(X, chunks=(6, 3)))
    assert calls == []
    threads(out)
    assert sorted(int(c[0]) for c in calls) == [0, 6, 12, 18]
    assert sum(len(c) for c in calls) == 23


def test_unbatched_argument_is_one_key_shared_by_every_chunk(monkeypatch):
    seen = []
    run = dask_support.ChunkKernel.__call__

    def recorded(self, *blocks):
        seen.append(dask_support._one_block(blocks[0]))
        return run(self, *blocks)
    monkeypatch.setattr(dask_support.ChunkKernel, "__call__", recorded)
    out = JIT_GRAD(THETA, da.from_array(X, chunks=(4, 3)))
    graph = dict(out.__dask_graph__())
    theta_keys = [k for k, v in graph.items()
                  if isinstance(v, np.ndarray) and v.shape == THETA.shape
                  or getattr(v, "shape", None) == THETA.shape]
    assert len(theta_keys) <= 1
    threads(out)
    assert len(seen) == 6
    assert all(s is seen[0] for s in seen)     # the same array, not a copy per chunk


def test_value_and_grad_pytree_structure_and_chunk_alignment():
    params = (RNG.standard_normal((3, 4)), RNG.standard_normal(4))
    y = np.where(RNG.random(23) < 0.5, -1.0, 1.0)
    xd = da.from_array(X, chunks=(7, 3))
    yd = da.from_array(y, chunks=5)                  # other batch chunks: aligned by dask
    value, (gW, gb) = JIT_VALUE_AND_GRAD(params, xd, yd)
    assert all(isinstance(v, da.Array) for v in (value, gW, gb))
    ref_value, (ref_W, ref_b) = JIT_VALUE_AND_GRAD(params, X, y)
    got = threads((value, gW, gb))
    for g, r in zip(got, (ref_value, ref_W, ref_b)):
        np.testing.assert_allclose(g, r, rtol=1e-12)
    assert got[1].shape == (23, 3, 4)


def test_dask_params_are_rechunked_to_one_chunk():
    params = da.from_array(THETA, chunks=1)            # chunked along a non-batch axis
    x = da.from_array(X, chunks=(10, 1))
    got = threads(JIT_GRAD(params, x))
    np.testing.assert_allclose(got, closed_form_grad(THETA, X), rtol=1e-10)


@pytest.mark.parametrize("transform", ["primal", "jvp", "jacfwd", "jacrev", "hessian"])
def test_python_target_transforms_match_numpy(transform):
    def jvp_cube(x, v):
        return ad.jvp(P.cube, (x,), (v,))
    fun = {"primal": P.cube, "jvp": jvp_cube, "jacfwd": ad.jacfwd(P.cube),
           "jacrev": ad.jacrev(P.cube), "hessian": ad.hessian(P.tanh_loss)}[transform]
    batched = ad.vmap(fun)
    args = (X, np.ones_like(X)) if transform == "jvp" else (X,)
    if transform == "hessian":
        batched = ad.vmap(fun, in_axes=(None, 0))
        args = (THETA, X)
    lazy = batched(*[da.from_array(a, chunks=(8, 3)) if a is not THETA else a for a in args])
    expect = batched(*args)
    got = threads(lazy)
    for g, e in zip(np.atleast_1d(got) if not isinstance(got, tuple) else got,
                    np.atleast_1d(expect) if not isinstance(expect, tuple) else expect):
        np.testing.assert_allclose(g, e, rtol=1e-12)


def test_out_axes_moves_the_batch_axis():
    batched = ad.vmap(ad.jacfwd(P.cube), out_axes=1)
    got = threads(batched(da.from_array(X, chunks=(8, 3))))
    np.testing.assert_allclose(got, batched(X), rtol=1e-12)
    assert got.shape == (3, 23, 3)


def test_apply_gufunc_accepts_batched_functions():
    got = da.apply_gufunc(JIT_GRAD, "(p),(n)->(p)", THETA, da.from_array(X, chunks=(6, 3)))
    np.testing.assert_allclose(threads(got), closed_form_grad(THETA, X), rtol=1e-10)


def test_xarray_apply_ufunc_parallelized():
    xr = pytest.importorskip("xarray")
    data = xr.DataArray(X, dims=("sample", "n")).chunk({"sample": 6})
    theta = xr.DataArray(THETA, dims=("p",))
    out = xr.apply_ufunc(JIT_GRAD, theta, data, input_core_dims=[["p"], ["n"]],
                         output_core_dims=[["p"]], dask="parallelized",
                         output_dtypes=[float])
    np.testing.assert_allclose(out.compute(scheduler="threads").values,
                               closed_form_grad(THETA, X), rtol=1e-10)


def test_mean_and_clipped_sum_compose_with_dask_reductions():
    grads = JIT_GRAD(THETA, da.from_array(X, chunks=(5, 3)))
    mean = threads(grads.mean(axis=0))
    norms = da.sqrt((grads ** 2).sum(axis=1))
    clipped = threads((grads * da.minimum(1.0, 0.1 / norms)[:, None]).sum(axis=0))
    ref = closed_form_grad(THETA, X)
    np.testing.assert_allclose(mean, ref.mean(axis=0), rtol=1e-10)
    scale = np.minimum(1.0, 0.1 / np.linalg.norm(ref, axis=1))
    np.testing.assert_allclose(clipped, (ref * scale[:, None]).sum(axis=0), rtol=1e-10)


def test_a_failing_chunk_names_its_examples():
    x = np.abs(X) + 0.1
    x[13, 1] = -1.0
    out = ad.vmap(P.log_sum, method="loop")(da.from_array(x, chunks=(5, 3)))
    with pytest.raises(ValueError, match="math domain error.*examples 10 to 14 of the batch"):
        threads(out)


def test_out_axes_none_is_refused_clearly():
    with pytest.raises(ValueError, match="out_axes=None cannot be checked lazily"):
        ad.vmap(P.cube, out_axes=None)(da.from_array(X, chunks=(8, 3)))


def test_unknown_chunk_sizes_are_refused_clearly():
    x = da.from_array(X, chunks=(8, 3))
    x = x[x[:, 0] > -10]
    with pytest.raises(ValueError, match="compute_chunk_sizes"):
        JIT_GRAD(THETA, x)


def test_batched_functions_pickle_as_recipes_built_once_per_process():
    cloudpickle = pytest.importorskip("cloudpickle")
    import pickle
    cloudpickle.register_pickle_by_value(P)
    try:
        blob = cloudpickle.dumps(JIT_GRAD)
    finally:
        cloudpickle.unregister_pickle_by_value(P)
    assert len(blob) < 20_000            # a recipe, not compiled code
    first, second = pickle.loads(blob), pickle.loads(blob)
    assert first is second
    np.testing.assert_allclose(first(THETA, X), closed_form_grad(THETA, X), rtol=1e-10)


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    import cloudpickle
    cloudpickle.register_pickle_by_value(P)        # workers cannot import the test programs
    # A task whose worker dies is retried on another up to allowed-failures
    # times (3 is distributed's default; set here so the fault test relies on it).
    with dask.config.set({"distributed.scheduler.allowed-failures": 3}):
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           dashboard_address=None)
    with cluster, distributed.Client(cluster) as c:
        yield c
    cloudpickle.unregister_pickle_by_value(P)


def test_local_cluster_with_processes(client):
    xd = da.from_array(X, chunks=(4, 3))
    got = client.compute(JIT_GRAD(THETA, xd)).result()
    np.testing.assert_allclose(got, closed_form_grad(THETA, X), rtol=1e-10)
    params = (RNG.standard_normal((3, 4)), RNG.standard_normal(4))
    y = np.where(RNG.random(23) < 0.5, -1.0, 1.0)
    value, (gW, gb) = JIT_VALUE_AND_GRAD(params, xd, da.from_array(y, chunks=4))
    got = client.compute([value, gW, gb], sync=True)
    ref_value, (ref_W, ref_b) = JIT_VALUE_AND_GRAD(params, X, y)
    for g, r in zip(got, (ref_value, ref_W, ref_b)):
        np.testing.assert_allclose(g, r, rtol=1e-12)
    # Each worker process built each transform once, however many chunks it ran.
    built = client.run(lambda: sorted(dask_support._REBUILT))
    assert all(len(tokens) <= 2 for tokens in built.values())


def test_local_cluster_python_target_and_errors(client):
    out = ad.vmap(ad.jacrev(P.cube))(da.from_array(X, chunks=(6, 3)))
    np.testing.assert_allclose(client.compute(out, sync=True), ad.vmap(ad.jacrev(P.cube))(X),
                               rtol=1e-12)
    x = np.abs(X) + 0.1
    x[2, 0] = -1.0
    out = ad.vmap(P.log_sum, method="loop")(da.from_array(x, chunks=(6, 3)))
    with pytest.raises(ValueError, match="examples 0 to 5 of the batch"):
        client.compute(out, sync=True)


def jacobian_of_cube(x):
    return np.stack([np.diag(3 * row ** 2) + 1.0 for row in x])


def hessian_of_tanh_loss(theta, x):
    t = np.tanh(x * theta)
    return np.stack([np.diag(d) for d in 2 * x ** 2 * (1 - t ** 2) * (1 - 3 * t ** 2)])


@pytest.mark.parametrize("transform", ["function", "jvp", "jacfwd", "hessian"])
def test_local_cluster_every_transform_matches_numpy(client, transform):
    """With grad and value_and_grad (test_local_cluster_with_processes) and
    jacrev (below), every transform of the issue, jitted, on worker processes."""
    v = RNG.standard_normal(X.shape)
    fun, args, closed = {
        "function": (ad.vmap(P.cube), (X,), (X ** 3 + X.sum(axis=1, keepdims=True),)),
        "jvp": (ad.vmap(P.cube_jvp), (X, v), (X ** 3 + X.sum(axis=1, keepdims=True),
                                                3 * X ** 2 * v + v.sum(axis=1, keepdims=True))),
        "jacfwd": (ad.vmap(ad.jacfwd(P.cube)), (X,), (jacobian_of_cube(X),)),
        "hessian": (ad.vmap(ad.hessian(P.tanh_loss), in_axes=(None, 0)), (THETA, X),
                    (hessian_of_tanh_loss(THETA, X),)),
    }[transform]
    fun = ad.jit(fun)
    lazy = fun(*[a if a is THETA else da.from_array(a, chunks=(6, 3)) for a in args])
    lazy = lazy if isinstance(lazy, tuple) else (lazy,)
    assert all(isinstance(part, da.Array) and part.numblocks[0] == 4 for part in lazy)
    got = client.compute(list(lazy), sync=True)
    expect = fun(*args)
    expect = expect if isinstance(expect, tuple) else (expect,)
    assert len(got) == len(expect) == len(closed)
    for g, e, c in zip(got, expect, closed):
        np.testing.assert_allclose(g, e, rtol=1e-12)
        np.testing.assert_allclose(g, c, rtol=1e-10, atol=1e-12)


class DaskArrayLike:
    """What a dask array looks like to s2s_ad, in a process without dask."""
    __module__ = "dask.array.core"

    def __init__(self, data):
        self.data = data
        self.shape, self.ndim, self.dtype = data.shape, data.ndim, data.dtype

    def __dask_graph__(self):
        return {}


def test_without_dask_a_dask_argument_says_what_to_install(monkeypatch):
    for name in [m for m in sys.modules if m == "dask" or m.startswith("dask.")]:
        monkeypatch.setitem(sys.modules, name, None)          # import dask... fails
    with pytest.raises(ImportError, match=r'pip install "dask\[array\]" distributed'):
        JIT_GRAD(THETA, DaskArrayLike(X))
    with pytest.raises(ImportError, match=r'pip install "dask\[array\]" distributed'):
        ad.vmap(P.cube)(DaskArrayLike(X))


def test_without_dask_batched_functions_still_pickle(monkeypatch):
    import pickle
    monkeypatch.setitem(sys.modules, "cloudpickle", None)     # dask brings cloudpickle
    batched = ad.vmap(ad.grad(P.tanh_loss), in_axes=(None, 0))
    blob = pickle.dumps(batched)                  # P.tanh_loss by reference
    monkeypatch.setattr(dask_support, "_REBUILT", {})         # as in a fresh process
    rebuilt = pickle.loads(blob)
    assert rebuilt is not batched
    np.testing.assert_allclose(rebuilt(THETA, X), closed_form_grad(THETA, X), rtol=1e-10)


def _benchmarks():
    root = str(pathlib.Path(__file__).resolve().parents[1])
    if root not in sys.path:              # benchmarks/ is not installed; plain `pytest` too
        sys.path.insert(0, root)
    from benchmarks import dask_td0
    return dask_td0


def test_dask_td0_benchmark_runs_and_checks_its_result(client):
    """A tiny run of benchmarks/dask_td0.py: its own check compares the mean
    gradient of the first chunks with the closed form (it raises if not)."""
    dask_td0 = _benchmarks()
    res = dask_td0.run(client, n=6 * 400, d=8, chunk=400, rounds=1, reference_chunks=2,
                       log=lambda line: None)
    assert res["chunks"] == 6 and res["workers"] == 2
    assert res["check_rel_error"] <= 1e-10
    assert res["chunks_per_s"] > 0 and min(res["worker_peak_rss_mb"]) > 0
    assert "chunks/s" in dask_td0.report(res)


def test_dask_td0_benchmark_is_skipped_without_dask(monkeypatch, capsys):
    dask_td0 = _benchmarks()
    monkeypatch.setitem(sys.modules, "dask.array", None)
    monkeypatch.setitem(sys.modules, "distributed", None)
    assert dask_td0.main(["--n", "10"]) == 0
    assert "dask_td0 skipped" in capsys.readouterr().out


def test_a_worker_killed_mid_chunk_is_retried_and_the_result_is_right(client, tmp_path):
    """The first chunk to finish kills its worker process before returning
    (exactly once: a marker file made with O_EXCL); the scheduler runs the
    lost tasks again (allowed-failures, set in the fixture) and the nanny
    starts a fresh worker process, which rebuilds the transform from its
    recipe when it gets a chunk."""
    marker = str(tmp_path / "killed")

    def install(marker):
        import os

        from s2s_ad.api import dask as dask_support
        run = dask_support.ChunkKernel.__call__

        def dying(self, *blocks):
            out = run(self, *blocks)
            try:
                fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return out
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
            os._exit(1)                      # the worker process dies mid-task
        dying.original = run
        dask_support.ChunkKernel.__call__ = dying

    def uninstall():
        from s2s_ad.api import dask as dask_support
        run = dask_support.ChunkKernel.__call__
        dask_support.ChunkKernel.__call__ = getattr(run, "original", run)

    before = set(client.run(os.getpid).values())
    client.run(install, marker)
    try:
        x = np.random.default_rng(1).standard_normal((40, 3))
        got = client.compute(JIT_GRAD(THETA, da.from_array(x, chunks=(5, 3))), sync=True)
    finally:
        client.run(uninstall)
    killed = int(pathlib.Path(marker).read_text())
    assert killed in before
    np.testing.assert_allclose(got, closed_form_grad(THETA, x), rtol=1e-10)
    client.wait_for_workers(2, timeout=30)       # the nanny's fresh worker is back
    after = set(client.run(os.getpid).values())
    assert killed not in after and len(after) == 2


def test_dask_dpsgd_example_step_matches_numpy():
    """examples/dask_dpsgd.py: the step over chunks equals the same DP-SGD step
    written in NumPy on the materialised data."""
    import importlib.util
    path = pathlib.Path(__file__).resolve().parents[1] / "examples" / "dask_dpsgd.py"
    spec = importlib.util.spec_from_file_location("dask_dpsgd_example", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    rng = np.random.default_rng(3)
    x_np, y_np = rng.standard_normal((600, 5)), np.where(rng.random(600) < 0.5, -1.0, 1.0)
    theta = np.full(5, 0.1)
    got = example.dp_sgd_step(theta, da.from_array(x_np, chunks=(150, 5)),
                              da.from_array(y_np, chunks=150))
    margin = -y_np * (x_np @ theta)
    grads = (-y_np * np.exp(margin) / (1 + np.exp(margin)))[:, None] * x_np
    scale = np.minimum(1.0, 1.0 / np.linalg.norm(grads, axis=1))
    noise = 1.1 * 1.0 * np.random.default_rng(0).standard_normal(5)
    want = theta - 0.5 * ((grads * scale[:, None]).sum(axis=0) + noise) / 600
    np.testing.assert_allclose(got, want, rtol=1e-12)
    _, _, before, after = example.main(n=4_000, d=4, chunk=1_000)
    assert np.isfinite(before) and np.isfinite(after)
