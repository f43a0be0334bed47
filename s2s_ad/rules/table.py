"""The supported-function table, rendered from the rule registry.

``python -m s2s_ad.rules.table > docs/supported.md`` regenerates the
documentation page; a test checks that the page is up to date.  The page
lists every rule (its names, differentiated operands and derivative, as
declared), then every NumPy/``math`` function of the supported surface that
has no rule, with the reason (:data:`UNSUPPORTED`).

The *surface* (:func:`surface`) is every public NumPy ufunc, every public
``math`` function, the commonly used array functions listed in
:data:`UNSUPPORTED`, and every name a rule is registered under.  The coverage test asserts that each
is either ruled (differentiable or not) or listed in :data:`UNSUPPORTED`,
never both.
"""
import inspect
import math

import numpy as np

from . import RULES, library, lookup
from .registry import ATTRIBUTES, BUILTINS, METHODS, OPERATORS

# -- functions without a rule, and why ---------------------------------------------

# "Off the differentiated path": a call with no rule runs as an opaque call,
# which is fine on values no derivative flows through.
_CUSTOM = "no rule yet: write it from ruled functions, or give it one with @ad.custom_vjp"
_INTEGER = "integer operation; usable off the differentiated path"
_BOOLEAN = ("zero derivative but not declared non-differentiable yet; usable off the "
            "differentiated path")
_DATA = "output shape depends on the data: neither Numba nor reverse mode can type it"


UNSUPPORTED = {
    # NumPy ufuncs
    "np.bitwise_and": _INTEGER, "np.bitwise_count": _INTEGER, "np.bitwise_invert": _INTEGER,
    "np.bitwise_left_shift": _INTEGER, "np.bitwise_not": _INTEGER, "np.bitwise_or": _INTEGER,
    "np.bitwise_right_shift": _INTEGER, "np.bitwise_xor": _INTEGER, "np.invert": _INTEGER,
    "np.left_shift": _INTEGER, "np.right_shift": _INTEGER, "np.gcd": _INTEGER,
    "np.lcm": _INTEGER,
    "np.isnat": "datetime values are not supported",
    "np.signbit": _BOOLEAN,
    "np.nextafter": _BOOLEAN, "np.spacing": _BOOLEAN,
    "np.divmod": "two outputs: use np.floor_divide and np.mod",
    "np.modf": "two outputs: use np.trunc and x - np.trunc(x)",
    "np.frexp": "two outputs (mantissa, integer exponent): no rule",
    # math
    "math.comb": _INTEGER, "math.perm": _INTEGER, "math.factorial": _INTEGER,
    "math.gcd": _INTEGER, "math.lcm": _INTEGER, "math.isqrt": _INTEGER,
    "math.isclose": _BOOLEAN,
    "math.nextafter": _BOOLEAN, "math.ulp": _BOOLEAN,
    "math.frexp": "two outputs (mantissa, integer exponent): no rule",
    "math.modf": "two outputs: use math.trunc and x - math.trunc(x)",
    # commonly used array functions
    "np.vander": _CUSTOM,
    "np.linspace": _BOOLEAN,
    "np.all": _BOOLEAN, "np.any": _BOOLEAN, "np.count_nonzero": _BOOLEAN,
    "np.isclose": _BOOLEAN, "np.allclose": _BOOLEAN, "np.array_equal": _BOOLEAN,
    "np.digitize": _BOOLEAN,
    "np.unique": _DATA, "np.argwhere": _DATA,
    "np.histogram": _DATA,
}



def _scanned(name):
    """Whether :func:`surface` finds ``name`` by scanning NumPy and math."""
    obj = resolve(name)
    return isinstance(obj, np.ufunc) or (name.startswith("math.") and callable(obj))


def resolve(name):
    """The object a dotted ``np.``/``math.`` name denotes, or None."""
    head, *rest = name.split(".")
    obj = {"np": np, "math": math}.get(head)
    for part in rest:
        obj = getattr(obj, part, None)
    return obj


def unsupported_reason(obj):
    """``(name, reason)`` of a callable listed in :data:`UNSUPPORTED`, or None."""
    for name, reason in UNSUPPORTED.items():
        found = resolve(name)
        if found is not None and found is obj:
            return name, reason
    return None


def _rule_of(obj):
    try:
        return lookup(obj)
    except TypeError:       # unhashable
        return None


