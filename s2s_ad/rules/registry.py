"""The rule registry: one declaration per primitive.

A :class:`Rule` says how to print a primitive in generated code and how to
differentiate it.  Elementwise primitives declare only their partial
derivatives (``partials``); the reverse transform turns them into
``g * partial`` (un-broadcast to the operand's shape), and the forward
transform into ``partial * d_operand``.  Other primitives declare their VJP
per operand as a template, and either are declared ``linear`` (in each
differentiated operand: the forward transform applies the primitive itself
to the tangents) or declare their JVP per operand as a template too
(``jvp``; ``np.prod``, ``np.max``).  Templates are plain Python expressions
over the names ``g`` (the output's cotangent), ``out`` (the output), the
rule's parameter names, ``d<operand>`` (an operand's tangent, in JVP
templates), and the fixed aliases ``np``, ``math`` and ``rt`` (the runtime)
-- the same subset the compiler differentiates, so generated derivative code
can be differentiated again.

Rules are data: the documentation table and the generic rule tests are
generated from :data:`RULES`.
"""
import ast
from dataclasses import dataclass, field
from typing import Any

RULES: dict = {}        # canonical name -> Rule
_BY_OBJECT: dict = {}   # id(python object) -> Rule
METHODS: dict = {}      # array method name -> canonical rule name
OPERATORS: dict = {}    # ast operator class -> canonical rule name
# Array attributes (``x.T``; a rule declared with ``attribute=`` adds its own,
# ``x.real``) and Python builtins that are spellings of a rule.
ATTRIBUTES = {"T": "np.transpose", "shape": "np.shape", "ndim": "np.ndim", "size": "np.size",
              "dtype": "dtype"}
BUILTINS = {abs: "np.abs", max: "np.maximum", min: "np.minimum", pow: "np.power"}


class Unvectorizable(Exception):
    """The function cannot be batched by rules (the per-sample loop can).

    Raised by a rule's batching handler (and by the batching transform) for
    an operation with no vectorised form; ``vmap`` then runs its loop."""

    def __init__(self, msg, loc=None):
        where = f"{loc.filename}:{loc.lineno}: " if loc else ""
        text = f"  ({loc.text.strip()})" if loc else ""
        super().__init__(f"{where}{msg}{text}")
        self.loc = loc


