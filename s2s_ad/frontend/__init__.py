"""From the user's Python to IR (layer ``frontend``: reads ``ir``, ``rules``, ``analyses``).

``parse`` reads a function's source (def, lambda, nested def, bound method)
and resolves its free names; ``desugar`` rewrites augmented assignments and
similar sugar; ``comprehensions`` turns comprehensions and generator
expressions into loops; ``anf`` lowers the result to A-normal form
(:class:`~s2s_ad.ir.Function`), inlining the library's Python implementations
of NumPy functions and in-place helpers; ``custom`` holds ``ad.custom_vjp`` /
``ad.custom_jvp`` and lowers functions that carry such rules.

Calls of s2s_ad's transforms inside user code are recognised here by marker
and lowered by ``s2s_ad.transforms.nested_calls`` (installed into ``anf``).
"""
