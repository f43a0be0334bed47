"""Generated code as a tree (s2s_ad.codegen.printer): comments survive the round trip.

Reverse mode, widen and module assembly hand generated code over as lists of
``ast`` statements; a comment is a marker statement (``printer.comment``).
These check that text -> tree -> text gives the text back, that a block left
with comments alone still prints as valid Python, and that module assembly
finds generated functions in the trees without parsing text.
"""
import ast
import traceback

import numpy as np
from conftest import fd_jacobian

import s2s_ad as ad
from s2s_ad.codegen import printer

SWEEP = ["bx = rt.zeros_like(x)",
         "# adjoint of: for i in range(n):  [line 3]",
         "for i in range(n - 1, -1, -1):",
         "    # adjoint of: s = s + x[i] * w  [line 4]",
         "    bx[i] += bs * w",
         "    if bx[i] > 0.0:",
         "        # a comment in a branch",
         "        bw = bs",
         "    else:",
         "        bw = 0.0",
         "return bx"]


def test_text_tree_text_is_the_identity():
    tree = printer.parse(SWEEP)
    assert sum(printer.is_comment(s) for s in ast.walk(ast.Module(tree, []))
               if isinstance(s, ast.stmt)) == 3
    assert printer.unparse(tree).splitlines() == SWEEP


def test_indented_lines_are_parsed_as_one_block():
    tree = printer.parse(["    " + line for line in SWEEP])
    assert printer.unparse(tree).splitlines() == SWEEP


def test_a_block_left_with_comments_alone_prints_a_pass():
    """A widened loop whose statements all went into shared partials keeps its
    comment: printed alone it was an IndentationError (fuzz program 2026/2)."""
    tree = printer.parse(SWEEP)
    loop = tree[2]
    loop.body = loop.body[:1]                      # only "# adjoint of: ..." left
    text = printer.unparse(tree)
    ast.parse(text)
    assert text.splitlines()[2:5] == ["for i in range(n - 1, -1, -1):",
                                      "    # adjoint of: s = s + x[i] * w  [line 4]",
                                      "    pass"]
    assert len(loop.body) == 1                     # the tree itself is left as it was


def test_a_writer_tree_prints_as_the_lines_written():
    w = printer.Writer()
    printer.def_line(w, "f", ["x", "n"])
    w.indent = 1
    w.lines.extend("    " + line for line in SWEEP)
    w.blank()
    tree = w.tree()
    assert [type(s) for s in tree] == [ast.FunctionDef]
    assert printer.unparse(tree) + "\n\n" == w.text()
    assert printer.unparse(list(tree)) + "\n\n" == w.text()   # printed again, not from the cache


def _helper(v):
    return np.sum(np.tanh(v) * v)


def loss(x):
    s = 0.0
    for i in range(x.shape[0]):
        s = s + _helper(x[i:])
    return s


def test_the_module_is_text_only_at_the_end():
    x = np.array([0.3, -0.2, 0.5, 1.1])
    src = ad.source(ad.grad(loss), x)
    compile(src, "<generated>", "exec")
    assert "def fwd__helper(" in src and "def bwd__helper(" in src and "# adjoint of:" in src
    assert printer.COMMENT not in src
    np.testing.assert_allclose(ad.grad(loss)(x), fd_jacobian(loss, x), rtol=1e-6)



def stencil_sweep(A, B):
    B[1:-1] = A[2:] - 2.0 * np.exp(A[1:-1]) + A[:-2]
    return np.sum(B * B)


def test_the_cpu_rewrites_hand_over_trees(monkeypatch):
    """The cpu target's rewrites (slice fusion, SIMD calls, the single-use
    temporaries' write-back) take and return the module's trees: the module's
    text is made once, by the one unparse, and never parsed."""
    from s2s_ad.codegen import fusion
    from s2s_ad.codegen.fusion import fuse_temporaries

    parsed = []                  # parses called from the cpu rewrites or module assembly
    real_parse = ast.parse

    def parse(text, *args, **kwargs):
        stack = traceback.extract_stack()
        if any(f.filename.endswith(("codegen/fusion.py", "fuse_slices.py")) or
               f.filename.endswith("pipeline.py") and f.name == "generate" for f in stack) \
                and not any(f.name == "unparse" for f in stack):   # (a comment's string)
            parsed.append(text)
        return real_parse(text, *args, **kwargs)

    monkeypatch.setattr(ast, "parse", parse)
    assert "tokenize" not in vars(fusion)
    A, B = np.linspace(0.1, 0.9, 40), np.zeros(40)
    src = ad.source(ad.jit(ad.grad(stencil_sweep)), A, B)
    assert "rt.exp(" in src and printer.PAREN not in src
    lines = [line.strip() for line in src.split("\n")]
    assert "_t3 = rt.exp(A[1:-1])" in lines and "rt.fusable(" in src
    assert "B_copy[1:-1] = (_t1 - _t4) + _t6" in lines            # slice fusion's fallback
    assert "rt.add_into(bA[1:-1], ((-bt5) * 2.0) * _t3)" in lines
    assert parsed == []
    monkeypatch.setattr(ast, "parse", real_parse)
    tree = printer.parse(["def f(x):", "    e = x * 2.0", "    return e + x",
                          "def g(x):", "    return x"])
    parts = [tree[:1], tree[1:]]
    fused = fuse_temporaries(parts)
    assert all(isinstance(s, ast.stmt) for part in fused for s in part)
    assert fused[1] is parts[1]                          # nothing to do: the same tree
    assert printer.unparse(fused[0]) == "def f(x):\n    return (x * 2.0) + x"
    assert printer.unparse(parts[0]) == "def f(x):\n    e = x * 2.0\n    return e + x"
    np.testing.assert_allclose(ad.jit(ad.grad(stencil_sweep))(A, B),
                               fd_jacobian(lambda a: stencil_sweep(a, np.zeros(40)), A),
                               rtol=1e-6)