def surface():
    """Every NumPy/``math`` name the coverage test accounts for."""
    names = {f"np.{n}" for n in dir(np)
             if not n.startswith("_") and isinstance(getattr(np, n), np.ufunc)}
    names |= {f"math.{n}" for n in dir(math)
              if not n.startswith("_") and callable(getattr(math, n))}
    names |= {n for n in UNSUPPORTED if not _scanned(n)}   # common array functions
    names |= {r.name for r in RULES.values() if r.name.startswith(("np.", "math."))}
    names |= {n for rule in RULES.values() for n in other_names(rule)}
    names |= {n for n in library.IMPLEMENTATIONS if n.startswith("np.")}
    return sorted(names)


def classify(name):
    """``"rule"``, ``"nondiff"``, ``"library"``, ``"unsupported"`` or None for a
    surface name."""
    rule = _rule_of(resolve(name))
    if rule is not None:
        return "nondiff" if rule.nondiff else "rule"
    if library.lookup(resolve(name)) is not None:
        return "library"
    return "unsupported" if name in UNSUPPORTED else None


def other_names(rule):
    """The other ``np.``/``math.`` names bound to the rule's function."""
    if rule.obj is None:
        return []
    out = []
    for prefix, module in (("np", np), ("math", math)):
        for n in dir(module):
            full = f"{prefix}.{n}"
            if not n.startswith("_") and full != rule.name and _rule_of(getattr(module, n)) is rule:
                out.append(full)
    return sorted(out)


# -- rendering -------------------------------------------------------------------

_OP_SYMBOL = {"Add": "a + b", "Sub": "a - b", "Mult": "a * b", "Div": "a / b", "Pow": "a ** b",
              "Mod": "a % b", "MatMult": "a @ b", "USub": "-a", "UAdd": "+a",
              "FloorDiv": "a // b", "Lt": "a < b", "LtE": "a <= b", "Gt": "a > b",
              "GtE": "a >= b", "Eq": "a == b", "NotEq": "a != b", "And": "a and b",
              "Or": "a or b", "Not": "not a"}
_SYNTAX = {"getitem": "x[index]", "setitem": "x[index] = value", "dtype": "x.dtype"}
_INTERNAL = {"copy": "emitted by the compiler where branches and loops join values"}
# What a backend cannot do with a rule (it says so when compiling).
_BACKEND = {"np.squeeze": "Numba needs an explicit axis (the result's rank is part of its type)"}
_DOMAIN = {"positive": "tested on x > 0", "unit": "tested on -1 < x < 1",
           "above_one": "tested on x > 1", "bool": "boolean"}


def _spellings(rule):
    """Every way user code can write the rule, besides its name."""
    out = [f"`{n}`" for n in other_names(rule)]
    out += [f"`{_OP_SYMBOL[op.__name__]}`" for op, name in OPERATORS.items() if name == rule.name]
    out += [f"`x.{m}()`" for m, name in METHODS.items() if name == rule.name
            and not m.startswith("__")]
    out += [f"`x.{a}`" for a, name in ATTRIBUTES.items()
            if name == rule.name and a != "dtype"]
    out += [f"`{b.__name__}()`" for b, name in BUILTINS.items()
            if name == rule.name]
    if rule.name in _SYNTAX:
        out.append(f"`{_SYNTAX[rule.name]}`")
    return out


def _code(text):
    return "`" + text.replace("|", "\\|") + "`"


def derivative(rule):
    """The derivative column: partials, VJP templates, or zero."""
    if rule.nondiff:
        return "zero"
    parts = []
    for p in rule.operands:
        if p in rule.partials:
            text = f"∂/∂{p}: {_code(rule.partials[p])}"
            if p in rule.vjp:          # declared where g * partial is not the cotangent
                text += f"; cotangent {_code(rule.vjp[p])}"
            parts.append(text)
        elif p in rule.vjp:
            spec = rule.vjp[p]
            if callable(spec):
                doc = (inspect.getdoc(spec) or spec.__name__).splitlines()[0]
                parts.append(f"{p}: {doc.rstrip('.').replace('``', '`')}")
            else:
                parts.append(f"{p}: {_code(spec)}")
    return "<br>".join(parts)


