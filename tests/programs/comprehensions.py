# ruff: noqa: F841  (error cases bind values they do not use)
"""User code with comprehensions and generator expressions (tests/test_comprehensions.py)."""
import numpy as np


def sum_squares_list(x):
    return sum([xi ** 2 for xi in x])


def sum_genexp_range(x):
    return sum(np.sin(x[i]) * x[i] for i in range(len(x)))


def sum_start_filter(x):
    return sum((xi * xi for xi in x if xi > 0.0), 1.5)


def sum_zip(x, w):
    return sum(a * np.tanh(b) for a, b in zip(x, w))


def sum_enumerate(x):
    return sum((i + 1.0) * v ** 3 for i, v in enumerate(x))


def sum_nested(x):
    return sum(x[i] * x[j] for i in range(len(x)) for j in range(i) if j % 2 == 0)


def sum_rows(M):
    return np.sum(sum(np.sin(row) for row in M) ** 2)


def np_sum_list(x):
    return np.sum([np.exp(xi) for xi in x])


def array_static(x):
    y = np.array([x[k] * x[k + 1] for k in range(3)])
    return np.sum(y ** 2)


def array_dynamic(x):
    return np.sum(np.array([np.cos(xi) * xi for xi in x]) ** 2)


def stack_rows(M):
    return np.sum(np.stack([row * np.sum(row) for row in M]) ** 2)


def array_filtered(x):
    ys = np.array([v ** 2 for v in x if v > 0.2])
    return np.sum(np.sqrt(ys + 1.0))


def named_list(x):
    ys = [np.sin(v) for v in x]
    n = len(ys)
    return ys[0] * ys[n - 1] + sum(ys) + np.sum(np.stack(ys))


def max_genexp(x):
    return max(v * v for v in x) + min([np.cos(v) for v in x])


def over_tuple(params):
    return sum(np.sum(p ** 2) for p in params)


def over_zip_tuples(ws, bs):
    return sum(np.sum(w * b) for w, b in zip(ws, bs))


def vector_out(x):
    return np.array([np.sin(xi) * x[0] for xi in x])


def var_not_leaking(x):
    v = 2.0
    s = sum(v * v for v in x)
    return s * v


def inside_ifexp(x):
    return sum(v * v for v in x) if x[0] > 0 else np.sum(x)


def nested_rows(M):
    return sum(v * v * w for row in M for v, w in zip(row, row[::-1]) if v > 0.3)


def square_of_list(x):
    ys = [v * 2.0 for v in x]
    return ys + ys  # <- list_add


def set_comp(x):
    s = {v for v in x}  # <- setcomp
    return x


def dict_comp(x):
    d = {i: v for i, v in enumerate(x)}  # <- dictcomp
    return x


def stored_generator(x):
    g = (v * v for v in x)  # <- stored_genexp
    return x


def gen_items(x):
    yield x


def over_generator(x):
    return sum(v for v in gen_items(x))  # <- over_generator


def concatenated(x):
    return np.sum(np.concatenate([x * k for k in range(2)]))  # <- concatenate
