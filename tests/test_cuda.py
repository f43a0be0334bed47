"""The CUDA target: ad.jit(ad.vmap(F), target="cuda").

Three kinds of test:

* equality with the CPU path (to 1e-10) and with finite differences or
  closed forms -- they run where kernels can run: on a GPU, or in Numba's
  CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``, which must be set before
  numba is imported);
* without a GPU and outside the simulator, ``test_under_simulator`` runs
  this file again in a subprocess with the simulator on, so the rest of
  the suite keeps the real numba.cuda;
* PTX compilation of the generated kernels and device functions (no GPU
  needed, only libNVVM): the simulator runs kernels as Python and accepts
  code a GPU cannot compile; compiling to PTX checks that it really can.
"""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import s2s_ad as ad
from s2s_ad.errors import UnsupportedSyntaxError

sys.path.insert(0, str(Path(__file__).parent))
from cuda_support import RUNS, nvvm, ptx_only, runs  # noqa: E402,F401
from programs.cuda_seeds import (  # noqa: E402
    lotka_volterra,
    mlp_loss,
    ode_adaptive,
    ode_directional,
    ode_hvp,
    ode_loss,
    ode_until,
    softplus_sum,
    sorts,
    td_loss,
)

rng = np.random.default_rng(7)
B = 6                        # the simulator runs a Python thread per CUDA thread


def _td_data(d=3):
    return (rng.standard_normal(d), rng.standard_normal((B, d)), rng.standard_normal(B),
            rng.standard_normal((B, d)))


def _close(a, b, tol=1e-10):
    for x, y in zip(*(ad.pytree.flatten(v)[0] for v in (a, b))):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=tol, atol=tol)


def _both(fun, in_axes, *args):
    gpu = ad.jit(ad.vmap(fun, in_axes=in_axes), target="cuda")(*args)
    cpu = ad.jit(ad.vmap(fun, in_axes=in_axes))(*args)
    _close(gpu, cpu)
    return gpu


@runs
def test_td0_per_sample_grad_equals_cpu_and_closed_form():
    theta, s_t, r, s_tp1 = _td_data()
    g = _both(ad.grad(td_loss), (None, 0, 0, 0), theta, s_t, r, s_tp1)
    delta = r + s_tp1 @ theta - s_t @ theta
    np.testing.assert_allclose(g, -2.0 * delta[:, None] * s_t, rtol=1e-12, atol=1e-12)
    assert g.shape == (B, 3) and isinstance(g, np.ndarray)


@runs
def test_mlp_per_example_grads_equal_cpu():
    W1, b1, w2 = rng.standard_normal(6), rng.standard_normal(3), rng.standard_normal(3)
    X, Y = rng.standard_normal((B, 2)), rng.standard_normal(B)
    grads = _both(ad.grad(mlp_loss, argnums=(0, 1, 2, 3)), (None, None, None, None, 0, 0),
                  W1, b1, w2, 0.3, X, Y)
    assert [np.shape(g) for g in grads] == [(B, 6), (B, 3), (B, 3), (B,)]


@runs
def test_rk4_sensitivities_equal_cpu_and_finite_differences():
    theta = 1.0 + 0.1 * rng.random((4, 4))
    state0 = 1.0 + 0.2 * rng.random((4, 2))
    gt, gs = _both(ad.grad(ode_loss, argnums=(0, 1)), (0, 0, None, None),
                   theta, state0, 0.05, 40)
    eps = 1e-6
    for k in range(4):
        e = np.zeros(4)
        e[k] = eps
        fd = (ode_loss(theta[1] + e, state0[1], 0.05, 40)
              - ode_loss(theta[1] - e, state0[1], 0.05, 40)) / (2 * eps)
        assert abs(gt[1, k] - fd) < 1e-6 * max(1.0, abs(fd))
    assert gs.shape == (4, 2)


