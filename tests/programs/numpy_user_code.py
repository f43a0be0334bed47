"""User code in a module whose name merely starts with "numpy".

Its helper is still a user function that the compiler must transform.
"""
import numpy as np


def helper(x):
    return x * 2.0


def uses_helper(x):
    return np.sum(helper(x))
