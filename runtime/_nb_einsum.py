"""Numba versions of einsum and tensordot (Numba has neither) and their adjoints.

``einsum``: the subscripts are a string literal, so each subscript string
(with the operands' ranks and dtypes) gets its own generated contraction:
a repeated letter in an operand becomes a diagonal (a loop), a letter no
other operand or the output needs is summed away first, and then operands
are contracted two at a time (in ``np.einsum_path``'s greedy order for three
or more) by one transpose, reshape and BLAS ``np.dot`` per pair -- a loop of
``np.dot`` over the letters both keep (a batch).  The adjoint of operand i is
the einsum ``rt.einsum_grad`` of the Python version describes, generated the
same way.

``tensordot``: Numba types a tuple ``axes`` as a plain tuple of ints (not
literal), so the axes are read at run time; the number of axes contracted
is known from the type, which fixes every rank.  The operands are transposed
so the contracted axes meet, reshaped to matrices and multiplied by one
``np.dot``.  Guarantees: the results equal NumPy's, in the operands' common
float dtype.
"""
import numpy as np
from numba import types
from numba.core.errors import TypingError
from numba.extending import overload, register_jitable
from numba.np.numpy_support import from_dtype

from . import linalg, linalg_linear
from ._nbutil import compile_impl, dtype_src, grad_dtype, loops, np_dtype


def _literal_str(ty, fname):
    if isinstance(ty, types.StringLiteral):
        return ty.literal_value
    if isinstance(ty, str):
        return ty
    raise TypingError(f"s2s_ad.runtime.{fname}: the subscripts must be a constant string")


def _ndims(tys, fname):
    out = []
    for ty in tys:
        if isinstance(ty, types.Array):
            out.append(ty.ndim)
        elif isinstance(ty, (types.Number, types.Boolean)):
            out.append(0)
        else:
            raise TypingError(f"s2s_ad.runtime.{fname}: operands must be arrays, got {ty}")
    return out


