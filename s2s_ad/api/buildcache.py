"""The disk cache of builds: what the transformation pipeline produced for
one request, kept so that a new process skips the pipeline.

A process whose compiled code is in the disk cache still had to run the
whole pipeline (parse, AD, code generation) to learn the generated module's
name: up to a few tenths of a second, most of a warm first call.  Each
``ad.jit`` build (target ``cpu``, ``cache=True``) is therefore written
beside the generated modules as ``<key>.build``: the generated source, the
constants it binds, its entry point and the little the API reads from a
build (the output's structure, whether it writes into an argument, whether
it has loops).  A later build of the same request reads it, checks it and
imports the module, without parsing anything.

The entry is found by a key over what the request states: the user
function (module, name, file, first line and source text), the request
(kind, argument structures and ranks, small lengths, argnums, layers,
width, options except ``compile``, the ``S2S_AD_FUSE_SLICES`` setting), the
hash of s2s_ad's own source files (its runtime included), the NumPy, Numba
and Python versions, and the names of the registered primitive rules.
With ``S2S_AD_DUMP_AFTER`` set the pipeline always runs (to print).  Everything else the pipeline
read -- each helper it parsed, each global or closed-over value, attribute
chain and default argument any parsed function resolved
(:mod:`s2s_ad.frontend.reads`) -- is listed in the entry's manifest with a
fingerprint, resolved again in the new process and compared before the
entry is used: a helper's edited source, another value of a global
constant (arrays by their bytes), a rule added with ``defvjp`` all miss, and
the pipeline runs (and replaces the entry).  A build that read something
the manifest cannot fingerprint (an instance of a user class, say) is not
kept.  The constants the module binds are the objects resolved in the new
process where they came from a read (the user's own arrays, not copies).

What the pipeline alone knows (the IR, for tiered execution's loop
estimate, or a batched build's details) is rebuilt on first use by running
the pipeline after all (:class:`Restored`).
"""
import hashlib
import importlib
import inspect
import io
import linecache
import os
import pickle
import platform
import sys
import threading
import types
from pathlib import Path

import numpy as np

from .. import backends, pipeline
from ..backends import tiers
from ..frontend import custom, reads
from ..rules import registry
from ..transforms import widen

#: The format of entries; another value is a miss.
VERSION = 3

_SUFFIX = ".build"


#: Held while a pipeline is built (``s2s_ad.api.core``, and a restored build's
#: IR made on first use): the passes share per-program caches, and a
#: transform called from several threads at once is built once.
BUILDING = threading.RLock()


class _Unkept(Exception):
    """The build depends on something the manifest cannot describe."""


def build(req):
    """The built pipeline state for ``req``: from the disk cache when a valid
    entry is there, else by running the pipeline (and keeping the result)."""
    if not _eligible(req):
        return pipeline.build(req)
    try:
        key = _key(req)
    except _Unkept:
        return pipeline.build(req)
    path = backends.cache_dir() / f"{key}{_SUFFIX}"
    entry = _read(path)
    if entry is not None:
        st = _restore(req, entry)
        if st is not None:
            return st
    with reads.recording() as rec:
        st = pipeline.build(req)
    try:
        _write(path, _entry(req, st, rec))
    except (_Unkept, pickle.PicklingError, TypeError, AttributeError, OSError):
        pass
    return st


def _eligible(req):
    # S2S_AD_DUMP_AFTER asks to see the passes run: run them.
    return (req.target == "cpu" and req.options.get("cache", True)
            and isinstance(req.fun, types.FunctionType) and backends.on_disk()
            and not os.environ.get("S2S_AD_DUMP_AFTER"))


# -- the key -----------------------------------------------------------------------

def _key(req):
    options = sorted((k, v) for k, v in req.options.items() if k != "compile")
    parts = [str(VERSION), _package_hash(), _function(req.fun), req.kind, _text(req.trees),
             repr(req.argnums), repr(req.has_aux), repr(options), repr(req.ranks),
             _text(req.layers), repr(req.lengths), repr(req.known), repr(req.width), _rules(),
             repr([os.environ.get(name) for name in _SETTINGS])]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


#: Environment settings the passes read.
_SETTINGS = ("S2S_AD_FUSE_SLICES", "S2S_AD_NESTED", "S2S_AD_REMAT")


def _text(value):
    text = repr(value)
    if " at 0x" in text:              # an object without a stable description
        raise _Unkept(text)
    return text


_PACKAGE = {}


