"""Tiered execution under ``ad.jit`` (the default; ``compile="eager"`` or
``S2S_AD_COMPILE=eager`` compiles on the first call instead).

Compiling a generated module with Numba takes seconds; running the same
module as plain NumPy code (the ``python`` backend) takes milliseconds to
start.  With tiered execution the first call of a build whose compiled code
is not ready:

* uses compiled code at once when it is already compiled in this process;
* loads it from Numba's disk cache, and runs it, when it is there (a few
  milliseconds for a cache entry; Numba's own start-up, its first jitted
  function in a process, comes on top); for loop-free code the next call
  measures Numba against NumPy, as below;
* otherwise starts compiling it in a background thread and answers from the
  NumPy module -- the same generated source, so the same numbers up to
  floating point; calls made while the compile runs do the same, and the
  first call after it finishes switches to compiled code (for loop-free
  code, first measuring which of the two is faster, as eager compilation
  does, see ``api._choose_execution``);
* waits for the compile instead where the NumPy module would be much slower:
  the loops' statements it would interpret are estimated from the call's
  arguments (trip counts of ``range(n)``, ``range(len(x))``,
  ``x.shape[0]``... where they are computable, see :func:`estimate`), and
  the first call waits when that estimate exceeds :data:`NUMPY_LIMIT`
  (or when a scalar loop's trip count cannot be computed).

The compile runs in a thread of this process rather than a helper process:
the generated module binds Python objects (closed-over arrays, the user's
helpers, custom rules) that another process cannot rebuild without
re-running the user's code.  A thread shares the interpreter lock with the
caller while Numba type-infers (LLVM's optimisation releases it); measured
in docs/compile_time.md.  The thread is not a daemon: a process that ends
while a compile runs waits for it, and the compiled code is saved to the
disk cache, so the next process starts compiled.  Numba compiles under its
own global lock, so another compile the caller needs meanwhile waits for
this one.  A compile that fails (code Numba cannot compile) raises its
error from the next call, as eager compilation raises it from the first.
"""
import contextlib
import os
import threading

import numpy as np

from .. import backends
from ..ir import Call, Const, For, If, Prim, Var, While, var_names, walk

MODES = ("tiered", "eager")
DEFAULT = "tiered"          # of ad.jit without compile= and without $S2S_AD_COMPILE

_LOCAL = threading.local()


@contextlib.contextmanager
def _flag(name):
    """Set the thread's flag ``name`` for the block (restoring it after)."""
    before = getattr(_LOCAL, name, False)
    setattr(_LOCAL, name, True)
    try:
        yield
    finally:
        setattr(_LOCAL, name, before)


def eager():
    """Calls in this block wait for compiled code (``ad.precompile``, and
    compiled callers that need the Numba entry point itself)."""
    return _flag("eager")


@contextlib.contextmanager
def numpy_tier():
    """Calls in this block answer as a tiered first call does while Numba
    compiles -- from the NumPy module -- and compile nothing: the oracle's
    witness of that answer (s2s_ad.oracle).  A build first called in the
    block is put back as it was before the call at the block's end (its
    next call chooses again); its other calls in the block answer from
    NumPy too.  Compiled callers (``eager()`` inside the block) still wait
    for compiled code.
    """
    before = getattr(_LOCAL, "numpy", None)
    _LOCAL.numpy = touched = []
    try:
        yield
    finally:
        _LOCAL.numpy = before
        for tier, st in touched:
            tier.reset(st)


