"""Derivative rules, one declaration per primitive (see ``registry``)."""
from . import arrays, elementwise, extras, fft, linalg, scans, special  # noqa: F401  (declaring)
from .registry import (
    ATTRIBUTES,
    BUILTINS,
    METHODS,
    OPERATORS,
    RULES,
    Rule,
    bind,
    lookup,
    unknown_rule,
)

__all__ = ["ATTRIBUTES", "BUILTINS", "METHODS", "OPERATORS", "RULES", "Rule", "bind", "lookup",
           "unknown_rule"]