def _package_hash():
    """s2s_ad's source files (runtime included) and the versions it runs on (once
    per process).  Each file counts by its path, size and modification time, as
    Python's own bytecode cache checks a module's source (reading the files
    took 8 ms, a tenth of a warm first call).  Not the files under
    ``__pycache__``: the runtime's generated kernels are written there as
    programs compile (runtime/_nb_cached.py), and a new one must not make
    every kept build stale."""
    if "digest" not in _PACKAGE:
        from .. import runtime
        h = hashlib.sha256()
        roots = [Path(__file__).resolve().parents[1], Path(runtime.__file__).resolve().parent]
        for root in roots:
            h.update(str(root).encode())
            files = []
            for folder, subfolders, names in os.walk(root):
                # not walked at all: hundreds of kernels pile up there with use
                subfolders[:] = [name for name in subfolders if name != "__pycache__"]
                files += [Path(folder, name) for name in names if name.endswith(".py")]
            for path in sorted(files):
                info = path.stat()
                h.update(f"{path.relative_to(root)} {info.st_size} {info.st_mtime_ns}\n"
                         .encode())
        import numba
        h.update(f"{np.__version__} {numba.__version__} {sys.version} "
                 f"{platform.machine()}".encode())
        _PACKAGE["digest"] = h.hexdigest()
    return _PACKAGE["digest"]


def _rules():
    return hashlib.sha256(" ".join(sorted(registry.RULES)).encode()).hexdigest()


# -- fingerprints -------------------------------------------------------------------

_LIBRARIES = ("numpy", "scipy", "math", "builtins", "s2s_ad", "runtime", "numba", "cmath",
              "operator", "functools")


def _function(fn):
    """A def function or lambda: where it is, its source lines (read as the
    front end reads them, from the file) and its bytecode."""
    code = getattr(fn, "__code__", None)
    lines = linecache.getlines(code.co_filename, fn.__globals__) if code else None
    if not lines:
        raise _Unkept(repr(fn))
    first, last = code.co_firstlineno, _last_line(code)
    h = hashlib.sha256("".join(lines[first - 1:last]).encode())
    _code(code, h)                  # two lambdas on one line share their source lines
    return f"function {fn.__module__}.{fn.__qualname__} {code.co_filename}:{first} " \
           f"{h.hexdigest()}"


def _last_line(code):
    lines = [line for _, _, line in code.co_lines() if line is not None]
    lines += [_last_line(c) for c in code.co_consts if isinstance(c, types.CodeType)]
    return max(lines, default=code.co_firstlineno)