@dataclass
class Rule:
    """How one primitive is printed and differentiated.

    ``params`` lists every parameter in call order; ``operands`` are those
    holding run-time values that may be differentiated (atoms, or tuples of
    atoms for sequence parameters such as ``np.concatenate``'s); the others
    are static options (axis, shape...).  ``vjp`` maps each differentiable
    operand to its cotangent template (or a callable building it for
    sequence operands); ``partials`` does the same for elementwise rules.
    A rule with ``vjp`` templates is either ``linear`` in each differentiated
    operand (``np.sum``; ``np.dot`` in each factor) or gives each such
    operand a ``jvp`` template (its tangent contribution, in terms of
    ``d<operand>``); a declaration with neither is refused.  ``nondiff``
    rules have zero derivative (``np.sign``, comparisons, constructors);
    ``unknown`` marks a callable with no rule at all.
    """
    name: str
    params: tuple
    operands: tuple
    emit: Any = None                  # dotted path, ast operator, or callable
    defaults: dict = field(default_factory=dict)
    partials: dict = field(default_factory=dict)
    vjp: dict = field(default_factory=dict)
    jvp: dict = field(default_factory=dict)
    linear: bool = False              # linear in each differentiated operand
    broadcast: bool = False
    nondiff: bool = False
    unknown: bool = False
    mutates: bool = False             # writes into its first operand (setitem)
    effect: bool = False              # run for its side effect (print): kept, never merged,
                                      # though nothing reads its value
    obj: Any = None
    doc: str = ""
    samples: Any = None               # domain hints for the generic tests
    piecewise: tuple = ()             # operands it is locally constant in (zero derivative)
    undiff: tuple = ()                # operands with no derivative rule: an error if active
    rank: Any = None                  # (operand ranks, params) -> output rank (None: unknown)
    shape: str = None                 # how the output's shape follows: a SHAPES kind
    batch: Any = None                 # (vectorizer, statement, body) -> emits the batched form,
                                      # or a BATCHING kind (s2s_ad/transforms/batch.py)
    batched: Any = None               # batch="product": the batched primitive (rules/internal.py)
    fresh: bool = False               # returns new storage no other name shares (np.zeros)
    view: bool = False                # may return a view of its first operand (np.reshape)
    gives_rank: bool = False          # its value is its operand's rank (np.ndim): folded when known
    gives_shape: bool = False         # its value is its operand's shape (np.shape): a reshape
                                      # to it has the operand's rank
    metadata: bool = False            # reads only its operands' shape and dtype (np.zeros_like)
    from_list: bool = False           # a list display operand is built as an array (np.array)
    equal_operands: str = None        # the rule for one value twice (x * x: np.square)
    fill: Any = None                  # a constructor's constant value (np.zeros: 0.0)
    total: str = None                 # a sum of vector "elements" (np.sum) or "products" (np.dot)
    parts: tuple = ()                 # multi-output: one rule name per output (each a primitive)
    varargs: bool = False             # trailing positional arguments form the last operand
    forms: Any = None                 # (args, kwargs) -> a library function, or another
                                      # rule, for that call form (None: this rule)
    cheap: bool = False               # about one instruction on numbers (x + y, x < y, x[i]): a
                                      # loop's adjoint recomputes it rather than storing it
    signs: tuple = ()                 # a signed sum of its operands: each one's sign
                                      # (np.subtract: (1, -1)); i + k is an index offset
    shape_only: tuple = ()            # operands its VJP reads for their shape alone (np.sum's a)
    kept_vjp: dict = field(default_factory=dict)   # a reduction's cotangent templates with the
                                      # reduced axes kept at length 1, for a caller that multiplies
                                      # them into a full-size partial (rt.sum_grad_kept)
    row_sum_vjp: dict = field(default_factory=dict)   # cotangent templates summed over the
                                      # operand's rows, for an operand only that sum reaches
                                      # (np.matmul's x1 = matrix + vector)
    shaped_by_first: bool = False     # its result's shape follows its first operand's shape and
                                      # the other operands' values, never the first one's values
                                      # (views and copies: x[i:], np.reshape, np.copy)
    contraction: bool = False         # a product linear in each operand separately, summing over
                                      # an axis (np.matmul): a scalar factor of an operand is one
                                      # of the result
    scales: tuple = ()                # operands a scalar other operand multiplies or divides
                                      # elementwise (np.multiply: x1 and x2; np.divide: x1)
    summed: str = None                # a runtime call printed for a sum (Rule.total "elements")
                                      # of its values: the same call on its operand, no full-size
                                      # temporary (np.square: rt.sum_squares(x, axis, keepdims))
    stacks_list: bool = False         # called on one list of arrays, gives them stacked on a new
                                      # first axis (np.array, np.stack): of a comprehension, the
                                      # comprehension's array
    reduces_iterable: Any = None      # the Python builtin that is this reduction over an
                                      # iterable's items (np.max: max(xs) is np.max(xs, axis=0))
    index_params: tuple = ()          # parameters read as an index: a list display there is
                                      # an index array, a tuple one index per axis (np.add.at)

    def __post_init__(self):
        if self.shape is not None and self.shape not in SHAPES:
            raise ValueError(f"rule {self.name}: unknown shape kind {self.shape!r}")
        if isinstance(self.batch, str) and self.batch not in BATCHING:
            raise ValueError(f"rule {self.name}: unknown batching kind {self.batch!r}")
        if self.vjp and not self.linear and set(self.jvp) != set(self.vjp):
            raise ValueError(f"rule {self.name}: a rule declared by VJP templates must be "
                             f"declared linear or give a JVP template for each operand")

    @property
    def pointwise(self):
        """Applied to each element (broadcasting operands): declared by partials,
        or a zero-derivative function of its one or two operands that declares
        no other shape behaviour (``np.sign``, comparisons)."""
        return self.elementwise or (
            self.nondiff and self.operands == self.params and len(self.operands) in (1, 2)
            and self.rank is None and self.shape is None and self.batch is None)

    @property
    def diff_operands(self):
        if self.nondiff:
            return ()
        return tuple(p for p in self.operands if p in self.partials or p in self.vjp)

    @property
    def elementwise(self):
        return bool(self.partials)

    def template(self, operand, reduce="unbroadcast"):
        """The cotangent template for ``operand``, as an ast expression.

        For broadcasting rules, ``reduce`` says how the cotangent comes back
        to the operand's shape: ``"unbroadcast"`` (shape known at run time),
        ``"sum"`` (a scalar operand of an array result) or ``None`` (the
        operand already has the output's shape).  An elementwise rule whose
        cotangent is not ``g`` times a partial (``np.abs`` of a complex value)
        declares it in ``vjp``, which then comes first.
        """
        if operand in self.partials and operand not in self.vjp:
            expr = f"g * ({self.partials[operand]})"
            if self.broadcast and reduce == "unbroadcast":
                expr = f"rt.unbroadcast({expr}, {operand})"
            elif self.broadcast and reduce == "sum":
                expr = f"np.sum({expr})"
            return parse_template(expr)
        spec = self.vjp[operand]
        return spec if callable(spec) else parse_template(spec)


