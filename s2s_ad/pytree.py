"""Pytrees at the API boundary: tuples and lists of values, nested.

Generated code never sees a tuple argument: the API flattens each argument
into leaves (passed as separate parameters) and rebuilds results in the
argument's structure, lists included.
"""
import numbers

import numpy as np


def flatten(x):
    """``(leaves, treedef)``; treedef is None for a leaf or (type, children)."""
    if isinstance(x, (tuple, list)):
        leaves, children = [], []
        for item in x:
            sub, tree = flatten(item)
            leaves.extend(sub)
            children.append(tree)
        return leaves, (type(x), tuple(children))
    return [x], None


def structure(treedef):
    """The container-free structure the compiler specialises on."""
    if treedef is None:
        return None
    return tuple(structure(c) for c in treedef[1])


def rebuild(value, treedef):
    """Convert nested tuples from generated code to the treedef's containers."""
    if treedef is None:
        return value
    kind, children = treedef
    return kind(rebuild(v, c) for v, c in zip(value, children))


def unflatten(leaves, treedef):
    """The inverse of :func:`flatten`.

    The recursion is a module function, not a closure: a closure that calls
    itself is a reference cycle, which would keep ``leaves`` (a batch's
    outputs) alive until the cyclic garbage collector ran.
    """
    return _build(treedef, iter(leaves))


def _build(tree, leaves):
    if tree is None:
        return next(leaves)
    kind, children = tree
    return kind(_build(c, leaves) for c in children)


def rank(x):
    """The number of dimensions of a leaf, or None for what is not a number."""
    if type(x) is float:
        return 0
    if isinstance(x, np.ndarray):
        return x.ndim
    if isinstance(x, (numbers.Number, np.generic)):
        return 0
    return None


def is_float_leaf(x):
    if type(x) is float:
        return True
    if isinstance(x, bool):
        return False
    if isinstance(x, (float, np.floating)):
        return True
    if isinstance(x, np.ndarray):
        return x.dtype.kind == "f"
    return False


def describe(x):
    if isinstance(x, np.ndarray):
        return f"an array of dtype {x.dtype}"
    if isinstance(x, numbers.Number):
        return f"a Python {type(x).__name__}"
    return f"a {type(x).__name__}"
