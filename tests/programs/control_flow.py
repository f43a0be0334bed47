"""A corpus of small user programs with loops, branches and in-place writes.

Each program is ordinary NumPy/``math`` code as a user would write it; the
compiler reads their source from this file.  ``CORPUS`` lists the programs
with a scalar output as ``(function, make_args, argnums)``: ``make_args()``
returns fresh example arguments (new arrays each call, since some programs
write into the arrays they are given copies of) and ``argnums`` is what to
differentiate.  ``ARRAY_CORPUS`` lists programs with array (or tuple)
outputs as ``(function, make_args)``, for ``ad.vjp``.

Example arguments keep every comparison a program makes well away from a
tie, so central finite differences see a smooth function.
"""
import math

import numpy as np

# -- helpers the programs call ------------------------------------------------


def rhs(y, k):
    """Right-hand side of a damped nonlinear oscillator, y = (position, velocity)."""
    out = np.zeros(2)
    out[0] = y[1]
    out[1] = -k * np.sin(y[0]) - 0.1 * y[1]
    return out


def rk2_step(y, h, k):
    """One midpoint (RK2) step of ``rhs``."""
    k1 = rhs(y, k)
    k2 = rhs(y + 0.5 * h * k1, k)
    return y + h * k2


def horner(c, t):
    """sum(c[i] * t**i), a helper that loops itself."""
    acc = 0.0
    for i in range(c.shape[0] - 1, -1, -1):
        acc = acc * t + c[i]
    return acc


def first_big(v):
    """A helper that returns from inside its loop."""
    t = v
    for k in range(10):
        t = t * 1.5 + 0.1
        if t > 2.0:
            return t * v
    return t


def pair(v):
    """A helper returning a tuple."""
    return v * v, np.sin(v)


def soft_abs(v):
    return math.sqrt(v * v + 0.01)


def smooth_sq(v):
    return v * v * math.exp(-0.1 * v)


# -- for loops over ranges ----------------------------------------------------


def cumsum_sq(x):
    """Loop-carried running sum; the loss reads every partial sum."""
    s = 0.0
    acc = 0.0
    for i in range(x.shape[0]):
        s = s + x[i]
        acc = acc + s * s
    return acc


def power_iter(a):
    """x <- x * x + a three times: a loop-carried scalar the adjoint needs."""
    x = a
    for k in range(3):
        x = x * x + a
    return x


def horner_desc(c, t):
    """Negative step: range(n - 1, -1, -1)."""
    acc = 0.0
    for i in range(c.shape[0] - 1, -1, -1):
        acc = acc * t + c[i]
    return acc


def strided(x):
    """Start and step: every other element from index 1, and backwards by 2."""
    s = 0.0
    for i in range(1, x.shape[0], 2):
        s = s + np.sin(x[i]) * x[i - 1]
    for j in range(x.shape[0] - 1, 0, -2):
        s = s + x[j] * x[j] * s
    return s


def int_bound(x, n):
    """Trip count from an integer argument (not differentiated)."""
    y = x
    for k in range(n):
        y = np.tanh(y) * 1.5 + 0.1 * x
    return np.sum(y * y)


def empty_loop(x, n):
    """A loop that runs zero times leaves the gradient of what follows."""
    s = np.sum(x)
    for k in range(n):
        s = s * s
    return s * 2.0


def tuple_carry(x):
    """Tuple unpacking of loop-carried values: a Fibonacci-like recurrence."""
    a, b = 1.0, x
    for k in range(4):
        a, b = b, a + b * x
    return b - 0.5 * a


def aug_assign(x, y):
    """Augmented assignment to scalars and arrays."""
    s = 1.0
    v = x * 1.0
    for k in range(3):
        s *= y
        s += np.sum(v) * 0.1
        v -= 0.2 * v * y
        v /= 1.0 + y * y
    return s + np.sum(v * v)


def momentum(w, x):
    """A few steps of gradient descent with momentum, gradient by hand."""
    v = np.zeros(w.shape[0])
    for k in range(4):
        r = np.dot(w, x) - 1.0
        g = r * x
        v = 0.9 * v + g
        w = w - 0.1 * v
    return np.sum(w * w) + np.dot(w, x)


# -- nested loops -------------------------------------------------------------