@runs
def test_tape_grows_with_the_trip_count():
    f = ad.jit(ad.vmap(ad.grad(ode_loss), in_axes=(0, 0, None, None)), target="cuda")
    cpu = ad.jit(ad.vmap(ad.grad(ode_loss), in_axes=(0, 0, None, None)))
    theta = 1.0 + 0.1 * rng.random((3, 4))
    state0 = 1.0 + 0.2 * rng.random((3, 2))
    for n in (5, 30):
        _close(f(theta, state0, 0.02, n), cpu(theta, state0, 0.02, n))


def _fd(fun, args, k, eps=1e-6):
    """Central difference of ``fun`` along element ``k`` of its first argument."""
    e = np.zeros_like(args[0])
    e[k] = eps
    return (fun(args[0] + e, *args[1:]) - fun(args[0] - e, *args[1:])) / (2 * eps)


def _halved_steps(theta, state0, h, n):
    """How many steps of ode_adaptive take the branch (a plain re-run)."""
    x, y, count = state0[0], state0[1], 0
    for _ in range(n):
        k1x, k1y = lotka_volterra(x, y, theta)
        k2x, k2y = lotka_volterra(x + 0.5 * h * k1x, y + 0.5 * h * k1y, theta)
        k3x, k3y = lotka_volterra(x + 0.5 * h * k2x, y + 0.5 * h * k2y, theta)
        k4x, k4y = lotka_volterra(x + h * k3x, y + h * k3y, theta)
        big = abs(k4x - k1x) + abs(k4y - k1y) > 0.25
        count += big
        step = 0.5 * h if big else h
        x = x + step / 6.0 * (k1x + 2.0 * k2x + 2.0 * k3x + k4x)
        y = y + step / 6.0 * (k1y + 2.0 * k2y + 2.0 * k3y + k4y)
    return count


@runs
def test_branch_inside_loop_under_grad_equals_cpu_and_finite_differences():
    r = np.random.default_rng(1)
    theta, state0 = 1 + 0.1 * r.random((B, 4)), 0.3 + 2 * r.random((B, 2))
    taken = [_halved_steps(theta[b], state0[b], 0.2, 20) for b in range(B)]
    assert 0 < sum(taken) < 20 * B and len(set(taken)) > 2     # both branches, per example
    gt, gs, gh = _both(ad.grad(ode_adaptive, argnums=(0, 1, 2)), (0, 0, None, None),
                       theta, state0, 0.2, 20)
    assert gh.shape == (B,)
    for b in (0, 2):
        for k in range(4):
            fd = _fd(ode_adaptive, (theta[b], state0[b], 0.2, 20), k)
            assert abs(gt[b, k] - fd) < 1e-5 * max(1.0, abs(fd))


@runs
def test_while_loop_under_grad_equals_cpu_and_finite_differences():
    r = np.random.default_rng(2)
    theta, state0 = 1 + 0.1 * r.random((B, 4)), 0.5 + r.random((B, 2))
    t_end = np.linspace(0.1, 0.6, B)                # trip counts differ per example
    gt, gs = _both(ad.grad(ode_until, argnums=(0, 1)), (0, 0, None, 0),
                   theta, state0, 0.05, t_end)
    for k in range(4):
        fd = _fd(ode_until, (theta[3], state0[3], 0.05, t_end[3]), k)
        assert abs(gt[3, k] - fd) < 1e-5 * max(1.0, abs(fd))
    # a longer loop than the kernel has seen: the stacks grow on the next call
    f = ad.jit(ad.vmap(ad.grad(ode_until), in_axes=(0, 0, None, 0)), target="cuda")
    cpu = ad.jit(ad.vmap(ad.grad(ode_until), in_axes=(0, 0, None, 0)))
    for scale in (1.0, 3.0):
        _close(f(theta, state0, 0.05, scale * t_end), cpu(theta, state0, 0.05, scale * t_end))