class _Writer:
    """Source lines of one contraction; each value is (name, letters)."""

    def __init__(self, ct):
        self.ct, self.lines, self.count = ct, [], 0

    def new(self):
        self.count += 1
        return f"t{self.count}"

    def put(self, line):
        self.lines.append("    " + line)

    def diagonal(self, name, letters):
        """The operand with each repeated letter read once (its diagonal)."""
        unique = "".join(dict.fromkeys(letters))
        if unique == letters:
            return name, letters
        out = self.new()
        first = {ch: letters.index(ch) for ch in unique}
        dims = ", ".join(f"{name}.shape[{first[ch]}]" for ch in unique)
        self.put(f"{out} = np.empty(({dims},), {dtype_src(self.ct)})")
        idx = [f"i_{ch}" for ch in unique]
        src_idx = ", ".join(f"i_{ch}" for ch in letters)
        body = [f"{out}[{', '.join(idx)}] = {name}[{src_idx}]"]
        self.lines += loops(idx, [f"{out}.shape[{k}]" for k in range(len(unique))], body)
        return out, unique

    def sum_out(self, name, letters, keep):
        """Sum away the letters not in ``keep`` (highest axis first)."""
        drop = [k for k, ch in enumerate(letters) if ch not in keep]
        if not drop:
            return name, letters
        out = self.new()
        if len(drop) == len(letters):
            self.put(f"{out} = np.sum({name})")
            return out, ""
        expr = name
        for k in reversed(drop):
            expr = f"np.sum({expr}, axis={k})"
        self.put(f"{out} = {expr}")
        return out, "".join(ch for ch in letters if ch in keep)

    def view(self, name, letters, groups):
        """Source of ``name`` as a (batch, rows, cols) or (rows, cols) array, with
        ``groups`` = (batch, rows, cols) letters, and whether its matrices are
        read transposed: an operand stored as batch + cols + rows is a reshaped
        view read with ``.T`` (BLAS takes either order), one in any other order
        is copied once into batch + rows + cols."""
        batch, rows, cols = groups
        transposed = letters == batch + cols + rows and letters != batch + rows + cols
        order = batch + (cols + rows if transposed else rows + cols)
        expr = f"np.ascontiguousarray({name})"
        if letters != order:
            perm = tuple(letters.index(ch) for ch in order)
            expr = f"np.ascontiguousarray(np.transpose({name}, {perm}))"
        parts = ((batch,) if batch else ()) + ((cols, rows) if transposed else (rows, cols))
        size = [" * ".join(f"{name}.shape[{letters.index(ch)}]" for ch in group) or "1"
                for group in parts]
        if len(letters) == 2 and not batch and len(rows) == 1 and len(cols) == 1:
            return name, transposed          # a matrix as it is
        return f"{expr}.reshape(({', '.join(size)},))", transposed

    def pair(self, x, y, keep, want=None):
        """Contract (name, letters) x and y, keeping the letters in ``keep``; the
        result's letters are batch + x's free + y's free, or batch + y's free +
        x's free when that is ``want`` (the product then computed transposed)."""
        (nx, sx), (ny, sy) = x, y
        shared = [ch for ch in sx if ch in sy]
        fx = "".join(ch for ch in sx if ch not in sy)
        fy = "".join(ch for ch in sy if ch not in sx)
        best = None
        for src in (sx, sy):      # the order of the shared letters: x's or y's
            batch = "".join(ch for ch in src if ch in shared and ch in keep)
            inner = "".join(ch for ch in src if ch in shared and ch not in keep)
            copies = sum(s not in (batch + a + b, batch + b + a)
                         for s, a, b in ((sx, fx, inner), (sy, inner, fy)))
            if best is None or copies < best[0]:
                best = (copies, batch, inner)
        _, batch, inner = best
        swap = want is not None and want == batch + fy + fx and want != batch + fx + fy
        ex, tx = self.view(nx, sx, (batch, fx, inner))
        ey, ty = self.view(ny, sy, (batch, inner, fy))
        a, b, out = self.new(), self.new(), self.new()
        self.put(f"{a} = {ex}")
        self.put(f"{b} = {ey}")
        (a, ta), (b, tb) = ((b, not ty), (a, not tx)) if swap else ((a, tx), (b, ty))
        ra, cb = (2 if ta else 1), (1 if tb else 2)      # axes of rows of a, cols of b
        shape = [f"{nx}.shape[{sx.index(ch)}]" for ch in batch] + \
            [f"{nz}.shape[{sz.index(ch)}]" for nz, sz, f in
             (((ny, sy, fy), (nx, sx, fx)) if swap else ((nx, sx, fx), (ny, sy, fy)))
             for ch in f]
        if batch:
            left = f"{a}[k].T" if ta else f"{a}[k]"
            right = f"{b}[k].T" if tb else f"{b}[k]"
            self.put(f"{out} = np.empty(({a}.shape[0], {a}.shape[{ra}], {b}.shape[{cb}]), "
                     f"{dtype_src(self.ct)})")
            self.put(f"for k in range({a}.shape[0]):")
            self.put(f"    np.dot({left}, {right}, {out}[k])")
        else:
            left = f"{a}.T" if ta else a
            right = f"{b}.T" if tb else b
            self.put(f"{out} = np.dot({left}, {right})")
        letters = batch + (fy + fx if swap else fx + fy)
        if not letters:
            final = self.new()
            self.put(f"{final} = {out}[0, 0]")
            return final, ""
        if batch or len(fx) != 1 or len(fy) != 1:
            self.put(f"{out} = {out}.reshape(({', '.join(shape)},))")
        return out, letters


def _order(ins):
    """Pairwise contraction order (np.einsum_path's greedy one, equal sizes assumed)."""
    if len(ins) < 3:
        return [(0, 1)] if len(ins) == 2 else []
    dummies = [np.ones((4,) * len(s)) for s in ins]
    path = np.einsum_path(",".join(ins), *dummies, optimize="greedy")[0][1:]
    return [tuple(step) for step in path]


