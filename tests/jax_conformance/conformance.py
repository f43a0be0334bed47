"""The JAX conformance corpus: JAX's documentation and tests, run by JAX and by s2s_ad.

Each case file in this folder is JAX code, as JAX's docs write it
(``import jax.numpy as jnp``, ``from jax import grad``), ending in a list
``CASES`` of :func:`case` entries: an expression to evaluate.  The harness
imports the file as it is (JAX computes the reference, in float64) and
translated the way a JAX user ports code (:func:`translate`: ``jnp`` ->
``np``, ``jax`` -> ``ad``...), written to a real file since s2s_ad reads
source, and evaluates the translated expression under each lowering
(:data:`LOWERINGS`): as written, under ``ad.jit`` (the compiled module run
on NumPy, and compiled by Numba), and with every ``vmap`` in the expression
forced to ``method="loop"`` and ``method="vectorize"``.  Every result must
equal JAX's: same structure, same kind of number (complex stays complex),
values within :data:`TOL`.

Where s2s_ad deliberately differs from JAX the case says so:
``reference=`` names a JAX expression that computes what the Python code
means when JAX cannot run it as written (a value-dependent ``if`` under
``jit``, a reverse-mode ``while``), and ``refused=`` an error type s2s_ad
raises on purpose, with ``why=`` the documented reason.  ``raises=`` is bad
input both reject with that error type (a non-scalar ``grad``, a batch size
mismatch).
"""
import ast
import dataclasses
import importlib.util
import re
import sys
from typing import Any

import numpy as np

#: (rtol, atol): the same algebra in float64 in another order (XLA's
#: transcendental functions are not NumPy's), so only rounding separates them.
TOL = (1e-9, 1e-11)

#: Names a JAX user calls transforms by (bare or as ``jax.NAME``).
TRANSFORMS = {"grad", "value_and_grad", "jacfwd", "jacrev", "jacobian", "hessian", "vmap",
              "jit", "jvp", "vjp", "linearize", "hvp"}
#: Transforms called as ``T(f, primals, ...)``: their first argument is the function.
APPLIED = {"jvp", "vjp", "linearize", "hvp"}

#: Mechanical port of JAX code, in order (what a JAX user's search-and-replace does).
_PORT = [
    (r"^import jax\.numpy as jnp$", "import numpy as np"),
    (r"^import jax\.scipy\.special$", "import scipy.special"),
    (r"^import jax\.scipy\.stats$", "import scipy.stats"),
    (r"^import jax\.scipy\.special as (\w+)$", r"import scipy.special as \1"),
    (r"^from jax\.scipy\.special import ", "from scipy.special import "),
    (r"^from jax\.scipy\.stats import ", "from scipy.stats import "),
    (r"^from jax\.lax import stop_gradient$", "from s2s_ad import stop_gradient"),
    (r"^from jax import ", "from s2s_ad import "),
    (r"^import jax$", "import s2s_ad as ad"),
    (r"^jax\.config\.update\(.*\)$", ""),
    (r"\bjax\.scipy\.", "scipy."),
    (r"\bjax\.lax\.stop_gradient\b", "ad.stop_gradient"),
    (r"\bjax\.", "ad."),
    (r"\bjnp\.", "np."),
    (r"\.block_until_ready\(\)", ""),
]


def translate(text):
    """``text`` (JAX code) as s2s_ad code, by the search-and-replace of :data:`_PORT`."""
    for pattern, repl in _PORT:
        text = re.sub(pattern, repl, text, flags=re.M)
    if "scipy." in text and not re.search(r"^import scipy", text, re.M):
        text = "import scipy.special\nimport scipy.stats\n" + text
    return text


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    expr: str                  # JAX code; translated for s2s_ad
    reference: str = ""        # JAX expression for the expected value, if not expr itself
    refused: Any = None        # error type s2s_ad raises on purpose (with why=)
    why: str = ""
    tol: tuple = TOL
    lowerings: tuple = ()      # only these (default: every one that applies)
    raises: Any = None         # error type JAX and s2s_ad both raise (bad input)


def case(name, expr, *, reference="", refused=None, why="", tol=TOL, lowerings=(), raises=None):
    if refused is not None and not why:
        raise ValueError(f"case {name}: a refusal needs why=")
    return Case(name, expr, reference, refused, why, tol, tuple(lowerings), raises)


def load(path, tmp_dir):
    """(JAX module, s2s_ad module) of case file ``path``.

    The s2s_ad module is the file ported, written under ``tmp_dir``, with
    one function per case and lowering (:func:`entry`) appended, so that a
    lambda in a case expression has source as s2s_ad needs."""
    import jax
    jax.config.update("jax_enable_x64", True)
    sys.path.insert(0, str(path.parent))
    try:
        reference = _import(f"jaxref_{path.stem}", path)
        lines = [translate(path.read_text()), "", "# The cases, one function per lowering."]
        for c in reference.CASES:
            for lowering in LOWERINGS:
                expr = lowered(translate(c.expr), lowering)
                if expr is not None:
                    lines += ["", "", f"def {entry(c, lowering)}():", f"    return {expr}"]
        ported = tmp_dir / f"ported_{path.stem}.py"
        ported.write_text("\n".join(lines) + "\n")
        try:
            return reference, _import(f"ported_{path.stem}", ported)
        except Exception as error:         # reported by each of the file's cases
            sys.modules.pop(f"ported_{path.stem}", None)
            return reference, error
    finally:
        sys.path.remove(str(path.parent))


