"""Numba overloads of dot, matmul, inner and their operand adjoints.

Numba's np.dot wants float operands of one dtype, ideally contiguous;
each overload therefore casts the operands (and g) to their common float
dtype and makes strided ones contiguous before calling it, then casts the
adjoint to the operand's float dtype.  A scalar operand is "weak" (takes
the array's dtype), as in linalg.py.  Supported in Numba: scalars (not
for matmul) and 1-D/2-D arrays for dot; for matmul also stacks of matrices
(ranks above 2, batch axes broadcast as in NumPy), one product per matrix;
any ranks >= 1 for inner.  Anything else is a TypingError naming the
limitation.
"""

import re

import numpy as np
from numba import types
from numba.core.errors import TypingError
from numba.extending import overload, register_jitable

from . import _nb_kernels as kernels
from . import linalg
from ._nbutil import compile_impl, dtype_src, grad_dtype, index, is_scalar, loops, np_dtype


def _check(fname, *tys, max_ndim=2, scalars=True):
    """Reject operand types the Numba versions do not support."""
    for ty in tys:
        if is_scalar(ty) and scalars:
            continue
        if not isinstance(ty, types.Array) or ty.ndim == 0 \
                or ty.ndim > max_ndim:
            what = "scalars and " if scalars else ""
            raise TypingError(
                f"s2s_ad.runtime.{fname} in Numba supports {what}arrays of "
                f"1 to {max_ndim} dimensions, got {ty}")


def _common_dtype(fname, *tys):
    """Common float dtype of the operands (BLAS needs one dtype)."""
    ct = np.result_type(*[np_dtype(t) for t in tys])
    if ct.kind not in "fc":
        raise TypingError(f"s2s_ad.runtime.{fname} in Numba supports float "
                          f"operands only, got {', '.join(map(str, tys))}")
    return ct


def _prep(name, ty, ct, contiguous=False):
    """Source of operand `name` cast to `ct` and laid out for np.dot.

    astype copies into a C array; otherwise a strided array is copied only
    when BLAS cannot use it as is (C or F layout is fine unless a reshape
    follows, which needs C).
    """
    if is_scalar(ty):
        return f"{dtype_src(ct)}({name})"
    if np_dtype(ty) != ct:
        return f"{name}.astype({dtype_src(ct)})"
    if ty.layout == "C" or (ty.layout == "F" and not contiguous):
        return name
    return f"np.ascontiguousarray({name})"


def gemm(a, b):
    """np.dot of two 2-D arrays (see its Numba overload)."""
    return np.dot(a, b)


#: An F-ordered operand with at most 1/SMALL_F of the other operand's elements
#: is copied to C order before the BLAS call.
SMALL_F = 4


@overload(gemm)
def _gemm(a, b):
    # Measured here (one BLAS thread): Numba's np.dot of a C array by a small
    # F-ordered one is up to 3x slower than copying the small one first
    # (1000x10 . 10x10: 20 -> 13 us; 5000x3 . 3x3: 47 -> 15 us); a large F
    # operand is better passed as is.
    if a.layout == "F" and b.layout != "F":
        def impl(a, b):
            if a.size * SMALL_F <= b.size:
                return kernels.dot(np.ascontiguousarray(a), b)
            return kernels.dot(a, b)
    elif b.layout == "F" and a.layout != "F":
        def impl(a, b):
            if b.size * SMALL_F <= a.size:
                return kernels.dot(a, np.ascontiguousarray(b))
            return kernels.dot(a, b)
    else:
        def impl(a, b):
            return kernels.dot(a, b)
    return impl


def _cast(expr, ct, ty):
    """Source of array `expr` (dtype ct) in the float dtype of `ty`."""
    dt = grad_dtype(ty)
    return expr if dt == ct else f"({expr}).astype({dtype_src(dt)})"


def _weak_dtype(x, y):
    """dtype of x * y when a scalar operand adopts the array's dtype."""
    for arr, other in ((x, y), (y, x)):
        if isinstance(arr, types.Array) and is_scalar(other) \
                and np_dtype(arr).kind in "fc":
            return np_dtype(arr)
    return np.result_type(np_dtype(x), np_dtype(y))


def _weak_mul(x, xty, y, yty):
    """Source of x * y with the scalar operand cast to the result dtype."""
    dt = _weak_dtype(xty, yty)
    xs = f"{dtype_src(dt)}({x})" if is_scalar(xty) else x
    ys = f"{dtype_src(dt)}({y})" if is_scalar(yty) else y
    return f"{xs} * {ys}", dt


def _scale_impl(a, b):
    """Impl of a * b for a product with a scalar operand."""
    expr, _ = _weak_mul("a", a, "b", b)
    return compile_impl(f"def impl(a, b):\n    return {expr}")