def contraction_source(spec, names, ndims, ct):
    """Source lines computing einsum ``spec`` of the arrays ``names``; returns
    (lines, result name).  A 0-d (scalar) operand multiplies the result."""
    ins, out = linalg.einsum_parse(spec, len(names))
    for s, nd in zip(ins, ndims):
        if len(s) != nd:
            raise TypingError(f"np.einsum: subscripts {s!r} for an operand of {nd} dimensions")
    w = _Writer(ct)
    scalars = [n for n, s in zip(names, ins) if not s]
    items = []
    for k, (n, s) in enumerate(zip(names, ins)):
        if s:
            items.append(w.diagonal(n, s))
    for k, (n, s) in enumerate(items):
        elsewhere = out + "".join(t for j, (_, t) in enumerate(items) if j != k)
        items[k] = w.sum_out(n, s, elsewhere)
    for i, j in _order([s for _, s in items]):
        x, y = items[i], items[j]
        items = [it for k, it in enumerate(items) if k not in (i, j)]
        keep = out + "".join(s for _, s in items)
        if not x[1] or not y[1]:                   # a full sum met a scalar
            r = w.new()
            w.put(f"{r} = {x[0]} * {y[0]}")
            items.append((r, x[1] + y[1]))
        else:
            items.append(w.pair(x, y, keep, want=None if items else out))
    (name, letters), = items
    name, letters = w.sum_out(name, letters, out)
    if letters != out:
        perm = tuple(letters.index(ch) for ch in out)
        r = w.new()
        w.put(f"{r} = np.ascontiguousarray(np.transpose({name}, {perm}))")
        name = r
    for s in scalars:
        name = f"({name} * {s})"
    return w.lines, name


def _prep_operand(name, ty, ct):
    if not isinstance(ty, types.Array):
        return f"{dtype_src(ct)}({name})"
    if np_dtype(ty) != ct:
        return f"{name}.astype({dtype_src(ct)})"
    return name


def _einsum_src(spec, tys, ct, prefix, header):
    names = [f"x{k}" for k in range(len(tys))]
    lines = [header] + [f"    {n} = {_prep_operand(f'{prefix}[{k}]', ty, ct)}"
                        for k, (n, ty) in enumerate(zip(names, tys))]
    body, result = contraction_source(spec, names, _ndims(tys, "einsum"), ct)
    return lines + body + [f"    return {result}"]


def _float_type(fname, tys):
    ct = np.result_type(*[np_dtype(t) for t in tys], np.float32)
    if ct.kind != "f":
        raise TypingError(f"s2s_ad.runtime.{fname} in Numba supports real operands only")
    return ct


@overload(linalg.einsum, prefer_literal=True)
def _einsum(subscripts, operands):
    spec = _literal_str(subscripts, "einsum")
    tys = list(operands) if isinstance(operands, types.BaseTuple) else [operands]
    ct = _float_type("einsum", tys)
    src = _einsum_src(spec, tys, ct, "operands", "def impl(subscripts, operands):")
    return compile_impl("\n".join(src))


@overload(linalg.einsum_grad, prefer_literal=True)
def _einsum_grad(g, subscripts, operands, i):
    spec = _literal_str(subscripts, "einsum_grad")
    if not isinstance(i, types.IntegerLiteral):
        raise TypingError("s2s_ad.runtime.einsum_grad: the operand index must be a constant")
    i = i.literal_value
    tys = list(operands) if isinstance(operands, types.BaseTuple) else [operands]
    ct = np.result_type(grad_dtype(tys[i]), np_dtype(g))
    gspec, extras = linalg_linear.einsum_grad_spec(spec, len(_ndims(tys, "einsum_grad")), i)
    arrays = ["g"] + [f"operands[{j}]" for j in range(len(tys)) if j != i]
    arr_tys = [g] + [t for j, t in enumerate(tys) if j != i]
    lines = ["def impl(g, subscripts, operands, i):"]
    for kind, axis in extras:
        n = f"operands[{i}].shape[{axis}]"
        make = f"np.eye({n}, dtype={dtype_src(ct)})" if kind == "eye" else \
            f"np.ones({n}, {dtype_src(ct)})"
        lines.append(f"    e{len(arrays)} = {make}")
        arrays.append(f"e{len(arrays)}")
        arr_tys.append(types.Array(from_dtype(ct), 2 if kind == "eye" else 1, "C"))
    names = [f"x{k}" for k in range(len(arrays))]
    lines += [f"    {n} = {_prep_operand(a, t, ct)}" for n, a, t in zip(names, arrays, arr_tys)]
    body, result = contraction_source(gspec, names, _ndims(arr_tys, "einsum_grad"), ct)
    return compile_impl("\n".join(lines + body + [f"    return {result}"]))


