"""README's "Coming from JAX" table, run line by line, and the JAX idioms behind it.

The table's s2s_ad cells are read from README.md and run after the section's
setup block (written to a real module file, since s2s_ad reads lambdas'
source); each result is checked against central finite differences of the
plain function or a closed form, never against s2s_ad itself.  Every row has
a check and every check a row.  Below the table: lambdas and nested defs
given to transforms inside transformed functions (closure conversion), and
dicts/NamedTuples/None as pytrees in grad, vmap and jit.
"""
import importlib.util
import pathlib
import re

import numpy as np
import pytest
from conftest import load_program

import s2s_ad as ad
from s2s_ad.testing import check_grad

ROOT = pathlib.Path(__file__).resolve().parents[1]
PROGRAMS = pathlib.Path(__file__).resolve().parent / "programs"


def readme_section():
    text = (ROOT / "README.md").read_text()
    start = text.index("\n## Coming from JAX\n")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def table_rows(section):
    """(idiom, s2s_ad code) of each row of the section's table."""
    rows = []
    for line in section.splitlines():
        if not line.startswith("| ") or line.startswith("| idiom") or line.startswith("| ---"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        assert len(cells) == 3, line
        code = re.match(r"`([^`]+)`", cells[2])
        assert code, f"the s2s_ad cell of {line!r} does not start with code"
        rows.append((cells[0].replace("`", ""), code.group(1)))
    return rows


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """The setup block and one function per row, imported from a real file."""
    section = readme_section()
    setup = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    rows = table_rows(section)
    body = setup + "".join(f"\n\ndef row_{i}():\n    return {code}\n"
                           for i, (_, code) in enumerate(rows))
    path = tmp_path_factory.mktemp("readme") / "coming_from_jax_table.py"
    path.write_text(body)
    spec = importlib.util.spec_from_file_location("coming_from_jax_table", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, {idiom: getattr(module, f"row_{i}") for i, (idiom, _) in enumerate(rows)}


# -- oracles ----------------------------------------------------------------------
def fd_grad(f, x, eps=1e-6):
    """Central differences of scalar f at the float array or float x."""
    x = np.asarray(x, dtype=float)
    g = np.zeros(x.shape)
    for i in np.ndindex(x.shape):
        e = np.zeros(x.shape)
        e[i] = eps
        g[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


def fd_jac(f, x, eps=1e-6):
    x = np.asarray(x, dtype=float)
    cols = []
    for i in range(x.size):
        e = np.zeros(x.size)
        e[i] = eps
        cols.append((np.asarray(f(x + e.reshape(x.shape))) -
                     np.asarray(f(x - e.reshape(x.shape)))) / (2 * eps))
    return np.stack(cols, axis=-1)


def loss_grad(m, w):
    """d/dw of mean((tanh(X w) - y)^2), by hand."""
    t = np.tanh(m.X @ w)
    return m.X.T @ (2.0 * (t - m.y) * (1.0 - t * t)) / m.y.size


def close(a, b, tol=1e-6):
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def check_dict_grad(m, g, f):
    """A dict gradient of f(params) against finite differences, leaf by leaf."""
    assert isinstance(g, dict) and sorted(g) == ["b", "w"]
    close(g["w"], fd_grad(lambda v: f({"w": v, "b": m.params["b"]}), m.params["w"]))
    close(g["b"], fd_grad(lambda v: f({"w": m.params["w"], "b": float(v)}), m.params["b"]))


def _lambda(m, g):
    close(g, fd_grad(lambda v: m.loss(v, m.X, m.y), m.w))


def _argnums(m, g):
    gw, gX = g
    close(gw, fd_grad(lambda v: m.loss(v, m.X, m.y), m.w))
    close(gX, fd_grad(lambda v: m.loss(m.w, v, m.y), m.X))


def _keywords(m, g):
    close(g, 3.0 * np.cos(m.w), 1e-12)


def _keywords_batched(m, g):
    # a keyword argument is not batched (JAX maps it over axis 0: pass it positionally there)
    close(g, 3.0 * np.cos(m.X), 1e-12)


def _dict_params(m, g):
    check_dict_grad(m, g, lambda p: m.sample_loss(p, m.X[0], m.y[0]))


def _namedtuple(m, g):
    assert isinstance(g, m.Params)
    close(g.w, fd_grad(lambda v: m.nt_loss(m.Params(v, 0.1), m.X, m.y), m.w))
    close(g.b, fd_grad(lambda v: m.nt_loss(m.Params(m.w, float(v)), m.X, m.y), 0.1))


def _has_aux(m, r):
    g, aux = r
    check_dict_grad(m, g, lambda p: m.loss_and_pred(p, m.X, m.y)[0])
    assert isinstance(aux, dict) and list(aux) == ["pred"]
    close(aux["pred"], np.tanh(m.X @ m.w + 0.1), 1e-12)


def _value_and_grad(m, r):
    value, g = r
    close(value, m.loss(m.w, m.X, m.y), 1e-12)
    close(g, fd_grad(lambda v: m.loss(v, m.X, m.y), m.w))


def _stop_gradient(m, g):
    close(g, m.w, 1e-12)          # d/dw sum(c * w) with c = w held constant


def _nested_grad(m, g):
    close(g, fd_grad(lambda v: np.sum(loss_grad(m, v) ** 2), m.w))


def _hessian(m, H):
    close(H, fd_jac(lambda v: loss_grad(m, v), m.w))


def _jvp(m, r):
    out, tangent = r
    close(out, np.sin(m.w) * m.w, 1e-12)
    close(tangent, np.cos(m.w) * m.w + np.sin(m.w), 1e-12)


def _vmap_lambda(m, r):
    close(r, np.tanh(m.X @ m.w + 0.1), 1e-12)


def _per_sample(m, g):
    assert isinstance(g, dict) and g["w"].shape == (3, 2) and g["b"].shape == (3,)
    for i in range(3):
        row = {"w": g["w"][i], "b": g["b"][i]}
        check_dict_grad(m, row, lambda p, i=i: m.sample_loss(p, m.X[i], m.y[i]))


def _jit_lambda(m, r):
    close(r, np.sum(np.sin(m.w) * m.w), 1e-12)


def _comprehension(m, g):
    close(g, 2.0 * m.w, 1e-12)


def _in_place(m, g):
    close(g, fd_grad(m.energy, m.u0))
    assert np.array_equal(m.u0, np.linspace(0.0, 1.0, 5))      # the argument is unchanged


def _ufunc(m, g):
    close(g, 1.0 - np.tanh(0.5) ** 2, 1e-12)


def _jacobian(m, jac):
    close(jac, (1.0 - np.tanh(m.X @ m.w) ** 2)[:, None] * m.X, 1e-12)


def _jacrev_aux(m, r):
    jac, aux = r
    _jacobian(m, jac)
    close(aux, m.w, 0)


def _linearize(m, r):
    close(r, np.cos(m.w) * m.w + np.sin(m.w), 1e-12)


def _vmap_vjp_fn(m, r):
    (rows,) = r
    close(rows, ((1.0 - np.tanh(m.X @ m.w) ** 2)[:, None] * m.X), 1e-12)


def _static_argnums(m, r):
    close(r, np.sum(m.w ** 3), 1e-12)


def _custom_jvp_reverse(m, g):
    assert g == 1.0                           # the body's derivative is nan at 100


def _custom_vjp_nondiff(m, g):
    close(g, np.clip(np.ones(2), -0.5, 0.5) * np.cos(m.w), 1e-12)


def _module_vmap(m, g):
    check_dict_grad(m, g, lambda p: m.batched_loss(p, m.X, m.y))


def _holomorphic(m, g):
    close(g, np.cos(1.0 + 2.0j), 1e-12)


def _norm_logpdf(m, g):
    close(g, -(m.w - 0.5) / 4.0, 1e-12)


CHECKS = {
    "lambda": _lambda, "argnums": _argnums, "keyword arguments": _keywords,
    "keyword arguments, batched": _keywords_batched,
    "dict params": _dict_params, "NamedTuple params": _namedtuple, "has_aux": _has_aux,
    "value_and_grad": _value_and_grad, "stop_gradient": _stop_gradient,
    "nested grad": _nested_grad, "hessian of a lambda": _hessian,
    "jvp of a lambda": _jvp, "vmap of a lambda": _vmap_lambda,
    "vmap with dict in_axes": _vmap_lambda, "per-sample gradients": _per_sample,
    "jit of a lambda": _jit_lambda, "jit of grad of a lambda": _lambda,
    "comprehension": _comprehension, "in-place update": _in_place,
    "ufunc passed directly": _ufunc, "jacobian": _jacobian, "jacrev with has_aux": _jacrev_aux,
    "linearize": _linearize, "vmap of a vjp_fn": _vmap_vjp_fn, "static_argnums": _static_argnums,
    "static_argnames under grad": _keywords, "custom_jvp in reverse mode": _custom_jvp_reverse,
    "custom_vjp with nondiff_argnums": _custom_vjp_nondiff,
    "module-level vmap in a loss": _module_vmap, "holomorphic=True": _holomorphic,
    "scipy.stats.norm": _norm_logpdf,
}


def test_every_row_has_a_check_and_every_check_a_row():
    idioms = [idiom for idiom, _ in table_rows(readme_section())]
    assert len(idioms) == len(set(idioms))
    assert set(idioms) == set(CHECKS)


@pytest.mark.parametrize("idiom", list(CHECKS))
def test_readme_row(table, idiom):
    module, rows = table
    CHECKS[idiom](module, rows[idiom]())


def test_print_in_a_differentiated_function_prints_the_values(table, capsys):
    """print() is kept as a statement with no derivative (issue 38): the
    generated gradient prints the primal values each call; print(x, file=...)
    is refused at its line."""
    module, _ = table
    path = pathlib.Path(module.__file__).with_name("prints.py")
    path.write_text("import numpy as np\n\n\ndef f(x):\n    print(x)\n"
                    "    return np.sum(x ** 2)\n\n\ndef g(x):\n    print(x, file=None)\n"
                    "    return np.sum(x ** 2)\n")
    spec = importlib.util.spec_from_file_location("coming_from_jax_prints", path)
    prints = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(prints)
    grad_f = ad.grad(prints.f)
    grad_f(np.ones(2))
    capsys.readouterr()
    np.testing.assert_allclose(grad_f(np.array([1.0, 2.0])), [2.0, 4.0])
    assert capsys.readouterr().out == "[1. 2.]\n"
    with pytest.raises(ad.UnsupportedSyntaxError) as info:
        ad.grad(prints.g)(np.ones(2))
    assert info.value.lineno == 10 and "print(x" in info.value.text


# -- lambdas and nested defs given to transforms inside transformed functions -------
cj = load_program(PROGRAMS / "coming_from_jax.py")
rng = np.random.default_rng(3)
W3 = rng.normal(size=3)
V3 = rng.normal(size=3)
XS = rng.normal(size=(4, 3))
YS = rng.normal(size=4)

INSIDE = {
    "penalty_lambda": (cj.penalty_lambda, (W3,)),
    "captures_argument": (cj.penalty_captures_argument, (W3, cj.A)),
    "vmap_lambda": (cj.vmap_lambda, (0.3 * np.ones((3, 2)), cj.A)),
    "jvp_nested_def": (cj.jvp_nested_def, (W3, V3)),
    "vjp_lambda": (cj.vjp_lambda, (W3, V3)),
    "hessian_lambda": (cj.hessian_lambda, (W3,)),
    "value_and_grad_default": (cj.value_and_grad_default, (W3,)),
    "nested_def_calls_lambda": (cj.nested_def_calls_lambda, (W3,)),
    "jacrev_argnums_lambda": (cj.jacrev_argnums_lambda, (W3, V3)),
    "grad_has_aux_lambda": (cj.grad_has_aux_lambda, (W3,)),
    "maml_lambda": (cj.maml_lambda, (W3, XS, YS, 0.1)),
}


@pytest.mark.parametrize("name", sorted(INSIDE))
def test_local_function_in_inner_transform(name):
    fn, args = INSIDE[name]
    check_grad(fn, args, argnums=tuple(range(len(args) - (name == "maml_lambda"))))


@pytest.mark.parametrize("name", ["penalty_lambda", "captures_argument", "vmap_lambda",
                                  "jvp_nested_def", "maml_lambda"])
def test_local_function_in_inner_transform_jit(name):
    fn, args = INSIDE[name]
    check_grad(fn, args, target="cpu")


def test_local_function_in_inner_transform_value():
    # the plain Python function runs the inner transforms as ordinary calls: the
    # compiled value must be that number
    fn, args = INSIDE["captures_argument"]
    assert ad.jit(fn)(*args) == pytest.approx(fn(*args), rel=1e-12)


def test_closure_conversion_reads_the_lambda_captures_as_parameters():
    text = ad.source(ad.grad(cj.penalty_captures_argument), W3, cj.A)
    assert "def grad_lambda(v, X, w):" in text


# -- dicts, NamedTuples and None as pytrees ---------------------------------------
PARAMS = {"w": np.array([0.3, -0.2, 0.4]), "b": 0.1}
NT = cj.P(PARAMS["w"], PARAMS["b"])


def dict_fd(f, p):
    return {"w": fd_grad(lambda v: f({"w": v, "b": p["b"]}), p["w"]),
            "b": fd_grad(lambda v: f({"w": p["w"], "b": float(v)}), p["b"])}


def per_sample_fd(i):
    return dict_fd(lambda p: cj.dict_loss(p, XS[i], YS[i]), PARAMS)


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("axes", [(None, 0, 0), ({"w": None, "b": None}, 0, 0)])
def test_vmap_grad_with_dict_in_axes(target, axes):
    t = ad.vmap(ad.grad(cj.dict_loss), in_axes=axes)
    g = (ad.jit(t) if target == "cpu" else t)(PARAMS, XS, YS)
    assert isinstance(g, dict) and g["w"].shape == (4, 3) and g["b"].shape == (4,)
    for i in range(4):
        want = per_sample_fd(i)
        close(g["w"][i], want["w"])
        close(g["b"][i], want["b"])


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_vmap_batches_one_leaf_of_a_dict(target):
    Ws = rng.normal(size=(4, 3))
    t = ad.vmap(cj.dict_loss, in_axes=({"w": 0, "b": None}, None, None))
    got = (ad.jit(t) if target == "cpu" else t)({"w": Ws, "b": 0.2}, XS[0], 0.5)
    close(got, [(np.tanh(XS[0] @ wi + 0.2) - 0.5) ** 2 for wi in Ws], 1e-12)


def test_dict_in_axes_that_does_not_match_is_a_value_error():
    with pytest.raises(ValueError, match="keys"):
        ad.vmap(cj.dict_loss, in_axes=({"w": None}, 0, 0))(PARAMS, XS, YS)


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_namedtuple_gradients_are_namedtuples(target):
    g_fn = ad.grad(cj.nt_loss)
    v_fn = ad.vmap(ad.grad(cj.nt_loss), in_axes=(None, 0, 0))
    if target == "cpu":
        g_fn, v_fn = ad.jit(g_fn), ad.jit(v_fn)
    g = g_fn(NT, XS[0], YS[0])
    assert isinstance(g, cj.P)
    want = per_sample_fd(0)
    close(g.w, want["w"])
    close(g.b, want["b"])
    G = v_fn(NT, XS, YS)
    assert isinstance(G, cj.P) and G.w.shape == (4, 3)
    close(G.b[2], per_sample_fd(2)["b"])


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_has_aux_returns_a_dict(target):
    t = ad.grad(cj.dict_aux, has_aux=True)
    g, aux = (ad.jit(t) if target == "cpu" else t)(PARAMS, XS[0], YS[0])
    assert isinstance(g, dict) and isinstance(aux, dict) and sorted(aux) == ["pred", "w2"]
    close(g["w"], per_sample_fd(0)["w"])
    close(aux["pred"], np.tanh(XS[0] @ PARAMS["w"] + 0.1), 1e-12)
    (value, aux2), g2 = ad.value_and_grad(cj.dict_aux, has_aux=True)(PARAMS, XS[0], YS[0])
    assert isinstance(aux2, dict) and value == pytest.approx(cj.dict_aux(PARAMS, XS[0], YS[0])[0])
    tb = ad.vmap(t, in_axes=(None, 0, 0))
    G, AUX = (ad.jit(tb) if target == "cpu" else tb)(PARAMS, XS, YS)
    assert isinstance(AUX, dict) and AUX["pred"].shape == (4,)
    close(AUX["pred"], np.tanh(XS @ PARAMS["w"] + 0.1), 1e-12)
    close(G["b"][3], per_sample_fd(3)["b"])


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_outputs_that_are_dicts_namedtuples_and_none(target):
    t = ad.vmap(cj.dict_out, in_axes=(None, 0))
    out = (ad.jit(t) if target == "cpu" else t)(PARAMS, XS)
    assert isinstance(out, dict) and out["none"] is None and isinstance(out["s"], cj.P)
    close(out["h"], np.tanh(XS @ PARAMS["w"]), 1e-12)
    close(out["s"].w, XS * 0.1, 1e-12)
    close(out["s"].b, np.full(4, 0.2), 1e-12)
    one = (ad.jit(cj.dict_out) if target == "cpu" else cj.dict_out)(PARAMS, XS[0])
    assert isinstance(one, dict) and one["none"] is None and isinstance(one["s"], cj.P)
    J = ad.jacrev(cj.dict_out)(PARAMS, XS[0])
    close(J["h"]["w"], fd_jac(lambda v: np.tanh(XS[0] @ v), PARAMS["w"]))


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("name", ["builds_a_dict", "lambda_over_dict"])
def test_dicts_inside_differentiated_code(target, name):
    fn = getattr(cj, name)
    args = (W3, 0.3, XS, YS) if name == "builds_a_dict" else (W3, XS)
    check_grad(fn, args, target=target)


def test_writing_into_a_dict_argument_is_refused():
    with pytest.raises(ad.UnsupportedSyntaxError, match="dict argument"):
        ad.grad(cj.writes_dict_argument)({"w": W3, "b": 0.1})
