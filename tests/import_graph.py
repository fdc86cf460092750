"""The imports between our modules, read from the source (lazy imports inside functions included).

Modules are named as inside their package: `storage/outbox` for honcho_hub/storage/outbox.py, `hub`
for honcho_hub/hub.py, `honcho_bridge/host` for extensions/honcho_bridge/host.py. The bridge imports
the core the way Agent Zero loads it (`usr.plugins.honcho.honcho_hub...`); that prefix is read as
`honcho_hub`.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable, Mapping

from hub_testkit import ROOT

PACKAGES = {"honcho_hub": "honcho_hub",
            "honcho_bridge": os.path.join("extensions", "honcho_bridge")}
HOST_PREFIX = "usr.plugins.honcho."


def modules() -> dict[str, str]:
    """Every module of both packages by name (`storage/outbox`, a package's own `__init__` as
    `storage`)."""
    found = {}
    for package, folder in PACKAGES.items():
        base = os.path.join(ROOT, folder)
        for dirpath, dirnames, names in os.walk(base):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            for name in names:
                if name.endswith(".py"):
                    path = os.path.join(dirpath, name)
                    parts = os.path.relpath(path, base)[:-3].split(os.sep)
                    if parts[-1] == "__init__":
                        parts = parts[:-1]
                    found["/".join([package, *parts])] = path
    assert len(found) > 20, ("too few modules found: "
                             "a moved package would make the architecture tests pass")
    return {name.removeprefix("honcho_hub/") or "honcho_hub": path for name, path in found.items()}


def _dotted(name: str) -> str:
    """`storage/outbox` as Python imports it: `honcho_hub.storage.outbox`."""
    if name == "honcho_hub" or name.startswith("honcho_bridge"):
        return name.replace("/", ".")
    return "honcho_hub." + name.replace("/", ".")


def imports(known: Mapping[str, str]) -> set[tuple[str, str]]:
    """(importer, imported) for every import of one of our modules by another, however deep in a
    function."""
    by_dotted = {_dotted(name): name for name in known}
    edges = set()
    for name, path in known.items():
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read(), path)
        here = _dotted(name) if path.endswith("__init__.py") else _dotted(name).rsplit(".", 1)[0]
        for node in ast.walk(tree):
            for target in _targets(node, here):
                target = target.removeprefix(HOST_PREFIX)
                if target in by_dotted and by_dotted[target] != name:
                    edges.add((name, by_dotted[target]))
    return edges


def _targets(node: ast.AST, package: str) -> Iterable[str]:
    """What an import statement names: its module, and each imported name as a possible submodule
    (the most specific that exists is the one imported; `from ..gateway import deadline` names
    gateway/deadline)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        base = package.split(".")[:len(package.split(".")) - node.level + 1]
        module = ".".join(base + ([node.module] if node.module else []))
    else:
        module = node.module or ""
    return [f"{module}.{alias.name}" for alias in node.names] + [module]


def most_specific(edges: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """Drop (a, package) where a also imports a module of that package by the same statement's
    names: `from ..storage import outbox` runs storage/__init__ too, but what it depends on is
    storage/outbox."""
    return {(a, b) for a, b in edges
            if not any(x == a and y.startswith(b + "/") for x, y in edges)}


def cycles(nodes: Iterable[str], edges: set[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected groups of more than one node (Tarjan's algorithm, iterative)."""
    graph: dict[str, list[str]] = {node: [] for node in nodes}
    for a, b in edges:
        graph.setdefault(a, []).append(b)
        graph.setdefault(b, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found
