"""Functions that call ad.vmap themselves, and are then differentiated."""
import numpy as np

import s2s_ad as ad


def loss(theta, x):
    return np.tanh(np.dot(theta, x)) ** 2


def total(theta, xs):
    return np.sum(ad.vmap(loss, in_axes=(None, 0))(theta, xs))


def pair(w, x):
    return np.sin(w * x), np.sum(w * x * x)


def columns_total(w, xs):
    """Examples are the columns of xs; two outputs per example."""
    a, b = ad.vmap(pair, (None, 1))(w, xs)
    return np.sum(a * a) + np.sum(b)


def tree_example(p, x):
    w, c = p
    return c * np.sum(np.tanh(w * x))


def tree_total(p, xs):
    return np.sum(ad.vmap(tree_example, ((None, None), 0))(p, xs) ** 2)


def bad_out_axes(theta, xs):
    return np.sum(ad.vmap(loss, (None, 0), 1)(theta, xs))


def bad_negative_axis(theta, xs):
    return np.sum(ad.vmap(loss, (None, -1))(theta, xs))


def bad_variable_axes(theta, xs, k):
    return np.sum(ad.vmap(loss, (None, k))(theta, xs))
