"""Matrix functions: ``np.linalg`` and the linear-algebra array functions.

Each primitive is one declaration: how it is printed (a runtime helper
``rt.X`` that works in NumPy and under Numba), its VJP and JVP templates,
its output rank (``rank``) and its batching rule (``batch``).  Functions
with several outputs (``slogdet``, ``eigh``, ``svd``, ``qr``, ``lstsq``)
declare one primitive per output (``parts``); an output the code never
reads is never computed.

Derivatives assume what the mathematics needs: an invertible matrix for
``solve``/``inv``/``det``/``slogdet``, a symmetric positive definite one for
``cholesky``, distinct eigenvalues for ``eigh`` and distinct non-zero singular
values for ``svd``, full rank for ``lstsq``/``qr``, a locally constant number of
singular values above ``pinv``'s cutoff (``rcond``).  A repeated
eigenvalue or singular value divides by zero: inf/nan, never a finite wrong
value.  ``eigh`` and ``cholesky`` read the lower triangle only (as NumPy's
do), so their adjoints are lower triangular.

``ad.vmap`` batches the ``np.linalg`` functions by running the per-example
function once per example (:func:`batch_loop`); ``einsum`` and ``tensordot``
batch by contracting one more axis.
"""
import ast
import math

import numpy as np

from ..runtime import linalg as rt_linalg
from .registry import RULES, Rule, Unvectorizable, linear, register

# -- rank rules ---------------------------------------------------------------------


def _const(atom, default=None):
    """A static parameter's value (a literal tuple arrives as a Tup of Consts)."""
    items = getattr(atom, "items", None)
    if items is not None:
        return tuple(_const(x) for x in items)
    return getattr(atom, "value", default)


def _same_rank(args, params):
    return args[0]


def _scalar(args, params):
    return 0


def _vector(args, params):
    return 1


def _matrix(args, params):
    return 2


def _solve_rank(args, params):
    return args[1]


def _trace_rank(args, params):
    return None if args[0] is None else args[0] - 2


def _diagonal_rank(args, params):
    return None if args[0] is None else args[0] - 1


def _diag_rank(args, params):
    return None if args[0] is None else 3 - args[0]


def _kron_rank(args, params):
    return None if None in args else max(args)


def _tensordot_rank(args, params):
    if None in args:
        return None
    axes = _const(params.get("axes"), 2)
    n = axes if isinstance(axes, int) else len(axes[0]) if isinstance(axes[0], (tuple, list)) \
        else 1
    return args[0] + args[1] - 2 * n


def _einsum_rank(args, params):
    text = str(_const(params.get("subscripts"), "")).replace(" ", "")
    if "->" in text:
        return len(text.split("->")[1])
    letters = text.replace(",", "")
    return sum(1 for ch in set(letters) if letters.count(ch) == 1)


def _norm_rank(args, params):
    if args[0] is None:
        return None
    axis = _const(params.get("axis"))
    if _const(params.get("keepdims"), False):
        return args[0]
    if axis is None:
        return 0
    return args[0] - (len(axis) if isinstance(axis, tuple) else 1)


def _lstsq_x_rank(args, params):
    return args[1]


# -- batching: once per example ------------------------------------------------------------

_MAPPED: dict = {}


def _mapped(rule):
    """The internal primitive running ``rule`` once per example of a batch."""
    if rule.name not in _MAPPED:
        every = ", ".join(rule.params)
        vjp = {p: f"rt.map_rule_vjp(rule, batched, {p!r}, g, out, {every})"
               for p in rule.diff_operands}
        _MAPPED[rule.name] = Rule(
            name=f"rt.map_rule[{rule.name}]", params=("rule", "batched") + rule.params,
            operands=rule.operands, emit="rt.map_rule", defaults=dict(rule.defaults),
            vjp=vjp, jvp={p: "rt.map_rule_jvp(unsupported)" for p in vjp},
            # What has no derivative per example has none batched: a higher
            # derivative through it must be refused, not taken as zero.
            nondiff=rule.nondiff, piecewise=rule.piecewise, undiff=rule.undiff)
    return _MAPPED[rule.name]