def triangle(x):
    """Nested loops, the inner bound depends on the outer index."""
    s = 0.0
    for i in range(x.shape[0]):
        for j in range(i + 1, x.shape[0]):
            s = s + x[i] * np.cos(x[j])
    return s


def data_bounds(x):
    """Inner trip count computed from the data (kept away from integer ties)."""
    s = 0.0
    for i in range(x.shape[0]):
        m = int(abs(x[i]) * 3.0)
        t = x[i]
        for j in range(m):
            t = t * 0.8 + np.sin(t)
        s = s + t * t
    return s


def matrix_fill(x):
    """x[i, j] = e writes in nested loops, then a reduction."""
    n = x.shape[0]
    A = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            A[i, j] = x[i] * np.sin(x[j]) + 1.0 * (i == j)
    return np.sum(np.dot(A, x) ** 2)


# -- iteration over arrays ----------------------------------------------------


def row_loop(M, w):
    """for row in M: a vector accumulator."""
    acc = np.zeros(M.shape[1])
    for row in M:
        acc = acc + np.tanh(row * w)
    return np.sum(acc * acc)


def zip_loop(x, y):
    """for a, b in zip(x, y)."""
    s = 0.0
    for a, b in zip(x, y):
        s = s + a * b * np.sin(a) + s * 0.1
    return s


def enumerate_loop(x):
    """for i, v in enumerate(x): the index is an integer, v differentiated."""
    s = 0.0
    for i, v in enumerate(x):
        s = s + (i + 1.0) * v * v - s * v
    return s


# -- while loops --------------------------------------------------------------


def grow_while(a):
    """Data-dependent trip count."""
    x = a
    while x < 10.0:
        x = x * 1.5 + a
    return x * x


def newton_while(a):
    """Newton's method for sqrt(a), until the step is tiny (while + break)."""
    x = a
    it = 0
    while it < 50:
        step = (x * x - a) / (2.0 * x)
        x = x - step
        if abs(step) < 1e-13:
            break
        it += 1
    return x


def newton_partial(a):
    """Newton, stopped after two steps: far from converged, so the gradient
    differs from that of the limit and every iteration's values matter."""
    x = a
    it = 0
    while True:
        x = x - (x * x - a) / (2.0 * x)
        it += 1
        if it >= 2:
            break
    return x


def bisect_then_newton(c):
    """Bisection brackets the cube root of c (piecewise constant in c), then
    a Newton step from the bracket's midpoint carries the derivative."""
    lo = 0.0
    hi = 2.0
    while hi - lo > 0.01:
        mid = 0.5 * (lo + hi)
        if mid * mid * mid > c:
            hi = mid
        else:
            lo = mid
    x = 0.5 * (lo + hi)
    return x - (x * x * x - c) / (3.0 * x * x)


def while_continue(x):
    """while with continue and break."""
    i = 0
    s = 0.0
    while i < x.shape[0]:
        v = x[i]
        i += 1
        if v < 0.0:
            continue
        s = s + np.exp(v) * s + v
        if s > 50.0:
            break
    return s


def while_true_break(a):
    """while True with the exit at the bottom (a do-while)."""
    x = a
    n = 0
    while True:
        x = np.sin(x) + a
        n += 1
        if n >= 3:
            break
    return x


def element_while(x):
    """The condition reads the array: walk until the first negative entry."""
    i = 0
    s = 0.0
    while x[i] > 0.0:
        s = s + np.exp(x[i]) * s + x[i]
        i += 1
    return s


def while_fill(x):
    """A while loop writing into a zeros array, reading the previous entry."""
    y = np.zeros(x.shape[0])
    i = 0
    while i < x.shape[0]:
        y[i] = x[i] * 2.0 + (y[i - 1] * x[i] if i > 0 else 0.0)
        i += 1
    return np.sum(y * y)


def while_zero_trips(a):
    """A while loop whose condition is false at once."""
    x = a
    while x > 10.0:
        x = x * 0.5
    return x * x


def while_in_for(x):
    """A while loop with a break, nested in a for loop."""
    s = 0.0
    for i in range(x.shape[0]):
        t = x[i]
        n = 0
        while n < 5:
            t = t * 1.3
            n += 1
            if t > 1.0:
                break
        s = s + t * s + t
    return s


