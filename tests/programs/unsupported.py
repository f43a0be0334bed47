# ruff: noqa: F821, F841, PLW0602  (deliberately unsupported code)
"""One function per construct outside the differentiable subset.

Each offending line ends in a ``# <- KEY`` marker; tests/test_errors.py finds
the line by its marker and asserts the error points there.  A fixture file,
not a test module: pytest does not collect it.
"""
import numpy as np


def use_lambda(x):
    y = x * 2.0
    h = lambda *z: z[0] * z[0]  # <- lambda
    return h(y)


def use_listcomp(x):
    ys = [x * i for i in (1.0, 2.0) if x > i]  # <- listcomp
    return ys


def use_setcomp(x):
    ys = {x * i for i in (1.0, 2.0)}  # <- setcomp
    return ys


def use_dictcomp(x):
    ys = {i: x for i in (1.0, 2.0)}  # <- dictcomp
    return ys


def use_genexp(x):
    y = (x * i for i in (1.0, 2.0))  # <- genexp
    return y


def use_yield(x):
    yield x * 2.0  # <- yield


def use_yield_from(x):
    yield from (x, x)  # <- yield_from


def use_try(x):
    try:  # <- try
        y = np.log(x)
    except ValueError:
        y = x
    return y


def use_with(x):
    with np.errstate(all="ignore"):  # <- with
        y = np.log(x)
    return y


COUNTER = 0


def use_global(x):
    global COUNTER  # <- global
    return x


def make_nonlocal():
    count = 0

    def use_nonlocal(x):
        nonlocal count  # <- nonlocal
        return x * 2.0
    return use_nonlocal


def use_nested_def(x):
    @np.vectorize
    def helper(y):  # <- nested_def
        return y * 2.0
    return helper(x)


def use_class(x):
    class Box:  # <- class
        pass
    return x


def use_del(x):
    y = x * 2.0
    del y  # <- del
    return x


def use_import(x):
    import math  # <- import
    return x * math.pi


def use_import_from(x):
    from math import pi  # <- import_from
    return x * pi


def use_print(x):
    y = x * 2.0
    print("y =", y, file=None)  # <- print
    return y


def use_raise(x):
    if x.shape[0] > 3:
        raise ValueError("too long")  # <- raise
    return x


def use_assert(x):
    assert np.all(x > 0.0)  # <- assert
    return x


def use_starred_call(x):
    parts = (x, x)
    return np.add(*parts)  # <- starred_call


def use_dict(x):
    d = {1.5: x}  # <- dict
    return x


def use_set(x):
    s = {x}  # <- set
    return x


def use_fstring(x):
    label = f"x={x}"  # <- fstring
    return x


def use_walrus(x):
    y = (z := x * 2.0) + z  # <- walrus
    return y


def use_match(x):
    match x.ndim:  # <- match
        case 1:
            y = x
        case _:
            y = x * 2.0
    return y


def code_after_return(x):
    return x * 2.0
    y = x  # <- after_return


def bare_expression(x):
    y = x * 2.0
    np.sin(x)  # <- bare_expr
    return y


def call_local(x):
    h = x * 2.0
    return h(x)  # <- call_local


def unknown_method(x):
    y = x.frobnicate()  # <- unknown_method
    return y


def unknown_array_attribute(x):
    y = x.flavour  # <- unknown_array_attribute
    return y


def unknown_module_attribute(x):
    y = np.frobnicate(x)  # <- unknown_module_attribute
    return y


def undefined_name(x):
    y = x * not_defined_anywhere  # <- undefined_name
    return y


def recursive(x):
    return recursive(x * 0.5)  # <- recursive


def calls_recursive(x):
    y = x + 1.0
    return recursive(y)


def star_args(*xs):  # <- star_args
    return xs[0]


def star_kwargs(x, **options):  # <- star_kwargs
    return x


def keyword_only(x, *, scale=1.0):  # <- keyword_only
    return x * scale


def positional_only(x, /):  # <- positional_only
    return x


def write_through_view(x):
    y = x * 2.0
    v = y[1:3]
    v[0] = x[0]  # <- write_through_view
    return np.sum(y)


def write_through_row(x):
    M = np.zeros((2, 3))
    for i in range(2):
        row = M[i]
        row[0] = x[i]  # <- write_through_row
    return np.sum(M)