def entry(c, lowering):
    """The name of the ported module's function evaluating case ``c`` under ``lowering``."""
    return f"case_{c.name}__" + re.sub(r"\W+", "_", lowering).strip("_")


def _import(name, path):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------- lowerings

def _transform_name(node):
    """The transform a call node's function names (``grad``, ``ad.grad``), or None."""
    if isinstance(node, ast.Name) and node.id in TRANSFORMS:
        return node.id
    if (isinstance(node, ast.Attribute) and node.attr in TRANSFORMS
            and isinstance(node.value, ast.Name) and node.value.id == "ad"):
        return node.attr
    return None


def _jit(node):
    return ast.Call(ast.Attribute(ast.Name("ad", ast.Load()), "jit", ast.Load()), [node], [])


class _Jit(ast.NodeTransformer):
    """Wraps the outermost transformed function of an expression in ``ad.jit``:
    ``grad(f)(x)`` -> ``ad.jit(grad(f))(x)``, ``jvp(f, p, t)`` -> ``jvp(ad.jit(f), p, t)``."""

    def __init__(self):
        self.done = False

    def visit_Call(self, node):
        if self.done:
            return node
        inner = node.func
        if isinstance(inner, ast.Call) and _transform_name(inner.func) not in (None, "jit"):
            self.done = True
            node.func = _jit(inner)
            return node
        if _transform_name(node.func) in APPLIED and node.args:
            self.done = True
            node.args[0] = _jit(node.args[0])
            return node
        return self.generic_visit(node)


class _Method(ast.NodeTransformer):
    """Adds ``method=`` to every ``vmap(...)`` of an expression."""

    def __init__(self, method):
        self.method, self.count = method, 0

    def visit_Call(self, node):
        self.generic_visit(node)
        if _transform_name(node.func) == "vmap":
            self.count += 1
            node.keywords = node.keywords + [ast.keyword("method", ast.Constant(self.method))]
        return node


def lowered(expr, lowering):
    """``expr`` (ported) rewritten for ``lowering``, or None where it does not apply."""
    tree = ast.parse(expr, mode="eval")
    if lowering == "python":
        return expr
    if lowering in ("jit[numpy tier]", "jit"):
        if "jit(" in expr:
            return None
        t = _Jit()
        tree = t.visit(tree)
        return ast.unparse(tree) if t.done else None
    method = lowering.split("=")[1]
    t = _Method(method)
    tree = t.visit(tree)
    return ast.unparse(tree) if t.count else None


#: How each lowering evaluates the rewritten expression: (lowering, runs under).
LOWERINGS = ("python", "jit[numpy tier]", "jit", "vmap method=loop", "vmap method=vectorize")


def evaluate(module, c, lowering):
    """Case ``c`` run by the ported ``module`` under ``lowering``."""
    from s2s_ad.backends import tiers
    run = getattr(module, entry(c, lowering))
    if lowering == "jit[numpy tier]":
        with tiers.numpy_tier():
            return run()
    return run()


# --------------------------------------------------------------- comparison

def plain(value):
    """A result as nested lists/dicts/('NamedTuple', fields) of NumPy arrays."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in sorted(value.items())}
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return (type(value).__name__, {f: plain(getattr(value, f)) for f in value._fields})
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    if value is None:
        return None
    return np.asarray(value)


def mismatch(got, want, tol, where="result"):
    """A sentence saying how ``got`` differs from ``want`` (both :func:`plain`), or ''."""
    if isinstance(want, dict) or isinstance(got, dict):
        if not (isinstance(want, dict) and isinstance(got, dict)) or want.keys() != got.keys():
            return f"{where}: structure {_shape_of(got)} where JAX gives {_shape_of(want)}"
        return next((m for k in want if (m := mismatch(got[k], want[k], tol, f"{where}[{k!r}]"))),
                    "")
    if isinstance(want, tuple) or isinstance(got, tuple):
        if not (isinstance(want, tuple) and isinstance(got, tuple)) or want[0] != got[0]:
            return f"{where}: {_shape_of(got)} where JAX gives {_shape_of(want)}"
        return mismatch(got[1], want[1], tol, where)
    if isinstance(want, list) or isinstance(got, list):
        if not (isinstance(want, list) and isinstance(got, list)) or len(want) != len(got):
            return f"{where}: structure {_shape_of(got)} where JAX gives {_shape_of(want)}"
        return next((m for i, (g, w) in enumerate(zip(got, want))
                     if (m := mismatch(g, w, tol, f"{where}[{i}]"))), "")
    if want is None or got is None:
        return "" if want is got else f"{where}: {_shape_of(got)} where JAX gives {_shape_of(want)}"
    if got.shape != want.shape:
        return f"{where}: shape {got.shape} where JAX gives {want.shape}"
    if np.iscomplexobj(want) != np.iscomplexobj(got):
        return f"{where}: dtype {got.dtype} where JAX gives {want.dtype}"
    rtol, atol = tol
    scale = float(np.max(np.abs(want))) if want.size and np.all(np.isfinite(want)) else 0.0
    ok = np.isclose(got, want, rtol=rtol, atol=atol * (1.0 + scale), equal_nan=True)
    if not np.all(ok):
        return f"{where}: {np.array2string(got, precision=12)} where JAX gives " \
               f"{np.array2string(want, precision=12)}"
    return ""


def _shape_of(v):
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k!r}: {_shape_of(x)}" for k, x in v.items()) + "}"
    if isinstance(v, tuple):
        return v[0] + _shape_of(v[1])
    if isinstance(v, list):
        return "[" + ", ".join(_shape_of(x) for x in v) + "]"
    if v is None:
        return "None"
    return f"array{v.shape}"
