"""The random programs of :mod:`s2s_ad.fuzz`: program ``i`` of seed ``S``, as text.

:class:`Program` turns ``(seed, index)`` into a module's source (constants,
helpers, the entry points ``f`` and ``g`` over one random body), its sample
arguments and its transforms' ``argnums``/``in_axes``; ``source(instrument=
True)`` gives the twin whose comparisons record their distance to a tie
(:data:`INSTRUMENT`).  A pure function of ``(seed, index)``: nothing here
runs the program or the oracle (that is :mod:`s2s_ad.fuzz`), so a program
can be regenerated anywhere from its name.
"""
import numpy as np

LENGTHS = (1, 2, 3, 16, 17)
OUT_LENGTHS = (1, 3, 16, 17)
MARGIN = 1e-3
BATCH = 3

# -- instrumentation ------------------------------------------------------------------

INSTRUMENT = '''
_MARGINS = []


def _gt(a, b):
    _MARGINS.append(float(np.min(np.abs(np.asarray(a) - np.asarray(b)), initial=np.inf)))
    return a > b


def _maximum(a, b):
    _MARGINS.append(float(np.min(np.abs(np.asarray(a) - np.asarray(b)), initial=np.inf)))
    return np.maximum(a, b)


def _minimum(a, b):
    _MARGINS.append(float(np.min(np.abs(np.asarray(a) - np.asarray(b)), initial=np.inf)))
    return np.minimum(a, b)


def _clip(a, lo, hi):
    d = np.minimum(np.abs(np.asarray(a) - lo), np.abs(np.asarray(a) - hi))
    _MARGINS.append(float(np.min(d, initial=np.inf)))
    return np.clip(a, lo, hi)


def _sort(a):
    _MARGINS.append(float(np.min(np.diff(np.sort(a)), initial=np.inf)))
    return np.sort(a)
'''


class _Text:
    """Renders comparisons plainly, or through the recording functions."""

    def __init__(self, instrument):
        self.instrument = instrument

    def gt(self, a, b):
        return f"_gt({a}, {b})" if self.instrument else f"{a} > {b}"

    def call(self, fn, *args):
        return f"_{fn}({', '.join(args)})" if self.instrument else f"np.{fn}({', '.join(args)})"


# -- the generator --------------------------------------------------------------------


def _c(rng, lo=-0.9, hi=0.9):
    return repr(round(float(rng.uniform(lo, hi)), 2))