def notes(rule):
    out = []
    statics = [p for p in rule.params if p not in rule.operands]
    if statics:
        out.append("static: " + ", ".join(
            f"{p}={rule.defaults[p]!r}" if p in rule.defaults else p for p in statics))
    if not rule.nondiff and set(rule.operands) - set(rule.diff_operands):
        out.append("not differentiated: " + ", ".join(
            p for p in rule.operands if p not in rule.diff_operands))
    if rule.broadcast:
        out.append("broadcasts")
    samples = rule.samples
    if isinstance(samples, dict):
        out += [f"{p}: {_DOMAIN.get(d, d)}" for p, d in samples.items()]
    elif samples:
        out.append(_DOMAIN.get(samples, samples))
    if isinstance(rule.emit, str) and rule.emit.startswith("rt."):
        out.append(f"runs as `{rule.emit}`")
    if rule.name in _INTERNAL:
        out.append(_INTERNAL[rule.name])
    if rule.name in _BACKEND:
        out.append(_BACKEND[rule.name])
    return "; ".join(out)


def _row(rule):
    operands = ", ".join(rule.operands) if rule.operands else "—"
    return (f"| `{rule.name}` | {', '.join(_spellings(rule)) or ''} | {operands} | "
            f"{derivative(rule)} | {notes(rule)} |")


_SECTIONS = [
    ("Elementwise NumPy functions and operators",
     ("Declared by partial derivatives; reverse mode multiplies the cotangent `g` by each "
     "partial and sums it back to the operand's shape when the operands broadcast. "
     "`out` is the function's value."),
     lambda r: r.elementwise and r.name.startswith("np.")),
    ("`math` functions", "On Python floats; declared by partial derivatives.",
     lambda r: r.elementwise and r.name.startswith("math.")),
    ("`scipy.special` functions", "Elementwise; declared by partial derivatives.",
     lambda r: r.elementwise and r.name.startswith("scipy.special.")),
    ("Array functions",
     ("Declared by their vector-Jacobian products: the cotangent of each operand, where `g` "
     "is the output's cotangent and `out` the output; `rt.*` are the runtime helpers "
     "generated code calls."),
     lambda r: not r.elementwise and not r.nondiff),
    ("Non-differentiable functions",
     ("Zero derivative: they may take differentiated values, and nothing flows back "
     "through them."), lambda r: r.nondiff),
]


def render():
    """The Markdown page: every rule, then the surface without rules."""
    from .library import stats  # noqa: F401  (scipy.stats.norm: registered at first use)
    lines = ["# Supported functions", "",
             ("Generated from the rule registry by `python -m s2s_ad.rules.table > "
             "docs/supported.md`; do not edit by hand."), "",
             (f"{len(RULES)} rules and {len(library.IMPLEMENTATIONS)} functions written "
              f"in NumPy over them. Each is tested against finite differences "
             "(`tests/test_rules.py`)."), ""]
    seen = set()
    for title, intro, pick in _SECTIONS:
        chosen = [r for r in RULES.values() if r.name not in seen and pick(r)]
        seen.update(r.name for r in chosen)
        lines += [f"## {title}", "", intro, "",
                  "| function | also written | operands | derivative | notes |",
                  "| --- | --- | --- | --- | --- |"]
        lines += [_row(r) for r in chosen]
        lines.append("")
    lines += ["## Written in NumPy", "",
              ("Implemented in plain Python over the functions above (`s2s_ad/rules/library/`, "
              "see docs/library.md): a call is lowered in place with its arguments bound, "
              "so every transform follows from the primitives' rules."), "",
              "| function | also written | how | where |", "| --- | --- | --- | --- |"]
    for impl in sorted(library.IMPLEMENTATIONS.values(), key=lambda i: i.name):
        also = [f"`x.{m}()`" for m, i in library.METHODS.items() if i is impl]
        lines.append(f"| `{impl.name}` | {', '.join(also)} | {impl.doc.replace('|', '/')} | "
                     f"written in NumPy in {impl.where} |")
    lines.append("")
    lines += ["## Not supported", "",
              ("NumPy ufuncs, `math` functions and common array functions with no rule. "
              "A call to one of them is allowed where no derivative flows through it; "
              "on a differentiated value it raises `ad.NonDifferentiableError`."), "",
              "| function | reason |", "| --- | --- |"]
    lines += [f"| `{n}` | {UNSUPPORTED[n]} |" for n in sorted(UNSUPPORTED)]
    return "\n".join(lines) + "\n"


def main():
    print(render(), end="")


if __name__ == "__main__":
    main()

__all__ = ["UNSUPPORTED", "classify", "other_names", "render", "resolve", "surface",
           "unsupported_reason"]