def carried_array_break(w, x):
    """An array carried through a loop that breaks on a reduction of it."""
    v = x * 1.0
    for k in range(10):
        v = np.tanh(w * v) + x
        if np.sum(v * v) > 2.0:
            break
    return np.sum(v)


# -- break, continue and return in loops ---------------------------------------


def continue_negative(x):
    """continue skips the negative entries."""
    s = 0.0
    for v in x:
        if v < 0.0:
            continue
        s = s + v * v * s + v
    return s


def break_first(x):
    """break in the very first iteration: nothing is recorded."""
    s = 1.0
    for i in range(x.shape[0]):
        if x[0] > 0.0:
            break
        s = s * x[i]
    return s * x[1]


def continue_write(x):
    """continue skips an in-place write."""
    out = np.zeros(x.shape[0])
    for i in range(x.shape[0]):
        if x[i] < 0.0:
            continue
        out[i] = x[i] * x[i]
    return np.sum(out * x)


def nested_continue_break(x):
    """continue in both loops, break in the inner one."""
    s = 0.0
    for i in range(x.shape[0]):
        if x[i] < 0.0:
            continue
        for j in range(x.shape[0]):
            if j == i:
                continue
            s = s + x[i] * x[j]
            if s > 0.6:
                break
    return s


def break_threshold(x):
    """break once the running product passes a threshold."""
    p = 1.0
    for i in range(x.shape[0]):
        p = p * (1.0 + x[i] * x[i])
        if p > 3.0:
            break
    return p * x[0]


def return_in_loop(x, t):
    """return from inside a loop, with a fallback after it."""
    s = 0.0
    for i in range(x.shape[0]):
        if x[i] > t:
            return s * x[i] + t
        s = s + np.sin(x[i])
    return s * t


def return_in_while(x):
    """return from inside a while loop."""
    i = 0
    s = 0.0
    while i < x.shape[0]:
        s = s + x[i] * x[i]
        if s > 1.0:
            return s * x[0]
        i += 1
    return s


def return_in_nested(x):
    """return from the inner of two nested loops."""
    for i in range(x.shape[0]):
        for j in range(x.shape[0]):
            if x[i] * x[j] > 0.5:
                return x[i] * x[j] * 3.0
    return 0.0


def nested_break(x):
    """break leaves only the inner loop."""
    s = 0.0
    for i in range(x.shape[0]):
        t = 0.0
        for j in range(x.shape[0]):
            t = t + x[j] * x[i]
            if t > 0.5:
                break
        s = s + t * x[i]
    return s


def inner_break_linear(x, a):
    """A break in the inner loop, where the adjoint needs nothing from the
    forward sweep but how many times the inner loop ran."""
    v = a
    for i in range(3):
        for j in range(4):
            v = 0.9 * v + x[0] * a
            if x[1] < 0.3 * j:
                break
    return v


def return_in_branch(x):
    """return from branches, no loop."""
    if x > 1.0:
        return x * x
    elif x > 0.0:
        return np.sin(x) * 3.0
    return np.exp(x)


# -- branches -----------------------------------------------------------------


def piecewise(x):
    """if/elif/else inside a loop, per element."""
    s = 0.0
    for v in x:
        if v > 0.5:
            s = s + v * v
        elif v > -0.5:
            s = s + np.sin(v) * s
        else:
            s = s - np.exp(v)
    return s


def cond_expr(x, y):
    """A conditional expression whose condition reads differentiated values."""
    z = x * y if x * y > 0.3 else np.sin(x) + y
    w = np.exp(z) if z < x + y else z * z
    return z * w


def cond_in_loop(x):
    """A conditional expression inside a loop."""
    s = 0.0
    for v in x:
        s = s + (v * v if v > 0.0 else -v * s)
    return s


def nested_cond(x):
    """Nested conditional expressions."""
    s = 0.0
    for v in x:
        s = s + (v if v > 0.5 else (v * v if v > -0.5 else np.exp(v))) * (1.0 + s)
    return s


def chained_compare(x):
    """A chained comparison as the condition."""
    s = 0.0
    for v in x:
        if -0.5 < v < 0.5:
            s = s + v * s + v
        else:
            s = s - v
    return s