def _sum_of_products_src(g, other, dt, params):
    """Source of dt(sum(g * other)) as a loop (the adjoint of a scalar).

    Replaces np.sum(g * other): no temporary, and far cheaper to compile.
    """
    oname, oty = other
    ct = dtype_src(_weak_dtype(g, oty))
    shaped = [(n, t) for n, t in (("g", g), other)
              if isinstance(t, types.Array) and t.ndim]
    names = [f"i{d}" for d in range(shaped[0][1].ndim)]

    def elem(name, ty):
        if is_scalar(ty):
            return f"{ct}({name})"
        return f"{name}[{index(names if ty.ndim else [])}]"

    lines = [f"def impl({params}):", f"    acc = {ct}(0)"]
    if len(shaped) == 2:
        if g.ndim != oty.ndim:
            raise TypingError("s2s_ad.runtime: g must have the product's "
                              "shape")
        lines += [f"    if g.shape != {oname}.shape:",
                  "        raise ValueError('g must have the product shape')"]
    lines += loops(names, [f"{shaped[0][0]}.shape[{d}]"
                           for d in range(len(names))],
                   [f"acc += {elem('g', g)} * {elem(oname, oty)}"])
    lines.append(f"    return {dt}(acc)")
    return "\n".join(lines)


def _scale_grad_impl(g, x, other, params):
    """Impl of the adjoint of x in x * other (one of them a scalar)."""
    if is_scalar(x):
        dt = dtype_src(grad_dtype(x))
        if any(isinstance(t, types.Array) and t.ndim for t in (g, other[1])):
            return compile_impl(_sum_of_products_src(g, other, dt, params))
        expr, _ = _weak_mul("g", g, other[0], other[1])
        return compile_impl(f"def impl({params}):\n    return {dt}({expr})")
    expr, dt = _weak_mul("g", g, other[0], other[1])
    return compile_impl(f"def impl({params}):\n    return {_cast(expr, dt, x)}")


@register_jitable
def _outer(u, v):
    """np.outer of 1-D u and v of one dtype (np.outer compiles slowly)."""
    out = np.empty((u.shape[0], v.shape[0]), u.dtype)
    for i in range(u.shape[0]):
        for j in range(v.shape[0]):
            out[i, j] = u[i] * v[j]
    return out


def _product_impl(a, b, fname, scalars):
    """Impl of np.dot(a, b) for scalars and 1-D/2-D operands."""
    _check(fname, a, b, scalars=scalars)
    if is_scalar(a) or is_scalar(b):
        return _scale_impl(a, b)
    ct = _common_dtype(fname, a, b)
    if a.ndim == 1 and b.ndim == 1:
        # Short vectors: an inline loop; a BLAS call costs more than the work
        # (per-sample gradients call this once per example).
        return compile_impl(
            f"def impl(a, b):\n"
            f"    n = a.shape[0]\n"
            f"    if n != b.shape[0]:\n"
            f"        raise ValueError('dot: shapes not aligned')\n"
            f"    if n > {SHORT_DOT}:\n"
            f"        return _dot({_prep('a', a, ct)}, {_prep('b', b, ct)})\n"
            f"    s = {dtype_src(ct)}(0.0)\n"
            f"    for i in range(n):\n"
            f"        s += a[i] * b[i]\n"
            f"    return s", {"_dot": kernels.dot})
    dot = "_gemm" if a.ndim == 2 and b.ndim == 2 else "_dot"
    return compile_impl(
        f"def impl(a, b):\n"
        f"    return {dot}({_prep('a', a, ct)}, {_prep('b', b, ct)})",
        {"_gemm": gemm, "_dot": kernels.dot})


#: Vectors up to this length are multiplied by an inline loop, not BLAS.
SHORT_DOT = 32


@overload(linalg.dot, prefer_literal=True)
def _dot(a, b):
    return _product_impl(a, b, "dot", scalars=True)


@overload(linalg.matmul, prefer_literal=True)
def _matmul(a, b):
    if _is_stack(a, b):
        return _stacked_impl(a, b)
    return _product_impl(a, b, "matmul", scalars=False)


def _is_stack(a, b):
    """Whether a @ b is a stack of products: array operands, one above 2-D."""
    return all(isinstance(t, types.Array) and t.ndim >= 1 for t in (a, b)) and \
        max(a.ndim, b.ndim) > 2