class Tier:
    """How one build runs until its compiled code is ready; ``note`` says
    what was chosen (shown by ``ad.source``)."""

    def __init__(self, choose, loop):
        # Loop-free code: the caller's function that measures Numba against
        # NumPy once compiled (api.core._choose_execution); None otherwise.
        self.choose = choose
        self.loop = loop          # the line of a scalar loop (see scalar_loop), or None
        self.started = False
        self.note = ""
        self.error = None
        self.thread = None
        self.numpy_only = False   # answering from NumPy under numpy_tier()
        self.loaded = False       # loaded from the disk cache; the next call measures

    def first_call(self, st, leaves):
        """Choose how this call (and the next ones) run; sets ``st.function``."""
        with _STARTING:
            if self.started:
                return
            self._start(st, leaves)
            # Only now: a thread that sees ``started`` finds ``st.function`` set.
            self.started = True

    @property
    def deferred(self):
        """Whether the first call answered from NumPy (compiled code comes
        later, or, under numpy_tier(), not at all)."""
        return self.thread is not None or self.numpy_only or self.loaded

    def reset(self, st):
        """Back to before the first call (the end of a numpy_tier() block)."""
        with _STARTING:
            st.function = getattr(st.compiled, st.entry)
            self.started = self.numpy_only = self.loaded = False
            self.note = ""

    def _start(self, st, leaves):
        dispatcher = getattr(st.compiled, st.entry)
        if context() == "numpy":
            st.function = getattr(self._numpy(st), st.entry)
            self.numpy_only = True
            self.note = "plain NumPy (the same module; numpy_tier(): nothing compiled)"
            _LOCAL.numpy.append((self, st))
            return
        try:
            sig = tuple(dispatcher.typeof_pyval(x) for x in leaves)
        except (ValueError, TypeError):          # Numba cannot type it: it says so on the call
            self.note = "compiled on the first call (an argument Numba cannot type)"
            return
        if sig in dispatcher.overloads:
            self.note = "compiled code (already compiled in this process)"
            return
        waits = getattr(_LOCAL, "eager", False) or getattr(_LOCAL, "disk_only", False)
        # Waiting, only whether there is an entry matters (its index, not its bytes).
        size, kernels = (backends.in_disk_cache(dispatcher, sig), 0) if waits else \
            backends.disk_entry(dispatcher, sig)
        seconds = size * LOAD_SECONDS_PER_BYTE + kernels * LOAD_SECONDS_PER_KERNEL
        if size and not waits and seconds > LOAD_WAIT and \
                self._numpy_faster(st, leaves, seconds):
            # A large entry (a gradient with much code inlined), or one calling
            # many of the runtime's kernels (each loaded as a library of its
            # own), takes a tenth of a second or more to load: NumPy answers
            # while it loads.
            calls = f", and the {kernels} runtime kernels it calls" if kernels else ""
            self._background(st, dispatcher, sig, (
                f"plain NumPy (the same module) while the compiled code "
                f"({size / 1e6:.1f} MB{calls}) loads from the disk cache in the "
                f"background, then compiled code"))
            return
        if size:
            # Loading a cache entry takes milliseconds: run compiled code now.
            self.note = "compiled code, loaded from the disk cache by the first call"
            if self.choose and not getattr(_LOCAL, "eager", False):
                # The next call measures Numba against NumPy (not this one:
                # it answers at once, as a tiered first call does).
                st.function = self._loaded(st, dispatcher)
                self.loaded = True
            return
        if getattr(_LOCAL, "disk_only", False):
            raise NotOnDisk(st.entry)
        if getattr(_LOCAL, "eager", False):
            self.note = "compiled on the first call (waited: ad.precompile or a compiled caller)"
            return
        seconds, why = 0.0, None      # no scalar loop: nothing to estimate
        if self.loop is not None:
            seconds, why = estimate(st, leaves)
            if seconds is None or seconds > NUMPY_LIMIT:
                self.note = (f"compiled on the first call (waited: the NumPy module would run "
                             f"{why} in the interpreter"
                             + (f", about {text(seconds)} by estimate, over the "
                                f"{text(NUMPY_LIMIT)} a tiered first call may take"
                                if seconds is not None else "") + ")")
                return
        self._background(st, dispatcher, sig, (
            "plain NumPy (the same module) while numba.njit compiles in the background, "
            "then compiled code" + (f" (estimated for its loops: {why}, about {text(seconds)})"
                                    if why else "")))

    def _background(self, st, dispatcher, sig, note):
        """Answer from the NumPy module while a thread compiles (or loads)
        ``dispatcher`` for ``sig``."""
        st.function = getattr(self._numpy(st), st.entry)
        self.note = note
        self.thread = threading.Thread(target=self._compile, args=(st, dispatcher, sig),
                                       name=f"s2s_ad compile {st.entry}")
        _RUNNING.add(self.thread)
        self.thread.start()

    def _numpy_faster(self, st, leaves, seconds):
        """Whether the NumPy module's loops (if any) would take, by estimate,
        less than half of ``seconds``."""
        if self.loop is None:
            return True
        spent, _ = estimate(st, leaves)
        return spent is not None and spent < seconds / 2

    @staticmethod
    def _numpy(st):
        """The generated module (the cpu target's source) run as plain NumPy."""
        return st.alternative or backends.load(st.source, st.program.consts,
                                               st.module.defined, st.entry, "python",
                                               like_numba=True)

    def _compile(self, st, dispatcher, sig):
        try:
            dispatcher.compile(sig)
        except BaseException as error:      # noqa: BLE001  (raised from the next call)
            self.error = error
            st.function = self._failed
        else:
            st.function = self._chooser(st) if self.choose else dispatcher
        finally:
            _RUNNING.discard(threading.current_thread())

    def _loaded(self, st, dispatcher):
        """The entry for the first call of code loaded from the disk cache:
        compiled code, and the measuring entry (:meth:`_chooser`) after it."""
        def first(*leaves):
            if st.function is first:
                st.function = self._chooser(st)
            return dispatcher(*leaves)
        return first

    def _failed(self, *args):
        raise self.error

    def _chooser(self, st):
        """The entry for the first call after the compile: measures Numba
        against NumPy on its arguments (``self.choose``), then runs."""
        measure = self.choose

        def choose(*leaves):
            if st.function is choose:
                measure(st, leaves)
            return st.function(*leaves)
        return choose

    def wait(self):
        """Block until the background compile (if any) has finished."""
        if self.thread is not None:
            self.thread.join()


