"""Two process-wide patches of Numba that make compiles cheaper without
changing a result (measured in docs/compile_time.md).

**The slice-assignment error.**  Numba lowers every ``a[...] = array`` (and
``a[...] += array``) with a call that raises ``ValueError`` when the shapes
differ; on the CPU its message is built with f-strings, and compiling that
string formatting (``str`` of integers, ``join``, concatenation) cost 1-3 s
of the first compile in every process -- a third of a small gradient's
compile, paid by nearly every generated module (user code and adjoints
assign into slices).  Here the same error is raised with the shapes as
arguments instead,

    ValueError('cannot assign slice of shape', (2, 2), 'from input of shape', (3,))

which Numba compiles without any string code; only the wording changes.

**Elementwise loops in two versions, not one per broadcast case.**  Numba
lowers a ufunc call or an array expression (``a * 0.5 + b``: one loop over
the result) with, for every array operand and every dimension, a test
``if the operand's extent > 1: use the loop index, else 0`` inside the loop.
The tests are loop-invariant, so LLVM's loop unswitching copies the loop
nest for their combinations: a two-operand expression over 3-D slices took
2.2 s to compile, an adjoint of ``heat_3d`` 14 s.  Here the loop nest is
built twice instead: once for operands whose shapes all equal the result's
(the loop indices address them directly, exactly as Numba does), and once
for any broadcasting, where each operand is addressed through steps that
are zero along its broadcast dimensions (no test in the loop).  One test
before the loops picks the version; an operand of lower rank always
broadcasts, so there only the second is built.  The same elements are read
and written in the same order, so results are bit for bit unchanged.

Both patches also apply to the user's own ``numba.njit`` functions compiled
after s2s_ad's runtime is imported.  If Numba's internals differ (another
version), nothing is patched.
"""

import numba
from numba.core import cgutils, types
from numba.core.imputils import impl_ret_new_ref
from numba.core.typing import templates

try:
    from numba.np import arrayobj, npyimpl
except ImportError:         # pragma: no cover  (another Numba layout: nothing to patch)
    arrayobj = npyimpl = None


@numba.njit
def _mismatch(src_shapes, index_shape):
    raise ValueError("cannot assign slice of shape", index_shape, "from input of shape",
                     src_shapes)


def _cheap_overload(src_shapes, index_shape):
    if (isinstance(src_shapes, types.UniTuple) and isinstance(index_shape, types.UniTuple)
            and src_shapes.dtype == index_shape.dtype
            and isinstance(src_shapes.dtype, types.Integer)):
        return lambda src_shapes, index_shape: _mismatch(src_shapes, index_shape)
    return None


def patch():
    """Replace Numba's CPU overload of ``raise_with_shape_context`` (once,
    before it was compiled); returns whether it was replaced."""
    stub = getattr(arrayobj, "raise_with_shape_context", None)
    done = False
    for func, fnty in getattr(templates.builtin_registry, "globals", ()):
        if func is not stub or stub is None:
            continue
        for template in getattr(fnty, "templates", ()):
            original = getattr(template, "_overload_func", None)
            if getattr(original, "__name__", "") == "ol_raise_with_shape_context_cpu" \
                    and not getattr(template, "_impl_cache", None):
                template._overload_func = staticmethod(_cheap_overload)
                done = True
    return done


PATCHED = patch()


def _steps_address(operand, indices):
    """Pointer to ``operand``'s element at the loop ``indices`` (its trailing
    ones), stepping zero along every dimension of extent 1."""
    builder = operand.builder
    one, zero = indices[0].type(1), indices[0].type(0)
    shape = list(operand.shape)
    if operand.layout in "CF":          # steps in items, as Numba's contiguous addressing
        steps = []
        for d in range(len(shape)):
            step = one
            for extent in (shape[d + 1:] if operand.layout == "C" else shape[:d]):
                step = builder.mul(step, extent)
            steps.append(step)
    else:                               # steps in bytes
        steps = list(operand.strides)
    offset = zero
    for index, extent, step in zip(indices, shape, steps):
        step = builder.select(builder.icmp_unsigned(">", extent, one), step, zero)
        offset = builder.add(offset, builder.mul(index, step))
    if operand.layout in "CF":
        return builder.gep(operand.data, [offset])
    return cgutils.pointer_add(builder, operand.data, offset)


