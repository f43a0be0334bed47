"""desugar: structured control flow without jumps.

Receives a fenced ``gast.FunctionDef``.  Guarantees on return:

* every ``for`` loop iterates over ``range(start, stop, step)`` (three
  arguments): ``for row in M``, ``for a, b in zip(x, y)`` and
  ``for i, v in enumerate(x)`` become index loops that read the elements;
* no ``break`` or ``continue`` remains: they set flags (``_brk``, ``_cnt``)
  and the statements they would skip are guarded by ``if not flag``; a
  ``for`` loop that breaks becomes a ``while`` loop over its counter, so no
  empty iterations run;
* a ``return`` inside a loop sets ``_done`` (and ``_which`` when there are
  several), leaves every loop, and its value is computed right after the
  outermost loop, where the variables still hold their values;
* statements after an ``if`` that may return move into the branch that does
  not, so every path ends in its own ``return``; those become assignments
  to ``_ret`` and the function ends in exactly one ``return``: every path
  assigns the result, none leaves a value undefined.

Loops with an ``else:`` clause are rejected (the error says how to rewrite).
"""
import itertools

import gast

_counter = itertools.count()


def _name(id_, ctx=None):
    return gast.Name(id_, ctx or gast.Load(), None, None)


def _assign(target, value):
    return gast.Assign([_name(target, gast.Store())], value, None)


def _not(expr):
    return gast.UnaryOp(gast.Not(), expr)


def _call(fn, *args):
    return gast.Call(_name(fn), list(args), [])


