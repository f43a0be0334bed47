"""The ``s2s-ad`` command line (also ``python -m s2s_ad``).

``s2s-ad show FILE.py:FUNC`` imports ``FILE.py`` (its folder first on
``sys.path``, as ``python FILE.py`` has it), transforms ``FUNC`` and prints the
generated source, the same text as ``ad.source``.  ``s2s-ad compile`` fills
the disk cache ahead of time (``ad.precompile``) and ``s2s-ad cache info|clear``
shows or empties it (see s2s_ad.backends.diskcache).  Every failure -- a bad
path, a module that fails to import, source the compiler rejects -- is one
message on stderr and exit status 1; ``--debug`` adds the Python traceback.
Usage errors exit 2, as argparse does.
"""
import argparse
import contextlib
import importlib.util
import inspect
import re
import sys
import traceback
from pathlib import Path

import numpy as np

import s2s_ad as ad
from s2s_ad import bench

MODES = ("grad", "value_and_grad", "vjp", "jvp", "jacfwd", "jacrev", "hessian", "vmap")
ARGNUMS_MODES = ("grad", "value_and_grad", "vjp", "jacfwd", "jacrev", "hessian")
TARGETS = ("python", "cpu", "cuda")


class CLIError(Exception):
    """A failure the user can fix, reported as one message and status 1."""


# -- the parser -------------------------------------------------------------

_EPILOG = """\
examples:
  s2s-ad show model.py:loss                    gradient w.r.t. the first argument
  s2s-ad show model.py:loss --argnums 0,2      gradients w.r.t. arguments 0 and 2
  s2s-ad show model.py:loss --target cpu       the source Numba compiles
  s2s-ad show td.py:td_loss --target cuda --in-axes None,0,0,0 \
      --args float64[3] float64[3] float64 float64[3]     the CUDA kernel, per example
  python -m s2s_ad show model.py:step --mode vjp

exit status: 0 on success, 1 when FILE or FUNC cannot be loaded or the
compiler rejects the function (the message says where and why), 2 for a
malformed command line.
"""

_SHOW_HELP = """\
Print the Python source that s2s_ad generates for FUNC under a transform: the
code that actually runs (ad.source).  FILE.py is imported under its module
name with its folder first on sys.path: its top-level code runs, as with
`python FILE.py`, except an `if __name__ == "__main__":` block.  Generated
code depends on the structure of the arguments; `show` assumes every
argument of FUNC is one array.  Set S2S_AD_DUMP_AFTER=all to
also print the source after each compiler pass.
"""