def _stack_loops(a, b, ct, body):
    """Source lines of a loop over the broadcast batch axes of a @ b.

    Defines the prepared operands ``A`` and ``B`` and, inside the loops,
    ``ia``/``ib`` (the index of the current matrix of each operand; a batch
    axis of length 1 is broadcast) and ``io`` (of the output's); ``body``
    lines run once per matrix with the shapes ``n0, n1, ...`` known.
    """
    core_a, core_b = min(a.ndim, 2), min(b.ndim, 2)
    lead_a, lead_b = a.ndim - core_a, b.ndim - core_b
    nb = max(lead_a, lead_b)
    lines = [f"    A = {_prep('a', a, ct, contiguous=True)}",
             f"    B = {_prep('b', b, ct, contiguous=True)}"]
    ia, ib = [], []
    for d in range(nb):
        ja, jb = d - (nb - lead_a), d - (nb - lead_b)
        sizes = [f"{n}.shape[{j}]" for n, j in (("A", ja), ("B", jb)) if j >= 0]
        if len(sizes) == 2:
            lines += [f"    if {sizes[0]} != {sizes[1]} and {sizes[0]} != 1 and "
                      f"{sizes[1]} != 1:",
                      "        raise ValueError('matmul: the batch axes do not broadcast')"]
        lines.append(f"    n{d} = max({', '.join(sizes)})" if len(sizes) == 2
                     else f"    n{d} = {sizes[0]}")
        if ja >= 0:
            ia.append(f"min(i{d}, A.shape[{ja}] - 1)")
        if jb >= 0:
            ib.append(f"min(i{d}, B.shape[{jb}] - 1)")
    names = [f"i{d}" for d in range(nb)]
    inner = [f"ia = ({', '.join(ia)}{',' if len(ia) == 1 else ''})",
             f"ib = ({', '.join(ib)}{',' if len(ib) == 1 else ''})",
             f"io = ({', '.join(names)},)"] + body
    return lines, loops(names, [f"n{d}" for d in range(nb)], inner)


def _stacked_impl(a, b):
    """Impl of a @ b for stacks of matrices (or of vectors with one matrix)."""
    ct = _common_dtype("matmul", a, b)
    core_a, core_b = min(a.ndim, 2), min(b.ndim, 2)
    prod = "_gemm(A[ia], B[ib])" if (core_a, core_b) == (2, 2) else "_dot(A[ia], B[ib])"
    head, body = _stack_loops(a, b, ct, [f"out[io] = {prod}"])
    nb = max(a.ndim - core_a, b.ndim - core_b)
    core = (["A.shape[-2]"] if core_a == 2 else []) + (["B.shape[-1]"] if core_b == 2 else [])
    shape = ", ".join([f"n{d}" for d in range(nb)] + core)
    src = "\n".join(["def impl(a, b):"] + head
                    + [f"    out = np.empty(({shape},), {dtype_src(ct)})"] + body
                    + ["    return out"])
    return compile_impl(src, {"_gemm": gemm, "_dot": kernels.dot})


def _stacked_grad_impl(g, a, b, which):
    """Impl of the adjoint of operand ``which`` of a @ b for stacks: each
    matrix product's adjoint, added into the operand's matrix (a broadcast
    operand gets the sum over the batch)."""
    ct = _common_dtype(f"matmul_grad_{which}", g, a, b)
    core = (min(a.ndim, 2), min(b.ndim, 2))
    formula = (_GRAD_A if which == "a" else _GRAD_B)[core]
    term = re.sub(r"\b([GAB])\b", lambda m: {"G": "G[io]", "A": "A[ia]", "B": "B[ib]"}[
        m.group(1)], formula)
    mine = "ia" if which == "a" else "ib"
    head, body = _stack_loops(a, b, ct, [f"r[{mine}] += {term}"])
    src = "\n".join(["def impl(g, a, b):", f"    G = {_g_src(g, ct, contiguous=True)}"] + head
                    + [f"    r = np.zeros({which}.shape, {dtype_src(ct)})"] + body
                    + [f"    return {_cast('r', ct, a if which == 'a' else b)}"])
    return compile_impl(src, {"_gemm": gemm, "_outer": _outer, "_dot": kernels.dot})


# Adjoint formulas for out = a . b by (a.ndim, b.ndim); G, A, B are the
# prepared g, a and b.  With 1-D . 1-D, g is a scalar.
_GRAD_A = {(1, 1): "G * B", (2, 1): "_outer(G, B)",
           (1, 2): "_dot(B, G)", (2, 2): "_gemm(G, B.T)"}
_GRAD_B = {(1, 1): "G * A", (2, 1): "_dot(A.T, G)",
           (1, 2): "_outer(A, G)", (2, 2): "_gemm(A.T, G)"}


def _g_src(g, ct, contiguous=False):
    """Source of the prepared cotangent G (a 0-d g is read as a scalar)."""
    if isinstance(g, types.Array) and g.ndim == 0:
        return f"{dtype_src(ct)}(g[()])"
    return _prep("g", g, ct, contiguous)


