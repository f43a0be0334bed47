"""Values the backward sweep reads, written in place after they were saved (issue 46).

The adjoint of ``np.tanh`` reads its output, that of a product its
operands, that of a loop the arrays it carries.  When the program later
writes into the same memory (a slice, an element, ``+=``, through a view or
a helper, in the next iteration of a ``for`` or ``while`` loop), the
backward sweep must still read the value as it was computed: the write
saves what it overwrites and the adjoint sweep restores it before the
earlier adjoints run (``docs/saved_values.md``).

* the issue's reproducer, against central differences and ``ad.jvp``;
* the corpus ``programs/saved_then_written.py`` through the differential
  oracle: every transform through the NumPy witnesses (three with the NumPy
  tier of ``ad.jit``, rotating), one compiled witness each in the default
  suite (rotating), every compiled witness of ``grad``, ``jacrev`` and
  ``vmap_grad`` in the slow tier;
* ``x += e`` on a view or an aliased array is NumPy's in-place update;
* one array under two names that the lowered code cannot keep one (a join,
  a loop header), refused at the write;
* where the restore is made and where it is not (no blanket copies).
"""
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import s2s_ad as ad
from s2s_ad import oracle

sys.path.insert(0, str(Path(__file__).parent))
from conftest import fd_jacobian, load_program  # noqa: E402

sw = load_program(Path(__file__).parent / "programs" / "saved_then_written.py")
CORPUS = {}
for _fn, _make, _argnums in sw.CORPUS:
    CORPUS[_fn.__name__] = (_fn, _make, _argnums)
NAMES = list(CORPUS)

TIER = ("jacrev", "grad", "jvp", "vjp", "jacfwd", "vmap_grad", "hessian", "value_and_grad",
        "vmap_jacrev", "vmap")


def _batched(args, argnums):
    first = argnums if isinstance(argnums, int) else argnums[0]
    axes = tuple(0 if i == first else None for i in range(len(args)))
    a = np.asarray(args[first], dtype=np.float64)
    stacked = np.stack([a, a * 1.004 + 0.001, a * 0.997 - 0.002])
    return tuple(stacked if i == first else v for i, v in enumerate(args)), axes


def _clean(report):
    assert report.checks > 0
    assert not report.disagreements, "\n".join(map(str, report.disagreements))


def test_the_reproducer():
    x = np.array([0.3, -0.8, 1.1, 0.5])
    want = np.array([3.2585019, 2.6899794, 1.2070224, 0.0449284])
    np.testing.assert_allclose(fd_jacobian(sw.tanh_stencil, x), want, atol=1e-6)
    for grad in (ad.grad(sw.tanh_stencil), ad.jit(ad.grad(sw.tanh_stencil), compile="eager")):
        np.testing.assert_allclose(grad(x), want, atol=1e-6)
    columns = [ad.jvp(sw.tanh_stencil, (x,), (e,))[1] for e in np.eye(4)]
    np.testing.assert_allclose(columns, want, atol=1e-6)


@pytest.mark.parametrize("name", NAMES)
def test_python_witnesses(name):
    fn, make, argnums = CORPUS[name]
    args = make()
    batched, axes = _batched(args, argnums)
    k = NAMES.index(name)
    tier = {TIER[(3 * k + j) % len(TIER)] for j in range(3)}
    report = oracle.check_all(fn, args, argnums, axes, name=name, batched_args=batched,
                              families=("python",), transforms=set(oracle.TRANSFORMS) - tier)
    report.extend(oracle.check_all(fn, args, argnums, axes, name=name, batched_args=batched,
                                   families=("python", "tier"), transforms=tier))
    _clean(report)


COMPILED = [(t, w.name) for t in ("grad", "vmap_grad", "jacrev", "jacfwd")
            for w in oracle.witnesses_for(t, 0, (0,), families=("numba",))]


