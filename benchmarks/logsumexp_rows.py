"""Workload: the gradient of a row-wise logsumexp, jitted against NumPy.

f(X) = sum over the rows of X of logsumexp(row), for a 1000 x 100 float64
matrix, written the numerically stable way.  Its gradient is the row-wise
softmax of X; the hand-written gradient is checked against the vectorised
softmax before anything is timed.

Array-level code: Numba's scalar ``exp`` is ~4x slower than NumPy's SIMD one
on this build, so the generated source may run faster on NumPy than under
Numba.  Targets: ``ad.jit(ad.grad(f))`` at most 2x ``ad.jit(f)``, and no
slower than the same generated source on NumPy (``ad.grad(f)``).

Run alone: ``python -m benchmarks.logsumexp_rows [--quick] [--breakdown]``
(the suite's table for this workload; ``--breakdown`` then times every
statement of the generated gradient on its own, in NumPy and in Numba).
"""
import argparse
import ast
import time

import numba
import numpy as np

import s2s_ad as ad

from . import core

NAME = "logsumexp_rows"
SIZES = {"full": (1000, 100), "tiny": (20, 10)}


def logsumexp_rows(X):
    m = np.max(X, axis=1, keepdims=True)
    s = np.sum(np.exp(X - m), axis=1)
    return np.sum(np.log(s)) + np.sum(m)


def softmax_rows(X):
    """The analytic gradient of logsumexp_rows: softmax of each row."""
    e = np.exp(X - X.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@numba.njit
def _hand_grad(X):
    """Row by row: max, exponentials (kept in the output), scale by 1/sum."""
    n, m = X.shape
    G = np.empty_like(X)
    for i in range(n):
        mx = X[i, 0]
        for j in range(1, m):
            mx = max(mx, X[i, j])
        s = 0.0
        for j in range(m):
            e = np.exp(X[i, j] - mx)
            G[i, j] = e
            s += e
        inv = 1.0 / s
        for j in range(m):
            G[i, j] *= inv
    return G


def oracle(args, grads):
    return core.compare(grads, softmax_rows(args[0]))


# -- peers --------------------------------------------------------------------

def jax_as_written(args):
    jax, jnp, _ = core.load_jax()
    grad = jax.jit(jax.grad(core.rebind(logsumexp_rows, np=jnp)))
    return core.Impl("jax", lambda X: core.jax_ready(grad(X)), (jnp.asarray(args[0]),),
                     note="the user's function on jax.numpy")


def torch_eager(args):
    torch = core.load_torch()

    def logsumexp_rows_t(X):
        m = torch.amax(X, dim=1, keepdim=True)
        s = torch.sum(torch.exp(X - m), dim=1)
        return torch.sum(torch.log(s)) + torch.sum(m)

    def grad(X):
        return torch.autograd.grad(logsumexp_rows_t(X), X)[0]

    return core.Impl("torch", grad, (torch.from_numpy(args[0].copy()).requires_grad_(),),
                     note="the user's code, torch.amax/sum(dim=)")


def autograd_hips(args):
    autograd, anp = core.load_autograd()
    return core.Impl("autograd", autograd.grad(core.rebind(logsumexp_rows, np=anp)), args,
                     note="the user's function on autograd.numpy")


def build(size="full"):
    shape = SIZES[size]
    X = np.random.default_rng(0).standard_normal(shape)
    return core.Workload(
        name=NAME, title="row-wise logsumexp, array code", size=f"{shape[0]}x{shape[1]}",
        args=(X,), argnums=0, primal=logsumexp_rows, numba_primal=ad.jit(logsumexp_rows),
        numba_note="numba.njit cannot compile np.max(..., axis=1, keepdims=True): the Numba "
                   "primal is ad.jit(f), the same function on s2s_ad's runtime",
        hand_grad=_hand_grad, oracle=oracle,
        oracle_name="analytic row-wise softmax", oracle_tol=1e-12,
        peers={"jax": jax_as_written, "torch": torch_eager, "autograd": autograd_hips},
        targets=[core.Target("s2s_ad", "numba", 2.0), core.Target("s2s_ad", "s2s_ad_py", 1.0)])


# -- where the time goes ------------------------------------------------------

def _entry_body(source):
    """The statements of the entry function of a generated module."""
    tree = ast.parse(source)
    return tree, [node for node in tree.body if isinstance(node, ast.FunctionDef)][-1]


def _loaded_names(node):
    return sorted({n.id for n in ast.walk(node)
                   if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)})


