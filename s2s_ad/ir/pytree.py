"""Pytrees at the API boundary: tuples, lists, dicts and NamedTuples of values, nested.

Generated code never sees a container argument: the API flattens each
argument into leaves (passed as separate parameters) and rebuilds results in
the argument's structure, lists, dicts and NamedTuples included.  A dict's
leaves come in the order of its sorted keys, as in JAX.
"""
import numbers

import numpy as np


class Keyed:
    """The container of a dict or a NamedTuple: its class and keys (field names).

    Called with the children in order, it builds the container, like the
    ``tuple`` and ``list`` a treedef holds for those.
    """

    def __init__(self, cls, keys):
        self.cls, self.keys = cls, tuple(keys)
        self.__name__ = cls.__name__

    def __call__(self, children):
        children = list(children)
        if self.cls is dict:
            return dict(zip(self.keys, children))
        return self.cls(*children)

    def __eq__(self, other):
        return isinstance(other, Keyed) and (self.cls, self.keys) == (other.cls, other.keys)

    def __hash__(self):
        return hash((self.cls, self.keys))

    def __repr__(self):
        return f"Keyed({self.__name__}, {self.keys})"


class Fields(tuple):
    """The structure of a dict or NamedTuple argument: its children's
    structures, with the container, so the compiler resolves ``v["a"]`` and
    ``p.a`` statically."""

    def __new__(cls, children, container):
        obj = super().__new__(cls, children)
        obj.container = container
        return obj

    def __eq__(self, other):
        return isinstance(other, Fields) and self.container == other.container and \
            tuple.__eq__(self, other)

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash((tuple(self), self.container))

    def __reduce__(self):
        return Fields, (tuple(self), self.container)


def is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def flatten(x):
    """``(leaves, treedef)``; treedef is None for a leaf or (container, children),
    the container being ``tuple``, ``list`` or a :class:`Keyed`."""
    if isinstance(x, dict):
        try:
            keys = sorted(x)
        except TypeError:
            raise TypeError(f"a dict argument needs keys that sort (strings), got keys "
                            f"{list(x)!r}") from None
        return _flatten_items([x[k] for k in keys], Keyed(dict, keys))
    if is_namedtuple(x):
        return _flatten_items(x, Keyed(type(x), type(x)._fields))
    if isinstance(x, (tuple, list)):
        return _flatten_items(x, type(x))
    return [x], None


def _flatten_items(items, container):
    leaves, children = [], []
    for item in items:
        sub, tree = flatten(item)
        leaves.extend(sub)
        children.append(tree)
    return leaves, (container, tuple(children))


def is_container(x):
    """Whether ``x`` is a pytree node (not a leaf)."""
    return isinstance(x, (tuple, list, dict))


def structure(treedef):
    """The structure the compiler specialises on: nested tuples of None, with
    :class:`Fields` for dicts and NamedTuples (lists and tuples look alike)."""
    if treedef is None:
        return None
    children = tuple(structure(c) for c in treedef[1])
    return Fields(children, treedef[0]) if isinstance(treedef[0], Keyed) else children


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


def unflatten_all(leaves, treedefs):
    """Several values from one list of leaves, one treedef each (a call's arguments)."""
    it = iter(leaves)
    return [_build(tree, it) for tree in treedefs]


def map_leaves(fn, x):
    """``x`` with every leaf replaced by ``fn(leaf)``."""
    leaves, treedef = flatten(x)
    return unflatten([fn(v) for v in leaves], treedef)


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


def is_complex_leaf(x):
    """A complex scalar (Python or NumPy) or a complex NumPy array."""
    if type(x) is complex or isinstance(x, np.complexfloating):
        return True
    return isinstance(x, np.ndarray) and x.dtype.kind == "c"


def is_inexact_leaf(x):
    """A leaf that can be differentiated: a float or a complex value (JAX's
    ``inexact`` dtypes)."""
    return is_float_leaf(x) or is_complex_leaf(x)


def describe(x):
    if isinstance(x, np.ndarray):
        return f"an array of dtype {x.dtype}"
    if isinstance(x, numbers.Number):
        return f"a Python {type(x).__name__}"
    return f"a {type(x).__name__}"