@pytest.mark.parametrize("name", NAMES)
def test_one_compiled_witness(name):
    fn, make, argnums = CORPUS[name]
    args = make()
    transform, witness = COMPILED[NAMES.index(name) % len(COMPILED)]
    batched, axes = _batched(args, argnums)
    report = oracle.check(fn, batched if transform.startswith("vmap") else args, transform,
                          argnums, axes, name=name, only={witness, "python", "vmap[loop]"})
    _clean(report)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_every_compiled_witness(name):
    fn, make, argnums = CORPUS[name]
    args = make()
    batched, axes = _batched(args, argnums)
    _clean(oracle.check_all(fn, args, argnums, axes, name=name, batched_args=batched,
                            families=("python", "numba"),
                            transforms=("grad", "jacrev", "vmap_grad")))


def test_augmented_assignment_on_a_view_updates_the_array():
    x = np.array([0.3, -0.8, 1.1, 0.5])
    assert np.isclose(ad.jit(sw.through_a_view, compile="eager")(x.copy()),
                      sw.through_a_view(x.copy()))
    _, tangent = ad.jvp(sw.through_a_view, (x,), (np.ones(4),))
    assert np.isclose(tangent, np.sum(fd_jacobian(sw.through_a_view, x)), atol=1e-6)


@pytest.mark.parametrize("fn, make, argnums", sw.REFUSED, ids=[f.__name__ for f, _, _ in
                                                               sw.REFUSED])
def test_one_array_under_two_names_is_refused_at_the_write(fn, make, argnums):
    with pytest.raises(ad.UnsupportedSyntaxError) as info:
        ad.grad(fn, argnums)(*make())
    message = str(info.value)
    assert "saved_then_written.py" in message and "also holds" in message
    assert "np.copy" in message


def test_the_write_saves_only_what_it_overwrites():
    """The stencil saves the slice it overwrites, once per iteration; the
    tanh output is pushed by reference, not copied."""
    x = np.array([0.3, -0.8, 1.1, 0.5])
    text = ad.source(ad.grad(sw.tanh_stencil), x)
    assert text.count("rt.snapshot(u_1[1:])") == 1
    assert "u_2_stack.append(u_2)" in text


def test_an_array_filled_in_each_iteration_saves_nothing():
    """A new array per iteration, written after it is made: no earlier read
    can see the write, so nothing is saved (a write through a carried name
    would be)."""
    x = np.array([0.3, -0.8, 1.1, 0.5])
    text = ad.source(ad.grad(sw.exp_then_element), x)
    assert re.search(r"\w_saved\b", text)         # the product read u before the write
    text = ad.source(ad.grad(_fresh_each_iteration), x)
    assert not re.search(r"\w_saved\b", text)
    np.testing.assert_allclose(ad.grad(_fresh_each_iteration)(x),
                               fd_jacobian(_fresh_each_iteration, x), atol=1e-6)


def _fresh_each_iteration(x):
    s = 0.0
    for t in range(3):
        b = x * (t + 1.0)
        b[0] = 0.5 * x[1]
        s = s + np.sum(np.sin(b))
    return s


@pytest.mark.parametrize("which", sorted(sw.OUT_READERS))
def test_every_elementwise_rule_reading_its_output(which):
    x = np.array([0.3, -0.8, 1.1, 0.5])
    report = oracle.check_all(sw.out_reader_written, (x, which), 0, (0, None),
                              name=f"out_reader_written[{which}]", families=("python",),
                              batched_args=(np.stack([x, x * 0.9 + 0.05]), which),
                              transforms=("grad", "jvp", "jacrev", "vmap_grad"))
    _clean(report)


def test_max_and_min_read_an_operand_written_later():
    x = np.array([0.3, -0.8, 1.1, 0.5])
    _clean(oracle.check_all(sw.extremum_written, (x,), 0, (0,), name="extremum_written",
                            families=("python",), transforms=("grad", "jvp", "jacrev")))


@pytest.mark.parametrize("which", sorted(sw.LINALG))
def test_every_matrix_rule_reading_its_result(which):
    x = np.array([0.3, -0.8, 0.6])
    _clean(oracle.check_all(sw.linalg_written, (x, which), 0, (0, None),
                            name=f"linalg_written[{which}]", families=("python",),
                            transforms=("grad", "jvp", "jacrev")))
