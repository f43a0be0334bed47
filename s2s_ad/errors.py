"""Error types raised to users.

Every error that concerns the user's code carries the user's file, line and
column, so it prints like a Python ``SyntaxError`` pointing at their source.
"""


class UnsupportedSyntaxError(SyntaxError):
    """Source the compiler cannot differentiate, at the user's line.

    ``filename``, ``lineno``, ``offset`` and ``text`` are set as for a
    ``SyntaxError``; the message says what is unsupported and what to write
    instead.
    """

    def __init__(self, msg, filename=None, lineno=None, offset=None, text=None):
        super().__init__(msg, (filename, lineno, offset, text))


class NonDifferentiableError(TypeError):
    """A call on a differentiated path has no derivative rule."""

    def __init__(self, msg, filename=None, lineno=None):
        self.filename = filename
        self.lineno = lineno
        where = f"{filename}:{lineno}: " if filename else ""
        super().__init__(where + msg)


class StructureError(TypeError, ValueError):
    """Arguments whose structures do not match (primals and tangents of ``jvp``).

    JAX raises a ``TypeError`` here, and s2s_ad has documented a
    ``ValueError``: this is both, so code written for either catches it.
    """