def batch_loop(vz, s, body):
    """vmap of ``s``: its rule applied to each example (NumPy's own loop for np.linalg)."""
    from ..ir import Const, Tup
    if any(isinstance(a, Tup) for a in s.args) or any(vz.is_b(v) for v in s.params.values()):
        raise Unvectorizable(f"{s.rule.name} with a batched option", s.loc)
    flags = tuple(vz.is_b(a) for a in s.args)
    params = {"rule": Const(s.rule.name), "batched": Const(flags), **s.params}
    vz.emit(body, _mapped(s.rule), s.args, params, s.loc, s.targets[0])


def _rule_by_name(name):
    from .internal import INTERNAL
    if name in RULES:
        return RULES[name]
    return next(r for r in list(INTERNAL.values()) + list(_PARTS.values()) if r.name == name)


_CODE: dict = {}


def apply_rule(name, batched, vjp, args, kwargs):
    """Run rule ``name`` (or, with ``vjp = (operand, g, out)``, its VJP template)
    over the examples of a batch; see ``rt.map_rule``."""
    from .. import runtime as rt
    rule = _rule_by_name(name)
    values = dict(zip(rule.params, args))
    values.update(kwargs)
    for p, d in rule.defaults.items():
        values.setdefault(p, d)
    flags = dict(zip(rule.operands, batched))
    size = next(len(values[p]) for p, b in flags.items() if b)
    if vjp is None:
        fn = _resolve(rule.emit, rt)
        results = []
        for k in range(size):
            row = [values[p][k] if flags.get(p) else values[p] for p in rule.params]
            results.append(fn(*row))
        return np.stack([np.asarray(r) for r in results])
    which, g, out = vjp
    key = (name, which)
    if key not in _CODE:
        _CODE[key] = compile(ast.Expression(rule.template(which, None)), f"<vjp of {name}>",
                             "eval")
    results = []
    for k in range(size):
        env = {p: values[p][k] if flags.get(p) else values[p] for p in rule.params}
        env.update(g=g[k], out=out[k], np=np, math=math, rt=rt)
        results.append(np.asarray(eval(_CODE[key], env)))   # noqa: S307 - a rule's template
    stacked = np.stack(results)
    return stacked if flags[which] else np.sum(stacked, axis=0)


rt_linalg.RULE_RUNNER = apply_rule


def _resolve(dotted, rt):
    head, *rest = dotted.split(".")
    obj = {"rt": rt, "np": np, "math": math}[head]
    for part in rest:
        obj = getattr(obj, part)
    return obj


# -- declarations ---------------------------------------------------------------------------

_PARTS: dict = {}


def _decl(name, obj, params, operands, vjp, jvp, *, rank, defaults=None, emit=None,
          nondiff_=False, undiff=(), samples=None):
    rule = Rule(name=name, params=tuple(params), operands=tuple(operands),
                emit=emit or "rt." + name.split(".")[-1], defaults=dict(defaults or {}),
                vjp=dict(vjp), jvp=dict(jvp), nondiff=nondiff_, rank=rank, batch=batch_loop,
                undiff=tuple(undiff), samples=samples)
    return register(rule, obj) if obj is not None else rule


def _multi(name, obj, params, parts, defaults=None):
    """A function with several outputs: one primitive per output, in ``parts``."""
    for part in parts:
        _PARTS[part.name] = part
        RULES.setdefault(part.name, part)
    return register(Rule(name=name, params=tuple(params), operands=(), emit=None,
                         defaults=dict(defaults or {}), parts=tuple(p.name for p in parts)), obj)


la = np.linalg

_decl("np.linalg.solve", la.solve, ("a", "b"), ("a", "b"),
      {"a": "rt.solve_grad_a(g, a, out)", "b": "rt.solve_grad_b(g, a)"},
      {"a": "rt.solve_jvp_a(da, a, out)", "b": "rt.solve(a, db)"}, rank=_solve_rank)
_decl("np.linalg.inv", la.inv, ("a",), ("a",), {"a": "rt.inv_grad(g, out)"},
      {"a": "rt.inv_jvp(da, out)"}, rank=_same_rank)
_decl("np.linalg.det", la.det, ("a",), ("a",), {"a": "rt.det_grad(g, a, out)"},
      {"a": "rt.det_jvp(da, a, out)"}, rank=_scalar)