@runs
def test_per_example_jacobians_equal_cpu_and_finite_differences():
    r = np.random.default_rng(3)
    theta, state0 = 1 + 0.1 * r.random((3, 4)), 1 + 0.2 * r.random((3, 2))
    args, axes = (theta, state0, 0.05, 12), (0, 0, None, None)
    jf = _both(ad.jacfwd(ode_loss), axes, *args)
    jr_theta, jr_state = _both(ad.jacrev(ode_loss, argnums=(0, 1)), axes, *args)
    hess = _both(ad.hessian(ode_loss), axes, *args)
    assert jf.shape == (3, 4) and jr_state.shape == (3, 2) and hess.shape == (3, 4, 4)
    np.testing.assert_allclose(jf, jr_theta, rtol=1e-10)
    grad = ad.jit(ad.grad(ode_loss))
    for k in range(4):
        e = np.zeros(4)
        e[k] = 1e-5
        fd = (grad(theta[1] + e, state0[1], 0.05, 12) - grad(theta[1] - e, state0[1], 0.05, 12))
        np.testing.assert_allclose(hess[1, :, k], fd / 2e-5, rtol=1e-5, atol=1e-7)
    # a vector function: every output row
    x = r.random((B, 2))
    for jac in (ad.jacfwd, ad.jacrev):
        j = _both(jac(_pair), (0, None), x, 0.7)
        np.testing.assert_allclose(j[1], np.stack([x[:, 1] ** 2, 2 * x[:, 0] * x[:, 1]], 1),
                                   rtol=1e-12)


def _pair(x, w):
    return np.sin(x[0] * w) * x[1], x[0] * x[1] ** 2


@runs
def test_jvp_inside_the_per_example_function_equals_cpu():
    r = np.random.default_rng(4)
    theta, state0, d = 1 + 0.1 * r.random((3, 4)), 1 + 0.2 * r.random((3, 2)), r.random((3, 4))
    out, tangent = _both(ode_directional, (0, 0, 0, None, None), theta, state0, d, 0.05, 12)
    g = ad.jit(ad.vmap(ad.grad(ode_loss), in_axes=(0, 0, None, None)))(theta, state0, 0.05, 12)
    np.testing.assert_allclose(tangent, np.sum(g * d, axis=1), rtol=1e-10)


@runs
def test_hvp_inside_the_per_example_function_equals_the_batched_hessian():
    # (tests/test_cuda_nested.py: the other transforms inside, and finite differences)
    theta, state0, v = 1 + 0.1 * rng.random((2, 4)), rng.random((2, 2)), rng.random((2, 4))
    hv = ad.jit(ad.vmap(ode_hvp, in_axes=(0, 0, 0, None, None)), target="cuda")(
        theta, state0, v, 0.05, 3)
    # the CPU path on the NumPy backend (its Numba compile is slow for this one)
    _close(hv, ad.vmap(ode_hvp, in_axes=(0, 0, 0, None, None))(theta, state0, v, 0.05, 3))
    hess = ad.jit(ad.vmap(ad.hessian(ode_loss), in_axes=(0, 0, None, None)), target="cuda")(
        theta, state0, 0.05, 3)
    np.testing.assert_allclose(hv, np.einsum("bij,bj->bi", hess, v), rtol=1e-10)


@runs
def test_value_and_grad_and_primal_equal_cpu():
    x = rng.random((B, 2))
    _both(ad.value_and_grad(softplus_sum, argnums=(0, 1)), (0, None), x, 0.7)
    _both(softplus_sum, (0, None), x, 0.7)
    _both(ode_loss, (0, 0, None, None), 1 + 0.1 * rng.random((3, 4)),
          1 + 0.1 * rng.random((3, 2)), 0.01, 10)


@runs
def test_float32_in_float32_out():
    theta, s_t, r, s_tp1 = (a.astype(np.float32) for a in _td_data())
    g = ad.jit(ad.vmap(ad.grad(td_loss), in_axes=(None, 0, 0, 0)), target="cuda")(
        theta, s_t, r, s_tp1)
    assert g.dtype == np.float32


