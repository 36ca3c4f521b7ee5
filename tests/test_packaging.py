"""The installed package is ``protocol``, ``store``, ``server`` and ``clients``: no benchmark, no test.

``pyproject.toml``'s ``packages.find`` decides what a wheel holds. This builds the package's
modules the way the wheel build does (setuptools' ``build_py``, reading the same ``pyproject.toml``
and ``MANIFEST.in``) from a copy of the tree, and checks the result file by file: nothing of
``benchmarks/`` or ``tests/`` (or anything else at the top) goes in, and every file of the four
packages does (a directory that lost its ``__init__.py`` would silently drop out of the wheel).

``build_py`` rather than a whole wheel: a wheel build needs the ``wheel`` package (not a test
dependency) and compiles every C accelerator, which takes longer than the rest of this file; the
pure-Python part of a wheel is exactly what ``build_py`` writes.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from clients.cli.serve_extras import FRONT_DOORS
from tests.support.paths import REPO_ROOT

INSTALLED = ("protocol", "store", "server", "clients")

#: Left out of the copy: what git ignores, and build output that is not source.
_NOT_SOURCE = (".git", "build", "dist", "*.so", "__pycache__", "node_modules", ".pytest_cache",
               ".ruff_cache", ".hypothesis", "*.egg-info", ".venv")  # fmt: skip


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def test_the_package_holds_the_four_packages_and_nothing_else(tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(REPO_ROOT, source, ignore=shutil.ignore_patterns(*_NOT_SOURCE))
    lib = tmp_path / "lib"
    result = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(lib)],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    built = _files(lib)
    assert {name.partition("/")[0] for name in built} == set(INSTALLED)
    assert not [name for name in built if "benchmarks" in name.split("/") or "tests" in name.split("/")]
    expected = {f"{package}/{name}" for package in INSTALLED for name in _files(source / package)}
    assert built == expected, (sorted(expected - built)[:10], sorted(built - expected)[:10])


#: What a base install (``pip install rmq-query``) has: lookups, the store tools and the test kit's
#: server need no more.
BASE_DEPENDENCIES = {"construct", "msgspec"}
#: Every optional library, by the module it is imported as: hidden below, as on a base install.
OPTIONAL_MODULES = ("grpc", "google.protobuf", "rocketmq", "cryptography", "aiohttp", "prometheus_client",
                    "pyspark", "pyarrow", "yaml", "lz4", "zstandard", "uvloop", "pytest")  # fmt: skip


def _project() -> dict:
    with open(REPO_ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\s<>=!;\[]", requirement, maxsplit=1)[0].lower() for requirement in requirements}


def test_the_base_install_is_what_lookups_need_and_each_front_door_has_its_extra() -> None:
    project = _project()
    extras = project["optional-dependencies"]
    assert _names(project["dependencies"]) == BASE_DEPENDENCIES
    assert {"grpc", "console", "testkit", "spark", "all"} <= set(extras)
    assert _names(extras["grpc"]) == {"grpcio", "protobuf", "rocketmq-python-client", "cryptography"}
    assert _names(extras["console"]) == {"aiohttp", "prometheus_client"}
    assert "pytest" in _names(extras["testkit"])
    # what serve names when a door's libraries are missing is what its extra installs
    for door, extra in (("grpc", "grpc"), ("http", "console")):
        assert FRONT_DOORS[door].extra == extra
        assert {dist.lower() for _, dist in FRONT_DOORS[door].modules} == _names(extras[extra])
    # [all] takes every other extra but the suite's; the suite's takes [all] (.ci/run installs [test,spark])
    (everything,) = extras["all"]
    assert set(everything.partition("[")[2].rstrip("]").split(",")) == set(extras) - {"all", "test"}
    assert "rmq-query[all]" in extras["test"]


def test_every_command_and_the_test_kit_import_without_any_optional_library() -> None:
    """On a base install every subcommand's module loads (``serve`` opens its doors only when their
    libraries are there) and the kit's ``RmqServer`` serves: hidden libraries raise on import."""
    code = (
        "import sys\n"
        f"for name in {OPTIONAL_MODULES!r}: sys.modules[name] = None\n"
        "from clients.cli import SUBCOMMANDS, build_parser\n"
        "build_parser()\n"
        "import tempfile, pathlib\n"
        "from clients.testkit import RmqServer, RmqClient, kit_store_config\n"
        "with tempfile.TemporaryDirectory() as root:\n"
        "    server = RmqServer(kit_store_config(pathlib.Path(root)))\n"
        "    try:\n"
        "        RmqClient(server).send('Orders', b'x', keys=['k1'])\n"
        "        print(len(RmqClient(server).query_by_key('Orders', 'k1')))\n"
        "    finally:\n"
        "        server.close()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"


def test_version_prints_the_installed_distributions_version() -> None:
    try:
        installed = metadata.version("rmq-query")
    except metadata.PackageNotFoundError:
        pytest.skip("rmq-query is not installed in this environment (pip install -e .)")
    done = subprocess.run(
        [sys.executable, "-m", "clients.cli", "--version"], cwd=REPO_ROOT, capture_output=True, text=True,
        timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"rmq-query {installed}"
    assert installed == _project()["version"]