class _Body:
    """A random straight-line-with-control-flow body over ``x`` (length n)."""

    def __init__(self, rng, n, has_k, has_a, helpers):
        self.rng, self.n, self.has_k, self.has_a = rng, n, has_k, has_a
        self.helpers = helpers
        self.vecs = ["x"]
        self.scals = ["a"] if has_a else []
        self.count = 0
        self.stmts = []        # list of functions T -> list of lines (T: _Text)

    def fresh(self, kind):
        self.count += 1
        return f"{kind}{self.count}"

    def pick(self, options):
        return options[self.rng.integers(len(options))]

    # expressions are functions of T, so the same draw renders plain and instrumented
    def vexpr(self, depth=2):
        r = self.rng
        if depth == 0 or r.random() < 0.3:
            leaf = self.pick(["var", "var", "C", "rev"])
            if leaf == "var":
                v = self.pick(self.vecs)
                return lambda T: v
            if leaf == "C":
                return lambda T: "C"
            v = self.pick(self.vecs)
            return lambda T: f"{v}[::-1]"
        kind = self.pick(["sin", "tanh", "exp", "sqrt", "log", "pow", "+", "-", "*", "scale",
                          "sscale", "K", "where", "maximum", "minimum", "clip", "helper"])
        a = self.vexpr(depth - 1)
        if kind == "sin":
            return lambda T: f"np.sin({a(T)})"
        if kind == "tanh":
            return lambda T: f"np.tanh({a(T)})"
        if kind == "exp":
            return lambda T: f"np.exp(0.5 * np.tanh({a(T)}))"
        if kind == "sqrt":
            return lambda T: f"np.sqrt(({a(T)}) ** 2 + 0.5)"
        if kind == "log":
            return lambda T: f"np.log(1.0 + ({a(T)}) ** 2)"
        if kind == "pow":
            p = self.pick(["2", "3", "2.0"])
            return lambda T: f"np.tanh({a(T)}) ** {p}"
        if kind in ("+", "-", "*"):
            b = self.vexpr(depth - 1)
            return lambda T: f"({a(T)} {kind} {b(T)})"
        if kind == "scale":
            c = _c(r)
            return lambda T: f"{c} * {a(T)}"
        if kind == "sscale":
            s = self.sexpr(0)
            return lambda T: f"np.tanh({s(T)}) * {a(T)}"
        if kind == "K" and self.has_k:
            return lambda T: f"K @ np.tanh({a(T)})"
        if kind == "where":
            c, k = _c(r), _c(r, 0.1, 0.5)
            return lambda T: f"np.where({T.gt(a(T), c)}, {a(T)}, {k} * {a(T)})"
        if kind in ("maximum", "minimum"):
            b = self.vexpr(depth - 1)
            return lambda T: T.call(kind, a(T), b(T))
        if kind == "clip":
            return lambda T: T.call("clip", a(T), "-0.5", "0.5")
        usable = [h for h in ("h_horner", "h_scan", "h_gate") if h in self.helpers]
        if kind == "helper" and usable:
            h = self.pick(usable)
            if h == "h_gate":
                s = self.sexpr(0)
                return lambda T: f"h_gate({a(T)}, {s(T)})"
            if h == "h_horner":
                return lambda T: f"h_horner(np.tanh({a(T)}))"
            return lambda T: f"{h}({a(T)})"
        return a

    def sexpr(self, depth=2):
        r = self.rng
        n = self.n
        if depth == 0 or r.random() < 0.3:
            leaf = self.pick(["var", "elem", "elem", "const"] if self.scals
                             else ["elem", "elem", "const"])
            if leaf == "var":
                s = self.pick(self.scals)
                return lambda T: s
            if leaf == "elem":
                v, j = self.pick(self.vecs), int(r.integers(0, n))
                return lambda T: f"{v}[{j}]"
            c = _c(r)
            return lambda T: c
        kind = self.pick(["sum", "mean", "dot", "matmul", "quad", "shift", "sin", "tanh",
                          "*", "+", "scale", "sqrt", "exp", "helper", "smax"])
        if kind in ("sum", "mean"):
            v = self.vexpr(depth - 1)
            return lambda T: f"np.{kind}({v(T)})"
        if kind in ("dot", "matmul"):
            v, w = self.vexpr(depth - 1), self.vexpr(depth - 1)
            return (lambda T: f"np.dot({v(T)}, {w(T)})") if kind == "dot" \
                else (lambda T: f"({v(T)} @ {w(T)})")
        if kind == "quad" and self.has_k:
            v = self.vexpr(depth - 1)
            return lambda T: f"(np.tanh({v(T)}) @ K @ np.tanh({v(T)}))"
        if kind == "shift":
            v = self.vexpr(depth - 1)
            return lambda T: f"np.sum(({v(T)})[1:] * ({v(T)})[:-1])"
        if kind == "helper" and "h_weighted" in self.helpers:
            v = self.vexpr(depth - 1)
            if "h_newton" in self.helpers and r.random() < 0.5:
                s = self.sexpr(depth - 1)
                return lambda T: f"h_newton({s(T)})"
            return lambda T: f"h_weighted({v(T)})"
        if kind == "smax":
            a, c, which = self.sexpr(depth - 1), _c(r), self.pick(["maximum", "minimum"])
            return lambda T: T.call(which, a(T), c)
        a = self.sexpr(depth - 1)
        if kind in ("sin", "tanh"):
            return lambda T: f"np.{kind}({a(T)})"
        if kind == "sqrt":
            return lambda T: f"np.sqrt(({a(T)}) ** 2 + 1.0)"
        if kind == "exp":
            return lambda T: f"np.exp(np.tanh({a(T)}))"
        if kind == "scale":
            c = _c(r)
            return lambda T: f"{c} * {a(T)}"
        b = self.sexpr(depth - 1)
        if kind == "*":
            return lambda T: f"np.tanh({a(T)}) * {b(T)}"
        return lambda T: f"({a(T)} + {b(T)})"

    def statement(self, depth=1):
        r = self.rng
        kinds = ["vassign", "vassign", "sassign", "sassign", "forsum", "buffer", "writes"]
        if depth > 0:
            kinds += ["if", "while", "forloop"]
        if "h_fill" in self.helpers:
            kinds += ["fill"]
        kind = self.pick(kinds)
        n = self.n
        if kind == "vassign":
            e, v = self.vexpr(), self.fresh("v")
            self.vecs.append(v)
            return lambda T, pad: [f"{pad}{v} = {e(T)}"]
        if kind == "sassign":
            e, s = self.sexpr(), self.fresh("s")
            self.scals.append(s)
            return lambda T, pad: [f"{pad}{s} = {e(T)}"]
        if kind == "forsum":
            s, v, w = self.fresh("s"), self.pick(self.vecs), self.pick(self.vecs)
            c = _c(r)
            bound = self.pick([str(n), "x.shape[0]"])
            self.scals.append(s)
            return lambda T, pad: [f"{pad}{s} = 0.0", f"{pad}for i in range({bound}):",
                                   f"{pad}    {s} = {s} + np.sin({v}[i] + {c}) * {w}[i]"]
        if kind == "buffer":
            v, w = self.fresh("v"), self.pick(self.vecs)
            e = self.sexpr(0)
            self.vecs.append(v)
            return lambda T, pad: [f"{pad}{v} = np.zeros({n})", f"{pad}for i in range({n}):",
                                   f"{pad}    {v}[i] = np.tanh({w}[i]) * {e(T)} + {w}[{n - 1} - i]"]
        if kind == "writes":
            v, w = self.fresh("v"), self.pick(self.vecs)
            j = int(r.integers(0, n))
            e = self.sexpr()
            self.vecs.append(v)
            return lambda T, pad: [f"{pad}{v} = {w} * 1.0", f"{pad}{v}[{j}] = {e(T)}",
                                   f"{pad}{v}[0] += {w}[{n - 1}] * 0.5"]
        if kind == "fill":
            v, w = self.fresh("v"), self.pick(self.vecs)
            form = self.pick(["bare", "assigned"])
            self.vecs.append(v)
            call = f"h_fill({v}, {w})" if form == "bare" else f"_ = h_fill({v}, {w})"
            return lambda T, pad: [f"{pad}{v} = np.zeros({n})", f"{pad}{call}"]
        if kind == "if":
            s = self.fresh("s")
            test, c = self.sexpr(1), _c(r)
            a, b = self.sexpr(), self.sexpr()
            self.scals.append(s)
            return lambda T, pad: [f"{pad}if {T.gt(test(T), c)}:", f"{pad}    {s} = {a(T)}",
                                   f"{pad}else:", f"{pad}    {s} = {b(T)}"]
        if kind == "while":
            s, k = self.fresh("s"), self.fresh("k")
            init, step = self.sexpr(1), self.sexpr(1)
            trips, c = int(r.integers(1, 5)), _c(r, 0.2, 0.8)
            self.scals.append(s)
            return lambda T, pad: [f"{pad}{s} = {init(T)}", f"{pad}{k} = 0",
                                   f"{pad}while {k} < {trips}:",
                                   f"{pad}    {s} = np.tanh({c} * {s} + {step(T)})",
                                   f"{pad}    {k} += 1"]
        # forloop: a loop-carried vector update, reading elements
        v, w = self.fresh("v"), self.pick(self.vecs)
        trips, c = int(r.integers(1, 4)), _c(r)
        self.vecs.append(v)
        return lambda T, pad: [f"{pad}{v} = {w} * 1.0", f"{pad}for t in range({trips}):",
                               f"{pad}    {v} = np.tanh({v} * {c} + {v}[0])"]

    def build(self, count, extras=None, inplace=None):
        self.stmts = []
        for _ in range(count):
            self.stmts.append(self.statement())
            if extras is not None and extras.rng.random() < 0.4:
                self.stmts.append(extras.statement())
            if inplace is not None and inplace.rng.random() < 0.4:
                self.stmts.append(inplace.statement())
        if extras is not None:
            self.stmts.append(extras.statement())
        if inplace is not None:
            self.stmts.append(inplace.statement())