_multi("np.linalg.slogdet", la.slogdet, ("a",), (
    _decl("linalg.slogdet[sign]", None, ("a",), ("a",), {}, {}, rank=_scalar,
          emit="rt.slogdet_sign", nondiff_=True),
    _decl("linalg.slogdet[logabsdet]", None, ("a",), ("a",), {"a": "rt.slogdet_grad(g, a)"},
          {"a": "rt.slogdet_jvp(da, a)"}, rank=_scalar, emit="rt.slogdet_logabsdet")))
_decl("np.linalg.cholesky", la.cholesky, ("a",), ("a",), {"a": "rt.cholesky_grad(g, out)"},
      {"a": "rt.cholesky_jvp(da, out)"}, rank=_same_rank)
_multi("np.linalg.eigh", la.eigh, ("a",), (
    _decl("linalg.eigh[eigenvalues]", None, ("a",), ("a",), {"a": "rt.eigh_w_grad(g, a)"},
          {"a": "rt.eigh_w_jvp(da, a)"}, rank=_vector, emit="rt.eigh_w"),
    _decl("linalg.eigh[eigenvectors]", None, ("a",), ("a",), {"a": "rt.eigh_v_grad(g, a)"},
          {"a": "rt.eigh_v_jvp(da, a)"}, rank=_matrix, emit="rt.eigh_v")))
_SVD = {"full_matrices": True}
_SVD_S = _decl("linalg.svd[S]", None, ("a", "full_matrices"), ("a",),
               {"a": "rt.svd_s_grad(g, a)"}, {"a": "rt.svd_s_jvp(da, a)"}, rank=_vector,
               emit="rt.svd_s", defaults=_SVD)
_SVD_PARTS = (
    _decl("linalg.svd[U]", None, ("a", "full_matrices"), ("a",),
          {"a": "rt.svd_u_grad(g, a)"}, {"a": "rt.svd_u_jvp(da, a)"}, rank=_matrix,
          emit="rt.svd_u", defaults=_SVD),
    _SVD_S,
    _decl("linalg.svd[Vh]", None, ("a", "full_matrices"), ("a",),
          {"a": "rt.svd_vh_grad(g, a)"}, {"a": "rt.svd_vh_jvp(da, a)"}, rank=_matrix,
          emit="rt.svd_vh", defaults=_SVD))
for _part in _SVD_PARTS:
    _PARTS[_part.name] = _part
    RULES.setdefault(_part.name, _part)


def _svd_parts(bound):
    """(U, S, Vh), or S alone with compute_uv=False."""
    if _const(bound.get("compute_uv"), True):
        return tuple(p.name for p in _SVD_PARTS)
    return _SVD_S.name


register(Rule(name="np.linalg.svd", params=("a", "full_matrices", "compute_uv"), operands=(),
              emit=None, defaults={"full_matrices": True, "compute_uv": True},
              parts=_svd_parts), la.svd)
_multi("np.linalg.qr", la.qr, ("a",), (
    _decl("linalg.qr[Q]", None, ("a",), ("a",), {"a": "rt.qr_q_grad(g, a)"},
          {"a": "rt.qr_q_jvp(da, a)"}, rank=_matrix, emit="rt.qr_q"),
    _decl("linalg.qr[R]", None, ("a",), ("a",), {"a": "rt.qr_r_grad(g, a)"},
          {"a": "rt.qr_r_jvp(da, a)"}, rank=_matrix, emit="rt.qr_r")))


def _pinv_forms(args, kwargs):
    """The library's forms of ``np.linalg.pinv``: ``hermitian=True`` (pinv of the
    lower triangle mirrored), and the calls NumPy refuses (``rcond`` with ``rtol``,
    ``rtol`` by position), refused at the user's line."""
    import inspect

    from .library import linalg as library_linalg
    from .library.registry import Implementation
    rcond = args[1] if len(args) > 1 else kwargs.get("rcond")
    hermitian = args[2] if len(args) > 2 else kwargs.get("hermitian")
    form = None
    if len(args) > 3:
        form = library_linalg.pinv_positional
    elif "rtol" in kwargs and rcond is not None and _const(rcond, 0) is not None:
        form = library_linalg.pinv_spellings
    elif hermitian is not None and _const(hermitian, True) is not False:
        form = library_linalg.pinv_hermitian
    return form and Implementation("np.linalg.pinv", form, None, inspect.signature(form))