class NotOnDisk(Exception):
    """Raised by a first call inside :func:`disk_only` whose compiled code is
    neither in this process nor in the disk cache."""


def disk_only():
    """First calls in this block load compiled code from the disk cache, and
    raise :class:`NotOnDisk` instead of compiling or answering from NumPy
    (a batched call asking whether its per-example code is on disk)."""
    return _flag("disk_only")


def need_no_compile(dispatcher, args):
    """Inside :func:`disk_only`: raise :class:`NotOnDisk` unless ``dispatcher``
    is compiled for ``args`` in this process or in the disk cache."""
    if not getattr(_LOCAL, "disk_only", False):
        return
    try:
        sig = tuple(dispatcher.typeof_pyval(x) for x in args)
    except (ValueError, TypeError):
        raise NotOnDisk(dispatcher.py_func.__name__) from None
    if sig not in dispatcher.overloads and not backends.in_disk_cache(dispatcher, sig):
        raise NotOnDisk(dispatcher.py_func.__name__)


def context():
    """``"eager"`` inside :func:`eager`, ``"numpy"`` inside :func:`numpy_tier`
    (and not eager), else None: how a first call here must run."""
    if getattr(_LOCAL, "eager", False):
        return "eager"
    return "numpy" if getattr(_LOCAL, "numpy", None) is not None else None


class Background:
    """``work()`` in a background thread, under :func:`eager` (it builds
    compiled code): the compile of something other than one generated
    module, e.g. ``ad.jit(ad.vmap(f))``'s per-sample loop.  The same
    guarantees as :class:`Tier`'s compile: not a daemon (a process ending
    meanwhile waits, and the disk cache is filled), waited for by a fork,
    its error kept (``error``) for the caller to raise."""

    def __init__(self, name, work, start=True):
        self.error = None
        self.done = False
        self.thread = threading.Thread(target=self._run, args=(work,), name=name)
        self._started = threading.Event()
        self._starting = threading.Lock()
        if start:
            self.start()

    def start(self):
        """Start the thread (once; ``start=False`` at creation leaves it to
        the caller, e.g. until a NumPy answer that would share the
        interpreter lock with it is computed)."""
        with self._starting:
            if self._started.is_set():
                return
            _RUNNING.add(self.thread)
            self.thread.start()
            self._started.set()

    def _run(self, work):
        try:
            with eager():
                work()
        except BaseException as error:      # noqa: BLE001  (raised by the caller)
            self.error = error
        finally:
            self.done = True
            _RUNNING.discard(threading.current_thread())

    def wait(self):
        self._started.wait()
        self.thread.join()


_STARTING = threading.Lock()

# Compile threads still running.  A fork waits for them: a child forked while
# one holds Numba's compiler lock would inherit the lock held by a thread that
# does not exist there, and hang at its first compile (multiprocessing's
# "fork" start method, os.fork).
_RUNNING = set()


def _wait_before_fork():
    me = threading.current_thread()
    for thread in list(_RUNNING):
        if thread is not me:
            thread.join()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_wait_before_fork)


