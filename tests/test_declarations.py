"""The declaration is the only place a primitive's facts live.

The transforms, analyses, printers and the frontend (every module of
s2s_ad/transforms/, s2s_ad/analyses/, s2s_ad/codegen/ and s2s_ad/frontend/)
read a primitive's facts from its :class:`s2s_ad.rules.Rule` (``rank``,
``batch``, ``vjp``, ``jvp``, ``linear``, ``mutates``...).  This test scans their
source for string literals naming a rule (a key of ``rules.RULES``), and for
the rule's Python function itself (``obj is np.stack``, ``{np.array: ...}``;
calling it, ``np.ndim(v)``, computes a value and is allowed):

- ``rules.RULES["np.add"]`` / ``INTERNAL[...]`` is *emission*: the transform
  builds code with that primitive (a cotangent sum, a tangent product).
  Allowed everywhere.
- Any other literal (``name == "np.eye"``, ``name in ("np.dot", ...)``) is a
  transform testing for one primitive: a per-primitive fact kept outside its
  declaration.  Allowed only for STRUCTURAL names.
"""
import ast
import pathlib

import pytest

from s2s_ad import rules

ROOT = pathlib.Path(__file__).resolve().parents[1] / "s2s_ad"
# Every pass, analysis, printer and the frontend (a new module in these packages is
# scanned too).
TRANSFORMS = ("transforms", "analyses", "codegen", "frontend")

# Language plumbing the lowering itself creates, not NumPy functions a user
# calls: indexing and index assignment, the join copy of branches and loops,
# dtype, the boolean operators, len/int/float of Python values, and
# stop_gradient.  Each transform handles them as syntax (their behaviour is
# the language's), so naming them is structural.
STRUCTURAL = {"getitem", "setitem", "copy", "dtype", "and", "or", "not", "len", "int",
              "float", "stop_gradient"}

# Where the facts the transforms once kept by name now live (s2s_ad/rules/): output
# ranks (Rule.rank), shape and batching kinds (Rule.shape, Rule.batch, Rule.batched),
# views (Rule.view), new storage (Rule.fresh), np.ndim's fold (Rule.gives_rank), list
# displays (Rule.from_list), x * x (Rule.equal_operands), fills and vector sums
# (Rule.fill, Rule.total), and for reverse mode: scalar operations worth recomputing
# (Rule.cheap), signed sums (Rule.signs: index offsets, increments, row sums), operands
# read for their shape (Rule.shape_only), kept-axes and row-summed adjoints
# (Rule.kept_vjp, Rule.row_sum_vjp); results shaped by their first operand alone
# (Rule.shaped_by_first: shape-only liveness), contractions and scalings
# (Rule.contraction, Rule.scales: moving a scalar factor onto a product's vector); for the
# printer, a sum of squares printed as one call (Rule.summed, Rule.total); for the frontend,
# what a call of a comprehension builds or reduces (Rule.stacks_list, Rule.reduces_iterable,
# Rule.total, Rule.shape "joined").

def _emitted(node, parents):
    parent = parents.get(node)
    if isinstance(parent, ast.Subscript) and parent.slice is node:
        v = parent.value
        return (isinstance(v, ast.Attribute) and v.attr in ("RULES", "INTERNAL")) or \
            (isinstance(v, ast.Name) and v.id in ("RULES", "INTERNAL"))
    return False


def _function_of_a_rule(node, parents):
    """The rule name when ``node`` is ``np.f`` / ``builtins.f`` / ``math.f`` naming
    the function a rule is declared for, not called there; else None."""
    import builtins
    import math

    import numpy as np
    modules = {"np": np, "numpy": np, "builtins": builtins, "math": math}
    if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.value.id in modules):
        return None
    parent = parents.get(node)
    if isinstance(parent, ast.Call) and parent.func is node:
        return None
    obj = getattr(modules[node.value.id], node.attr, None)
    rule = rules.lookup(obj) if obj is not None else None
    reduced = [r for r in rules.RULES.values() if obj is not None and r.reduces_iterable is obj]
    return rule.name if rule is not None else (reduced[0].name if reduced else None)