HELPERS = {
    "h_horner": lambda T: ["def h_horner(y):", "    p = np.zeros_like(y)",
                           "    for k in range(COEF.shape[0]):",
                           "        p = p * y + COEF[k]", "    return p"],
    "h_scan": lambda T: ["def h_scan(v):", "    out = np.zeros(v.shape[0])", "    run = 0.0",
                         "    for i in range(v.shape[0]):",
                         "        run = 0.5 * run + np.sin(v[i])", "        out[i] = run",
                         "    return out"],
    "h_gate": lambda T: ["def h_gate(v, s):",
                         f"    return np.where({T.gt('v', '0.1')}, v * s, "
                         f"{T.call('minimum', 'v', '0.0')})"],
    "h_weighted": lambda T: ["def h_weighted(v):", "    acc = 0.0",
                             "    for i in range(v.shape[0]):",
                             "        acc = acc + np.tanh(v[i]) * C[i]", "    return acc"],
    "h_newton": lambda T: ["def h_newton(s):", "    t = 1.0 + s * s", "    r = 1.0", "    k = 0",
                           "    while k < 5:", "        r = 0.5 * (r + t / r)", "        k += 1",
                           "    return r"],
    "h_fill": lambda T: ["def h_fill(buf, v):", "    for i in range(v.shape[0]):",
                         "        buf[i] = v[i] * 2.0 + 0.5"],
}


