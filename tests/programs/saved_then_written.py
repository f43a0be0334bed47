"""Values the backward sweep reads, written in place after they were saved.

Each program computes something whose adjoint reads a value -- the output of
a rule whose partials name ``out`` (``np.tanh``, ``np.exp``, ``np.sqrt``,
``1 / x``), an operand of a product, an array a loop carries -- and then
writes into the same memory: slices, elements, ``+=``, ``*=``, through a
view, through a helper, in ``for`` and ``while`` loops and in branches.  The
backward sweep must read each value as it was when it was computed
(tests/test_saved_then_written.py; issue 46).

``CORPUS``: (function, make arguments, argnums).  ``REFUSED``: programs
where one array has two names that the lowered code cannot keep one (a join,
a loop header), refused at the write.
"""
import numpy as np
import scipy.special


def tanh_stencil(x):
    """The issue's reproducer: ``np.tanh``'s output is written by the next
    iteration's slice update."""
    u = x.copy()
    for t in range(2):
        u[1:] = u[1:] + u[:-1]
        u = np.tanh(u)
    return np.sum(u)


def heat_tanh(x, k):
    """A heat stencil with a nonlinearity, the interior written in place."""
    u = x.copy()
    for t in range(4):
        u[1:-1] = u[1:-1] + k * (u[:-2] - 2.0 * u[1:-1] + u[2:])
        u = np.tanh(u)
    return np.sum(u ** 2)


def exp_then_element(x):
    """``np.exp``'s output, then one element of it rewritten."""
    u = np.exp(0.5 * x)
    u[1] = np.sin(u[0]) * 0.3
    return np.sum(u * x)


def sqrt_then_scaled(x):
    """``np.sqrt``'s output scaled in place (``*=``) in the next iteration."""
    u = x * 1.0
    for t in range(3):
        u *= 0.9
        u = np.sqrt(u ** 2 + 0.5)
    return np.sum(u * x)


def reciprocal_then_added(x):
    """``1 / x``'s output, added into in place (``+=``) by the next iteration."""
    u = x * 1.0
    for t in range(3):
        u += 0.2 * x
        u = 1.0 / (1.0 + u ** 2)
    return np.sum(u)


def operand_then_written(x, w):
    """An operand of a product, written after the product."""
    p = w * 1.0
    s = np.sum(p * x)
    p[0] = 2.0 * x[1]
    p[1:] = p[1:] * x[:-1]
    return s + np.sum(p * p)


def matmul_operand_then_written(x, K):
    """An operand of ``@`` written in place afterwards."""
    v = np.tanh(x)
    y = K @ v
    v[:] = v * v
    return np.sum(y * x) + np.sum(v)


def through_a_view(x):
    """A view of ``np.tanh``'s output written into (the base is what the
    adjoint reads)."""
    u = x * 1.0
    for t in range(3):
        u = np.tanh(u)
        tail = u[1:]
        tail += 0.5 * x[:-1]
    return np.sum(u * x)


def _shift_into(buf, c):
    buf[1:] = buf[1:] + c * buf[:-1]


def through_a_helper(x):
    """A helper writes into ``np.tanh``'s output in place."""
    u = x * 1.0
    for t in range(3):
        u = np.tanh(u)
        _shift_into(u, 0.7)
    return np.sum(u * x)


def while_loop(x):
    """The stencil under a ``while`` loop."""
    u = x.copy()
    k = 0
    while k < 3:
        u[1:] = u[1:] + 0.5 * u[:-1]
        u = np.exp(0.3 * np.tanh(u))
        k += 1
    return np.sum(u * x)


def element_loop(x):
    """Element writes in an inner loop into the previous iteration's output."""
    u = np.tanh(x)
    for t in range(2):
        for i in range(1, x.shape[0]):
            u[i] = u[i] + 0.5 * u[i - 1]
        u = np.tanh(u)
    return np.sum(u * x)


def in_a_branch(x):
    """The write happens in one branch only."""
    u = x * 1.0
    for t in range(3):
        if np.sum(u) > 0.1:
            u[0] = u[0] * 0.5 + 0.2
        else:
            u[1:] = u[1:] - 0.3 * u[:-1]
        u = np.tanh(u)
    return np.sum(u * x)


def carried_alias(x):
    """Two names for one array carried round the loop, one of them written."""
    u = np.tanh(x)
    for t in range(3):
        v = u
        v[0] = v[0] + 0.4 * v[-1]
        u = np.sin(v) + 0.1 * v
    return np.sum(u * x)


def joined_alias(x, a):
    """An if joins two arrays into one name; the write through it reaches
    either, and each is read by an adjoint."""
    p = np.tanh(x)
    q = np.exp(0.2 * x)
    if a > 0.0:
        r = p
    else:
        r = q
    r[1:] = r[1:] * 0.5
    return np.sum(p * x) + np.sum(q * x) + np.sum(r)


def alias_written_in_loop(x):
    """``w`` and ``u`` are one array; the loop writes it through ``u``."""
    u = np.tanh(x)
    w = u
    for t in range(2):
        u[1:] = u[1:] + 0.5 * u[:-1]
    return np.sum(w * x) + np.sum(u)


def alias_before_loop(x):
    """``w`` and ``u`` are one array until the loop rebinds ``u``; the first
    iteration's write reaches ``w``, the later ones do not."""
    u = np.tanh(x)
    w = u
    for t in range(2):
        u[1:] = u[1:] + 0.5 * u[:-1]
        u = np.sin(u)
    return np.sum(w * x) + np.sum(u)


