#!/usr/bin/env python3
"""Checks the layering of the tree: C++ includes go down the layers, Python imports form no circle.

1. C++: every `#include "<layer>/..."` in src/<layer>/ must name the file's own layer or one
   that this script's LAYERS table allows it to use (DESIGN.md "Code layout (by layer)", STYLE.md §1 "Calls go
   downward only", and the arrows of CMakeLists.txt `target_link_libraries`). A directory of src/
   that is not in the table is a problem too: a new layer gets its row before its first include.
   Single known upward includes are listed, with their reason, in KNOWN_UPWARD_INCLUDES and
   printed as notes on every run.
   Inside src/server/, every file lives in one of the rooms of SERVER_ROOMS (docs/server-wing.md)
   and includes only its own room's headers and those of the rooms listed before it, so the
   composition root (`root/`) is included by nobody and a route never reaches up into the
   transport that calls it.
2. Python: no module of the `kcoral` package (python/kcoral/**) is in an import cycle. Imports
   are read with `ast`: `import kcoral.x`, `from kcoral.x import y`, `from kcoral import x` (an
   edge to the module kcoral.x when it exists, else to the package) and relative imports. Lazy
   imports, inside functions, count: they defer the cycle to run time but the two modules still
   depend on each other, and the worker's circles went through exactly such imports. Imports
   under `if TYPE_CHECKING:` do not count (they never run). Importing kcoral.a.b is not counted
   as importing the package kcoral.a (every package's __init__ would be in a cycle otherwise).

Prints each problem (for a cycle: the modules around it) and exits 1 if there is any, else 0.
Standard library only; run by `make test` (its `layers` step).
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections import deque
from pathlib import Path

# Which layers each layer of src/ may include, besides itself: the arrows the code uses, no
# more (issue 41), each one a line of CMakeLists.txt's target_link_libraries. server uses
# protocol, store, pool, cluster and tls; cluster uses protocol, store and tls (its node-to-node
# traffic, peer_client.cc, shares the TLS contexts with the server's HTTPS, issue 26); pool uses
# ipc; store uses protocol, for the request's blob references (store/blob_store.h includes
# protocol/execute_request.h); ipc uses protocol's JsonFields (protocol/json_fields.h, the
# checked field reads it shares with cluster's messages); worker uses ipc, and native through
# dlopen, never an include; protocol, tls and native use base only. Nothing uses a layer above it: no cycle is
# possible. A new arrow gets its entry here, with its reason, before its first include.
LAYERS: dict[str, frozenset[str]] = {
    "base": frozenset(),
    "protocol": frozenset({"base"}),
    "store": frozenset({"base", "protocol"}),
    "ipc": frozenset({"base", "protocol"}),
    "pool": frozenset({"base", "ipc"}),
    "cluster": frozenset({"base", "protocol", "store", "tls"}),
    "tls": frozenset({"base"}),
    "server": frozenset({"base", "protocol", "store", "pool", "cluster", "tls"}),
    "native": frozenset({"base"}),
    "worker": frozenset({"base", "ipc"}),
}

# The server's rooms (issue 41), lowest first: a file of a room may include the headers of its own
# room and of the rooms before it. core: the words every room speaks (replies, endings, the
# config, Services, which only names the parts); tenancy: keys, limits and quotas; status: the
# event log, the counts, the dashboard and its routes; execute: POST /execute and the blob
# routes; clustering: the cluster glue (entry, executor, peer routes), which implements
# execute's RemoteRoute; transport: connections, the session and its Routes; root: App and main.
SERVER_ROOMS: list[str] = ["core", "tenancy", "status", "execute", "clustering", "transport", "root"]

# Single includes that go up a layer and are known (issue 24), each with why it is still there.
# Printed on every run, so they stay visible; one that is gone from the tree is a problem, so
# the list shrinks when they are fixed. Never add a layer-wide exception here.
KNOWN_UPWARD_INCLUDES: dict[tuple[str, str], str] = {}

REPO = Path(__file__).resolve().parent.parent
CPP_SUFFIXES = {".h", ".hh", ".hpp", ".cc", ".cpp", ".cxx", ".cu", ".cuh"}
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"/]+)/([^"]+)"', re.MULTILINE)


def check_includes(root: Path) -> tuple[list[str], list[str]]:
    """Returns (problems, notes) for the C++ tree under root/src."""
    problems: list[str] = []
    notes: list[str] = []
    src = root / "src"
    if not src.is_dir():
        return problems, notes
    seen_exceptions = set()
    for layer_dir in sorted(p for p in src.iterdir() if p.is_dir()):
        layer = layer_dir.name
        if layer not in LAYERS:
            problems.append(f"src/{layer}/: a layer missing from LAYERS in scripts/check_layers.py")
            continue
        allowed = LAYERS[layer] | {layer}
        for path in sorted(layer_dir.rglob("*")):
            if path.suffix not in CPP_SUFFIXES or not path.is_file():
                continue
            rel = path.relative_to(root).as_posix()
            text = path.read_text(encoding="utf-8", errors="replace")
            if layer == "server":
                problems.extend(check_server_room(rel, path.relative_to(layer_dir), text))
            for match in INCLUDE.finditer(text):
                target = match.group(1)
                if target not in LAYERS or target in allowed:
                    continue  # a third-party header ("nlohmann/json.hpp") or a permitted layer
                included = f"{target}/{match.group(2)}"
                line = text.count("\n", 0, match.start()) + 1
                if (rel, included) in KNOWN_UPWARD_INCLUDES:
                    seen_exceptions.add((rel, included))
                    notes.append(
                        f"{rel}:{line}: known upward include of {included} ({layer} -> {target}): "
                        f"{KNOWN_UPWARD_INCLUDES[(rel, included)]}"
                    )
                    continue
                uses = ", ".join(sorted(LAYERS[layer])) or "nothing"
                problems.append(
                    f"{rel}:{line}: includes {included}, but {layer} may use only {uses} "
                    f"(DESIGN.md layers; LAYERS in scripts/check_layers.py)"
                )
    for rel, included in sorted(set(KNOWN_UPWARD_INCLUDES) - seen_exceptions):
        if (root / rel).exists() or root == REPO:  # a planted tree need not have the file
            problems.append(f"{rel}: no longer includes {included}: remove it from KNOWN_UPWARD_INCLUDES")
    return problems, notes


def check_server_room(rel: str, inside: Path, text: str) -> list[str]:
    """The problems of one file of src/server/ (`inside`: its path under it) with SERVER_ROOMS."""
    room = inside.parts[0] if len(inside.parts) > 1 else None
    if room not in SERVER_ROOMS:
        return [
            f"{rel}: not in a room of src/server/ (SERVER_ROOMS in scripts/check_layers.py: "
            f"{', '.join(SERVER_ROOMS)})"
        ]
    rank = SERVER_ROOMS.index(room)
    problems = []
    for match in INCLUDE.finditer(text):
        if match.group(1) != "server":
            continue
        included = match.group(2)
        target = included.split("/")[0] if "/" in included else None
        if target in SERVER_ROOMS and SERVER_ROOMS.index(target) <= rank:
            continue
        line = text.count("\n", 0, match.start()) + 1
        below = ", ".join(SERVER_ROOMS[:rank]) or "no other room"
        problems.append(
            f"{rel}:{line}: includes server/{included}, but the server's {room} room "
            f"may use only {below} (SERVER_ROOMS in scripts/check_layers.py)"
        )
    return problems


def _module_name(package_root: Path, path: Path) -> str:
    parts = list(path.relative_to(package_root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, module: str, is_package: bool) -> list[tuple[str, ...]]:
    """For every import that runs, at any depth: the names it may mean, the likeliest first.

    `import a.b` means a.b; `from a import b` means the module a.b if there is one, else a.
    Relative imports are resolved against the module's package.
    """
    found: list[tuple[str, ...]] = []
    package = module if is_package else module.rpartition(".")[0]

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend((alias.name,) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            found.extend((f"{base}.{alias.name}", base) for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph(package_root: Path) -> tuple[dict[str, set[str]], list[str]]:
    """Edges between the modules of the package at package_root, and files that do not parse."""
    files = {_module_name(package_root, path): path for path in sorted(package_root.rglob("*.py"))}
    graph: dict[str, set[str]] = {name: set() for name in files}
    problems = []
    for name, path in files.items():
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except SyntaxError as exc:
            problems.append(f"{path}: does not parse: {exc}")
            continue
        for candidates in _imports(tree, name, path.name == "__init__.py"):
            target = next((c for c in candidates if c in files), None)
            if target is not None and target != name:  # None: outside the package, or an extension
                graph[name].add(target)
    return graph, problems


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def _shortest_cycle(graph: dict[str, set[str]], members: set[str], start: str) -> list[str]:
    parent = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for child in sorted(graph[node] & members):
            if child == start:
                path = [node]
                while parent[path[-1]] is not None:
                    path.append(parent[path[-1]])
                return list(reversed(path)) + [start]
            if child not in parent:
                parent[child] = node
                queue.append(child)
    return []


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """For each circle of modules, the shortest cycle through each of its members (deduplicated)."""
    cycles = []
    for component in _strongly_connected(graph):
        members = set(component)
        seen = set()
        for start in component:
            cycle = _shortest_cycle(graph, members, start)
            ring = cycle[:-1]
            first = ring.index(min(ring))
            key = tuple(ring[first:] + ring[:first])
            if key not in seen:
                seen.add(key)
                cycles.append(list(key) + [key[0]])
    return cycles


def check_imports(root: Path) -> list[str]:
    package_root = root / "python" / "kcoral"
    if not package_root.is_dir():
        return []
    graph, problems = import_graph(package_root)
    for cycle in find_cycles(graph):
        problems.append("import cycle: " + " -> ".join(cycle))
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="check_layers.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--root", type=Path, default=REPO, help="the tree to check (default: this repository)")
    parser.add_argument("--quiet", action="store_true", help="print problems only, not known exceptions")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    if not (root / "src").is_dir() and not (root / "python" / "kcoral").is_dir():
        print(f"check_layers: {root} has neither src/ nor python/kcoral/", file=sys.stderr)
        return 2
    include_problems, notes = check_includes(root)
    problems = include_problems + check_imports(root)
    if not args.quiet:
        for note in notes:
            print(f"note: {note}")
    for problem in problems:
        print(problem)
    if problems:
        print(f"check_layers: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print("check_layers: C++ layers and Python imports are in order")
    return 0


if __name__ == "__main__":
    sys.exit(main())