#: The share of programs with "first hour" statements (see :class:`_Extras`).
EXTRAS_SHARE = 0.5

#: Module-level helpers the "first hour" statements call: in-place writes into
#: an argument (with a keyword argument), and functions transformed inside.
EXTRA_HELPERS = {
    "x_axpy": lambda T: ["def x_axpy(buf, v, scale=1.0):", "    for i in range(v.shape[0]):",
                         "        buf[i] += scale * np.tanh(v[i])"],
    "x_shift": lambda T: ["def x_shift(buf, c):", "    buf[1:] = buf[1:] + c * buf[:-1]",
                          "    return np.sum(buf)"],
    "x_inner": lambda T: ["def x_inner(z):", "    return np.sum(np.sin(z) * z)"],
}


class _Extras:
    """Statements with the features users reach for in their first hour.

    Each rebinds the newest vector or scalar of the body (``s3 = s3 + 0.1 *
    ...``), one after some statements and one at the end, so the rest of the
    body, drawn from the main stream, is unchanged.  The
    update's value is one of: a comprehension or generator expression (over
    ``range``, ``zip``, ``enumerate``, nested, filtered), a local lambda or
    ``def`` (called with a keyword argument), a helper writing into an array
    in place (``x_axpy(buf, v, scale=...)``, ``x_shift``), a library function
    (``np.var``, ``np.cumsum``, ``np.sort``, ``np.take``, ``np.linalg.solve``...)
    or a transform called inside (``ad.grad``, ``ad.jvp``, ``ad.vmap``,
    ``ad.hessian``); sometimes inside a ``for`` loop or an ``if``.
    """

    def __init__(self, rng, body, program):
        self.rng, self.body, self.program = rng, body, program
        self.count = 0

    def pick(self, options):
        return options[self.rng.integers(len(options))]

    def helper(self, name):
        if name not in self.program.extra_helpers:
            self.program.extra_helpers.append(name)
        return name

    def statement(self):
        b, r, n = self.body, self.rng, self.body.n
        self.count += 1
        k = self.count
        v, w = self.pick(b.vecs), self.pick(b.vecs)
        # The newest vector or scalar: the entry points return the last ones.
        target = self.pick([b.vecs[-1]] + b.scals[-1:])
        vector_ok = target in b.vecs
        c = _c(r, 0.2, 0.8)
        kinds = ["genexp_range", "genexp_zip", "genexp_enum", "listcomp", "nested", "filtered",
                 "lambda", "def_kw", "axpy", "shift", "var", "cumsum", "sort", "take", "flip",
                 "logaddexp", "einsum", "outer", "tile", "grad", "jvp", "vmap"]
        if n >= 2:
            kinds += ["std", "diff"]
        if n <= 3:
            kinds += ["hessian"]
        if b.has_k:
            kinds += ["solve", "slogdet", "inv", "norm"]
        if vector_ok:
            kinds += ["stack", "vgrad"]
        kind = self.pick(kinds)
        pre = []           # lines before the update, rendered with T
        if kind == "genexp_range":
            e = lambda T: f"sum(np.sin({v}[i]) * {w}[i] for i in range({n}))"  # noqa: E731
        elif kind == "genexp_zip":
            e = lambda T: f"sum(p * np.tanh(q) for p, q in zip({v}, {w}))"  # noqa: E731
        elif kind == "genexp_enum":
            e = lambda T: f"sum((i + 1.0) * np.sin(p) for i, p in enumerate({v}))"  # noqa: E731
        elif kind == "listcomp":
            e = lambda T: f"sum([p * p * {c} for p in {v}])"  # noqa: E731
        elif kind == "nested":
            e = lambda T: (f"sum({v}[i] * np.tanh({w}[j]) for i in range({n}) "  # noqa: E731
                           f"for j in range(i + 1))")
        elif kind == "filtered":
            e = lambda T: f"sum(p * p for p in {v} if {T.gt('p', c)})"  # noqa: E731
        elif kind == "stack":
            e = lambda T: f"np.array([np.sin({v}[i]) * {w}[i] for i in range({n})])"  # noqa: E731
        elif kind == "lambda":
            name = f"lam{k}"
            pre = [lambda T: f"{name} = lambda z: np.tanh(z) * {c} + z * z"]
            e = lambda T: f"np.sum({name}({v}))"  # noqa: E731
        elif kind == "def_kw":
            name = f"loc{k}"
            pre = [lambda T: f"def {name}(z, scale=1.0):",
                   lambda T: f"    return np.sin(z * scale) * {w}[0]"]
            e = lambda T: f"np.sum({name}({v}, scale={c}))"  # noqa: E731
        elif kind == "axpy":
            h, buf = self.helper("x_axpy"), f"buf{k}"
            pre = [lambda T: f"{buf} = {w} * 1.0", lambda T: f"{h}({buf}, {v}, scale={c})"]
            e = lambda T: f"np.sum({buf} * {v})"  # noqa: E731
        elif kind == "shift":
            h, buf = self.helper("x_shift"), f"buf{k}"
            pre = [lambda T: f"{buf} = np.tanh({v})"]
            e = lambda T: f"{h}({buf}, {c}) + np.sum({buf} * {w})"  # noqa: E731
        elif kind == "var":
            e = lambda T: f"np.var({v})"  # noqa: E731
        elif kind == "std":
            e = lambda T: f"np.std({v} + {c} * np.arange({n}))"  # noqa: E731
        elif kind == "cumsum":
            e = lambda T: f"np.sum(np.cumsum(np.sin({v})) * C)"  # noqa: E731
        elif kind == "sort":
            e = lambda T: f"np.sum({T.call('sort', v)} * C)"  # noqa: E731
        elif kind == "take":
            i, j = int(r.integers(0, n)), int(r.integers(0, n))
            e = lambda T: f"np.sum(np.take({v}, [{i}, {j}]) * {c})"  # noqa: E731
        elif kind == "flip":
            e = lambda T: f"np.sum(np.flip({v}) * {w})"  # noqa: E731
        elif kind == "diff":
            e = lambda T: f"np.sum(np.diff({v}) ** 2)"  # noqa: E731
        elif kind == "logaddexp":
            e = lambda T: f"np.sum(np.logaddexp({v}, {c} * {w}))"  # noqa: E731
        elif kind == "einsum":
            e = lambda T: f"np.einsum('i,i->', {v}, np.tanh({w}))"  # noqa: E731
        elif kind == "outer":
            e = lambda T: f"np.sum(np.outer({v}, {w}) * {c})"  # noqa: E731
        elif kind == "tile":
            e = lambda T: f"np.sum(np.tile({v}, 2)[{n}:] * np.repeat({w}, 2)[::2])"  # noqa: E731
        elif kind in ("solve", "slogdet", "inv", "norm"):
            spd = f"(K @ K.T + {n}.0 * np.eye({n}))"
            e = {"solve": lambda T: f"np.sum(np.linalg.solve({spd}, {v}))",
                 "slogdet": lambda T: f"np.linalg.slogdet({spd})[1]",
                 "inv": lambda T: f"np.sum(np.linalg.inv({spd}) * {c})",
                 "norm": lambda T: f"np.linalg.norm(K @ {v} + 1.0)"}[kind]
        elif kind == "grad":
            e = lambda T: (f"np.sum(ad.grad(lambda z: np.sum(np.sin(z) * {w}))({v}) "  # noqa: E731
                           f"* {c})")
        elif kind == "vgrad":
            h = self.helper("x_inner")
            e = lambda T: f"ad.grad({h})({v}) * {c}"  # noqa: E731
        elif kind == "jvp":
            h = self.helper("x_inner")
            e = lambda T: f"ad.jvp({h}, ({v},), ({w},))[1]"  # noqa: E731
        elif kind == "vmap":
            e = lambda T: f"np.sum(ad.vmap(lambda z: np.tanh(z * {c}))({v}))"  # noqa: E731
        else:                                    # hessian (short vectors only)
            h = self.helper("x_inner")
            e = lambda T: f"np.sum(ad.hessian({h})({v}) * {c})"  # noqa: E731
        wrap = self.pick(["none", "none", "for", "if"])
        test_v, test_c = self.pick(b.vecs), _c(r)
        j = int(r.integers(0, n))

        def render(T, pad):
            lines = [f"{pad}{p(T)}" for p in pre]
            update = f"{target} = {target} + 0.1 * {e(T)}"
            if wrap == "for":
                return lines + [f"{pad}for r{k} in range(2):", f"{pad}    {update}"]
            if wrap == "if":
                return lines + [f"{pad}if {T.gt(f'{test_v}[{j}]', test_c)}:",
                                f"{pad}    {update}"]
            return lines + [f"{pad}{update}"]
        return render


