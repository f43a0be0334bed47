"""The runtime's cached kernels are called by symbol (runtime/_nb_link.py).

The overload implementations that call a kernel only declare it, and so does
the generated gradient (or, with S2S_AD_LINK_KERNELS=1, it links each kernel
once); its numbers agree with finite differences; the next process runs the
gradient from disk; a kernel saved with calls to other kernels whose load
records are gone is compiled again, not run (MCJIT would abort the process
on an unresolved symbol).
"""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
from s2s_ad.runtime import _nb_kernels, _nb_link

import s2s_ad as ad
from s2s_ad import testing

ROOT = Path(__file__).resolve().parent.parent
LOSS = textwrap.dedent("""
    import numpy as np

    def loss(W, x):
        h = np.tanh(x @ W)
        return np.sum(np.exp(h) * h) + np.log(np.sum(h * h, axis=0)).sum()
""")


def _inputs():
    rng = np.random.default_rng(3)
    return rng.normal(size=(4, 3)), rng.normal(size=(5, 4))


def _reference(loss):
    """The NumPy gradient, itself checked against central finite differences."""
    return testing.check_grad(loss, _inputs())


def _loss(folder):
    folder.mkdir(exist_ok=True)
    (folder / "linked_loss.py").write_text(LOSS)
    sys.path.insert(0, str(folder))
    try:
        import linked_loss
    finally:
        sys.path.pop(0)
    return linked_loss.loss


def _compiled(loss):
    g = ad.jit(ad.grad(loss), compile="eager")
    np.testing.assert_allclose(g(*_inputs()), _reference(loss), rtol=1e-12, atol=1e-14)
    st = g._last
    top = [cres.library for name in st.module.defined
           for cres in getattr(st.compiled, name).overloads.values()]
    products = {cres.library for cres in _nb_kernels.dot.overloads.values()}
    linked = [lib for library in top for lib in library._linking_libraries]
    return top, products, linked


def test_the_gradient_calls_each_kernel_by_symbol_and_so_do_its_callees(tmp_path):
    assert _nb_link.PATCHED and not _nb_link.LINK_KERNELS
    top, products, linked = _compiled(_loss(tmp_path / "src"))
    # the implementations calling the product kernel are linked into the
    # gradient; none of them, nor the gradient, links the kernel's code
    assert linked
    assert not products & set(linked)
    for library in linked:
        assert not products & set(library._linking_libraries)
    # the gradient remembers the kernels it calls (what its cache entry names
    # for the next process to load first), and its module only declares them
    assert products & {k for library in top for k in library._s2s_kernels}
    symbols = {cres.fndesc.mangled_name for cres in _nb_kernels.dot.overloads.values()}
    declared = {fn.name for library in top for fn in library._final_module.functions
                if fn.is_declaration}
    assert symbols & declared
    assert all(_nb_link._lookup(symbol) is not None for symbol in symbols)


def test_linked_once_by_the_outermost_compile_on_request(tmp_path, monkeypatch):
    # S2S_AD_LINK_KERNELS=1: session 19's behaviour, each kernel linked once
    monkeypatch.setattr(_nb_link, "LINK_KERNELS", True)
    top, products, linked = _compiled(_loss(tmp_path / "src"))
    assert products & set(linked), "the product kernel is not linked by the gradient"
    callers = [lib for lib in linked if lib not in products]
    assert callers
    for library in callers:
        assert not products & set(library._linking_libraries)


def test_a_cache_entry_names_how_many_kernels_it_calls():
    assert _nb_link.declared_kernels(b"..grad_f [calls 12 s2s_ad kernels]..") == 12
    assert _nb_link.declared_kernels(b"..grad_f..") == 0


SCRIPT = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, sys.argv[1])
    import numpy as np
    import s2s_ad as ad
    from s2s_ad.runtime import _nb_link
    stale = []
    if sys.argv[2] == "forget":     # the kernels' load records are gone
        _nb_link._lookup = lambda symbol: None
        load = _nb_link._load_callees
        def counted(library):
            try:
                return load(library)
            except _nb_link.StaleEntry as exc:
                stale.append(str(exc))
                raise
        _nb_link._load_callees = counted
    import linked_loss
    rng = np.random.default_rng(3)
    W, x = rng.normal(size=(4, 3)), rng.normal(size=(5, 4))
    g = ad.jit(ad.grad(linked_loss.loss), compile="eager")
    grad = g(W, x)
    st = g._last
    stats = [getattr(st.compiled, name).stats for name in st.module.defined]
    print(json.dumps({"grad": grad.tolist(), "stale": len(stale),
                      "hits": sum(sum(s.cache_hits.values()) for s in stats),
                      "misses": sum(sum(s.cache_misses.values()) for s in stats)}))
""")


def _run(cache, src, mode):
    # at the default optimisation level: at -O0 Numba leaves dead dynamic globals
    # in the module and refuses to cache any generated gradient
    env = dict(os.environ, S2S_AD_CACHE_DIR=str(cache),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(src), mode], env=env,
                          capture_output=True, text=True, timeout=300, cwd=ROOT, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_next_process_runs_from_disk_and_stale_kernels_are_compiled_again(tmp_path):
    src = tmp_path / "src"
    loss = _loss(src)
    first = _run(tmp_path / "cache", src, "plain")
    assert first["misses"] >= 1
    np.testing.assert_allclose(first["grad"], _reference(loss), rtol=1e-12, atol=1e-14)
    warm = _run(tmp_path / "cache", src, "plain")
    assert warm["hits"] >= 1 and warm["misses"] == 0
    np.testing.assert_array_equal(warm["grad"], first["grad"])
    # A fresh cache: the gradient is compiled, loading the runtime's kernels from
    # Numba's cache; those saved with declared calls of other kernels cannot be
    # loaded without their records, so they are compiled again (and the process
    # is not aborted).
    again = _run(tmp_path / "fresh", src, "forget")
    assert again["stale"] >= 1
    np.testing.assert_allclose(again["grad"], first["grad"], rtol=1e-13, atol=1e-15)