# Rule.shape: how a primitive's output shape follows from its operands and
# parameters (read by rank and shape inference, s2s_ad/analyses/ranks.py).
SHAPES = {
    "same": "the first operand's shape (np.copy, np.zeros_like)",
    "permuted": "the first operand's rank, its axes reordered (np.transpose)",
    "reduced": "the first operand reduced over `axis` (None: every axis), unless `keepdims`",
    "scalar": "a number (np.ndim, len)",
    "from_shape": "the `shape` parameter (np.zeros, np.full)",
    "reshaped": "the `shape` parameter's rank; its sizes may hold -1 (np.reshape)",
    "stacked": "the sequence operand's items stacked on a new axis (np.stack, np.array)",
    "joined": "the sequence operand's items joined along an existing axis (np.concatenate)",
}

# Rule.batch as a string: a batching kind, implemented once in
# s2s_ad/transforms/batch.py for every rule that declares it.
BATCHING = {
    "same": "the same call on the batch (np.copy, np.zeros_like)",
    "reduction": "the reduction with `axis` shifted past the batch axis (None: every example axis)",
    "axis_required": "`axis` shifted past the batch axis; axis=None cannot batch (np.argmax)",
    "product": "the rule's `batched` product primitive (np.dot -> rt.bdot)",
    "reshape": "a reshape keeping the batch axis (np.reshape)",
    "ravel": "a reshape to (batch, -1) (np.ravel)",
    "transpose": "the permutation with the batch axis kept first",
    "expand_dims": "`axis` shifted past the batch axis, counted in the output's rank",
    "squeeze": "`axis` shifted past the batch axis (no axis: cannot batch)",
    "stack": "every item batched, `axis` shifted past the batch axis, counted in the output",
    "concatenate": "every item batched, `axis` shifted past the batch axis",
    "array": "np.stack of the batched items on axis 1",
    "full_like": "a batched fill value broadcast over the batched shape",
    "scatter": "the scatter through a gather's batched index: np.arange(batch) in front "
               "(np.add.at; s2s_ad/transforms/batch_index.py)",
    "query_shape": "the shape without the batch axis",
    "query_len": "the length of the first example axis",
    "query_ndim": "the rank less one",
    "query_size": "the size over the batch size",
    "query": "unchanged (it does not depend on the batch: dtype)",
    "none": "no batched form (vmap runs its loop)",
}


_PARSED: dict = {}


def parse_template(expr):
    if expr not in _PARSED:
        _PARSED[expr] = ast.parse(expr, mode="eval").body
    return _PARSED[expr]