def _code(code, h):
    h.update(code.co_code)
    h.update(repr((code.co_names, code.co_varnames, code.co_freevars)).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _code(const, h)
        else:
            h.update(repr(const).encode())


def fingerprint(obj, depth=0):
    """A text that changes when ``obj`` would change a build reading it; raises
    _Unkept for objects it cannot describe."""
    if depth > 8:
        raise _Unkept("nested too deep")
    if obj is None or obj is Ellipsis or isinstance(obj, (bool, int, float, complex, str, bytes)):
        return f"{type(obj).__name__}:{obj!r}"
    if isinstance(obj, np.generic):
        return f"{obj.dtype}:{obj!r}"
    if isinstance(obj, np.ndarray):
        if obj.dtype.hasobject:
            raise _Unkept("an object array")
        data = hashlib.sha256(np.ascontiguousarray(obj).tobytes()).hexdigest()
        return f"ndarray:{obj.dtype}{obj.shape}{obj.flags.f_contiguous}:{data}"
    if isinstance(obj, np.dtype):
        return f"dtype:{obj}"
    if isinstance(obj, types.ModuleType):
        return f"module:{obj.__name__}"
    if isinstance(obj, (tuple, list)):
        kind = type(obj)
        if kind not in (tuple, list) and not hasattr(kind, "_fields"):
            raise _Unkept(repr(kind))
        return (f"{kind.__module__}.{kind.__qualname__}["
                + ",".join(fingerprint(v, depth + 1) for v in obj) + "]")
    if isinstance(obj, dict) and type(obj) is dict and all(isinstance(k, str) for k in obj):
        return "dict{" + ",".join(f"{k}={fingerprint(obj[k], depth + 1)}"
                                  for k in sorted(obj)) + "}"
    rule = custom.rule_of(obj)
    if rule is not None:
        parts = [fingerprint(getattr(rule, a, None), depth + 1) for a in _RULE_PARTS]
        parts += [fingerprint(getattr(rule, "policy", None), depth + 1)]
        return f"{rule.kind}(" + ",".join(parts) + ")"
    if getattr(type(obj), "__s2s_ad_object__", None) == "transformed":
        settings = (obj.kind, obj.argnums, obj.has_aux, obj.target,
                    sorted(obj.options.items()), obj.single, obj.layers, obj.units, obj.width)
        return f"transformed{_text(settings)}({fingerprint(obj.fun, depth + 1)})"
    module = getattr(obj, "__module__", None) or type(obj).__module__ or ""
    library = module.split(".")[0] in _LIBRARIES
    if isinstance(obj, types.FunctionType) and not library:
        return _function(obj) + f" defaults {fingerprint(obj.__defaults__, depth + 1)}"
    if inspect.ismethod(obj):
        return f"method {fingerprint(obj.__func__, depth + 1)} of " \
               f"{fingerprint(obj.__self__, depth + 1)}"
    if isinstance(obj, type) or (library and callable(obj)):
        return f"{type(obj).__name__}:{module}.{_named(obj, module)}"
    raise _Unkept(repr(type(obj)))


def _named(obj, module):
    """The name under which ``module`` holds ``obj`` itself (a class, a library
    function), which a new process finds again; raises _Unkept otherwise (an
    instance with state, a class defined in a function)."""
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    try:
        found = importlib.import_module(module)
        for part in str(name).split("."):
            found = getattr(found, part)
    except Exception as error:         # noqa: BLE001  (not found by name)
        raise _Unkept(repr(obj)) from error
    if found is not obj:
        raise _Unkept(repr(obj))
    return name


#: The parts of a custom rule (``ad.custom_vjp``/``custom_jvp``) a build reads.
_RULE_PARTS = ("fun", "fwd", "bwd", "jvp")


def _origins(obj, index, out, depth=0):
    """Record where the functions inside a read object are (its attributes), so
    that a function parsed later can be found again from that read."""
    if depth > 2:
        return
    out.setdefault(id(obj), (index, ()))
    rule = custom.rule_of(obj)
    parts = _RULE_PARTS if rule is not None else ("fun",) if getattr(
        type(obj), "__s2s_ad_object__", None) == "transformed" else ()
    for attr in parts:
        value = getattr(obj, attr, None)
        if value is not None:
            out.setdefault(id(value), (index, (attr,)))


# -- writing an entry ---------------------------------------------------------------

def _entry(req, st, rec):
    """The entry for a build: its output and the manifest of its reads."""
    if not rec.functions or rec.functions[0] is not req.fun or rec.nested:
        raise _Unkept("the entry function was not parsed first, or a build ran inside")
    origins, links = {}, [None]
    reads_out = []
    for index, (owner, name, obj) in enumerate(rec.reads):
        if owner is None or owner >= len(rec.functions):
            raise _Unkept("a read outside the recording")
        reads_out.append((owner, name, fingerprint(obj)))
        _origins(obj, index, origins)
    for fn in rec.functions[1:]:
        if id(fn) in origins:
            links.append(origins[id(fn)])
        elif _own(fn):
            # A library function's implementation (rules/library), lowered in
            # place of a NumPy call: s2s_ad's source, which the key covers.
            links.append(("package", fn.__module__, fn.__qualname__))
        else:
            raise _Unkept(f"{fn!r} parsed but not read")
    # Owners are resolved in the order they were parsed: each from an earlier read.
    read_objects = {id(obj): i for i, (_, _, obj) in enumerate(rec.reads)}
    consts = _dumps(st.program.consts, read_objects)
    return {"version": VERSION, "reads": reads_out, "links": links, "source": st.source,
            "consts": consts, "defined": list(st.module.defined), "entry": st.entry,
            "loops": pipeline.has_loops(st.program),
            "measured": st.alternative is not None, "out_tree": pickle.dumps(st.out_tree),
            "entry_writes": st.program.entry_writes, "loop_line": tiers.scalar_loop(st),
            "element_params": pipeline.element_params(st),
            "rows_width": getattr(st.module, "rows_width", 1)}


def _own(fn):
    """Whether ``fn`` is a function of s2s_ad's own modules."""
    module = getattr(fn, "__module__", None) or ""
    return isinstance(fn, types.FunctionType) and module.startswith("s2s_ad.") and \
        "<locals>" not in fn.__qualname__


class _Pickler(pickle.Pickler):
    def __init__(self, file, read_objects):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.read_objects = read_objects

    def persistent_id(self, obj):
        if isinstance(obj, (bool, int, float, str, type(None))):
            return None
        index = self.read_objects.get(id(obj))
        if index is not None:
            return ("read", index)
        if isinstance(obj, types.ModuleType):
            return ("module", obj.__name__)
        return None


def _dumps(consts, read_objects):
    buffer = io.BytesIO()
    _Pickler(buffer, read_objects).dump(consts)
    return buffer.getvalue()


def _write(path, entry):
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_bytes(pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL))
    os.replace(tmp, path)