def reshape_view_of_written(x):
    """A reshape's view of an array the loop writes into: made again from
    the array where it is read."""
    c = np.tanh(x)
    d = c.reshape(c.shape)
    for t in range(2):
        c[1:] = 0.5 * (d[:-1] + 1.0) * d[:-1]
    return np.sum(c * x)


def rnn_state(x, W):
    """A recurrent state updated in place, ``np.tanh``'s output each step."""
    h = np.zeros(x.shape[0])
    for t in range(3):
        h[:] = np.tanh(W @ h + x)
        h[0] = h[0] * 0.5
    return np.sum(h * x)


def _passes_through(v):
    return v


def _tanh_of(v):
    return np.tanh(v)


def helper_result_written(x):
    """A helper's ``np.tanh`` output (one of its residuals) is its result,
    written by the next iteration; another helper returns the carried array
    it was passed."""
    u = x * 1.0
    for t in range(3):
        w = _passes_through(u)
        w[0] = w[0] * 0.5 + 0.1 * x[1]
        u = _tanh_of(w)
        u[1:] = u[1:] + 0.4 * u[:-1]
    return np.sum(u * x)


def _x():
    return np.array([0.3, -0.8, 1.1, 0.5])


_K = np.array([[0.5, -0.2, 0.1, 0.3], [0.2, 0.4, -0.3, 0.1],
               [-0.1, 0.3, 0.6, -0.2], [0.3, 0.1, 0.2, -0.4]])

CORPUS = [
    (tanh_stencil, lambda: (_x(),), 0),
    (heat_tanh, lambda: (np.linspace(-0.9, 0.8, 7), 0.3), (0, 1)),
    (exp_then_element, lambda: (_x(),), 0),
    (sqrt_then_scaled, lambda: (_x(),), 0),
    (reciprocal_then_added, lambda: (_x(),), 0),
    (operand_then_written, lambda: (_x(), np.array([0.4, 0.2, -0.5, 0.9])), (0, 1)),
    (matmul_operand_then_written, lambda: (_x(), _K.copy()), (0, 1)),
    (through_a_view, lambda: (_x(),), 0),
    (through_a_helper, lambda: (_x(),), 0),
    (while_loop, lambda: (_x(),), 0),
    (element_loop, lambda: (_x(),), 0),
    (in_a_branch, lambda: (_x(),), 0),
    (carried_alias, lambda: (_x(),), 0),
    (rnn_state, lambda: (_x(), _K * 0.8), (0, 1)),
    (alias_written_in_loop, lambda: (_x(),), 0),
    (reshape_view_of_written, lambda: (_x(),), 0),
    (helper_result_written, lambda: (_x(),), 0),
]

#: The programs a GPU thread runs (1-d arrays of static length, no matrices
#: or slices of arrays made per example): tests/test_cuda_saved_then_written.py.
ON_CUDA = ["exp_then_element", "sqrt_then_scaled", "reciprocal_then_added",
           "operand_then_written", "through_a_view", "element_loop", "carried_alias"]

REFUSED = [
    (joined_alias, lambda: (_x(), 0.7), 0),
    (alias_before_loop, lambda: (_x(),), 0),
]


# -- every rule whose adjoint reads its output (docs/saved_values.md, Audit) --------------

#: The elementwise ones, on values kept in every domain (0.2 to 0.8).
OUT_READERS = {
    "np.cbrt": np.cbrt, "np.exp": np.exp, "np.exp2": np.exp2, "np.expm1": np.expm1,
    "np.reciprocal": np.reciprocal, "np.sqrt": np.sqrt, "np.tan": np.tan, "np.tanh": np.tanh,
    "scipy.special.erfinv": scipy.special.erfinv, "scipy.special.gamma": scipy.special.gamma,
    "scipy.special.log_ndtr": scipy.special.log_ndtr,
    "np.power": lambda v: np.power(v, 1.7), "np.float_power": lambda v: np.float_power(v, 1.7),
    "np.divide": lambda v: np.divide(1.0, 1.0 + v), "np.hypot": lambda v: np.hypot(v, 0.7),
    "np.cumprod": np.cumprod,
}


def out_reader_written(x, which):
    """The rule's output, written by the next iteration's slice update."""
    u = x * 1.0
    for t in range(2):
        u[1:] = u[1:] + 0.3 * u[:-1]
        u = OUT_READERS[which](0.5 + 0.3 * np.tanh(u))
    return np.sum(u * x)


def extremum_written(x):
    """``np.max``/``np.min`` read their operand (where it equals the result);
    the operand is written afterwards."""
    u = np.tanh(x)
    s = 0.0
    for t in range(2):
        m = np.max(u) - np.min(u)
        u[0] = u[0] + 0.5 * m
        s = s + m
        u = np.sin(u)
    return s + np.sum(u * x)


#: The matrix rules whose adjoint reads the result.
LINALG = {"np.linalg.inv": np.linalg.inv, "np.linalg.cholesky": np.linalg.cholesky,
          "np.linalg.pinv": np.linalg.pinv,
          "np.linalg.solve": lambda A: np.linalg.solve(A, np.eye(3) + 0.1)}


def linalg_written(x, which):
    """A matrix rule's result, written in place, read again next iteration."""
    A = 2.0 * np.eye(3) + 0.1 * np.outer(x, x)
    s = 0.0
    for t in range(2):
        B = LINALG[which](A)
        B[0, :] = B[0, :] * 0.5 + 0.1
        s = s + np.sum(B * B) + np.linalg.det(A) + np.linalg.norm(B)
        A = A + 0.1 * (B @ B.T)
    return s

