"""A sibling module that cli_demo.py imports by its bare name."""
FACTOR = 3.0


def scale(x):
    return x * FACTOR