class Desugar:
    def __init__(self, src, taken):
        self.src = src
        self.taken = set(taken)
        self.uses = {}

    def fresh(self, base):
        name, i = base, 0
        while name in self.taken:
            i += 1
            name = f"{base}{i}"
        self.taken.add(name)
        return name

    def run(self, fn):
        body = fn.body
        for s in body[:-1]:
            if isinstance(s, gast.Return):
                raise self.src.error(body[body.index(s) + 1], "code after return is unreachable; "
                                     "remove it")
        self.depth = 0            # loops around the statement being rewritten
        self.sites = []           # returns inside the current outermost loop
        self.done = self.fresh("_done") if any(
            _contains_return_in_loop(s) for s in body) else None
        self.which = None
        # Flag initialisations are located at the first loop that returns.
        self.flag_site = next((n for n in gast.walk(fn) if isinstance(n, (gast.For, gast.While))
                               and _contains(n, gast.Return)), None)
        body = self.block(body, [])
        if len(body) == 1 and isinstance(body[0], gast.Return) or not _contains(
                gast.Module(body[:-1], []), gast.Return) and isinstance(body[-1], gast.Return):
            fn.body = self._prologue() + body
            return fn
        ret = self.fresh("_ret")
        final = gast.copy_location(gast.Return(_name(ret)), _last_return(fn))
        fn.body = self._prologue() + _assign_tails(body, ret) + [final]
        return fn

    def _prologue(self):
        """Flag initialisations."""
        out = []
        if self.done:
            out.append(_assign(self.done, gast.Constant(False, None)))
        if self.which:
            out.append(_assign(self.which, gast.Constant(0, None)))
        where = self.flag_site
        return [gast.copy_location(x, where) for x in out] if where is not None else out

    # A block is rewritten left to right; after a statement that may set a
    # flag in ``flags``, the rest of the block runs under ``if not flag``.
    def block(self, stmts, flags):
        out = []
        for i, s in enumerate(stmts):
            rest = stmts[i + 1:]
            if isinstance(s, gast.Return) and self.depth:
                return out + self._loop_return(s)
            if isinstance(s, gast.Return):
                return out + [s]           # anything after it is unreachable
            if isinstance(s, gast.If) and not self.depth and _contains(s, gast.Return) and rest:
                return out + self.stmt(_nest_rest(s, rest), flags)
            new = self.stmt(s, flags)
            out.extend(new)
            if isinstance(s, (gast.For, gast.While)) and not self.depth and self.sites:
                after = self._after_loop(s, rest)
                return out + self.block([after], flags)
            raised = [f for f in flags if _sets(new, f)]
            if raised and rest:
                cond = _not(_or([_name(f) for f in raised]))
                guarded = self.block(rest, flags)
                out.append(gast.copy_location(gast.If(cond, guarded, []), rest[0]))
                return out
        return out

    def _loop_return(self, s):
        """``return e`` inside a loop: remember e, raise the flag, leave."""
        self.sites.append(s)
        out = [gast.copy_location(_assign(self.done, gast.Constant(True, None)), s)]
        if self.several:
            self.which = self.which or self.fresh("_which")
            out.insert(0, gast.copy_location(
                _assign(self.which, gast.Constant(len(self.sites), None)), s))
        return out

    def _after_loop(self, loop, rest):
        """``if _done: return e`` (one branch per return site), else ``rest``."""
        sites, self.sites = self.sites, []
        orelse = list(rest)
        for k, site in reversed(list(enumerate(sites, 1))):
            test = _name(self.done) if len(sites) == 1 else gast.Compare(
                _name(self.which), [gast.Eq()], [gast.Constant(k, None)])
            value = site.value if site.value is not None else gast.Constant(None, None)
            ret = gast.copy_location(gast.Return(value), site)
            orelse = [gast.copy_location(gast.If(test, [ret], orelse), loop)]
        return orelse[0]

    def stmt(self, s, flags):
        if isinstance(s, (gast.Break, gast.Continue)):
            flag = self.loop_flags["break" if isinstance(s, gast.Break) else "continue"]
            return [gast.copy_location(_assign(flag, gast.Constant(True, None)), s)]
        if isinstance(s, gast.If):
            s.body = self.block(s.body, flags) or [gast.Pass()]
            s.orelse = self.block(s.orelse, flags)
            return [s]
        if isinstance(s, gast.For):
            return self.for_loop(s, flags)
        if isinstance(s, gast.While):
            return self.while_loop(s, flags)
        return [s]

    def _loop_setup(self, s):
        if s.orelse:
            raise self.src.error(s, "loops with an else: clause are not supported; "
                                 "use a flag variable set before break instead")
        saved = getattr(self, "loop_flags", None)
        brk = self.fresh("_brk") if _contains_jump(s.body, gast.Break) else None
        cnt = self.fresh("_cnt") if _contains_jump(s.body, gast.Continue) else None
        self.loop_flags = {"break": brk, "continue": cnt}
        return saved, brk, cnt

    def _loop_body(self, body, brk, cnt):
        inner = [f for f in (brk, cnt) if f] + ([self.done] if self.done else [])
        if not self.depth:    # an outermost loop: does it hold several returns?
            self.several = sum(isinstance(n, gast.Return) for s in body for n in gast.walk(s)) > 1
        self.depth += 1
        new = self.block(body, inner)
        self.depth -= 1
        if cnt:
            new.insert(0, _assign(cnt, gast.Constant(False, None)))
        return new

    def while_loop(self, s, flags):
        returns = _contains(s, gast.Return)
        saved, brk, cnt = self._loop_setup(s)
        body = self._loop_body(s.body, brk, cnt)
        self.loop_flags = saved
        stops = [f for f in (brk, self.done if returns else None) if f]
        test = s.test
        if stops:
            test = gast.BoolOp(gast.And(), [_not(_or([_name(f) for f in stops])), test])
        loop = gast.copy_location(gast.While(test, body, []), s)
        pre = [_assign(brk, gast.Constant(False, None))] if brk else []
        return pre + [loop]

    def for_loop(self, s, flags):
        returns = _contains(s, gast.Return)
        start, stop, step, before, prologue = self.iteration(s)
        saved, brk, cnt = self._loop_setup(s)
        body = prologue + self._loop_body(s.body, brk, cnt)
        self.loop_flags = saved
        stops = [f for f in (brk, self.done if returns else None) if f]
        index = s.target
        if not stops:
            rng = _call("range", start, stop, step)
            return before + [gast.copy_location(gast.For(index, rng, body, [], None), s)]
        # A loop that can stop early becomes a while loop over its counter.
        k, end, inc = self.fresh("_k"), self.fresh("_stop"), self.fresh("_step")
        pre = [_assign(k, start), _assign(end, stop), _assign(inc, step)]
        pre += [_assign(f, gast.Constant(False, None)) for f in stops if f != self.done]
        body = [gast.copy_location(gast.Assign([index], _name(k), None), s)] + body
        body.append(gast.copy_location(_assign(k, gast.BinOp(_name(k), gast.Add(), _name(inc))), s))
        test = gast.BoolOp(gast.And(), [_not(_or([_name(f) for f in stops])),
                                        _in_range(_name(k), _name(end), _name(inc), step)])
        return before + [gast.copy_location(x, s) for x in pre] + [
            gast.copy_location(gast.While(test, body, []), s)]

    def iteration(self, s):
        """(start, stop, step, statements before, body prologue) as a range loop."""
        it = s.iter
        fn = self.src.resolve(it.func)[1] if isinstance(it, gast.Call) else None
        if fn is range:
            args = list(it.args)
            if it.keywords or not 1 <= len(args) <= 3:
                raise self.src.error(it, "range() takes 1 to 3 positional arguments")
            if len(args) == 1:
                args = [gast.Constant(0, None)] + args
            if len(args) == 2:
                args.append(gast.Constant(1, None))
            return args[0], args[1], args[2], [], []
        if fn is enumerate:
            pair = isinstance(s.target, gast.Tuple) and len(s.target.elts) == 2
            if len(it.args) != 1 or not pair:
                raise self.src.error(s, "write enumerate loops as: for i, v in enumerate(x)")
            idx, item = s.target.elts
            ref, before = self.hoist(it.args[0])
            s.target = idx
            pro = [gast.copy_location(gast.Assign([item], _subscript(ref, idx), None), s)]
            return gast.Constant(0, None), _call("len", ref), gast.Constant(1, None), before, pro
        if fn is zip:
            targets = s.target.elts if isinstance(s.target, gast.Tuple) else None
            if targets is None or len(targets) != len(it.args):
                raise self.src.error(s, "write zip loops as: for a, b in zip(x, y)")
            return self._index_loop(s, list(zip(targets, it.args)))
        return self._index_loop(s, [(s.target, it)])

    def _index_loop(self, s, pairs):
        i = self.fresh("_i")
        hoisted, pro, lens = [], [], []
        for target, seq in pairs:
            ref, pre = self.hoist(seq)
            hoisted += pre
            lens.append(_call("len", ref))
            item = _subscript(ref, _name(i))
            item.iterates = True        # a dict gives its keys (anf/expressions.py)
            read = gast.Assign([target], item, None)
            pro.append(gast.copy_location(read, s))
        stop = lens[0] if len(lens) == 1 else _call("min", *lens)
        s.target = _name(i, gast.Store())
        return gast.Constant(0, None), stop, gast.Constant(1, None), hoisted, pro

    def hoist(self, expr):
        if isinstance(expr, gast.Name):
            return expr, []
        name = self.fresh("_seq")
        return _name(name), [gast.copy_location(_assign(name, expr), expr)]