def scalar_loop(st):
    """The user's line of a loop whose body computes no array (so the NumPy
    module would run it element by element), or None.

    Ranks come from the build's argument ranks; a value of unknown rank
    counts as a scalar, so an unknown loop is waited for.
    """
    if "loop_line" in vars(st):        # a build restored from the disk cache: kept there
        return st.loop_line
    from ..analyses import ranks
    req = st.request
    fns = [st.fn] + [f for f in st.program.functions.values() if f is not st.fn]
    for fn in fns:
        loops = [s for s in walk(fn.body) if isinstance(s, (For, While))]
        if not loops:
            continue
        given = list(req.ranks[:len(fn.params)]) if fn is st.fn and req.ranks else []
        given += [None] * (len(fn.params) - len(given))
        try:
            known = ranks.infer(fn, given)
        except Exception:      # noqa: BLE001  (no estimate: wait, the safe choice)
            known = {}
        for loop in loops:
            body = loop.body + (loop.test if isinstance(loop, While) else [])
            if not any(_makes_array(s, known) for s in walk(body)):
                return loop.loc.lineno if loop.loc else "?"
    return None


def _makes_array(s, known):
    if not isinstance(s, (Prim, Call)):
        return False
    return any((known.get(getattr(t, "name", t)) or 0) >= 1 for t in s.targets)


# -- the estimate: how long the NumPy module would interpret its loops ------------------

#: The longest a tiered first call may spend running the NumPy module, by
#: estimate, instead of waiting for a compile (which takes seconds).  Over
#: the limit the first call waits.  (Code in the disk cache is loaded by the
#: first call whatever the estimate.)
NUMPY_LIMIT = 0.5
#: Loading compiled code from Numba's disk cache: seconds per byte of the
#: entry (LLVM parses the module's bitcode for linking; measured 0.07 s per
#: MB: the attention gradient's 3.0 MB entry loads in 0.2 s).  A first call
#: whose entry would take longer than :data:`LOAD_WAIT` answers from NumPy
#: while a thread loads it.
LOAD_SECONDS_PER_BYTE = 0.07e-6
#: ... and up to this per runtime kernel the entry calls by symbol (each a
#: cache entry of its own: index, data, bitcode, its symbols; measured 1.7 to
#: 4.7 ms a kernel on the benchmark's workloads).
LOAD_SECONDS_PER_KERNEL = 4e-3
LOAD_WAIT = 0.06
#: Seconds per statement of the user's function run in the NumPy module
#: (its statement and adjoint, generated): measured 0.07-0.8 us on scalar
#: loops (rosen_loop, ode_rk4), taken at the high end.
STATEMENT_SECONDS = 1e-6
#: Trip count assumed for a ``while`` loop, and for a ``for`` loop over
#: arrays whose bounds are not computable at the call (a scalar ``for`` loop
#: with such bounds makes the first call wait).
ASSUMED_TRIPS = 16


def estimate(st, leaves):
    """(seconds, what) the NumPy module of ``st`` would spend interpreting
    the user's statements for arguments ``leaves``, or (None, what) when a
    scalar loop's trip count cannot be computed; ``what`` describes the
    costliest loop (its line and trip count).

    Trip counts come from the loops' bounds, evaluated on the call's
    arguments where they are computed from them by integer arithmetic,
    ``len``, ``np.shape``/``.shape[k]``, ``np.size``, ``int``, ``min``/``max``
    (constants included), and on the index of an enclosing loop (at its
    first and at its last value, the larger count taken for every trip);
    statements are counted through branches (the longer side) and called
    functions.
    """
    from ..analyses import ranks
    fn = st.fn
    names = list(var_names(fn.param_trees))
    env = dict(zip(names, leaves)) if len(names) <= len(leaves) else {}
    given = list(st.request.ranks[:len(fn.params)]) if st.request.ranks else []
    given += [None] * (len(fn.params) - len(given))
    try:
        known = ranks.infer(fn, given)
    except Exception:      # noqa: BLE001  (no ranks: every loop counts as scalar)
        known = {}
    counter = _Counter(known)
    try:
        count = counter.body(fn.body, env, 0)
    except _Unknown as unknown:
        return None, f"the scalar loop at line {unknown.line} (its trip count is not known here)"
    line, trips = counter.longest
    what = f"the loop at line {line} {trips:,} times" if line is not None else "its loops"
    if counter.whiles:
        what += f", counting {ASSUMED_TRIPS} iterations per while loop"
    return count * STATEMENT_SECONDS, what


