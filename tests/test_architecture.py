"""The layout promises: every import points down the floors of docs/architecture.md (lazy imports
included) and no modules or packages import each other in a cycle; the Modules table of
docs/architecture.md names every module of the core package, and only those; the package has one
exception tree."""

import importlib
import inspect
import os
import re
import tempfile
import unittest

import import_graph
from hub_testkit import ROOT

# The floors, top first: a module imports only from its own floor or below. A unit is a package of
# honcho_hub (`storage`), one of its top-level modules (`hub`), or the bridge (`honcho_bridge`).
FLOORS = (
    ("adapters", ("honcho_bridge", "cli", "__main__")),
    ("composition root", ("hub",)),
    ("operations", ("ops",)),
    ("memory tool", ("tool",)),
    ("services", ("capture", "delivery", "recall", "chats")),
    ("storage and Honcho", ("storage", "gateway")),
    ("settings and safety", ("settings", "safety")),
    ("bottom", ("errors", "backoff", "bounded", "keyed", "heap", "names", "prompt_window",
                "runtime", "honcho_hub")),
)
# Imports that still point up a floor, each to be removed by the move that fixes it (issue 23). The
# test fails on one not listed and on one listed that is gone, so the list only shrinks.
KNOWN_UPWARD: set[tuple[str, str]] = set()
# Imports inside a floor that close a cycle, likewise to be removed.
KNOWN_CYCLE_EDGES: set[tuple[str, str]] = set()


def package_modules() -> set[str]:
    """Every module of honcho_hub as a path inside it (`storage/outbox.py`), package markers
    aside."""
    base = os.path.join(ROOT, "honcho_hub")
    found = set()
    for dirpath, dirnames, names in os.walk(base):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        found.update(os.path.relpath(os.path.join(dirpath, name), base) for name in names
                     if name.endswith(".py") and name != "__init__.py")
    assert found, "no module under honcho_hub: a moved package would make this test pass"
    return found


def architecture_table() -> list[str]:
    """The modules the Modules table of docs/architecture.md names, in its order."""
    with open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8") as handle:
        page = handle.read()
    section = page.split("\n## Modules\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([\w/]+\.py)` \|", section, re.MULTILINE)


class ArchitectureSectionTest(unittest.TestCase):
    def test_the_table_names_every_module_once_and_nothing_else(self):
        named = architecture_table()
        self.assertEqual(sorted(set(named)), sorted(named), "a module named twice")
        self.assertEqual(set(named) - package_modules(), set(),
                         "named in docs/architecture.md but not in the package")
        self.assertEqual(package_modules() - set(named), set(),
                         "in the package but not in docs/architecture.md")


def unit(module: str) -> str:
    return module.split("/")[0]


def floor_of(module: str) -> int:
    """0 for the bottom floor, counting up; KeyError for a unit no floor holds."""
    return next(len(FLOORS) - 1 - i for i, (_, units) in enumerate(FLOORS) if unit(module) in units)


class FloorsTest(unittest.TestCase):
    def setUp(self):
        self.modules = import_graph.modules()
        self.edges = import_graph.most_specific(import_graph.imports(self.modules))

    def test_every_module_stands_on_a_floor(self):
        homeless = sorted({unit(m) for m in self.modules}
                          - {u for _, units in FLOORS for u in units})
        self.assertEqual(homeless, [],
                         "units on no floor: add them to FLOORS and docs/architecture.md")

    def test_no_import_points_up_a_floor(self):
        upward = {(a, b) for a, b in self.edges if floor_of(b) > floor_of(a)}
        self.assertEqual(sorted(upward - KNOWN_UPWARD), [], "imports pointing up a floor")
        self.assertEqual(sorted(KNOWN_UPWARD - upward), [], "fixed: remove them from KNOWN_UPWARD")

    def test_the_bridge_and_the_command_line_import_nothing_of_each_other(self):
        # Adapters side by side: what both need (how a chat's data names its sender) lies below.
        across = {(a, b) for a, b in self.edges if {unit(a), unit(b)} == {"honcho_bridge", "cli"}}
        self.assertEqual(sorted(across), [])

    def test_no_modules_and_no_units_import_each_other_in_a_cycle(self):
        listed = KNOWN_UPWARD | KNOWN_CYCLE_EDGES
        self.assertEqual(sorted(KNOWN_CYCLE_EDGES - self.edges), [],
                         "gone: remove them from KNOWN_CYCLE_EDGES")
        edges = self.edges - listed
        self.assertEqual(import_graph.cycles(self.modules, edges), [],
                         "modules importing each other")
        units = {(unit(a), unit(b)) for a, b in edges if unit(a) != unit(b)}
        self.assertEqual(import_graph.cycles({unit(m) for m in self.modules}, units), [],
                         "packages importing each other")

    def test_the_cycle_finder_finds_a_cycle(self):
        # The check above is only as good as this: a cycle of three and one of two, beside a chain.
        edges = {("a", "b"), ("b", "c"), ("c", "a"), ("d", "e"), ("e", "d"), ("f", "a")}
        self.assertEqual(sorted(import_graph.cycles("abcdef", edges)),
                         [["a", "b", "c"], ["d", "e"]])

    def test_an_import_inside_a_function_counts(self):
        with tempfile.TemporaryDirectory() as folder:
            paths = {name: os.path.join(folder, name + ".py") for name in ("a", "b")}
            with open(paths["a"], "w", encoding="utf-8") as handle:
                handle.write("def later():\n    from .b import thing\n    return thing\n")
            with open(paths["b"], "w", encoding="utf-8") as handle:
                handle.write("thing = 1\n")
            self.assertEqual(import_graph.imports(paths), {("a", "b")})

    def test_the_architecture_document_lists_these_floors(self):
        with open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8") as handle:
            document = handle.read()
        section = document.split("\n## Floors\n", 1)[1].split("\n## ", 1)[0]
        rows = re.findall(r"^\| ([^|]+?) \| (.+?) \|$", section,
                          re.MULTILINE)[1:]  # after the header
        listed = [(name, tuple(re.findall(r"`([\w/]+?)/?`", units))) for name, units in rows]
        self.assertEqual(listed, [(name, units) for name, units in FLOORS])


class ExceptionTreeTest(unittest.TestCase):
    def test_every_public_exception_of_the_package_is_defined_in_errors_under_hub_error(self):
        from honcho_hub.errors import HubError

        elsewhere, outside_tree = [], []
        # importing __main__ runs the command line
        for path in sorted(package_modules() - {"__main__.py"}):
            module = importlib.import_module("honcho_hub." + path[:-3].replace(os.sep, "."))
            for name, cls in inspect.getmembers(module, inspect.isclass):
                if cls.__module__ != module.__name__ or not issubclass(cls, BaseException):
                    continue
                if not issubclass(cls, HubError):
                    outside_tree.append(f"{path}:{name}")
                # a private signal stays in its module
                if path != "errors.py" and not name.startswith("_"):
                    elsewhere.append(f"{path}:{name}")
        self.assertEqual(elsewhere, [], "public exceptions defined outside errors.py")
        self.assertEqual(outside_tree, [], "exceptions outside the HubError tree")


if __name__ == "__main__":
    unittest.main()