@overload(linalg.einsum_jvp, prefer_literal=True)
def _einsum_jvp(subscripts, operands, tangents):
    spec = _literal_str(subscripts, "einsum_jvp")
    n = len(operands) if isinstance(operands, types.BaseTuple) else 1
    terms = []
    for i in range(n):
        ops = ", ".join(f"tangents[{j}]" if j == i else f"operands[{j}]" for j in range(n))
        terms.append(f"_einsum({spec!r}, ({ops},))")
    src = "def impl(subscripts, operands, tangents):\n    return " + " + ".join(terms)
    return compile_impl(src, {"_einsum": linalg.einsum})


# -- tensordot: axes read at run time --------------------------------------------------

def _axes_count(axes, na):
    """How many axes are contracted, from the Numba type of ``axes``."""
    if isinstance(axes, types.Omitted):
        axes = axes.value
    if isinstance(axes, int):
        return axes, "int"
    if isinstance(axes, types.IntegerLiteral):
        return axes.literal_value, "int"
    if isinstance(axes, types.Integer):
        raise TypingError("s2s_ad.runtime.tensordot: an int axes must be a constant")
    if isinstance(axes, types.BaseTuple) and len(axes) == 2:
        first = axes[0]
        if isinstance(first, types.BaseTuple):
            return len(first), "lists"
        if isinstance(first, types.Integer):
            return 1, "pair"
    raise TypingError(f"s2s_ad.runtime.tensordot: axes must be an int or a pair of "
                      f"sequences of ints, got {axes}")


@register_jitable
def _free(ndim, contracted):
    """The axes of an ndim-array not in ``contracted``, in order."""
    free = np.empty(ndim - contracted.shape[0], np.int64)
    k = 0
    for d in range(ndim):
        if not np.any(contracted == d):
            free[k] = d
            k += 1
    return free


@register_jitable
def _positive(axes, ndim):
    out = np.empty(len(axes), np.int64)
    for k in range(len(axes)):
        out[k] = axes[k] % ndim
    return out


@register_jitable
def _sorted_partner(mine, other):
    """other[j] for the j that put ``mine`` in increasing order."""
    return other[np.argsort(mine)]


def _tup(name, n):
    return "(" + "".join(f"{name}[{k}], " for k in range(n)) + ")"


def _tdot_lines(x, y, nx, ny, n, cx, cy, out):
    """Source: out = tensordot(x, y, (cx, cy)) with run-time axis arrays cx, cy."""
    fx, fy = nx - n, ny - n
    return [
        f"    fx = _free({nx}, {cx})",
        f"    fy = _free({ny}, {cy})",
        f"    px = np.concatenate((fx, {cx}))",
        f"    py = np.concatenate(({cy}, fy))",
        f"    X = np.ascontiguousarray(np.transpose({x}, {_tup('px', nx)}))",
        f"    Y = np.ascontiguousarray(np.transpose({y}, {_tup('py', ny)}))",
        "    m, k, r = 1, 1, 1",
        f"    for d in range({fx}):",
        "        m *= X.shape[d]",
        f"    for d in range({n}):",
        "        k *= Y.shape[d]",
        f"    for d in range({fy}):",
        f"        r *= Y.shape[{n} + d]",
        f"    {out} = np.dot(X.reshape((m, k)), Y.reshape((k, r)))",
        f"    {out} = {out}.reshape(({''.join(f'X.shape[{d}], ' for d in range(fx))}"
        f"{''.join(f'Y.shape[{n + d}], ' for d in range(fy))}))",
    ]