@runs
def test_device_arrays_in_device_arrays_out():
    from numba import cuda
    theta, s_t, r, s_tp1 = _td_data()
    f = ad.jit(ad.vmap(ad.grad(td_loss), in_axes=(None, 0, 0, 0)), target="cuda")
    out = f(cuda.to_device(theta), cuda.to_device(s_t), cuda.to_device(r),
            cuda.to_device(s_tp1))
    assert hasattr(out, "copy_to_host")
    np.testing.assert_allclose(out.copy_to_host(), f(theta, s_t, r, s_tp1), rtol=1e-14)


@runs
def test_body_a_thread_cannot_run_names_the_users_line():
    f = ad.jit(ad.vmap(ad.grad(sorts)), target="cuda")
    with pytest.raises(UnsupportedSyntaxError, match="cuda") as info:
        f(rng.random((3, 40)))
    assert "cuda_seeds.py" in str(info.value)


def test_source_shows_kernel_and_device_functions(request):
    theta, s_t, r, s_tp1 = _td_data()
    f = ad.jit(ad.vmap(ad.grad(td_loss), in_axes=(None, 0, 0, 0)), target="cuda")
    assert "generated on the first call" in ad.source(f)
    if not RUNS:
        request.getfixturevalue("nvvm")
        f.compile_ptx(theta, s_t, r, s_tp1)      # builds the kernel without launching it
    else:
        f(theta, s_t, r, s_tp1)
    text = ad.source(f)
    assert "@cuda.jit\ndef vmap_kernel(" in text and "cuda.gridsize(1)" in text
    assert "@cuda.jit(device=True)\ndef grad_td_loss(" in text
    assert "# v_t = np.dot(theta, s_t)  [line" in text


def test_show_target_cuda_prints_kernel_and_device_functions(capsys):
    from s2s_ad import cli
    seeds = str(Path(__file__).parent / "programs" / "cuda_seeds.py")
    assert cli.main(["show", f"{seeds}:ode_until", "--target", "cuda", "--in-axes",
                     "0,0,None,0", "--args", "float64[4]", "float64[2]", "float64",
                     "float64"]) == 0
    out = capsys.readouterr().out
    assert "def vmap_kernel(" in out and "@cuda.jit(device=True)\ndef grad_ode_until(" in out
    assert "rtd.push(" in out and "rtd.pop_as(" in out            # the while loop's stacks
    assert cli.main(["show", f"{seeds}:ode_loss", "--mode", "hessian", "--target", "cuda",
                     "--in-axes", "0,0,None,None", "--args", "float64[4]", "float64[2]",
                     "float64", "int64"]) == 0
    assert "Hessian-vector product" in capsys.readouterr().out
    assert cli.main(["show", f"{seeds}:td_loss", "--mode", "vmap", "--target", "cuda"]) == 1
    assert "--args" in capsys.readouterr().err


@pytest.mark.skipif(RUNS, reason="kernels can run here")
def test_without_a_gpu_says_what_to_install():
    theta, s_t, r, s_tp1 = _td_data()
    f = ad.jit(ad.vmap(ad.grad(td_loss), in_axes=(None, 0, 0, 0)), target="cuda")
    with pytest.raises(RuntimeError, match=r"s2s_ad\[cuda\].*NUMBA_ENABLE_CUDASIM=1"):
        f(theta, s_t, r, s_tp1)


def test_cuda_needs_a_vmap():
    with pytest.raises(ValueError, match="vmap"):
        ad.jit(ad.grad(td_loss), target="cuda")(*[x[0] if np.ndim(x) > 1 else x
                                                  for x in _td_data()])


# -- PTX: what the GPU compiles -------------------------------------------------
@ptx_only
@pytest.mark.usefixtures("nvvm")
@pytest.mark.parametrize("case", ["td0", "mlp", "rk4", "softplus", "adaptive", "while",
                                  "jacfwd", "jacrev", "hessian", "jvp"])