def register(rule, *objects, methods=(), operator=None, attribute=None):
    """Add ``rule``; ``objects`` are the Python callables that denote it,
    ``attribute`` an array attribute that reads it (``x.real``)."""
    if rule.name in RULES:
        raise ValueError(f"rule {rule.name} declared twice")
    RULES[rule.name] = rule
    for obj in objects:
        if obj is None:
            continue
        _BY_OBJECT[id(obj)] = rule
        rule.obj = rule.obj or obj
    for m in methods:
        METHODS[m] = rule.name
    if operator is not None:
        OPERATORS[operator] = rule.name
    if attribute is not None:
        ATTRIBUTES[attribute] = rule.name
    return rule


def lookup(obj):
    """The rule for a Python callable, or None."""
    return _BY_OBJECT.get(id(obj))


def unknown_rule(obj, name):
    """A placeholder rule for a callable with no derivative rule.

    Calls to it are allowed where nothing is differentiated through them;
    the activity pass raises NonDifferentiableError otherwise.
    """
    return Rule(name=name, params=(), operands=(), emit=None, unknown=True, obj=obj)


def elementwise(name, obj, params, partials, *, emit=None, methods=(), operator=None,
                samples=None, also=(), **facts):
    """Declare an elementwise primitive by its partial derivatives (``facts``:
    further Rule fields, ``shape=``, ``batch=``...)."""
    rule = Rule(name=name, params=tuple(params), operands=tuple(params), emit=emit or name,
                partials=dict(partials), broadcast=len(params) > 1, samples=samples, **facts)
    return register(rule, obj, *also, methods=methods, operator=operator)


def nondiff(name, obj, params, *, emit=None, defaults=None, operands=None, methods=(),
            operator=None, also=(), **facts):
    """Declare a primitive with zero derivative."""
    rule = Rule(name=name, params=tuple(params),
                operands=tuple(params if operands is None else operands),
                emit=emit or name, defaults=dict(defaults or {}), nondiff=True, **facts)
    return register(rule, obj, *also, methods=methods, operator=operator)


def linear(name, obj, params, operands, vjp, *, emit=None, defaults=None, methods=(),
           operator=None, samples=None, also=(), **facts):
    """Declare a primitive linear in each differentiated operand by its VJP
    templates (one per operand); its JVP is itself applied to the tangents."""
    rule = Rule(name=name, params=tuple(params), operands=tuple(operands), emit=emit or name,
                defaults=dict(defaults or {}), vjp=dict(vjp), linear=True, samples=samples,
                **facts)
    return register(rule, obj, *also, methods=methods, operator=operator)


def nonlinear(name, obj, params, operands, vjp, jvp, *, emit=None, defaults=None, methods=(),
              samples=None, also=(), **facts):
    """Declare a non-elementwise primitive by its VJP and JVP templates (one
    of each per differentiated operand)."""
    rule = Rule(name=name, params=tuple(params), operands=tuple(operands), emit=emit or name,
                defaults=dict(defaults or {}), vjp=dict(vjp), jvp=dict(jvp), samples=samples,
                **facts)
    return register(rule, obj, *also, methods=methods)


def bind(rule, args, kwargs, error):
    """Match call arguments to ``rule.params``; returns {param: value}.

    ``error(msg)`` builds the exception for a bad call.
    """
    bound = {}
    if len(args) > len(rule.params):
        raise error(f"{rule.name} takes at most {len(rule.params)} positional arguments")
    for p, a in zip(rule.params, args):
        bound[p] = a
    for k, v in kwargs.items():
        if k == "out" and k not in rule.params:
            raise error(f"{rule.name}(..., out=...) writes into an array, which is not "
                        f"differentiated; assign the result instead (y = {rule.name}(...))")
        if k not in rule.params:
            raise error(f"{rule.name} got an unsupported keyword argument '{k}'")
        if k in bound:
            raise error(f"{rule.name} got multiple values for argument '{k}'")
        bound[k] = v
    for p in rule.params:
        if p not in bound and p not in rule.defaults:
            raise error(f"{rule.name} is missing the argument '{p}'")
    return bound

