"""The package's layers import downward only, and no import cycle exists.

Every ``import`` in ``s2s_ad/`` and ``runtime/`` -- at module level and
inside functions -- is an edge from the importing module to the module it
names.  A name starting with ``_`` is imported only within its own package.  Each module belongs to one layer (:data:`LAYERS`, bottom first); an
edge may point to the same layer or below, never above, and the graph of
modules has no cycle (within a layer too).  There is no list of exceptions.

Run it as a script to print the layers and the import graph::

    python tests/test_layers.py
"""
import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]

#: Bottom first.  A module is in the first layer with a prefix it matches
#: (``s2s_ad.ir`` matches ``s2s_ad.ir`` and ``s2s_ad.ir.names``).
LAYERS = (
    ("base", ("s2s_ad.errors", "s2s_ad._stop", "s2s_ad.ir", "s2s_ad.runtime")),
    ("rules", ("s2s_ad.rules",)),
    ("analyses", ("s2s_ad.analyses",)),
    ("codegen", ("s2s_ad.codegen",)),
    ("frontend", ("s2s_ad.frontend",)),
    ("transforms", ("s2s_ad.transforms",)),
    ("backends", ("s2s_ad.backends",)),
    ("pipeline", ("s2s_ad.pipeline",)),
    ("api", ("s2s_ad.api",)),
    ("tools", ("s2s_ad.testing", "s2s_ad.oracle", "s2s_ad.fuzz", "s2s_ad.bench", "s2s_ad.cli",
               "s2s_ad.__main__", "s2s_ad")),
)


def modules():
    """{module name: path} for every module of the package (runtime/ is s2s_ad.runtime)."""
    out = {}
    for base, prefix in ((ROOT / "s2s_ad", ["s2s_ad"]), (ROOT / "runtime", ["s2s_ad", "runtime"])):
        for path in sorted(base.rglob("*.py")):
            parts = prefix + list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def layer_of(name):
    for i, (_, prefixes) in enumerate(LAYERS):
        if any(name == p or name.startswith(p + ".") for p in prefixes):
            return i
    raise AssertionError(f"module {name} is in no layer: add it to LAYERS in {__file__}")


def edges(mods, missing=None):
    """{(importer, imported): first line} over every import statement; an
    import of an ``s2s_ad`` module that does not exist is added to ``missing``."""
    out = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[:len(base) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module
                # ``from package import submodule`` names the submodule itself.
                targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in mods else source
                           for a in node.names]
            for t in targets:
                if t in mods and t != name:
                    out.setdefault((name, t), node.lineno)
                elif t and t.split(".")[0] == "s2s_ad" and t not in mods and missing is not None:
                    missing.append(f"{path.relative_to(ROOT)}:{node.lineno}: {t}")
    return out


def cycles(mods, graph):
    """The strongly connected components with more than one module (Tarjan)."""
    succ = {m: sorted(b for a, b in graph if a == m) for m in mods}
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in succ[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for m in mods:
        if m not in index:
            visit(m)
    return found


def _where(mods, a, line):
    return f"{mods[a].relative_to(ROOT)}:{line}"


def test_every_module_is_in_a_layer():
    for name in modules():
        layer_of(name)


def test_imports_point_down():
    mods = modules()
    upward = [f"{_where(mods, a, line)}: {a} ({LAYERS[layer_of(a)][0]}) imports {b} "
              f"({LAYERS[layer_of(b)][0]})"
              for (a, b), line in sorted(edges(mods).items()) if layer_of(b) > layer_of(a)]
    assert not upward, "imports that point up a layer:\n" + "\n".join(upward)


def test_every_import_names_a_module_that_exists():
    """A relative import left pointing at a moved module fails only when the
    function holding it runs; this finds it now."""
    missing = []
    edges(modules(), missing)
    assert not missing, "imports of modules that do not exist:\n" + "\n".join(missing)


def test_no_import_cycle():
    mods = modules()
    found = cycles(mods, edges(mods))
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def private_imports(mods):
    """``from X import _name`` where X is in another package than the importer
    (a module's private helpers are its package's business)."""
    out = []
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.ImportFrom) and node.level):
                continue
            base = package.split(".")
            base = base[:len(base) - node.level + 1]
            source = ".".join(base + ([node.module] if node.module else []))
            for a in node.names:
                private = a.name.startswith("_") and not a.name.startswith("__")
                if private and f"{source}.{a.name}" not in mods and \
                        source.split(".")[:2] != name.split(".")[:2]:
                    out.append(f"{path.relative_to(ROOT)}:{node.lineno}: {a.name} from {source}")
    return out


def test_no_private_name_crosses_a_package():
    found = private_imports(modules())
    assert not found, "private names imported from another package:\n" + "\n".join(found)


def test_the_checks_see_an_upward_import_and_a_cycle(tmp_path, monkeypatch):
    """The walker is not blind: a function-local upward import and a cycle are found."""
    pkg = tmp_path / "s2s_ad"
    (pkg / "ir").mkdir(parents=True)
    (pkg / "api").mkdir()
    (tmp_path / "runtime").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "ir" / "__init__.py").write_text("def f():\n    from ..api import core\n")
    (pkg / "api" / "__init__.py").write_text("")
    (pkg / "api" / "core.py").write_text("from . import other\n")
    (pkg / "api" / "other.py").write_text("from .core import x\n")
    (pkg / "api" / "third.py").write_text("from ..ir import _hidden\n")
    (pkg / "api" / "fourth.py").write_text("def f():\n    from ..gone import x\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    mods = modules()
    graph = edges(mods)
    assert ("s2s_ad.ir", "s2s_ad.api.core") in graph
    assert layer_of("s2s_ad.api.core") > layer_of("s2s_ad.ir")
    assert cycles(mods, graph) == [["s2s_ad.api.core", "s2s_ad.api.other"]]
    assert private_imports(mods) == ["s2s_ad/api/third.py:1: _hidden from s2s_ad.ir"]
    missing = []
    edges(mods, missing)
    assert missing == ["s2s_ad/api/fourth.py:2: s2s_ad.gone"]


if __name__ == "__main__":
    mods = modules()
    graph = edges(mods)
    for i, (layer, _) in enumerate(reversed(LAYERS)):
        members = [m for m in mods if layer_of(m) == len(LAYERS) - 1 - i]
        print(f"== {layer} ({len(members)} modules)")
        for m in members:
            below = sorted({b for a, b in graph if a == m})
            print(f"  {m} -> {', '.join(x.removeprefix('s2s_ad.') for x in below) or '-'}")
    bad = [(a, b) for a, b in graph if layer_of(b) > layer_of(a)]
    print(f"{len(mods)} modules, {len(graph)} import edges, {len(bad)} upward, "
          f"{len(cycles(mods, graph))} cycles")
