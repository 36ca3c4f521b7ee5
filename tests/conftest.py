"""Shared test fixtures: where the golden data produced by the real Java RocketMQ lives.

The golden data is in the repository under ``tests/golden`` (``tests/golden/README.md`` says how each
file was produced) and is read in place, never written: a test that needs a writable store copies it
first. The session checks that at its end (``pytest_sessionfinish``).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.support import golden_guard, xdist_groups
from tests.support.paths import GOLDEN_DIR, STORES_DIR, VECTORS_DIR
from tests.support.v5_client import bind_telemetry_callers_to_the_io_loop

#: Hypothesis for this suite: no property test may depend on the machine's speed. Under load (two
#: xdist workers on two shared cores, other jobs) generating an example can take longer than the
#: default health check allows ("too_slow") and one example can pass the default 200 ms deadline;
#: neither is a fault of the code under test. Every other health check and the example counts stay
#: as each test sets them. ``HYPOTHESIS_PROFILE=default`` brings Hypothesis's own defaults back.
settings.register_profile(
    "suite", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "suite"))

#: The official 5.x Python client's Telemetry race under load (tests/support/v5_client.py says why).
bind_telemetry_callers_to_the_io_loop()


def _require(path: Path) -> Path:
    if not path.exists():
        pytest.fail(f"golden data missing: {path} (tests/golden is part of the repository)")
    return path


@pytest.fixture(scope="session")
def vectors_dir() -> Path:
    return _require(VECTORS_DIR)


@pytest.fixture(scope="session")
def stores_dir() -> Path:
    return _require(STORES_DIR)


@pytest.fixture(scope="session")
def manifest(vectors_dir: Path) -> dict:
    return json.loads((vectors_dir / "manifest.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def vectors_by_name(manifest: dict) -> dict[str, dict]:
    return {v["name"]: v for v in manifest["vectors"]}


_GOLDEN_BEFORE = pytest.StashKey[golden_guard.Snapshot]()


def pytest_sessionstart(session: pytest.Session) -> None:
    """Snapshot the golden data (in the controller only, when the tests run in xdist workers)."""
    if not hasattr(session.config, "workerinput"):
        session.config.stash[_GOLDEN_BEFORE] = golden_guard.snapshot(GOLDEN_DIR)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run when a test wrote into ``tests/golden`` (it must copy the data first)."""
    before = session.config.stash.get(_GOLDEN_BEFORE, None)
    if before is None:
        return
    changed = golden_guard.changes(before, golden_guard.snapshot(GOLDEN_DIR))
    if changed:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        text = "a test wrote into tests/golden (copy golden data before writing to it):\n  " + "\n  ".join(
            changed[:20]
        )
        if reporter is not None:
            reporter.write_line(text, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_configure(config: pytest.Config) -> None:
    """Keep the workers' queue in the order ``pytest_collection_modifyitems`` gives it: xdist would
    otherwise sort the groups by their number of tests and hand the longest group, one test, out last."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Put each test in its xdist group (``tests/support/xdist_groups.py``); harmless without xdist.
    In an xdist worker, whose collection is the queue the workers share, the groups are also ordered
    longest first (``xdist_groups.schedule_key``), each group's tests kept in their order.

    ``tryfirst``: xdist's worker turns each test's ``xdist_group`` mark into the ``@group`` suffix of
    its node id in this same hook, and its plugin is registered after this file, so it ran first and
    found no mark: every test was a group of its own, and a module's fixtures (twenty JVMs for the
    Java scenarios, the many-topics replay, a SparkSession) were set up again in each worker."""
    groups: dict[str, str] = {}
    for item in items:
        mark = item.get_closest_marker("xdist_group")
        if mark is None:
            group = xdist_groups.group_of(item.nodeid, getattr(item, "fixturenames", ()))
            item.add_marker(pytest.mark.xdist_group(group))
        else:  # a group a test chose itself (xdist's own rule for the marker's name)
            group = str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
        groups[item.nodeid] = group
    if hasattr(config, "workerinput"):
        sizes = Counter(groups.values())
        items.sort(key=lambda item: xdist_groups.schedule_key(group := groups[item.nodeid], sizes[group]))