def named_primitives(filename):
    """{name: [line, ...]} of string literals naming a rule, not emission, and of
    references to a rule's function, in a module or in every module of a package
    (a folder: lines as ``file:line``)."""
    path = ROOT / filename
    files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
    found = {}
    for f in files:
        tree = ast.parse(f.read_text())
        parents = {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    node.value in rules.RULES and not _emitted(node, parents):
                where = node.lineno if f == path else f"{f.name}:{node.lineno}"
                found.setdefault(node.value, []).append(where)
            named = _function_of_a_rule(node, parents)
            if named is not None:
                where = node.lineno if f == path else f"{f.name}:{node.lineno}"
                found.setdefault(named, []).append(where)
    return found


@pytest.mark.parametrize("filename", TRANSFORMS)
def test_transforms_name_no_new_primitive(filename):
    found = named_primitives(filename)
    extra = {n: lines for n, lines in found.items() if n not in STRUCTURAL}
    assert not extra, (f"s2s_ad/{filename} names primitives {extra} (name: lines): put the "
                       f"fact in the rule's declaration (a Rule field) and read it from there")


def test_the_scan_sees_a_named_primitive(tmp_path):
    """The scanner flags a comparison and skips emission (it can fail)."""
    (tmp_path / "t.py").write_text('def f(s):\n    x = rules.RULES["np.add"]\n'
                                   '    return s.rule.name == "np.eye"\n'
                                   'def g(obj, v):\n    return obj is np.stack, np.ndim(v)\n'
                                   'M = {builtins.max: 1}\n')
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        assert named_primitives("t.py") == {"np.eye": [3], "np.stack": [5], "np.max": [6]}
    finally:
        ROOT = saved


def test_moved_ranks_are_declared():
    for name in ("np.eye", "np.arange", "np.shape", "np.outer", "np.ravel", "np.expand_dims",
                 "np.dot", "np.matmul", "np.inner"):
        assert rules.RULES[name].rank is not None, name
    assert rules.RULES["np.matmul"].rank([2, 1], {}) == 1
    assert rules.RULES["np.dot"].rank([0, 2], {}) == 2


def test_reverse_mode_facts_are_declared():
    """The facts reverse mode reads name the rule's own operands, and are declared
    where the peepholes rely on them."""
    from s2s_ad.rules.registry import parse_template
    for rule in rules.RULES.values():
        assert not rule.signs or len(rule.signs) == len(rule.operands), rule.name
        assert set(rule.shape_only) <= set(rule.diff_operands), rule.name
        for templates in (rule.kept_vjp, rule.row_sum_vjp):
            assert set(templates) <= set(rule.diff_operands), rule.name
            for t in templates.values():
                parse_template(t)
    assert rules.RULES["np.subtract"].signs == (1, -1) and rules.RULES["np.add"].cheap
    assert not rules.RULES["np.exp"].cheap and not rules.RULES["np.multiply"].signs
    assert set(rules.RULES["np.mean"].kept_vjp) == {"a"} == set(rules.RULES["np.sum"].shape_only)
    assert set(rules.RULES["np.matmul"].row_sum_vjp) == {"x1"}
    for rule in rules.RULES.values():
        assert set(rule.scales) <= set(rule.diff_operands), rule.name
        assert not rule.contraction or (rule.linear and len(rule.operands) == 2), rule.name
    assert rules.RULES["np.divide"].scales == ("x1",) and rules.RULES["np.dot"].contraction
    assert rules.RULES["np.reshape"].shaped_by_first and not rules.RULES["np.sin"].shaped_by_first


def test_declared_kinds_are_implemented():
    """Every shape and batching kind a rule declares is one the transforms implement."""
    from s2s_ad.rules.internal import INTERNAL
    from s2s_ad.rules.registry import BATCHING, SHAPES
    from s2s_ad.transforms import batch
    every = list(rules.RULES.values()) + list(INTERNAL.values())
    assert {r.shape for r in every} - {None} <= set(SHAPES)
    declared = {r.batch for r in every if isinstance(r.batch, str)}
    assert declared <= set(BATCHING)
    queries = {k for k in BATCHING if k.startswith("query")}
    assert set(BATCHING) == set(batch._KINDS) | queries
    assert all(r.batched is not None for r in every if r.batch == "product")
    assert rules.RULES["np.sum"].shape == "reduced" and rules.RULES["np.dot"].batch == "product"


def test_an_unknown_kind_is_refused():
    from s2s_ad.rules.registry import Rule
    with pytest.raises(ValueError, match="unknown shape kind"):
        Rule(name="t", params=("a",), operands=("a",), shape="squashed")
    with pytest.raises(ValueError, match="unknown batching kind"):
        Rule(name="t", params=("a",), operands=("a",), batch="sideways")


def test_printer_and_frontend_facts_are_declared():
    """The facts the printer's sum-of-squares fusion and the comprehension lowering
    read are the rules' own (Rule.summed, Rule.stacks_list, Rule.reduces_iterable)."""
    import builtins
    assert rules.RULES["np.square"].summed == "rt.sum_squares"
    assert not rules.RULES["np.exp"].summed and rules.RULES["np.sum"].total == "elements"
    assert {r.name for r in rules.RULES.values() if r.stacks_list} == \
        {"np.array", "np.asarray", "np.stack"}
    assert rules.RULES["np.max"].reduces_iterable is builtins.max
    assert rules.RULES["np.min"].reduces_iterable is builtins.min
    for rule in rules.RULES.values():
        if rule.summed:        # printed in the sum's place: the same axis and keepdims
            assert rule.elementwise and len(rule.operands) == 1, rule.name
        if rule.reduces_iterable is not None:
            assert rule.shape == "reduced" and "axis" in rule.params, rule.name