def bool_ops(x, y):
    """and / or / not on comparisons of differentiated values."""
    s = 0.0
    for k in range(3):
        if (x > 0.0 and y < 2.0) or not (x * y > -1.0):
            s = s + x * y
        else:
            s = s - y
        x = x * 0.5 + 0.1 * y
    return s + x


def helper_in_branch(x):
    """User helpers called in both arms of a branch, inside a loop."""
    s = 0.0
    for i in range(x.shape[0]):
        if x[i] > 0.0:
            s = s + soft_abs(x[i]) * s
        else:
            s = s + smooth_sq(x[i])
    return s


def looping_helper(c, t):
    """A helper that loops, called inside a loop over evaluation points."""
    s = 0.0
    for i in range(t.shape[0]):
        s = s + horner(c, t[i]) ** 2
    return s


def helper_with_break(v):
    t = v
    for k in range(10):
        t = t * 1.5 + 0.1 * v
        if t > 2.0:
            break
    return t


def calls_breaking_helper(x):
    """A helper with a data-dependent break, called in a loop."""
    s = 0.0
    for i in range(x.shape[0]):
        s = s + helper_with_break(x[i]) * x[i]
    return s


def tuple_helper(x):
    """A helper returning a tuple, unpacked in a loop."""
    s = 0.0
    for i in range(len(x)):
        a, b = pair(x[i])
        s = s + a * b + s * a
    return s


def pytree_loop(params, x):
    """A (weights, bias) tuple argument used in a loop."""
    w, b = params
    h = x
    for k in range(3):
        h = np.tanh(w * h + b)
    return np.sum(h * h)


def helper_twice(c, t):
    """The same looping helper twice in one loop body."""
    s = 0.0
    for i in range(t.shape[0]):
        s = s + horner(c, t[i]) * horner(c, -t[i])
    return s


def returning_helper(x):
    """A helper with a return inside its loop, called in a loop."""
    s = 0.0
    for i in range(x.shape[0]):
        s = s + first_big(x[i]) * s + x[i]
    return s


# -- in-place writes ----------------------------------------------------------


def recurrence(a, u):
    """x[i] = a * x[i - 1] + u[i] into a zeros array."""
    x = np.zeros(u.shape[0])
    x[0] = u[0]
    for i in range(1, u.shape[0]):
        x[i] = a * x[i - 1] + u[i]
    return np.sum(x * x)


def overwrite_needed(x):
    """Each write destroys a value the gradient needs (x[i] and z's old
    entries are read after being overwritten)."""
    z = x * 1.0
    s = 0.0
    for k in range(2):
        for i in range(z.shape[0]):
            s = s + z[i] * z[i]
            z[i] = np.sin(z[i]) * s
    return s + np.sum(z * z)


def elementwise_aug(x):
    """x[i] *= e and x[i] -= e: augmented writes that need the old value."""
    y = x * 1.0
    for k in range(2):
        for i in range(1, y.shape[0]):
            y[i] *= y[i - 1] + 0.5
            y[i] -= 0.1 * y[i]
    return np.sum(y)


def slice_aug(x):
    """Overlapping slice updates y[1:3] += ..., reading what earlier ones wrote."""
    y = x * 1.0
    for k in range(3):
        y[1:3] += y[0:2] * y[2:4]
    return np.sum(y * y)


def accumulate_at(x):
    """x[i] += e into a zeros array, several writes per element."""
    out = np.zeros(3)
    for i in range(x.shape[0]):
        out[i % 3] += x[i] * x[i]
        out[(i + 1) % 3] += np.sin(x[i]) * out[i % 3]
    return np.sum(out * out)


def slice_writes(x):
    """Slice writes x[a:b] = e, some overwriting earlier ones."""
    n = x.shape[0]
    out = np.zeros(n)
    out[0:3] = x[0:3] * 2.0
    out[2:n] = np.sin(x[2:n]) + out[2:n]
    for k in range(1, n - 1):
        out[k - 1:k + 1] = out[k - 1:k + 1] * x[k]
    return np.sum(out * out)


def fill_and_read(x):
    """out = np.zeros(n) filled in a loop, read back in a second loop."""
    n = x.shape[0]
    out = np.zeros(n)
    for i in range(n):
        out[i] = np.sin(x[i]) * x[i - 1]
    s = 0.0
    for i in range(n):
        s = s + out[i] * out[n - 1 - i]
    return s


