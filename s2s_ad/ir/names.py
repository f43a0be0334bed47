"""Hygienic, readable names for generated code."""
import keyword

RESERVED = {"np", "math", "rt", "numba"}


class Names:
    """Allocates names that collide with nothing the user wrote.

    A user variable keeps its own name for its first definition; later
    definitions (the function is in SSA form between control-flow joins) get
    ``x_1``, ``x_2``...; temporaries are ``_t1``, ``_t2``...; adjoints of
    ``x`` are ``bx``.
    """

    def __init__(self, taken=()):
        self.taken = set(taken) | RESERVED | set(keyword.kwlist)
        self.own = set()      # user names whose first definition is still free
        self._temps = 0

    def claim_user(self, names):
        self.own |= set(names) - RESERVED
        self.taken |= set(names)

    def user(self, name):
        """Name for a (re)definition of the user's variable ``name``."""
        if name in self.own:
            self.own.discard(name)
            return name
        return self.fresh(name)

    def fresh(self, base):
        if base not in self.taken:
            self.taken.add(base)
            return base
        stem = base.rstrip("0123456789").rstrip("_") or base
        i = 1
        while f"{stem}_{i}" in self.taken:
            i += 1
        name = f"{stem}_{i}"
        self.taken.add(name)
        return name

    def family(self, base, count):
        """``count`` fresh names ``base_0, base_1, ...``, one per direction of a
        vector-mode derivative (``base_r0, ...`` where those are taken)."""
        for sep in ("_", "_r", "_q"):
            names = [f"{base}{sep}{k}" for k in range(count)]
            if not any(n in self.taken for n in names):
                self.taken |= set(names)
                return names
        return [self.fresh(f"{base}_q{k}") for k in range(count)]

    def temp(self):
        while True:
            self._temps += 1
            name = f"_t{self._temps}"
            if name not in self.taken:
                self.taken.add(name)
                return name

    def adjoint(self, name):
        return self.fresh("b" + name.lstrip("_") if name.startswith("_") else "b" + name)
