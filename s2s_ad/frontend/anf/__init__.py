"""normalize: resolved gast function -> A-normal form (:mod:`s2s_ad.ir`).

Receives a :class:`~s2s_ad.frontend.parse.FunctionSource` and the structure of each
argument (a leaf, or a tuple of structures).  Guarantees: every statement is
one primitive (:class:`~s2s_ad.ir.Prim`) or user-function call
(:class:`~s2s_ad.ir.Call`) on atoms; names are in SSA form (a user variable
redefined gets a fresh name, so no value is ever overwritten); calls are in
canonical form (operators, methods and attributes become the rule of their
NumPy function: ``a * b`` and ``np.multiply``, ``x.sum(0)`` and ``np.sum``,
``x.T`` and ``np.transpose`` share one rule); tuples are static
(:class:`~s2s_ad.ir.Tup`) and never built at run time; the body ends in one
:class:`~s2s_ad.ir.Return`.

One :class:`~s2s_ad.frontend.anf.lowerer.Lowerer` per (function, argument
structure), written in parts: ``lowerer`` (the class and its state),
``statements``, ``expressions``, ``calls`` (dispatch, rules, methods),
``inlining`` (local, user and library functions), ``memory`` (in-place writes
and views); ``program`` holds the :class:`Program` of one request, ``common``
the shared folding helpers, ``markers`` the recognition of s2s_ad's own
transforms in user code.
"""
from ...ir import LEAF, Record, tree_of
from .common import LocalFn, _leaves, map_values
from .lowerer import Lowerer
from .markers import install_transform_calls, transform_kind, transformed_object
from .program import Program

__all__ = ["LEAF", "LocalFn", "Lowerer", "Program", "Record", "install_transform_calls",
           "transform_kind", "transformed_object", "tree_of", "_leaves", "map_values"]