def two_buffers(x):
    """Two zeros arrays of the same shape are two arrays, not one."""
    a = np.zeros(x.shape[0])
    b = np.zeros(x.shape[0])
    for i in range(x.shape[0]):
        a[i] = x[i]
        b[i] = 2.0 * x[i] * a[i]
    return np.sum(a * b)


def same_read_after_write(x):
    """The same expression before and after a write to what it reads."""
    y = x * 1.0
    p = y[0] * 2.0
    y[0] = 5.0 * x[1]
    q = y[0] * 2.0
    return p * q


def ode_rk2(y0, k):
    """An ODE integrator: helper for the step, helper for the right-hand side."""
    y = y0
    h = 0.1
    for n in range(10):
        y = rk2_step(y, h, k)
    return y[0] * y[0] + 0.5 * y[1]


# -- array outputs (for ad.vjp) ------------------------------------------------


def recurrence_array(a, u):
    """The recurrence's whole trajectory."""
    x = np.zeros(u.shape[0])
    x[0] = u[0]
    for i in range(1, u.shape[0]):
        x[i] = a * x[i - 1] + np.tanh(u[i])
    return x


def trajectory(y0, k):
    """The ODE integrator's states, one row per step."""
    traj = np.zeros((6, 2))
    y = y0
    for n in range(6):
        y = rk2_step(y, 0.2, k)
        traj[n, :] = y
    return traj


def scan_pair(x):
    """A tuple output: running maximum-like smooth scan and a cumulative sum."""
    out = np.zeros(x.shape[0])
    c = np.zeros(x.shape[0])
    s = 0.0
    for i, v in enumerate(x):
        s = s + v
        c[i] = s
        out[i] = v * v if v > 0.0 else np.sin(v)
    return out, c


def tuple_return_in_loop(x):
    """A tuple returned from inside a loop."""
    s = 0.0
    for i in range(x.shape[0]):
        if x[i] > 0.7:
            return s, x[i] * s
        s = s + x[i]
    return s, s * s


def row_normalise(M):
    """A matrix output built row by row, with a branch per row."""
    out = np.zeros(M.shape)
    for i in range(M.shape[0]):
        r = M[i]
        n = np.sum(r * r)
        if n > 1.0:
            out[i] = r / np.sqrt(n)
        else:
            out[i] = r * n
    return out


# -- neighbouring elements (the reverse sweep carries one of them in a local) ----

def rosen_chain(x):
    """Reads x[i] and x[i + 1]: the extended Rosenbrock function."""
    s = 0.0
    for i in range(x.shape[0] - 1):
        a = x[i + 1] - x[i] * x[i]
        s += 100.0 * a * a + (1.0 - x[i]) ** 2
    return s


def backward_difference(x, h):
    """Reads x[i - 1] and x[i] from i = 2, one of them only in a branch."""
    s = 0.0
    for i in range(2, x.shape[0]):
        d = (x[i] - x[i - 1]) / h
        if d > 0.0:
            s += d * d * x[i - 1]
        else:
            s += np.sin(d)
    return s


def neighbours_and_sum(x):
    """Neighbouring reads plus a whole-array use in the same loop (no carry)."""
    s = 0.0
    for i in range(x.shape[0] - 1):
        s += x[i] * x[i + 1] + 0.1 * np.sum(x)
    return s


def three_point(x):
    """Reads x[i - 1], x[i] and x[i + 1] (three offsets: no carry)."""
    s = 0.0
    for i in range(1, x.shape[0] - 1):
        s += (x[i - 1] - 2.0 * x[i] + x[i + 1]) ** 2
    return s


def _rotate_or_shift(r, x):
    """A helper returning early inside a branch (a residual set on one path only)."""
    sq = np.dot(r, r)
    if sq != 0.0:
        t = np.sqrt(sq)
        return x * np.cos(t)
    return x + r


def early_return_helper(r, x):
    """Calls the helper on both paths: r scaled by 0 takes the other branch."""
    s = 0.0
    for i in range(3):
        s += np.sum(_rotate_or_shift(r * i, x))
    return s


# -- the corpus ---------------------------------------------------------------

