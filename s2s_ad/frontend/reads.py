"""What a build read from the user's program: the functions it parsed and
every free name they resolved (layer ``frontend``).

``s2s_ad.api.buildcache`` keeps a build's output on disk and must know
everything that output depends on, so that a changed helper, global
constant or rule is never served from a stale entry.  While a
:func:`recording` block is active (one build, under the API's build lock),
:class:`~s2s_ad.frontend.parse.FunctionSource` reports here each function
it parses (:func:`parsed`) and each free name, attribute chain or default
it reads (:func:`read`); outside one, both are a no-op.
"""
import contextlib
import threading

_LOCAL = threading.local()


class Recording:
    """The reads of one build, in the order they happened.

    ``reads``: ``(owner, dotted name, object)`` -- ``owner`` is the number
    of the parsed function that read it (0: the first parsed, the build's
    entry); ``sources``: each parsed function's FunctionSource, by number.
    """

    def __init__(self):
        self.reads = []
        self.sources = []
        self.functions = []       # the object each parsed function was given as
        self._owner = {}          # id(FunctionSource) -> its number
        self.nested = False       # another recording started inside this one

    def owner(self, src):
        return self._owner.get(id(src))


@contextlib.contextmanager
def recording():
    """Record the reads of the builds in this block (this thread)."""
    before = getattr(_LOCAL, "current", None)
    if before is not None:
        # A build inside a build: the inner one's reads are not the outer
        # one's record, so the outer build cannot be described.
        before.nested = True
    _LOCAL.current = rec = Recording()
    try:
        yield rec
    finally:
        _LOCAL.current = before


def parsed(fn, src):
    rec = getattr(_LOCAL, "current", None)
    if rec is not None and id(src) not in rec._owner:
        rec._owner[id(src)] = len(rec.sources)
        rec.sources.append(src)
        rec.functions.append(fn)


def read(src, name, obj):
    rec = getattr(_LOCAL, "current", None)
    if rec is not None:
        owner = rec._owner.get(id(src))
        # A read by a function parsed outside the recording (None) makes the
        # build one the cache cannot describe: buildcache refuses to keep it.
        rec.reads.append((owner, name, obj))