def _stored_names(stmt):
    """The names an assignment (``x = ...``, ``a, b = ...``, ``x += ...``) binds."""
    target = stmt.target if isinstance(stmt, ast.AugAssign) else stmt.targets[0]
    return [t.id for t in target.elts] if isinstance(target, ast.Tuple) else [target.id]


def _statement_function(stmt, env):
    """``def one(<inputs>): <stmt>; return <outputs>`` for one statement."""
    inputs = [name for name in _loaded_names(stmt) if name in env]
    if isinstance(stmt, ast.AugAssign):     # ``x += y`` reads x too
        inputs = [stmt.target.id] + [n for n in inputs if n != stmt.target.id]
    if isinstance(stmt, ast.Return):
        body = [ast.Return(stmt.value)]
    else:
        outputs = _stored_names(stmt)
        body = [stmt, ast.Return(ast.Tuple([ast.Name(o, ast.Load()) for o in outputs],
                                           ast.Load()))]
    fn = ast.FunctionDef(name="one", args=ast.arguments(
        posonlyargs=[], args=[ast.arg(i) for i in inputs], kwonlyargs=[], kw_defaults=[],
        defaults=[]), body=body, decorator_list=[], returns=None, type_params=[])
    return ast.unparse(ast.fix_missing_locations(fn)), inputs


def _best_of(fn, args, number, repeat):
    fn(*args)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn(*args)
        best = min(best, (time.perf_counter() - start) / number)
    return best


def breakdown(X, number=20, repeat=15):
    """Time each statement of the generated gradient, in NumPy and in Numba.

    The gradient's source (``ad.source``) is run statement by statement to
    record every intermediate value; each statement is then wrapped in a
    function of its inputs and timed as plain Python/NumPy and compiled with
    ``numba.njit``.  Per-call overhead of a wrapper (a few hundred ns in
    Numba for boxing arrays) is included in each row.
    """
    import numba

    source = ad.source(ad.grad(logsumexp_rows), X)
    tree, entry = _entry_body(source)
    # Run the module's imports, then build each statement's function: the
    # point is to time the generated text itself.
    scope = {}
    imports = ast.Module([n for n in tree.body if not isinstance(n, ast.FunctionDef)], [])
    exec(compile(imports, "<generated>", "exec"), scope)  # noqa: S102
    env = {entry.args.args[0].arg: X}
    rows = []
    for stmt in entry.body:
        text, inputs = _statement_function(stmt, env)
        namespace = dict(scope)
        exec(text, namespace)  # noqa: S102
        plain = namespace["one"]
        args = [env[i] for i in inputs]
        result = plain(*args)
        if not isinstance(stmt, ast.Return):
            env.update(zip(_stored_names(stmt), result))
        jitted = numba.njit(plain)
        rows.append((ast.unparse(stmt), _best_of(plain, args, number, repeat),
                     _best_of(jitted, args, number, repeat)))
    print(f"\nwhere the time goes: each statement of grad_{logsumexp_rows.__name__} on its own "
          f"(best of {repeat} x {number}, microseconds)")
    print(f"{'numpy':>8} {'numba':>8} {'numba/numpy':>11}  statement")
    for text, t_np, t_nb in rows:
        print(f"{t_np * 1e6:8.1f} {t_nb * 1e6:8.1f} {t_nb / t_np:11.2f}  {text}")
    total_np = sum(r[1] for r in rows)
    total_nb = sum(r[2] for r in rows)
    print(f"{total_np * 1e6:8.1f} {total_nb * 1e6:8.1f} {total_nb / total_np:11.2f}  total")
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.logsumexp_rows",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run)")
    parser.add_argument("--breakdown", action="store_true",
                        help="time each generated statement even when the targets are met")
    args = parser.parse_args(argv)
    from . import runner
    result = runner.run_suite(["--only", NAME] + (["--quick"] if args.quick else []))
    missed = [t for t in result["workloads"][NAME]["targets"] if t["met"] is False]
    if missed or args.breakdown:
        X = build("full").args[0]
        breakdown(X, *((5, 5) if args.quick else (20, 15)))
    return result


if __name__ == "__main__":
    main()