# -- reading one back ---------------------------------------------------------------

def _read(path):
    try:
        entry = pickle.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except Exception:          # noqa: BLE001  (a damaged entry: build again, and replace it)
        return None
    return entry if isinstance(entry, dict) and entry.get("version") == VERSION else None


def _restore(req, entry):
    """The state an entry describes, or None when any read resolves to something
    else now (then the pipeline runs)."""
    try:
        objects = _resolve(req.fun, entry["reads"], entry["links"])
    except Exception:            # noqa: BLE001  (a name gone, an attribute error...: stale)
        return None
    if objects is None:
        return None
    try:
        consts = _Unpickler(io.BytesIO(entry["consts"]), objects).load()
        out_tree = pickle.loads(entry["out_tree"])
    except Exception:            # noqa: BLE001  (a module or class gone: stale)
        return None
    st = Restored(req)
    st.source, st.entry, st.out_tree = entry["source"], entry["entry"], out_tree
    st.loop_line, st.element_params = entry["loop_line"], entry["element_params"]
    st.program = _Partial(lambda: st.full().program, consts=consts,
                          entry_writes=entry["entry_writes"], loops=entry["loops"])
    st.module = _Partial(lambda: st.full().module, defined=entry["defined"],
                         rows_width=entry["rows_width"])
    st.compiled = backends.load(st.source, consts, entry["defined"], st.entry, "cpu",
                                req.options, superword=widen.uses_lanes(st.source))
    if entry.get("measured", not entry["loops"]):     # NumPy measured against Numba
        st.alternative = backends.load(st.source, consts, entry["defined"], st.entry, "python",
                                       like_numba=True)
    return st


def _resolve(fun, records, links):
    """The objects each recorded read names now, or None where one's fingerprint
    differs from the recorded one."""
    owners = [fun]
    objects = []
    for owner, name, recorded in records:
        while len(owners) <= owner:            # the next parsed function: from its read
            link = links[len(owners)]
            if link[0] == "package":           # s2s_ad's own (see _entry)
                obj = importlib.import_module(link[1])
                attrs = link[2].split(".")
            else:
                obj, attrs = objects[link[0]], link[1]
            for attr in attrs:
                obj = getattr(obj, attr)
            owners.append(obj)
        obj = _lookup(owners[owner], name)
        try:
            now = fingerprint(obj)
        except _Unkept:
            return None
        if now != recorded:
            return None
        objects.append(obj)
    return objects


def _lookup(fn, name):
    """What ``name`` (a free name, a dotted chain, ``__defaults__``) means in
    ``fn`` now, as :class:`s2s_ad.frontend.parse.FunctionSource` resolves it."""
    import builtins
    bound = None
    if inspect.ismethod(fn):
        bound, fn = fn.__self__, fn.__func__
    if name == "__defaults__":
        return fn.__defaults__
    first, *rest = name.split(".")
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    params = fn.__code__.co_varnames[:fn.__code__.co_argcount]
    if bound is not None and params and first == params[0]:
        obj = bound
    elif first in cells:
        obj = cells[first].cell_contents
    elif first in fn.__globals__:
        obj = fn.__globals__[first]
    else:
        obj = getattr(builtins, first)
    for attr in rest:
        obj = getattr(obj, attr)
    return obj


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, objects):
        super().__init__(file)
        self.objects = objects

    def persistent_load(self, pid):
        kind, value = pid
        if kind == "read":
            return self.objects[value]
        return importlib.import_module(value)


class _Partial:
    """Some attributes of a built object, known; the others from ``full()``."""

    def __init__(self, full, **known):
        self.__dict__.update(known)
        self._full = full

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._full(), name)


class Restored(pipeline.State):
    """A build read from the disk cache.  Its IR (``fn``) and the rest of the
    program and module are built on first use by running the pipeline."""

    def full(self):
        built = self.__dict__.get("_full")
        if built is None:
            with BUILDING:
                built = self.__dict__.get("_full")
                if built is None:
                    built = self.__dict__["_full"] = pipeline.build(self.request)
        return built

    @property
    def fn(self):
        return self.__dict__.get("_fn") or self.full().fn

    @fn.setter
    def fn(self, value):
        self.__dict__["_fn"] = value
