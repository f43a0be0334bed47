"""The ``s2s-ad`` command line (also ``python -m s2s_ad``).

``s2s-ad show FILE.py:FUNC`` imports ``FILE.py`` (its folder first on
``sys.path``, as ``python FILE.py`` has it), transforms ``FUNC`` and prints the
generated source, the same text as ``ad.source``.  Every failure -- a bad
path, a module that fails to import, source the compiler rejects -- is one
message on stderr and exit status 1; ``--debug`` adds the Python traceback.
Usage errors exit 2, as argparse does.
"""
import argparse
import contextlib
import importlib.util
import inspect
import sys
import traceback
from pathlib import Path

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
    show.add_argument("--debug", action="store_true",
                      help="on failure, print the full Python traceback too")
    return parser


def main(argv=None):
    """Run the command line; returns the exit status."""
    status = bench.dispatch(argv)      # `bench` hands its options to the suite
    if status is not None:
        return status
    args = build_parser().parse_args(argv)
    try:
        text = show(args)
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