def _subscript(value, index):
    value = _name(value.id) if isinstance(value, gast.Name) else value
    index = _name(index.id) if isinstance(index, gast.Name) else index
    return gast.Subscript(value, index, gast.Load())


def _in_range(k, stop, step, step_expr):
    """``k`` is still inside ``range(..., stop, step)``."""
    if isinstance(step_expr, gast.Constant):
        op = gast.Lt() if step_expr.value > 0 else gast.Gt()
        return gast.Compare(k, [op], [stop])
    up = gast.BoolOp(gast.And(), [gast.Compare(step, [gast.Gt()], [gast.Constant(0, None)]),
                                  gast.Compare(k, [gast.Lt()], [stop])])
    negative = gast.Compare(_name(step.id), [gast.Lt()], [gast.Constant(0, None)])
    down = gast.BoolOp(gast.And(), [negative,
                                    gast.Compare(_name(k.id), [gast.Gt()], [_name(stop.id)])])
    return gast.BoolOp(gast.Or(), [up, down])


def _last_return(fn):
    returns = [n for n in gast.walk(fn) if isinstance(n, gast.Return)]
    return max(returns, key=lambda n: getattr(n, "lineno", 0)) if returns else fn.body[-1]


def _contains_return_in_loop(node):
    return any(isinstance(n, (gast.For, gast.While)) and _contains(n, gast.Return)
               for n in gast.walk(node))


def _always_returns(stmts):
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, (gast.Return, gast.Raise)):     # a raise leaves too
        return True
    return isinstance(last, gast.If) and _always_returns(last.body) and _always_returns(last.orelse)


def _nest_rest(s, rest):
    """Move the statements after ``s`` into each of its branches that can fall through."""
    import copy
    branches = [s.body, s.orelse]
    open_ = [b for b in branches if not _always_returns(b)]
    for k, b in enumerate(open_):
        b.extend(rest if k == len(open_) - 1 else copy.deepcopy(rest))
    return s


def _assign_tails(stmts, ret):
    """Each path's final ``return e`` becomes ``ret = e``."""
    out = list(stmts)
    last = out[-1] if out else None
    if isinstance(last, gast.Return):
        value = last.value if last.value is not None else gast.Constant(None, None)
        out[-1] = gast.copy_location(_assign(ret, value), last)
    elif isinstance(last, gast.If):
        last.body = _assign_tails(last.body, ret)
        last.orelse = _assign_tails(last.orelse, ret)
    else:
        out.append(_assign(ret, gast.Constant(None, None)))
    return out


def _or(exprs):
    return exprs[0] if len(exprs) == 1 else gast.BoolOp(gast.Or(), exprs)


def _contains(node, kind):
    return any(isinstance(n, kind) for n in gast.walk(node))


def _contains_jump(body, kind):
    """Whether ``body`` breaks/continues *this* loop (not a nested one)."""
    for s in body:
        if isinstance(s, kind):
            return True
        if isinstance(s, gast.If) and (_contains_jump(s.body, kind)
                                       or _contains_jump(s.orelse, kind)):
            return True
    return False


def _sets(stmts, flag):
    for s in stmts:
        for n in gast.walk(s):
            if isinstance(n, gast.Name) and n.id == flag and isinstance(n.ctx, gast.Store):
                return True
    return False


def desugar(src):
    taken = {n.id for n in gast.walk(src.node) if isinstance(n, gast.Name)}
    fn = Desugar(src, taken).run(src.node)
    _inherit_locations(fn)
    return fn


def _inherit_locations(node, parent=None):
    """Statements the pass created point at the user's statement they came from."""
    for child in gast.iter_child_nodes(node):
        if parent is not None and not hasattr(child, "lineno") and hasattr(parent, "lineno"):
            gast.copy_location(child, parent)
        _inherit_locations(child, child if hasattr(child, "lineno") else parent)
