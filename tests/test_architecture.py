"""The layout promises: the README's architecture section names every module of the core package, and only
those; the package has one exception tree."""

import importlib
import inspect
import os
import re
import unittest

from hub_testkit import ROOT


def package_modules() -> set[str]:
    """Every module of honcho_hub as a path inside it (`storage/outbox.py`), package markers aside."""
    base = os.path.join(ROOT, "honcho_hub")
    found = set()
    for dirpath, dirnames, names in os.walk(base):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        found.update(os.path.relpath(os.path.join(dirpath, name), base) for name in names
                     if name.endswith(".py") and name != "__init__.py")
    assert found, "no module under honcho_hub: a moved package would make this test pass"
    return found


def architecture_table() -> list[str]:
    """The modules the README's Architecture table names, in its order."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        readme = handle.read()
    section = readme.split("\n## Architecture\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([\w/]+\.py)` \|", section, re.MULTILINE)


class ArchitectureSectionTest(unittest.TestCase):
    def test_the_table_names_every_module_once_and_nothing_else(self):
        named = architecture_table()
        self.assertEqual(sorted(set(named)), sorted(named), "a module named twice")
        self.assertEqual(set(named) - package_modules(), set(), "named in the README but not in the package")
        self.assertEqual(package_modules() - set(named), set(), "in the package but not in the README")


class ExceptionTreeTest(unittest.TestCase):
    def test_every_public_exception_of_the_package_is_defined_in_errors_under_hub_error(self):
        from honcho_hub.errors import HubError

        elsewhere, outside_tree = [], []
        for path in sorted(package_modules() - {"__main__.py"}):  # importing __main__ runs the command line
            module = importlib.import_module("honcho_hub." + path[:-3].replace(os.sep, "."))
            for name, cls in inspect.getmembers(module, inspect.isclass):
                if cls.__module__ != module.__name__ or not issubclass(cls, BaseException):
                    continue
                if not issubclass(cls, HubError):
                    outside_tree.append(f"{path}:{name}")
                if path != "errors.py" and not name.startswith("_"):  # a private signal stays in its module
                    elsewhere.append(f"{path}:{name}")
        self.assertEqual(elsewhere, [], "public exceptions defined outside errors.py")
        self.assertEqual(outside_tree, [], "exceptions outside the HubError tree")


if __name__ == "__main__":
    unittest.main()