def build_parser():
    """The argparse parser for ``s2s-ad``."""
    parser = argparse.ArgumentParser(
        prog="s2s-ad", description="s2s_ad: source-to-source automatic differentiation "
        "for NumPy/math Python code.", epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {ad.__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser(
        "bench", add_help=False,
        help="run the benchmark suite against hand-written Numba, JAX, PyTorch and "
             "autograd (s2s-ad bench --help)")
    show = commands.add_parser(
        "show", help="print the generated source of a transformed function",
        description=_SHOW_HELP, epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    show.add_argument("spec", metavar="FILE.py:FUNC",
                      help="the Python file and the name of a function defined or imported in it "
                      "(a dotted name such as helpers.loss follows attributes)")
    show.add_argument("--mode", choices=MODES, default="grad",
                      help="the transform (default: grad).  grad, value_and_grad and vjp "
                      "are reverse mode; jvp and jacfwd forward mode; jacrev builds on vjp, "
                      "hessian on the gradient of a JVP; vmap batches the function")
    show.add_argument("--argnums", metavar="N[,N...]",
                      help="comma-separated positions of the arguments to differentiate "
                      "(default: 0; for vjp, every argument); negative counts from the end.  "
                      "Not for jvp or vmap")
    show.add_argument("--in-axes", metavar="AXES", dest="in_axes",
                      help="vmap only: the batch axis of each argument, comma-separated "
                      "integers or None, e.g. 0,None (default: 0)")
    show.add_argument("--target", choices=TARGETS,
                      help="the backend the source is generated for (default: python, or the "
                      "target of FUNC when it is already wrapped in ad.jit); cpu compiles "
                      "with numba.njit, cuda with numba.cuda (batched functions only)")
    show.add_argument("--args", nargs="+", metavar="TYPE",
                      help="--target cuda: the type of each argument of one example, "
                      "DTYPE[SHAPE] or DTYPE (the kernel is generated for that layout); "
                      "--in-axes then gives the batch axis of each (default: 0), for any mode")
    show.add_argument("--debug", action="store_true",
                      help="on failure, print the full Python traceback too")
    _add_compile_parser(commands)
    _add_cache_parser(commands)
    return parser


_COMPILE_HELP = """\
Compile FUNC under a transform for the given argument types and keep the
machine code in the disk cache (see `s2s-ad cache info`), so that a later
process calling ad.jit(<transform>(FUNC)) with arguments of those types
loads it instead of compiling: run it when building a deployment or CI
image.  FILE.py is imported as `show` imports it; FUNC runs once on example
values of the given types (floats in [0.5, 1.5), integers 1 or 0).
"""

_COMPILE_EPILOG = """\
argument types (--args, one per positional argument, quoted for the shell):
  float64[100]      a 1-D float64 array of 100 elements
  float32[8,3]      a 2-D float32 array
  float64 / int64   a scalar (Python float / int)
Compiled code depends on each argument's dtype and rank, and on the length
of 1-D arrays of up to 16 elements; other sizes are only examples.
For --mode vjp the cotangent follows the arguments, for jvp the tangents.

examples:
  s2s-ad compile model.py:loss --mode grad --args 'float64[1000]' 'float64[1000,10]'
  s2s-ad compile model.py:loss --mode vmap --in-axes 0,None --args 'float64[64,3]' 'float64[3]'
"""


def _add_compile_parser(commands):
    comp = commands.add_parser(
        "compile", help="compile a transformed function into the disk cache ahead of time",
        description=_COMPILE_HELP, epilog=_COMPILE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    comp.add_argument("spec", metavar="FILE.py:FUNC",
                      help="the Python file and the name of a function defined or imported in it")
    comp.add_argument("--mode", choices=("jit",) + MODES, default="grad",
                      help="the transform (default: grad); jit compiles FUNC itself")
    comp.add_argument("--args", nargs="+", required=True, metavar="TYPE",
                      help="the type of each positional argument: DTYPE[SHAPE] or DTYPE")
    comp.add_argument("--argnums", metavar="N[,N...]",
                      help="positions of the arguments to differentiate (default: 0)")
    comp.add_argument("--in-axes", metavar="AXES", dest="in_axes",
                      help="vmap only: the batch axis of each argument, e.g. 0,None")
    comp.add_argument("--target", choices=("cpu", "cuda"), default="cpu",
                      help="the compiled backend (default: cpu)")
    comp.add_argument("--fastmath", action="store_true",
                      help="as ad.jit(..., fastmath=True): compile code for that setting")
    comp.add_argument("--parallel", action="store_true",
                      help="as ad.jit(..., parallel=True): compile code for that setting")
    comp.add_argument("--debug", action="store_true",
                      help="on failure, print the full Python traceback too")


def _add_cache_parser(commands):
    cache = commands.add_parser(
        "cache", help="show or clear the disk cache of generated and compiled code",
        description="The disk cache holds generated modules and the machine code Numba "
        "compiled from them ($S2S_AD_CACHE_DIR/generated, by default "
        "~/.cache/s2s_ad/generated).  `info` shows where it is and what it holds; "
        "`clear` removes its files (processes running now keep what they loaded; "
        "the next call of a removed function compiles it again).")
    cache.add_argument("action", choices=("info", "clear"))
    cache.add_argument("--debug", action="store_true",
                       help="on failure, print the full Python traceback too")


def main(argv=None):
    """Run the command line; returns the exit status."""
    status = bench.dispatch(argv)      # `bench` hands its options to the suite
    if status is not None:
        return status
    args = build_parser().parse_args(argv)
    command = {"show": show, "compile": compile_command, "cache": cache_command}[args.command]
    try:
        text = command(args)
    except Exception as exc:  # noqa: BLE001  (every failure becomes one message)
        if args.debug:
            traceback.print_exception(exc)
        print(describe_error(exc, args.debug), file=sys.stderr)
        return 1
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


# -- show ---------------------------------------------------------------------

def show(args):
    """The generated source for the ``show`` command's arguments."""
    path, name = split_spec(args.spec)
    if args.target == "cuda" and (args.args is not None or args.mode == "vmap"):
        return show_cuda(args, path, name)
    if args.args is not None:
        raise CLIError("--args applies to --target cuda (for other targets `show` assumes "
                       "every argument is one array)")
    check_options(args)
    argnums = parse_argnums(args.argnums)
    in_axes = parse_in_axes(args.in_axes)
    transform = require_transform(args.mode)
    with user_path(path):
        module = import_file(path)
        fn = find_function(module, name, path)
        transformed = BUILDERS[args.mode](transform, fn, argnums, in_axes)
        if args.target is not None:
            transformed = ad.jit(transformed, target=args.target)
        return ad.source(transformed)


def show_cuda(args, path, name):
    """``show --target cuda``: the kernel and device functions of
    ``ad.jit(ad.vmap(<mode>(FUNC), in_axes), target="cuda")`` for examples of
    the ``--args`` types (generated, neither compiled nor launched)."""
    if not args.args:
        raise CLIError("--target cuda generates a kernel for one argument layout: give the "
                       "type of each argument of one example with --args, e.g. --args "
                       "float64[3] float64[3] float64 float64[3] --in-axes None,0,0,0")
    in_axes = parse_in_axes(args.in_axes)
    if args.argnums is not None and args.mode not in ARGNUMS_MODES:
        raise CLIError(f"--argnums does not apply to --mode {args.mode}")
    argnums = parse_argnums(args.argnums)
    types = [parse_type(t) for t in args.args]
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(types)
    if len(axes) != len(types):
        raise CLIError(f"--in-axes has {len(axes)} entries for {len(types)} --args")
    rng = np.random.default_rng(0)
    examples = []
    for t, axis in zip(types, axes):
        value = t.example(rng)
        if axis is not None:
            value = np.stack([value, value], axis=axis)      # a batch of two
        examples.append(value)
    with user_path(path):
        module = import_file(path)
        fn = find_function(module, name, path)
        if args.mode == "vmap":
            batched = ad.vmap(fn, in_axes=in_axes)
        else:
            batched = ad.vmap(BUILDERS[args.mode](require_transform(args.mode), fn, argnums,
                                                  None), in_axes=in_axes)
        return ad.source(ad.jit(batched, target="cuda"), *examples)


# -- compile and cache ----------------------------------------------------------

def compile_command(args):
    """Precompile for the ``compile`` command; returns the report printed."""
    path, name = split_spec(args.spec)
    if args.mode != "jit":
        check_options(args)
    elif args.argnums is not None or args.in_axes is not None:
        raise CLIError("--argnums and --in-axes do not apply to --mode jit")
    argnums = parse_argnums(args.argnums)
    in_axes = parse_in_axes(args.in_axes)
    types = [parse_type(t) for t in args.args]
    with user_path(path):
        module = import_file(path)
        fn = find_function(module, name, path)
        if args.mode == "jit":
            transformed = fn
        else:
            transformed = BUILDERS[args.mode](require_transform(args.mode), fn, argnums,
                                              in_axes)
        transformed = ad.jit(transformed, target=args.target, fastmath=args.fastmath,
                             parallel=True if args.parallel else None)
        before = ad.cache_info()["compiled"]
        ad.precompile(transformed, *types)
    info = ad.cache_info()
    added = max(info["compiled"] - before, 0)
    note = "" if added else (" (already in the cache, or nothing to compile: a loop-free "
                             "vmap runs on NumPy)")
    return (f"compiled {args.mode} of {name} for ({', '.join(map(str, types))}): "
            f"{added} new compiled entries{note}; {info['compiled']} in the cache "
            f"{info['path']}")


_TYPE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\[([0-9,\s]*)\])?\s*$")


def parse_type(text):
    """``"float64[10,3]"`` -> ShapeDtypeStruct((10, 3), float64); ``"int64"`` a scalar."""
    m = _TYPE.match(text)
    dtype = None
    if m:
        try:
            dtype = np.dtype(m.group(1))
        except TypeError:
            dtype = None
    if dtype is None or dtype.kind not in "fib":
        raise CLIError(f"--args: {text!r} is not an argument type; expected DTYPE[SHAPE] or "
                       f"DTYPE with a float, int or bool dtype, such as float64[100], "
                       f"float32[8,3] or int64")
    dims = [d.strip() for d in (m.group(2) or "").split(",") if d.strip()]
    return ad.ShapeDtypeStruct(tuple(int(d) for d in dims), dtype)


def cache_command(args):
    """The report of ``cache info`` or ``cache clear``."""
    if args.action == "clear":
        done = ad.clear_cache()
        return (f"removed {done['files']} files ({_size_text(done['bytes'])}) from "
                f"{done['path']}, and {done['kernel_files']} files "
                f"({_size_text(done['kernel_bytes'])}) of the runtime's compiled kernels")
    info = ad.cache_info()
    kernels = (f"runtime kernels: {info['kernels']} compiled entries "
               f"({_size_text(info['kernel_bytes'])}"
               + "".join(f", in {folder}" for folder in info["kernel_folders"]) + ")")
    if not info["exists"]:
        return f"cache folder: {info['path']} (not created yet: empty)\n{kernels}"
    return (f"cache folder: {info['path']}\n"
            f"generated modules: {info['modules']}\n"
            f"compiled functions: {info['functions']} ({info['compiled']} compiled entries, "
            f"one per function and argument types)\n"
            f"kept builds: {info['builds']} (the transformation's output, per request)\n"
            f"size: {_size_text(info['bytes'])}\n{kernels}")


def _size_text(n):
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024


def split_spec(spec):
    """``FILE.py:FUNC`` -> (resolved Path, "FUNC"), checking the file exists."""
    file, sep, name = spec.rpartition(":")
    if not sep or not file or not name:
        raise CLIError(f"expected FILE.py:FUNC (a Python file and a function name, separated "
                       f"by a colon), got {spec!r}")
    if not all(part.isidentifier() for part in name.split(".")):
        raise CLIError(f"{name!r} is not a Python name; expected FILE.py:FUNC, got {spec!r}")
    path = Path(file).expanduser()
    if not path.exists():
        raise CLIError(f"no such file: {file!r}")
    if not path.is_file():
        raise CLIError(f"{file!r} is not a file; expected a Python source file (FILE.py)")
    if path.suffix != ".py":
        raise CLIError(f"{file!r} is not a Python source file; expected a .py file")
    return path.resolve(), name


def parse_argnums(text):
    """``"1"`` -> 1, ``"0,1"`` -> (0, 1), None -> None (the mode's default)."""
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")]
    if parts and parts[-1] == "" and len(parts) > 1:   # "0," is a one-element tuple
        parts.pop()
        as_tuple = True
    else:
        as_tuple = len(parts) > 1
    try:
        nums = tuple(int(p) for p in parts)
    except ValueError:
        raise CLIError(f"--argnums must be argument positions separated by commas, such as 0 "
                       f"or 0,2; got {text!r}") from None
    return nums if as_tuple else nums[0]


def parse_in_axes(text):
    """``"0"`` -> 0, ``"None"`` -> None, ``"0,None"`` -> (0, None)."""
    if text is None:
        return 0
    parts = [p.strip() for p in text.split(",")]
    try:
        axes = tuple(None if p == "None" else int(p) for p in parts)
    except ValueError:
        raise CLIError(f"--in-axes must be integers or None separated by commas, such as 0 or "
                       f"0,None; got {text!r}") from None
    return axes if len(axes) > 1 else axes[0]


def check_options(args):
    """Reject options that mean nothing for the chosen mode."""
    if args.argnums is not None and args.mode not in ARGNUMS_MODES:
        raise CLIError(f"--argnums does not apply to --mode {args.mode}")
    if args.in_axes is not None and args.mode != "vmap":
        raise CLIError(f"--in-axes applies only to --mode vmap, not --mode {args.mode}")


def require_transform(mode):
    """``ad.<mode>``, or a CLIError when this version of s2s_ad lacks it."""
    if not hasattr(ad, mode):
        raise CLIError(f"--mode {mode} is not available: this version of s2s_ad "
                       f"({ad.__version__}) has no ad.{mode} transform yet")
    return getattr(ad, mode)


# -- transforms ---------------------------------------------------------------

def _argnums_transform(transform, fn, argnums, in_axes):
    return transform(fn, argnums=0 if argnums is None else argnums)


def _all_args_transform(kind):
    """vjp and jvp take example values in the API; build the function form."""
    def build(transform, fn, argnums, in_axes):
        plain, target, options = _unwrap(fn)
        if argnums is None:
            nums = tuple(range(_arg_count(plain)))
        else:   # validated and normalised exactly as ad.grad does it
            nums = ad.grad(plain, argnums=argnums).argnums
        if kind == "jvp":
            return ad.Transformed(plain, "primal", target=target, options=options,
                                  layers=((nums, "pair"),))
        return ad.Transformed(plain, kind, argnums=nums, target=target, options=options)
    return build


def _vmap_transform(transform, fn, argnums, in_axes):
    return transform(fn, in_axes=in_axes)


BUILDERS = {
    "grad": _argnums_transform, "value_and_grad": _argnums_transform,
    "vjp": _all_args_transform("vjp"), "jvp": _all_args_transform("jvp"),
    "jacfwd": _argnums_transform, "jacrev": _argnums_transform,
    "hessian": _argnums_transform, "vmap": _vmap_transform,
}


def _unwrap(fn):
    """The user function beneath ``ad.jit``, with the target it asked for."""
    if isinstance(fn, ad.Transformed):
        if fn.kind != "primal":
            raise CLIError(f"{fn!r} is already transformed; name the plain function")
        return fn.fun, fn.target, fn.options
    return fn, "python", {}


def _arg_count(fn):
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 0
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


# -- importing the user's file ------------------------------------------------

@contextlib.contextmanager
def user_path(path):
    """The file's folder first on ``sys.path``, as ``python FILE.py`` has it."""
    saved = list(sys.path)
    sys.path.insert(0, str(path.parent))
    try:
        yield
    finally:
        sys.path[:] = saved


def import_file(path):
    """Execute ``path`` as a fresh module named after the file."""
    name = path.stem
    existing = sys.modules.get(name)
    if existing is not None and getattr(existing, "__file__", None) != str(path):
        name = f"_s2s_ad_user_{name}"   # never shadow an installed module
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        del sys.modules[name]
        raise CLIError(f"cannot import {path}: it is not valid Python\n"
                       + _syntax_text(exc, type(exc).__name__)) from exc
    except (Exception, SystemExit) as exc:
        del sys.modules[name]
        raise CLIError(f"cannot import {path}: {_exception_line(exc)}"
                       f"{_where(exc, path)}") from exc
    return module


def find_function(module, name, path):
    """``module.name`` (a dotted name follows attributes), checked callable."""
    obj = module
    for part in name.split("."):
        if not hasattr(obj, part):
            raise CLIError(f"{path} defines no function {name!r}{_candidates(module)}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise CLIError(f"{name!r} in {path} is a {type(obj).__name__}, not a function")
    return obj


def _candidates(module):
    names = sorted(n for n, v in vars(module).items()
                   if inspect.isfunction(v) and v.__module__ == module.__name__)
    if len(names) > 8:
        names = names[:8] + [f"... ({len(names) - 8} more)"]
    return f"; it defines: {', '.join(names)}" if names else ""


# -- messages -----------------------------------------------------------------

def describe_error(exc, debug=False):
    """One message for ``exc``, shaped for a terminal."""
    if isinstance(exc, CLIError):
        return f"s2s-ad: error: {exc}".rstrip("\n")
    if isinstance(exc, ad.UnsupportedSyntaxError):
        return _syntax_text(exc, "UnsupportedSyntaxError").rstrip("\n")
    if isinstance(exc, (TypeError, ValueError, NotImplementedError)):
        return f"s2s-ad: {_exception_line(exc)}"
    hint = "" if debug else "rerun with --debug for the traceback and "
    return (f"s2s-ad: internal error: {_exception_line(exc)}\nThis is a bug in s2s_ad; "
            f"{hint}please report it.")


def _syntax_text(exc, label):
    """A SyntaxError as Python prints it: file, line, source, caret, message."""
    lines = traceback.format_exception_only(exc)
    lines[-1] = f"{label}: {exc.msg}\n"
    return "".join(lines)


def _exception_line(exc):
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _where(exc, path):
    """`` (FILE, line N)`` for the innermost traceback frame in ``path``."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(path)]
    return f" (at {path}, line {frames[-1].lineno})" if frames else ""