def growing_prefix(x):
    """A carried array rebound, unread, to a longer slice each iteration."""
    m = x[:1]
    s = 0.0
    for i in range(x.shape[0] - 1):
        m = x[:i + 2]
        for j in range(m.shape[0]):
            s = s + m[j] * m[j]
    return s + np.sum(m)


def shrinking_suffix(x):
    """...and to a shorter one, read after the loop."""
    m = x * 2.0
    for i in range(1, x.shape[0] - 1):
        m = np.sin(x[i:]) * x[i]
    return np.sum(m * m)


CORPUS = [
    (cumsum_sq, lambda: (np.array([0.3, -0.2, 0.5, 0.1]),), 0),
    (power_iter, lambda: (0.4,), 0),
    (horner_desc, lambda: (np.array([0.5, -1.0, 0.3, 0.2]), 0.7), (0, 1)),
    (strided, lambda: (np.array([0.3, -0.2, 0.5, 0.1, 0.9, -0.4]),), 0),
    (int_bound, lambda: (np.array([0.3, -0.6, 1.1]), 3), 0),
    (empty_loop, lambda: (np.array([0.3, -0.6, 1.1]), 0), 0),
    (tuple_carry, lambda: (0.8,), 0),
    (aug_assign, lambda: (np.array([0.3, -0.6, 1.1]), 0.7), (0, 1)),
    (momentum, lambda: (np.array([0.1, -0.2, 0.3]), np.array([0.5, 1.0, -0.4])), (0, 1)),
    (triangle, lambda: (np.array([0.3, -0.2, 0.5, 0.1]),), 0),
    (data_bounds, lambda: (np.array([0.2, -0.5, 0.9, 0.1]),), 0),
    (matrix_fill, lambda: (np.array([0.3, -0.2, 0.5]),), 0),
    (row_loop, lambda: (np.arange(12.0).reshape(4, 3) / 10 - 0.5, np.array([0.5, -1.0, 2.0])),
     (0, 1)),
    (zip_loop, lambda: (np.array([0.3, -0.2, 0.5]), np.array([1.1, 0.4, -0.7])), (0, 1)),
    (enumerate_loop, lambda: (np.array([0.3, -0.2, 0.5, 0.8]),), 0),
    (grow_while, lambda: (0.7,), 0),
    (newton_while, lambda: (2.0,), 0),
    (newton_partial, lambda: (3.0,), 0),
    (bisect_then_newton, lambda: (1.7,), 0),
    (while_true_break, lambda: (0.4,), 0),
    (element_while, lambda: (np.array([0.3, 0.5, 0.2, -0.8, 0.6]),), 0),
    (while_fill, lambda: (np.array([0.3, -0.2, 0.5, 0.1]),), 0),
    (while_zero_trips, lambda: (2.0,), 0),
    (while_in_for, lambda: (np.array([0.3, -0.6, 0.8, 0.45, 1.2]),), 0),
    (carried_array_break, lambda: (np.array([0.5, 0.9, 1.1]), np.array([0.3, 0.4, 0.5])), (0, 1)),
    (while_continue, lambda: (np.array([0.3, -0.2, 0.5, 1.2, 0.9, -0.4]),), 0),
    (continue_negative, lambda: (np.array([0.3, -0.2, 0.5, -1.0, 0.7]),), 0),
    (break_threshold, lambda: (np.array([0.5, 0.7, 0.9, 1.1, 0.3]),), 0),
    (break_first, lambda: (np.array([0.3, -0.6, 0.8, 0.45, 1.2]),), 0),
    (continue_write, lambda: (np.array([0.3, -0.2, 0.5, 0.1]),), 0),
    (nested_continue_break, lambda: (np.array([0.3, 0.5, -0.2, 0.8, 0.6]),), 0),
    (return_in_loop, lambda: (np.array([0.3, -0.2, 0.5, 1.2, 1.1]), 0.9), (0, 1)),
    (return_in_while, lambda: (np.array([0.3, 0.5, -0.2, 0.8, 0.6]),), 0),
    (return_in_nested, lambda: (np.array([0.3, 0.5, -0.2, 0.8, 0.6]),), 0),
    (nested_break, lambda: (np.array([0.3, 0.45, -0.2, 0.6]),), 0),
    (inner_break_linear, lambda: (np.array([0.5, 0.45]), 0.7), (0, 1)),
    (return_in_branch, lambda: (0.6,), 0),
    (piecewise, lambda: (np.array([0.9, 0.2, -0.8, 0.1, -0.3, 1.3]),), 0),
    (cond_expr, lambda: (0.7, 0.9), (0, 1)),
    (cond_in_loop, lambda: (np.array([0.3, 0.5, -0.2, 0.8, 0.6]),), 0),
    (nested_cond, lambda: (np.array([0.3, -0.6, 0.8, 0.45, 1.2]),), 0),
    (chained_compare, lambda: (np.array([0.3, -0.6, 0.8, 0.45, 1.2]),), 0),
    (bool_ops, lambda: (0.6, 0.8), (0, 1)),
    (helper_in_branch, lambda: (np.array([0.3, -0.2, 0.5, -1.0]),), 0),
    (looping_helper, lambda: (np.array([0.5, -1.0, 0.3]), np.array([0.2, -0.4, 0.9])), (0, 1)),
    (calls_breaking_helper, lambda: (np.array([0.3, 0.7, 1.1]),), 0),
    (tuple_helper, lambda: (np.array([0.3, -0.6, 0.8, 0.45, 1.2]),), 0),
    (pytree_loop, lambda: ((np.array([0.5, -0.3]), np.array([0.1, 0.2])), np.array([0.7, 0.2])),
     0),
    (helper_twice, lambda: (np.array([0.5, -1.0, 0.3]), np.array([0.2, -0.4, 0.9])), (0, 1)),
    (returning_helper, lambda: (np.array([0.3, 0.7, 1.1]),), 0),
    (recurrence, lambda: (0.7, np.array([0.3, -0.2, 0.5, 0.1, 0.4])), (0, 1)),
    (overwrite_needed, lambda: (np.array([0.3, -0.2, 0.5]),), 0),
    (elementwise_aug, lambda: (np.array([0.3, -0.6, 0.8, 0.45, 1.2]),), 0),
    (slice_aug, lambda: (np.array([0.3, -0.6, 0.8, 0.45, 1.2]),), 0),
    (accumulate_at, lambda: (np.array([0.3, -0.2, 0.5, 0.1, 0.7]),), 0),
    (slice_writes, lambda: (np.array([0.3, -0.2, 0.5, 0.1, 0.7]),), 0),
    (fill_and_read, lambda: (np.array([0.3, -0.2, 0.5, 0.1]),), 0),
    (two_buffers, lambda: (np.array([0.3, -0.2, 0.5]),), 0),
    (same_read_after_write, lambda: (np.array([0.3, -0.2, 0.5]),), 0),
    (ode_rk2, lambda: (np.array([0.5, -0.3]), 1.3), (0, 1)),
    (rosen_chain, lambda: (np.array([0.3, -0.2, 0.5, 0.1, 0.9]),), 0),
    (backward_difference, lambda: (np.array([0.3, -0.2, 0.5, 0.1, 0.9, 0.4]), 0.7), (0, 1)),
    (neighbours_and_sum, lambda: (np.array([0.3, -0.2, 0.5, 0.1]),), 0),
    (three_point, lambda: (np.array([0.3, -0.2, 0.5, 0.1, 0.9]),), 0),
    (early_return_helper, lambda: (np.array([0.1, 0.2, 0.3]), np.array([0.5, -0.4, 0.2])),
     (0, 1)),
    (growing_prefix, lambda: (np.array([0.3, -0.2, 0.5, 0.1, 0.9]),), 0),
    (shrinking_suffix, lambda: (np.array([0.3, -0.2, 0.5, 0.1, 0.9]),), 0),
]

ARRAY_CORPUS = [
    (recurrence_array, lambda: (0.7, np.array([0.3, -0.2, 0.5, 0.1, 0.4]))),
    (trajectory, lambda: (np.array([0.5, -0.3]), 1.3)),
    (scan_pair, lambda: (np.array([0.3, -0.2, 0.5, -0.9]),)),
    (tuple_return_in_loop, lambda: (np.array([0.3, -0.6, 0.8, 0.45, 1.2]),)),
    (row_normalise, lambda: (np.array([[0.3, -0.2, 0.5], [1.0, 0.8, -0.6]]),)),
]