def _axes_lines(kind, n, na, nb):
    if kind == "int":
        return [f"    ca = np.arange({na - n}, {na})", f"    cb = np.arange({n})"]
    if kind == "pair":
        return [f"    ca = _positive((axes[0],), {na})", f"    cb = _positive((axes[1],), {nb})"]
    return [f"    ca = _positive(axes[0], {na})", f"    cb = _positive(axes[1], {nb})"]


_ENV = {"_free": _free, "_positive": _positive, "_partner": _sorted_partner}


def _cast_lines(names_tys, ct):
    return [f"    {n}_ = {_prep_operand(n, t, ct)}" for n, t in names_tys]


def _cotangent_lines(g, ct):
    """``g_``: the cotangent as an array of dtype ct; a number (the cotangent of a
    full contraction, ``np.tensordot(x, y, 2)`` of matrices) as a 0-d array."""
    if isinstance(g, types.Array):
        return _cast_lines((("g", g),), ct)
    return [f"    g_ = np.full((), {dtype_src(ct)}(g))"]


@overload(linalg.tensordot, prefer_literal=True)
def _tensordot(a, b, axes=2):
    n, kind = _axes_count(axes, a.ndim)
    ct = _float_type("tensordot", [a, b])
    lines = (["def impl(a, b, axes=2):"] + _cast_lines((("a", a), ("b", b)), ct)
             + _axes_lines(kind, n, a.ndim, b.ndim)
             + _tdot_lines("a_", "b_", a.ndim, b.ndim, n, "ca", "cb", "out")
             + ["    return out"])
    return compile_impl("\n".join(lines), _ENV)


@overload(linalg.tensordot_grad_a, prefer_literal=True)
def _tensordot_grad_a(g, a, b, axes=2):
    n, kind = _axes_count(axes, a.ndim)
    ct = np.result_type(grad_dtype(a), np_dtype(g))
    fa, fb = a.ndim - n, b.ndim - n
    lines = (["def impl(g, a, b, axes=2):"] + _cotangent_lines(g, ct)
             + _cast_lines((("b", b),), ct)
             + _axes_lines(kind, n, a.ndim, b.ndim)
             + [f"    gk = np.arange({fa}, {fa + fb})", f"    fb_ = _free({b.ndim}, cb)"]
             + _tdot_lines("g_", "b_", fa + fb, b.ndim, fb, "gk", "fb_", "r")
             # r: a's free axes, then b's contracted ones in b's order, named by a's
             + ["    order = np.concatenate((_free(" + str(a.ndim) + ", ca), _partner(cb, ca)))",
                "    inv = np.argsort(order)",
                f"    return np.ascontiguousarray(np.transpose(r, {_tup('inv', a.ndim)}))"])
    return compile_impl("\n".join(lines), _ENV)


@overload(linalg.tensordot_grad_b, prefer_literal=True)
def _tensordot_grad_b(g, a, b, axes=2):
    n, kind = _axes_count(axes, a.ndim)
    ct = np.result_type(grad_dtype(b), np_dtype(g))
    fa = a.ndim - n
    lines = (["def impl(g, a, b, axes=2):"] + _cotangent_lines(g, ct)
             + _cast_lines((("a", a),), ct)
             + _axes_lines(kind, n, a.ndim, b.ndim)
             + [f"    fa_ = _free({a.ndim}, ca)", f"    gk = np.arange({fa})"]
             + _tdot_lines("a_", "g_", a.ndim, getattr(g, "ndim", 0), fa, "fa_", "gk", "r")
             # r: a's contracted axes in a's order (named by b's), then b's free ones
             + ["    order = np.concatenate((_partner(ca, cb), _free(" + str(b.ndim) + ", cb)))",
                "    inv = np.argsort(order)",
                f"    return np.ascontiguousarray(np.transpose(r, {_tup('inv', b.ndim)}))"])
    return compile_impl("\n".join(lines), _ENV)