# NumPy's defaults: rcond=None and rtol not given is a cutoff of 1e-15 (rt.pinv's rtol
# default, so an omitted rcond or rtol prints nothing); rtol=None is max(M, N) * eps.
_decl("np.linalg.pinv", la.pinv, ("a", "rcond", "hermitian", "rtol"), ("a",),
      {"a": "rt.pinv_grad(g, a, out)"}, {"a": "rt.pinv_jvp(da, a, out)"}, rank=_same_rank,
      defaults={"rcond": None, "hermitian": False, "rtol": 1e-15})
RULES["np.linalg.pinv"].forms = _pinv_forms


def _spelling_forms(name, form, keywords):
    """A ``forms`` hook: a call passing any of ``keywords`` (by keyword or position)
    is the library's ``form`` (s2s_ad/rules/library/linalg.py), named as NumPy's."""
    def forms(args, kwargs):
        import inspect

        from .library import linalg as library_linalg
        from .library.registry import Implementation
        if len(args) > 1 or set(kwargs) & set(keywords):
            fn = getattr(library_linalg, form)
            return Implementation(name, fn, None, inspect.signature(fn))
        return None
    return forms


RULES["np.linalg.cholesky"].forms = _spelling_forms("np.linalg.cholesky", "cholesky_upper",
                                                    ("upper",))
RULES["np.linalg.eigh"].forms = _spelling_forms("np.linalg.eigh", "eigh_uplo", ("UPLO",))
RULES["np.linalg.qr"].forms = _spelling_forms("np.linalg.qr", "qr_mode", ("mode",))
_LSTSQ = {"rcond": None}
_multi("np.linalg.lstsq", la.lstsq, ("a", "b", "rcond"), (
    _decl("linalg.lstsq[x]", None, ("a", "b", "rcond"), ("a", "b"),
          {"a": "rt.lstsq_grad_a(g, a, b, out)", "b": "rt.lstsq_grad_b(g, a, out)"},
          {"a": "rt.lstsq_jvp_a(da, a, b, out)", "b": "rt.lstsq_jvp_b(db, a, out)"},
          rank=_lstsq_x_rank, emit="rt.lstsq_x", defaults=_LSTSQ),
    _decl("linalg.lstsq[residuals]", None, ("a", "b", "rcond"), ("a", "b"), {}, {},
          rank=_vector, emit="rt.lstsq_residuals", defaults=_LSTSQ, undiff=("a", "b")),
    _decl("linalg.lstsq[rank]", None, ("a", "b", "rcond"), ("a", "b"), {}, {},
          rank=_scalar, emit="rt.lstsq_rank", defaults=_LSTSQ, nondiff_=True),
    _decl("linalg.lstsq[s]", None, ("a", "b", "rcond"), ("a", "b"), {}, {},
          rank=_vector, emit="rt.lstsq_sv", defaults=_LSTSQ, undiff=("a", "b"))),
    defaults=_LSTSQ)
_decl("np.linalg.matrix_power", la.matrix_power, ("a", "n"), ("a",),
      {"a": "rt.matrix_power_grad(g, a, n)"}, {"a": "rt.matrix_power_jvp(da, a, n)"},
      rank=_same_rank)
_NORM = {"ord": None, "axis": None, "keepdims": False}
_decl("np.linalg.norm", la.norm, ("x", "ord", "axis", "keepdims"), ("x",),
      {"x": "rt.norm_grad(g, x, out, ord, axis, keepdims)"},
      {"x": "np.real(rt.sum(rt.norm_grad(np.ones_like(out), x, out, ord, axis, keepdims) "
            "* dx, axis, keepdims))"}, rank=_norm_rank, defaults=_NORM)


# -- linear ones ---------------------------------------------------------------------------

def _cross_forms(args, kwargs):
    """``np.cross`` along other axes (``axisa``... or ``axis``): the library's form."""
    if len(args) > 2 or kwargs:
        from .library import linalg as library_linalg
        from .library.registry import helper
        return helper(library_linalg.cross_axes)
    return None


