"""Single-use variables written back into the expression that reads them
(s2s_ad/codegen/fusion.py, on the cpu target's trees): which are moved, which
stay, and a compiled stencil checked against NumPy and finite differences."""
import textwrap

import numpy as np

import s2s_ad as ad
from s2s_ad.codegen import printer
from s2s_ad.codegen.fusion import fuse_temporaries
from tests.conftest import fd_jacobian


def _fused(text):
    """``text`` (a function as the printer writes it) fused, as its lines."""
    tree = printer.parse(textwrap.dedent(text).strip("\n").split("\n"))
    return printer.unparse(fuse_temporaries([tree])[0]).split("\n")


def test_a_chain_of_single_use_temporaries_becomes_one_expression():
    got = _fused("""
        def f(A, B):
            # B[1:-1] = A[2:] - 2.0 * A[1:-1] + A[:-2]  [line 3]
            _t3 = A[2:]
            _t4 = A[1:-1]
            _t5 = 2.0 * _t4
            _t6 = _t3 - _t5
            _t7 = A[:-2]
            _t8 = _t6 + _t7
            B[1:-1] = _t8
            return np.sum(B)
    """)
    assert got == ["def f(A, B):",
                   "    # B[1:-1] = A[2:] - 2.0 * A[1:-1] + A[:-2]  [line 3]",
                   "    B[1:-1] = (A[2:] - (2.0 * A[1:-1])) + A[:-2]",
                   "    return np.sum(B)"]


def test_what_is_read_twice_called_stored_or_reassigned_stays():
    got = _fused("""
        def f(a, b, n):
            x = a * b
            y = x + x
            c = rt.sum(a)
            z = c * 2.0
            w = a + b
            a[0] = 1.0
            v = w * 2.0
            u = b * 3.0
            b = a
            t = u + b
            s = a - 1.0
            while s > n:
                s = s - 1.0
            return y + z + v + t + s
    """)
    assert got == ["def f(a, b, n):",
                   "    x = a * b",            # read twice
                   "    y = x + x",
                   "    c = rt.sum(a)",        # a call (not of a ufunc)
                   "    z = c * 2.0",          # read after a store: not moved past it
                   "    w = a + b",
                   "    a[0] = 1.0",
                   "    u = b * 3.0",          # b is assigned before u is read
                   "    b = a",
                   "    s = a - 1.0",          # assigned twice
                   "    v = w * 2.0",          # read in a while loop's test: kept before it
                   "    t = u + b",
                   "    while s > n:",
                   "        s = s - 1.0",
                   "    return y + z + v + t + s"]


def test_blocks_strings_attributes_and_tuples():
    got = _fused("""
        def f(x, n):
            d = x * 2.0
            for i in range(n):
                e = x + 1.0
                x = e
            k = (x, d)
            y = rt.einsum('d,d->', (x, x))
            return y.d + k[0]
            m = x * 2.0
            return (m, m.shape)
    """)
    assert got == ["def f(x, n):",
                   "    d = x * 2.0",          # read after the loop: not moved into it
                   "    for i in range(n):",
                   "        x = x + 1.0",
                   "    k = (x, d)",
                   "    y = rt.einsum('d,d->', (x, x))",
                   "    return y.d + k[0]",
                   "    m = x * 2.0",
                   "    return (m, m.shape)"]
    assert _fused("def f(x, y):\n    k = x, y\n    return k[0] + (1.0, k)[1][0]")[-1] == \
        "    return k[0] + (1.0, k)[1][0]"      # read twice
    assert _fused("def f(x, y):\n    k = x, y\n    return g(k, 1.0)")[-1] == \
        "    return g((x, y), 1.0)"              # a tuple keeps its parentheses
    assert _fused("def f(x):\n    e = np.exp(-x)\n    return e * np.tanh(x)") == \
        ["def f(x):", "    return np.exp(-x) * np.tanh(x)"]     # ufuncs
    assert _fused("def f(x):\n    e = np.exp(x, out=x)\n    return e * 2.0")[1] == \
        "    e = np.exp(x, out=x)"                              # (one that writes)
    for use in ("lambda k: e + k", "[e + k for k in x]", "x > 0 and e > 0", "x if e else 1.0"):
        assert _fused(f"def f(x):\n    e = x * 2.0\n    return {use}")[1] == \
            "    e = x * 2.0"                                    # evaluated elsewhere


def stencil(A, steps):
    B = A.copy()
    for t in range(steps):
        B[1:-1, 1:-1] = 0.25 * (A[2:, 1:-1] + A[:-2, 1:-1] + A[1:-1, 2:] + A[1:-1, :-2]) \
            - A[1:-1, 1:-1] * A[1:-1, 1:-1]
        A = B.copy()
    return np.sum(A * A)


def test_a_compiled_stencil_is_one_expression_and_right():
    A = np.linspace(0.1, 0.9, 30).reshape(5, 6)
    f = ad.jit(stencil)
    np.testing.assert_allclose(f(A, 2), stencil(A, 2), rtol=1e-14)
    store = [line.strip() for line in ad.source(f).split("\n")
             if line.strip().startswith("B[1:-1, 1:-1] = ")]
    # The slice fusion's fallback (transforms/fuse_slices.py) reads the views it
    # shares with its loop nest by name; the arithmetic is one expression.
    assert store == ["B[1:-1, 1:-1] = (0.25 * (((_t2 + _t3) + _t5) + _t7)) - np.square(_t10)"]
    g = ad.jit(ad.grad(stencil))
    want = fd_jacobian(lambda a: stencil(a.reshape(5, 6), 2), A.ravel()).reshape(5, 6)
    np.testing.assert_allclose(g(A, 2), want, rtol=1e-6, atol=1e-9)
