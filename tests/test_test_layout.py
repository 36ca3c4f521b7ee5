"""The test tree's own rules (issue 17): no test imports another test module or a conftest, the
helpers tests share are in ``tests/support/`` (which holds no test module), and every folder of tests
is the room of a package of the source tree.

Imports are read with ``ast`` from every Python file under ``tests/``: a test module that imports
another one runs that module's tests' imports and fixtures in its own namespace (and, imported by name,
can collect them twice); a conftest is pytest's to load, not a module to import.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT

TESTS = REPO_ROOT / "tests"
SUPPORT = TESTS / "support"

#: Test folders that are not the mirror of a source package, and why.
NOT_A_PACKAGE = {
    "store/reput": "the broker's reput (following a live store) spans commitlog, consumequeue and index",
}


def python_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)


def is_test_module_name(name: str) -> bool:
    """``test_*`` or ``conftest``: pytest's to collect or load, never another module's to import."""
    return name.startswith("test_") or name == "conftest"


def forbidden_imports(source: str) -> list[str]:
    """Every import in ``source`` that names a test module or a conftest, as ``line: what``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            names = [module] + [f"{module}.{alias.name}".lstrip(".") for alias in node.names]
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names = [node.args[0].value]
        for name in names:
            if any(is_test_module_name(part) for part in name.split(".")):
                found.append(f"{node.lineno}: {name}")
    return found


def test_the_import_check_sees_every_form() -> None:
    """The check itself: each way of reaching a test module or a conftest is found, the rest is not."""
    bad = [
        "from tests.server.test_send_replay import replay",
        "import tests.server.test_send_replay",
        "from tests.server import test_send_replay",
        "from tests.clients.conftest import open_java_store",
        "from .test_consume_queue_golden import records",
        "from . import conftest",
        "importlib.import_module('tests.server.test_send_replay')",
    ]
    for line in bad:
        assert forbidden_imports(line), line
    good = [
        "from tests.support.send_replay import replay",
        "import pytest",
        "from store.index import index_range",
    ]
    assert forbidden_imports("\n".join(good)) == []


@pytest.mark.parametrize("path", python_files(), ids=lambda p: str(p.relative_to(TESTS)))
def test_no_test_module_or_conftest_is_imported(path: Path) -> None:
    assert forbidden_imports(path.read_text(encoding="utf-8")) == [], (
        f"{path.relative_to(REPO_ROOT)} imports a test module or a conftest: move what it shares into "
        "tests/support/"
    )


def test_support_holds_no_test_module() -> None:
    names = sorted(p.name for p in SUPPORT.rglob("*.py") if "__pycache__" not in p.parts)
    assert names, "tests/support is empty"
    assert [n for n in names if is_test_module_name(Path(n).stem)] == []


def test_every_folder_of_tests_mirrors_a_package() -> None:
    rooms = {p.parent.relative_to(TESTS).as_posix() for p in TESTS.rglob("test_*.py")} - {"."}
    for room in sorted(rooms):
        assert room in NOT_A_PACKAGE or (REPO_ROOT / room).is_dir(), f"tests/{room} mirrors no package"
    assert set(NOT_A_PACKAGE) <= rooms, "a folder named in NOT_A_PACKAGE is gone"