def test_kernels_compile_to_ptx(case):
    if case == "td0":
        f = ad.vmap(ad.grad(td_loss), in_axes=(None, 0, 0, 0))
        args = _td_data(8)
    elif case == "mlp":
        f = ad.vmap(ad.grad(mlp_loss, argnums=(0, 1, 2, 3)), in_axes=(None,) * 4 + (0, 0))
        args = (rng.random(6), rng.random(3), rng.random(3), 0.3, rng.random((B, 2)),
                rng.random(B))
    elif case == "rk4":
        f = ad.vmap(ad.grad(ode_loss, argnums=(0, 1)), in_axes=(0, 0, None, None))
        args = (rng.random((B, 4)), rng.random((B, 2)), 0.01, 100)
    elif case in ("jacfwd", "jacrev", "hessian"):
        f = ad.vmap(getattr(ad, case)(ode_loss), in_axes=(0, 0, None, None))
        args = (rng.random((B, 4)), rng.random((B, 2)), 0.01, 10)
    elif case == "jvp":
        f = ad.vmap(ode_directional, in_axes=(0, 0, 0, None, None))
        args = (rng.random((B, 4)), rng.random((B, 2)), rng.random((B, 4)), 0.01, 10)
    elif case == "adaptive":
        f = ad.vmap(ad.grad(ode_adaptive, argnums=(0, 1, 2)), in_axes=(0, 0, None, None))
        args = (rng.random((B, 4)), rng.random((B, 2)), 0.2, 20)
    elif case == "while":
        f = ad.vmap(ad.grad(ode_until, argnums=(0, 1)), in_axes=(0, 0, None, 0))
        args = (rng.random((B, 4)), rng.random((B, 2)), 0.05, rng.random(B))
    else:
        f = ad.vmap(ad.value_and_grad(softplus_sum, argnums=(0, 1)), in_axes=(0, None))
        args = (rng.random((B, 2)), 0.7)
    ptx = ad.jit(f, target="cuda").compile_ptx(*args)
    assert ".entry" in ptx and "vmap_kernel" in ptx
    assert "malloc" not in ptx            # nothing allocated on the device


# -- the simulator, from a normal run -------------------------------------------
@pytest.mark.skipif(RUNS, reason="kernels already run in this process")
def test_under_simulator():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    # this file and the other CUDA test files, in one process (the simulator is slow to start)
    files = [__file__] + sorted(str(p) for p in Path(__file__).parent.glob("test_cuda_*.py"))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                           *files], env=env, capture_output=True, text=True, timeout=600,
                          cwd=Path(__file__).parent.parent)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "failed" not in proc.stdout and " passed" in proc.stdout


# -- numba-cuda on NumPy 2.5 ------------------------------------------------------------
def test_numba_cuda_loads_its_array_overloads_without_numpys_row_stack():
    """numba-cuda 0.30 registers an overload of np.row_stack at its first compile;
    NumPy 2.5 has no row_stack (every kernel failed to compile on a GPU machine
    with numpy 2.5.2).  s2s_ad loads that module with the alias lent for the import
    and leaves NumPy as it was."""
    import importlib.util
    try:
        found = importlib.util.find_spec("numba.cuda.np.arrayobj") is not None
    except ImportError:
        found = False
    if not found:
        pytest.skip("a numba without numba-cuda's array overloads")
    code = ("import sys\n"
            "import numpy as np\n"
            "from s2s_ad.api.cuda import numba_cuda\n"
            "assert 'numba.cuda.np.arrayobj' not in sys.modules\n"
            "if hasattr(np, 'row_stack'):\n"
            "    del np.row_stack                 # as NumPy 2.5 has it\n"
            "cuda = numba_cuda()\n"
            "assert 'numba.cuda.np.arrayobj' in sys.modules\n"
            "assert not hasattr(np, 'row_stack')\n"
            "assert hasattr(sys.modules['numba.cuda.np.arrayobj'], 'impl_np_vstack')\n"
            "print('ok')\n")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=300, cwd=Path(__file__).parent.parent)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]
