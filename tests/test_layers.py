"""Every import arrow runs one way: protocol ← store ← server.broker ← server ← clients.

The layers (ARCHITECTURE.md): ``protocol`` is bytes and knows nothing else; ``store`` is files over
``protocol``; ``server.broker`` is the broker's rules (what a request does to the store), sans-IO,
over ``store``; the rest of ``server`` is sockets, and talks to the store only through the facade
of ``server/store_api.py``; ``clients`` may use everything installed. ``benchmarks`` and ``tests``
are not installed, so nothing installed may import them.

Each module's imports are read from its source (``ast``): top-level, function-level and
``TYPE_CHECKING`` imports alike, relative imports resolved, and the literal names given to
``importlib.import_module`` or ``protocol.accel.load``. A failure names the module, the line and the
arrow; the fix is to move the code into the layer it belongs to, not to widen the table below.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT

INSTALLED = ("protocol", "store", "server", "clients")
TOP_LEVEL = (*INSTALLED, "benchmarks", "tests")

#: The layers each layer may import (itself included).
ALLOWED: dict[str, frozenset[str]] = {
    "protocol": frozenset({"protocol"}),
    "store": frozenset({"protocol", "store"}),
    "server.broker": frozenset({"protocol", "store", "server.broker"}),
    "server": frozenset({"protocol", "store", "server.broker", "server"}),
    "clients": frozenset({"protocol", "store", "server.broker", "server", "clients"}),
    "benchmarks": frozenset({"protocol", "store", "server.broker", "server", "clients", "benchmarks"}),
    "tests": frozenset(TOP_LEVEL) | {"server.broker"},
}

#: The one module of ``server`` outside ``server.broker`` that may name ``store``: the facade.
STORE_FACADE = "server.store_api"

#: Import cycles between modules of the installed packages that are allowed (none).
ALLOWED_CYCLES: list[frozenset[str]] = []


def layer_of(module: str) -> str | None:
    """The layer of a dotted module name, or None for the standard library and third parties."""
    if module == "server.broker" or module.startswith("server.broker."):
        return "server.broker"
    top = module.partition(".")[0]
    return top if top in TOP_LEVEL else None


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for top in TOP_LEVEL:
        for path in sorted((REPO_ROOT / top).rglob("*.py")):
            found[_module_name(path)] = path
    return found


def _dynamic_import(node: ast.Call) -> str | None:
    """``import_module("a.b")`` / ``accel.load("a.b")`` with a literal name: that name."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name not in ("import_module", "load") or not node.args:
        return None
    arg = node.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and layer_of(arg.value) is not None:
        return arg.value
    return None


def imports_in(source: str, package: str) -> list[tuple[str, int]]:
    """Every module ``source`` imports (dotted names, relative ones resolved against ``package``)."""
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # ``from pkg import name``: name may be a module of pkg, so both are recorded
            found += [(target, node.lineno)]
            found += [(f"{target}.{alias.name}", node.lineno) for alias in node.names if alias.name != "*"]
        elif isinstance(node, ast.Call) and (name := _dynamic_import(node)) is not None:
            found.append((name, node.lineno))
    return found