def ufunc_loops(context, builder, sig, args, ufunc, kernel_class):
    """Numba's ``npyimpl.numpy_ufunc_kernel`` (same arguments, same result),
    with the loop nest built in two versions (module docstring)."""
    operands = [npyimpl._prepare_argument(context, builder, arg, ty)
                for arg, ty in zip(args, sig.args)]
    if len(operands) < ufunc.nin:
        raise RuntimeError(f"Not enough inputs to {ufunc.__name__}, expected {ufunc.nin} "
                           f"got {len(operands)}")
    for k, ret_ty in enumerate(npyimpl._unpack_output_types(ufunc, sig)):
        if ufunc.nin + k >= len(operands):        # a result to allocate
            if isinstance(ret_ty, types.ArrayCompatible):
                operands.append(npyimpl._build_array(context, builder, ret_ty, sig.args,
                                                     operands))
            else:
                operands.append(npyimpl._prepare_argument(
                    context, builder, context.get_value_type(ret_ty)(None), ret_ty))
        elif context.enable_nrt:                  # an ``out=`` array: returned, so one more ref
            context.nrt.incref(builder, ret_ty, args[ufunc.nin + k])
    inputs, outputs = operands[:ufunc.nin], operands[ufunc.nin:]
    kernel = kernel_class(context, builder, npyimpl._ufunc_loop_sig(
        [o.base_type for o in outputs], [i.base_type for i in inputs]))
    arrays = [i for i in inputs if isinstance(i, npyimpl._ArrayHelper)]
    order = "F" if (sum(a.layout == "F" for a in arrays)
                    > sum(a.layout == "C" for a in arrays)) else "C"
    loop_shape = outputs[0].shape

    def loop_nest(load):
        with cgutils.loop_nest(builder, loop_shape, intp=context.get_value_type(types.intp),
                               order=order) as indices:
            values = [load(i, indices) if isinstance(i, npyimpl._ArrayHelper)
                      else i.load_data(indices) for i in inputs]
            results = npyimpl._unpack_output_values(ufunc, builder, kernel.generate(*values))
            for value, output in zip(results, outputs):
                output.store_data(indices, value)

    def direct(operand, indices):
        return operand.load_data(list(indices))

    def stepped(operand, indices):
        if not operand.ndim:
            return operand.load_data(())
        pointer = _steps_address(operand, list(indices[len(indices) - operand.ndim:]))
        return context.data_model_manager[operand.base_type].load_from_data_pointer(
            builder, pointer)

    if any(a.ndim < len(loop_shape) for a in arrays):
        loop_nest(stepped)
    elif not arrays:
        loop_nest(direct)
    else:
        same = cgutils.true_bit
        for a in arrays:
            for extent, n in zip(a.shape, loop_shape):
                same = builder.and_(same, builder.icmp_signed("==", extent, n))
        with builder.if_else(same, likely=True) as (whole, broadcast):
            with whole:
                loop_nest(direct)
            with broadcast:
                loop_nest(stepped)
    out = npyimpl._pack_output_values(ufunc, context, builder, sig.return_type,
                                      [o.return_val for o in outputs])
    return impl_ret_new_ref(context, builder, sig.return_type, out)


def patch_ufunc_loops():
    """Make Numba's ufunc and array-expression lowering use ``ufunc_loops``;
    returns whether it did."""
    needed = ("_prepare_argument", "_build_array", "_unpack_output_types",
              "_unpack_output_values", "_pack_output_values", "_ufunc_loop_sig",
              "_ArrayHelper", "numpy_ufunc_kernel")
    if npyimpl is None or not all(hasattr(npyimpl, name) for name in needed):
        return False            # pragma: no cover  (another Numba version)
    npyimpl.numpy_ufunc_kernel = ufunc_loops
    return True


NUMBA_UFUNC_LOOPS = getattr(npyimpl, "numpy_ufunc_kernel", None)   # Numba's own, for tests
UFUNC_LOOPS_PATCHED = patch_ufunc_loops()