#: The share of programs with in-place statements (see :class:`_InPlace`).
INPLACE_SHARE = 0.25

#: The helper the in-place statements call: it writes into its argument.
INPLACE_HELPERS = {
    "p_shift": lambda T: ["def p_shift(buf, c):", "    buf[1:] = buf[1:] + c * buf[:-1]",
                          "    buf[0] = buf[0] * 0.9"],
}

#: Rules whose adjoint reads their output, as the in-place statements apply them.
OUT_READERS = ("np.tanh({})", "np.exp(0.5 * np.tanh({}))", "np.sqrt(({}) ** 2 + 0.5)",
               "1.0 / (1.0 + ({}) ** 2)", "np.sin({})")


class _InPlace:
    """Statements that write in place into arrays an earlier adjoint reads.

    Each makes a new vector ``u`` from one of the body's: the output of a rule
    whose adjoint reads it (``np.tanh``, ``np.exp``, ``np.sqrt``, ``1 / x``,
    ``np.sin``), or an operand of a product, and then writes into it -- a
    slice update (``u[1:] = u[1:] + c * u[:-1]``), an element, ``+=`` and
    ``*=``, ``+=`` through a view (``tail = u[1:]; tail += ...``), a helper
    writing into its argument, element writes in an inner loop, a write in
    one branch -- in a ``for`` or ``while`` loop whose next iteration applies
    the rule again, or once after a product read it.  The vector becomes the
    body's newest, so the entry points return it.
    """

    def __init__(self, rng, body, program):
        self.rng, self.body, self.program = rng, body, program
        self.count = 0

    def pick(self, options):
        return options[self.rng.integers(len(options))]

    def statement(self):
        b, r, n = self.body, self.rng, self.body.n
        self.count += 1
        k = self.count
        u, w, v = f"u{k}", self.pick(b.vecs), self.pick(b.vecs)
        act = self.pick(OUT_READERS)
        c, j, tie = _c(r, 0.2, 0.7), int(r.integers(0, n)), _c(r)
        trips = int(r.integers(1, 4))
        kind = self.pick(["slice", "element", "iadd", "imul", "view", "helper", "inner",
                          "branch", "operand", "operand"])
        if n < 2 and kind in ("slice", "view", "inner"):
            kind = "element"
        write = {
            "slice": lambda T: [f"{u}[1:] = {u}[1:] + {c} * {u}[:-1]"],
            "element": lambda T: [f"{u}[{j}] = {u}[{j}] * {c} + 0.1 * {v}[{j}]"],
            "iadd": lambda T: [f"{u} += {c} * {v}"],
            "imul": lambda T: [f"{u} *= {c}"],
            "view": lambda T: [f"tail{k} = {u}[1:]", f"tail{k} += {c} * {v}[:-1]"],
            "helper": lambda T: [f"p_shift({u}, {c})"],
            "inner": lambda T: [f"for i in range(1, {n}):",
                                f"    {u}[i] = {u}[i] + {c} * {u}[i - 1]"],
            "branch": lambda T: [f"if {T.gt(f'{u}[{j}]', tie)}:",
                                 f"    {u}[0] = {u}[0] * 0.5 + 0.2",
                                 "else:", f"    {u}[{j}] = {u}[{j}] - {c} * {v}[{j}]"],
        }
        if kind == "helper" and "p_shift" not in self.program.extra_helpers:
            self.program.extra_helpers.append("p_shift")
        b.vecs.append(u)
        if kind == "operand":
            s = b.fresh("s")
            b.scals.append(s)
            return lambda T, pad: [f"{pad}{u} = {w} * 1.0",
                                   f"{pad}{s} = np.sum({u} * {v}) + np.sum(np.tanh({u}))",
                                   f"{pad}{u}[{j}] = {s} * 0.3",
                                   f"{pad}{u}[0] = {u}[0] + {c} * {v}[{n - 1}]"]
        lines = write[kind]
        loop = self.pick(["for", "for", "while"])

        def render(T, pad):
            body = [f"{pad}    {ln}" for ln in lines(T)] + [f"{pad}    {u} = {act.format(u)}"]
            if loop == "for":
                return [f"{pad}{u} = {act.format(w)}", f"{pad}for t{k} in range({trips}):"] + body
            head = [f"{pad}{u} = {act.format(w)}", f"{pad}k{k} = 0",
                    f"{pad}while k{k} < {trips}:"]
            return head + body + [f"{pad}    k{k} += 1"]
        return render