def _linear(name, obj, params, operands, vjp, *, rank, emit=None, defaults=None,
            batch=batch_loop, methods=()):
    rule = linear(name, obj, params, operands, vjp, emit=emit, defaults=defaults,
                  methods=methods)
    rule.rank, rule.batch = rank, batch
    return rule


_AXES2 = {"offset": 0, "axis1": 0, "axis2": 1}
_linear("np.trace", np.trace, ("a", "offset", "axis1", "axis2"), ("a",),
        {"a": "rt.trace_grad(g, a, offset, axis1, axis2)"}, emit="rt.trace", defaults=_AXES2,
        rank=_trace_rank, methods=("trace",))
_linear("np.diagonal", np.diagonal, ("a", "offset", "axis1", "axis2"), ("a",),
        {"a": "rt.diagonal_grad(g, a, offset, axis1, axis2)"}, emit="rt.diagonal",
        defaults=_AXES2, rank=_diagonal_rank, methods=("diagonal",))
_linear("np.diag", np.diag, ("v", "k"), ("v",), {"v": "rt.diag_grad(g, v, k)"}, emit="rt.diag",
        defaults={"k": 0}, rank=_diag_rank)
_linear("np.tril", np.tril, ("m", "k"), ("m",), {"m": "np.tril(g, k)"}, defaults={"k": 0},
        rank=_same_rank)
_linear("np.triu", np.triu, ("m", "k"), ("m",), {"m": "np.triu(g, k)"}, defaults={"k": 0},
        rank=_same_rank)
_linear("np.kron", np.kron, ("a", "b"), ("a", "b"),
        {"a": "rt.kron_grad_a(g, a, b)", "b": "rt.kron_grad_b(g, a, b)"}, emit="rt.kron",
        rank=_kron_rank)
_linear("np.cross", np.cross, ("a", "b"), ("a", "b"),
        {"a": "rt.cross_grad_a(g, a, b)", "b": "rt.cross_grad_b(g, a, b)"}, emit="rt.cross",
        rank=_kron_rank).forms = _cross_forms
# vdot(a, b) = sum(conj(a) b): C-linear in b, conjugate-linear in a, so (JAX's
# convention) a's cotangent is conj(g b) and b's g conj(a); conj is the identity
# for real values.
_linear("np.vdot", np.vdot, ("a", "b"), ("a", "b"),
        {"a": "rt.reshape_like(np.conj(g * b), a)", "b": "rt.reshape_like(g * np.conj(a), b)"},
        emit="rt.vdot", rank=_scalar)
_linear("np.tensordot", np.tensordot, ("a", "b", "axes"), ("a", "b"),
        {"a": "rt.tensordot_grad_a(g, a, b, axes)", "b": "rt.tensordot_grad_b(g, a, b, axes)"},
        emit="rt.tensordot", defaults={"axes": 2}, rank=_tensordot_rank)


def _einsum_vjp(i, items, g, params, atom):
    """The cotangent of the i-th operand: einsum of g and the others (`rt.einsum_grad`)"""
    return ast.Call(ast.Name("rt.einsum_grad", ast.Load()),
                    [g, ast.Constant(params["subscripts"]),
                     ast.Tuple([atom(x) for x in items], ast.Load()), ast.Constant(i)], [])


def _einsum_batch(vz, s, body):
    """vmap of einsum: one more letter on the batched operands and the output."""
    from ..ir import Const, Tup
    text = str(s.params["subscripts"].value).replace(" ", "")
    items = s.args[0]
    if not isinstance(items, Tup):
        raise Unvectorizable("np.einsum of a sequence held in a variable", s.loc)
    from ..runtime.linalg import einsum_parse
    ins, out = einsum_parse(text, len(items.items))
    free = next(ch for ch in "zyxwvutsrqponmlkjihgfedcbaZYXWVUTSRQPONMLKJIHGFEDCBA"
                if ch not in text)
    ins = [free + t if vz.is_b(x) else t for t, x in zip(ins, items.items)]
    spec = ",".join(ins) + "->" + free + out
    vz.emit(body, s.rule, [items], {"subscripts": Const(spec)}, s.loc, s.targets[0])


