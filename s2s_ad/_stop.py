"""``stop_gradient``: the one primitive users call inside their functions."""


def stop_gradient(x):
    """Return ``x`` unchanged; no derivative flows through it.

    Inside a function transformed by s2s_ad, the value is treated as a
    constant, like ``jax.lax.stop_gradient`` or PyTorch's ``detach``.
    """
    return x