class Program:
    """Program ``index`` of ``seed``: its source, sample arguments and transforms."""

    def __init__(self, seed, index, extras=True, inplace=None):
        self.seed, self.index = seed, index
        self.name = f"fuzz_{seed}_{index}"
        rng = np.random.default_rng([seed, index])
        self.n = n = int(rng.choice(LENGTHS))
        self.m = int(rng.choice(OUT_LENGTHS))
        self.has_k = bool(rng.random() < 0.5)
        self.has_a = bool(rng.random() < 0.5)
        names = sorted(HELPERS)
        self.helpers = [h for h in names if rng.random() < (0.1 if h == "h_fill" else 0.35)]
        self.consts = {"C": rng.normal(size=n).round(2),
                       "M": (rng.normal(size=(self.m, n)) / np.sqrt(n)).round(2),
                       "COEF": rng.normal(size=4).round(2)}
        body = _Body(rng, n, self.has_k, self.has_a, self.helpers)
        # The "first hour" statements (comprehensions, local lambdas and defs,
        # in-place helpers, keyword arguments, library functions, transforms
        # inside) come from a stream of their own: with ``extras=False``, or
        # when the draw says none, the program is the one this generator made
        # before they existed.
        xrng = np.random.default_rng([seed, index, 1])
        self.extras = bool(extras and xrng.random() < EXTRAS_SHARE)
        self.extra_helpers = []
        # The in-place statements have a stream of their own too; ``inplace``
        # True gives every program some, False none, None the share
        # :data:`INPLACE_SHARE`.
        prng = np.random.default_rng([seed, index, 2])
        self.inplace = bool(prng.random() < INPLACE_SHARE) if inplace is None else inplace
        body.build(int(rng.integers(2, 6)), _Extras(xrng, body, self) if self.extras else None,
                   _InPlace(prng, body, self) if self.inplace else None)
        self.body = body
        last_v, last_s = body.vecs[-1], (body.scals[-1] if body.scals else "0.5")
        other_v = body.pick(body.vecs)
        self.f_ret = f"{last_s} + np.sum({last_v} * {other_v}) + np.sin(np.sum(x))"
        self.g_ret = body.pick([f"np.tanh({last_v}) * {last_s} + {other_v}",
                                f"M @ np.tanh({last_v}) + {last_s}"])
        self.params = ["x"] + (["K"] if self.has_k else []) + (["a"] if self.has_a else [])
        self.k_axis = 0 if self.has_k and rng.random() < 0.3 else None
        self.a_axis = 0 if self.has_a and rng.random() < 0.6 else None
        self.argnums_choice = int(rng.integers(0, 3))
        self.rng = rng

    def source(self, instrument=False, keep=None, only=None):
        """The module's text; ``keep``: indices of the body statements to keep (all by
        default), ``only``: the one entry point to write (both by default)."""
        T = _Text(instrument)
        stmts = self.body.stmts if keep is None else [self.body.stmts[k] for k in keep]
        body = [ln for s in stmts for ln in s(T, "    ")]
        entries = [(n, r) for n, r in (("f", self.f_ret), ("g", self.g_ret))
                   if only is None or n == only]
        text = "\n".join(body + [r for _, r in entries])
        lines = ["import numpy as np", ""]
        if "ad." in text:
            lines[1:1] = ["", "import s2s_ad as ad"]
        for k, v in self.consts.items():
            lines.append(f"{k} = np.array({v.tolist()!r})")
        if instrument:
            lines.append(INSTRUMENT)
        for h in self.helpers:
            if keep is None or h in text:
                lines += ["", ""] + HELPERS[h](T)
        for h in self.extra_helpers:
            if f"{h}(" in text:
                lines += ["", ""] + {**EXTRA_HELPERS, **INPLACE_HELPERS}[h](T)
        for fname, ret in entries:
            lines += ["", "", f"def {fname}({', '.join(self.params)}):", *body,
                      f"    return {ret}"]
        return "\n".join(lines) + "\n"

    @property
    def argnums(self):
        k = len(self.params)
        return [0, tuple(range(k)), k - 1][self.argnums_choice] if k > 1 else 0

    @property
    def in_axes(self):
        return (0,) + ((self.k_axis,) if self.has_k else ()) + \
            ((self.a_axis,) if self.has_a else ())

    def draw(self, rng):
        """(sample args, batched args) for this program."""
        n = self.n
        one = [rng.normal(size=n) * 0.8]
        batch = [rng.normal(size=(BATCH, n)) * 0.8]
        if self.has_k:
            one.append(rng.normal(size=(n, n)) / np.sqrt(n))
            batch.append(rng.normal(size=(BATCH, n, n)) / np.sqrt(n) if self.k_axis == 0
                         else one[-1].copy())
        if self.has_a:
            one.append(float(rng.uniform(-1.0, 1.0)))
            batch.append(rng.uniform(-1.0, 1.0, size=BATCH) if self.a_axis == 0
                         else one[-1])
        return tuple(one), tuple(batch)
