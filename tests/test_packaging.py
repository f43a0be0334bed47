"""``pip install .`` installs every package of s2s_ad.

pyproject.toml lists the packages by name (``runtime/`` is installed as
``s2s_ad.runtime``); a package folder missing from the list is absent from a
non-editable install, which the editable install the suite runs under would
never show.
"""
import pathlib

import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_every_package_folder_is_listed_in_pyproject():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())
                 ["tool"]["setuptools"]["packages"])
    found = {".".join(("s2s_ad",) + init.parent.relative_to(ROOT / "s2s_ad").parts)
             for init in (ROOT / "s2s_ad").rglob("__init__.py")}
    found |= {".".join(("s2s_ad", "runtime") + init.parent.relative_to(ROOT / "runtime").parts)
              for init in (ROOT / "runtime").rglob("__init__.py")}
    assert found - listed == set(), f"add to [tool.setuptools] packages: {sorted(found - listed)}"
    assert listed - found == set(), f"listed but not a package: {sorted(listed - found)}"