_EINSUM = register(Rule(
    name="np.einsum", params=("subscripts", "operands"), operands=("operands",),
    emit="rt.einsum", vjp={"operands": _einsum_vjp},
    jvp={"operands": "rt.einsum_jvp(subscripts, operands, doperands)"},
    rank=_einsum_rank, batch=_einsum_batch, varargs=True), np.einsum)


def _einsum_forms(args, kwargs):
    """``optimize=`` (any value: the contraction order is always optimised for three
    or more operands, and NumPy's value does not depend on it): the library's form
    for that number of operands."""
    if "optimize" not in kwargs:
        return None
    import inspect

    from .library import linalg as library_linalg
    from .library.registry import Implementation
    fn = getattr(library_linalg, f"einsum_{len(args) - 1}", library_linalg.einsum_many)
    return Implementation("np.einsum", fn, None, inspect.signature(fn))


RULES["np.einsum"].forms = _einsum_forms


# -- the helpers JVP templates call (forward-mode code is lowered code too) -----------------

def _tangent_rule(emit, params, rank, statics=()):
    """An internal primitive of a JVP template: it computes a tangent.

    Differentiating it again (reverse over forward) is refused clearly:
    its operands have no derivative rule here.
    """
    from .internal import INTERNAL
    operands = tuple(p for p in params if p not in statics)
    rule = Rule(name=emit, params=tuple(params), operands=operands, emit=emit, rank=rank,
                batch=batch_loop, undiff=operands, nondiff=True)
    INTERNAL[emit] = rule
    return rule


def _first_rank(args, params):
    return args[0]


_tangent_rule("rt.solve_jvp_a", ("da", "a", "out"), lambda a, p: a[2])
_tangent_rule("rt.inv_jvp", ("da", "out"), _matrix)
_tangent_rule("rt.det_jvp", ("da", "a", "out"), _scalar)
_tangent_rule("rt.slogdet_jvp", ("da", "a"), _scalar)
_tangent_rule("rt.cholesky_jvp", ("da", "out"), _matrix)
_tangent_rule("rt.eigh_w_jvp", ("da", "a"), _vector)
_tangent_rule("rt.eigh_v_jvp", ("da", "a"), _matrix)
_tangent_rule("rt.svd_s_jvp", ("da", "a"), _vector)
_tangent_rule("rt.svd_u_jvp", ("da", "a"), _matrix)
_tangent_rule("rt.svd_vh_jvp", ("da", "a"), _matrix)
_tangent_rule("rt.qr_q_jvp", ("da", "a"), _matrix)
_tangent_rule("rt.qr_r_jvp", ("da", "a"), _matrix)
_tangent_rule("rt.pinv_jvp", ("da", "a", "out"), _matrix)
_tangent_rule("rt.lstsq_jvp_a", ("da", "a", "b", "out"), lambda a, p: a[2])
_tangent_rule("rt.lstsq_jvp_b", ("db", "a", "out"), lambda a, p: a[2])
_tangent_rule("rt.matrix_power_jvp", ("da", "a", "n"), _matrix, statics=("n",))
_tangent_rule("rt.norm_grad", ("g", "x", "out", "ord", "axis", "keepdims"), lambda a, p: a[1],
              statics=("ord", "axis", "keepdims"))


def _einsum_jvp_batch(vz, s, body):
    from ..ir import Const, Tup
    ops, tans = s.args
    spec = str(s.params["subscripts"].value).replace(" ", "")
    from ..runtime.linalg import einsum_parse
    ins, out = einsum_parse(spec, len(ops.items))
    free = next(ch for ch in "zyxwvutsrqponmlkjihgfedcbaZYXWVUTSRQPONMLKJIHGFEDCBA"
                if ch not in spec)
    new = ",".join(free + t for t in ins) + "->" + free + out
    ops = Tup(tuple(vz.batch(x, body, s.loc) for x in ops.items))
    tans = Tup(tuple(vz.batch(x, body, s.loc) for x in tans.items))
    vz.emit(body, s.rule, [ops, tans], {"subscripts": Const(new)}, s.loc, s.targets[0])


_EINSUM_JVP = _tangent_rule("rt.einsum_jvp", ("subscripts", "operands", "tangents"),
                            _einsum_rank, statics=("subscripts",))
_EINSUM_JVP.batch = _einsum_jvp_batch