@functools.cache
def imports_of(module: str) -> tuple[tuple[str, int], ...]:
    """``imports_in`` of a module of the tree."""
    path = modules()[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    return tuple(imports_in(path.read_text(encoding="utf-8"), package))


def _wrong_arrows(layers: tuple[str, ...]) -> Iterator[str]:
    for module in modules():
        own = layer_of(module)
        if own not in layers:
            continue
        for imported, line in imports_of(module):
            target = layer_of(imported)
            if target is not None and target not in ALLOWED[own]:
                yield f"{module}:{line} imports {imported} ({own} -> {target})"


@pytest.mark.parametrize("layer", list(ALLOWED))
def test_every_arrow_runs_one_way(layer: str) -> None:
    assert list(_wrong_arrows((layer,))) == []


def test_the_server_reads_the_store_only_through_its_facade() -> None:
    """Outside ``server.broker``, only ``server/store_api.py`` names a ``store`` module."""
    wrong = [
        f"{module}:{line} imports {imported}"
        for module in modules()
        if layer_of(module) == "server" and module != STORE_FACADE
        for imported, line in imports_of(module)
        if layer_of(imported) == "store"
    ]
    assert wrong == []


#: Modules that do I/O on sockets or run an event loop: sans-IO layers import none of them.
IO_MODULES = frozenset({"asyncio", "socket", "selectors", "ssl", "uvloop"})


@pytest.mark.parametrize("layer", ["protocol", "server.broker"])
def test_sans_io_layers_import_no_sockets_and_no_event_loop(layer: str) -> None:
    wrong = [
        f"{module}:{line} imports {imported}"
        for module in modules()
        if layer_of(module) == layer
        for imported, line in imports_of(module)
        if imported.partition(".")[0] in IO_MODULES
    ]
    assert wrong == []


#: The gRPC front door's rules (conversion, checks, routes, settings): sans-IO inside ``server``, so
#: they are tested and reused (by the receive half) without a port, a loop or grpc's runtime.
GRPC_SANS_IO = (
    "server.grpc.conversion",
    "server.grpc.validation",
    "server.grpc.route",
    "server.grpc.client_settings",
)


@pytest.mark.parametrize("module", GRPC_SANS_IO)
def test_the_grpc_rules_are_sans_io(module: str) -> None:
    wrong = [
        f"{module}:{line} imports {imported}"
        for imported, line in imports_of(module)
        if imported.partition(".")[0] in IO_MODULES | {"grpc"}
        or imported in ("server.grpc.service", "server.grpc.server")
    ]
    assert wrong == []


def test_the_grpc_front_door_names_no_store_module() -> None:
    """``server.grpc`` reaches the store through ``server.broker`` and the facade, never directly."""
    wrong = [
        f"{module}:{line} imports {imported}"
        for module in modules()
        if module == "server.grpc" or module.startswith("server.grpc.")
        for imported, line in imports_of(module)
        if layer_of(imported) == "store"
    ]
    assert [m for m in modules() if m.startswith("server.grpc.")] != []
    assert wrong == []


def _resolve(imported: str) -> str | None:
    """The module of ``imported`` (the longest known prefix: ``a.b.name`` is ``a.b``)."""
    parts = imported.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules():
            return candidate
    return None


def _graph(nodes: list[str], key: object) -> dict[str, set[str]]:
    group = key if callable(key) else (lambda m: m)
    graph: dict[str, set[str]] = {group(m): set() for m in nodes}
    for module in nodes:
        for imported, _ in imports_of(module):
            target = _resolve(imported)
            if target is not None and target in nodes and group(target) != group(module):
                graph[group(module)].add(group(target))
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one node (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def _installed_modules() -> list[str]:
    return [m for m in modules() if layer_of(m) in (*INSTALLED, "server.broker")]


def test_no_cycle_between_layers() -> None:
    graph = _graph(_installed_modules(), layer_of)
    assert _cycles(graph) == []


def test_no_import_cycle_between_modules() -> None:
    cycles = [sorted(c) for c in _cycles(_graph(_installed_modules(), None)) if c not in ALLOWED_CYCLES]
    assert cycles == []


def test_the_checker_sees_every_kind_of_import() -> None:
    """The reader above is what this test trusts: it must find the imports a layer hides best."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from server.app import QueryServer\n"
        "def late():\n    import clients.admin\n"
        "def dynamic():\n    importlib.import_module('benchmarks.vs_java')\n"
        "from .. import put_message\n"
        "from .scheduled import due\n"
    )
    names = {name for name, _ in imports_in(source, "server.broker.inner")}
    assert {"server.app", "clients.admin", "benchmarks.vs_java"} <= names
    assert {"server.broker.put_message", "server.broker.inner.scheduled"} <= names
    assert layer_of("server.broker.put_message") == "server.broker"
    assert layer_of("server.store_api") == "server"
    assert layer_of("json") is None