class _Unknown(Exception):
    def __init__(self, line):
        super().__init__(line)
        self.line = line


class _Counter:
    """Statements one run of a body executes (see :func:`estimate`)."""

    def __init__(self, known):
        self.known = known
        self.longest = (None, 0)      # (line, trips) of the loop run most often
        self.whiles = False           # a while loop counted (ASSUMED_TRIPS)

    def body(self, stmts, env, depth, bound=False):
        total = 0
        for s in stmts:
            total += self.statement(s, env, depth, bound)
        return total

    def statement(self, s, env, depth, bound=False):
        if isinstance(s, For):
            trips = _trips(s, env)
            if trips is None:
                if not any(_makes_array(x, self.known) for x in walk(s.body)):
                    raise _Unknown(_line(s))
                trips = ASSUMED_TRIPS
            return 1 + self._loop(s, trips, s.body, env, depth)
        if isinstance(s, While):
            self.whiles = True
            return 1 + self._loop(s, ASSUMED_TRIPS, s.test + s.body, env, depth)
        if isinstance(s, If):
            return 1 + max(self.body(s.body, env, depth + 1, bound),
                           self.body(s.orelse, env, depth + 1, bound))
        if isinstance(s, Call):
            # The callee's arguments are not evaluated: its loops' bounds are
            # computable from constants only.
            return 1 + (self.body(s.callee.body, {}, depth + 1) if depth < 16 else 0)
        if isinstance(s, Prim) and (depth == 0 or bound):
            _evaluate(s, env)
        return 1

    def _loop(self, s, trips, stmts, env, depth):
        trips = max(int(trips), 0)
        if trips > self.longest[1]:
            self.longest = (_line(s), trips)
        start, step = (_value(a, env) for a in (s.start, s.step)) if isinstance(s, For) \
            else (None, None)
        if not trips or not isinstance(start, (int, np.integer)):
            return trips * self.body(stmts, env, depth + 1)
        # Loops inside whose bounds follow this one's index (range(i + 1, n)):
        # the body counted with the index at its first and at its last value,
        # the larger taken for every trip.
        per = 0
        for k in {0, trips - 1}:
            inner = dict(env)
            inner[s.index] = int(start) + k * int(step)
            per = max(per, self.body(stmts, inner, depth + 1, bound=True))
        return trips * per


def _line(s):
    return s.loc.lineno if s.loc else "?"


def _trips(s, env):
    start, stop, step = (_value(a, env) for a in (s.start, s.stop, s.step))
    if not all(isinstance(v, (int, np.integer)) for v in (start, stop, step)) or not step:
        return None
    return len(range(int(start), int(stop), int(step)))


def _value(atom, env):
    if isinstance(atom, Const):
        return atom.value
    if isinstance(atom, Var):
        return env.get(atom.name)
    return None


_INTS = {"np.add": lambda a, b: a + b, "np.subtract": lambda a, b: a - b,
         "np.multiply": lambda a, b: a * b, "np.floor_divide": lambda a, b: a // b,
         "np.minimum": min, "np.maximum": max, "min": min, "max": max}


def _evaluate(s, env):
    """Bind the integer (or shape) a top-level statement computes, where it is
    one of the few forms loop bounds are written with."""
    name = s.rule.name
    args = [_value(a, env) for a in s.args]
    if any(a is None for a in args) or len(s.targets) != 1:
        return
    value = None
    if name in ("np.shape", "len", "np.size") and len(args) == 1 and hasattr(args[0], "shape"):
        a = args[0]
        value = {"np.shape": np.shape, "len": len, "np.size": np.size}[name](a) \
            if np.ndim(a) else None
    elif name == "getitem" and isinstance(args[0], tuple):
        index = _value(s.params.get("index"), env)
        if isinstance(index, (int, np.integer)) and -len(args[0]) <= index < len(args[0]):
            value = args[0][index]
    elif name in ("copy", "int") and len(args) == 1 and isinstance(args[0], (int, np.integer)):
        value = int(args[0])
    elif name in _INTS and len(args) == 2 and all(
            isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args):
        if name != "np.floor_divide" or args[1]:
            value = _INTS[name](*args)
    if value is not None:
        env[s.targets[0]] = value


def text(seconds):
    """``seconds`` as the notes write it (``140 ms``, ``1.2 s``)."""
    return f"{seconds * 1e3:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"