def _product_grad_impl(g, a, b, which, fname, scalars):
    """Impl of the adjoint of operand `which` ("a"/"b") of a . b."""
    _check(fname, a, b, scalars=scalars)
    if is_scalar(a) or is_scalar(b):
        other = ("b", b) if which == "a" else ("a", a)
        return _scale_grad_impl(g, a if which == "a" else b, other,
                                "g, a, b")
    ct = _common_dtype(fname, g, a, b)
    # Only the other operand enters the adjoint; prepare just that one.
    if which == "a":
        expr, other = _GRAD_A[(a.ndim, b.ndim)], f"B = {_prep('b', b, ct)}"
    else:
        expr, other = _GRAD_B[(a.ndim, b.ndim)], f"A = {_prep('a', a, ct)}"
    src = ("def impl(g, a, b):\n"
           f"    G = {_g_src(g, ct)}\n"
           f"    {other}\n"
           f"    return {_cast(expr, ct, a if which == 'a' else b)}")
    return compile_impl(src, {"_outer": _outer, "_gemm": gemm, "_dot": kernels.dot})


@overload(linalg.dot_grad_a, prefer_literal=True)
def _dot_grad_a(g, a, b):
    return _product_grad_impl(g, a, b, "a", "dot_grad_a", scalars=True)


@overload(linalg.dot_grad_b, prefer_literal=True)
def _dot_grad_b(g, a, b):
    return _product_grad_impl(g, a, b, "b", "dot_grad_b", scalars=True)


@overload(linalg.matmul_grad_a, prefer_literal=True)
def _matmul_grad_a(g, a, b):
    if _is_stack(a, b):
        return _stacked_grad_impl(g, a, b, "a")
    return _product_grad_impl(g, a, b, "a", "matmul_grad_a", scalars=False)


@overload(linalg.matmul_grad_b, prefer_literal=True)
def _matmul_grad_b(g, a, b):
    if _is_stack(a, b):
        return _stacked_grad_impl(g, a, b, "b")
    return _product_grad_impl(g, a, b, "b", "matmul_grad_b", scalars=False)


def _lead_size(name, ndim):
    """Source of the product of all but the last axis length of `name`."""
    return " * ".join(f"{name}.shape[{d}]" for d in range(ndim - 1)) or "1"


def _inner_setup(a, b, ct, need="AB"):
    """Source lines defining k, m, n and the (m, k) A / (n, k) B matrices.

    Only the matrices named in `need` are built (each may cost a copy).
    """
    lines = ["    k = a.shape[-1]",
             "    if b.shape[-1] != k:",
             "        raise ValueError('inner: last dimensions differ')",
             f"    m = {_lead_size('a', a.ndim)}",
             f"    n = {_lead_size('b', b.ndim)}"]
    for name, ty, rows in (("A", a, "m"), ("B", b, "n")):
        if name in need:
            prep = _prep(name.lower(), ty, ct, contiguous=True)
            lines.append(f"    {name} = {prep}.reshape(({rows}, k))")
    return lines


@overload(linalg.inner, prefer_literal=True)
def _inner(a, b):
    _check("inner", a, b, max_ndim=32)
    if is_scalar(a) or is_scalar(b):
        return _scale_impl(a, b)
    if a.ndim == 1 and b.ndim == 1:
        return _product_impl(a, b, "inner", scalars=True)
    ct = _common_dtype("inner", a, b)
    lines = ["def impl(a, b):"] + _inner_setup(a, b, ct) + [
        "    return _dot(A, B.T).reshape(a.shape[:-1] + b.shape[:-1])"]
    return compile_impl("\n".join(lines), {"_dot": kernels.dot})


def _inner_grad_impl(g, a, b, which):
    """Impl of the adjoint of operand `which` of np.inner(a, b)."""
    fname = f"inner_grad_{which}"
    _check(fname, a, b, max_ndim=32)
    if is_scalar(a) or is_scalar(b) or (a.ndim == 1 and b.ndim == 1):
        return _product_grad_impl(g, a, b, which, fname, scalars=True)
    ct = _common_dtype(fname, g, a, b)
    expr = "_dot(G, B)" if which == "a" else "_dot(G.T, A)"
    need = "B" if which == "a" else "A"
    lines = (["def impl(g, a, b):"] + _inner_setup(a, b, ct, need)
             + [f"    G = {_g_src(g, ct, contiguous=True)}.reshape((m, n))",
                f"    r = {expr}.reshape({which}.shape)",
                f"    return {_cast('r', ct, a if which == 'a' else b)}"])
    return compile_impl("\n".join(lines), {"_dot": kernels.dot})


@overload(linalg.inner_grad_a, prefer_literal=True)
def _inner_grad_a(g, a, b):
    return _inner_grad_impl(g, a, b, "a")


@overload(linalg.inner_grad_b, prefer_literal=True)
def _inner_grad_b(g, a, b):
    return _inner_grad_impl(g, a, b, "b")
