"""The pytest plugin: cheap to import, its fixtures work, and the kit guide's example tests pass with it.

The example tests are taken from the test kit guide's (docs/testkit.md) "pytest fixtures" section and
run in a child pytest with the plugin loaded by name (``-p clients.testkit.pytest_plugin``; the
installed entry point's copy is blocked so the module is not registered twice).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from clients.testkit.server import RmqClient, RmqServer, RmqWriter, kit_store_config
from tests.support.paths import REPO_ROOT


def _readme_example() -> str:
    guide = (REPO_ROOT / "docs" / "testkit.md").read_text(encoding="utf-8")
    section = guide.split("\n## pytest fixtures", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    return block


def test_importing_the_plugin_loads_nothing_of_the_project_but_itself() -> None:
    code = (
        "import sys; before = set(sys.modules); import clients.testkit.pytest_plugin; "
        "new = set(sys.modules) - before; "
        "roots = ('clients', 'server', 'store', 'protocol', 'msgspec'); "
        "print(sorted(m for m in new if m.split('.')[0] in roots))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "['clients', 'clients.testkit', 'clients.testkit.pytest_plugin']"


def test_readme_example_tests_pass_with_the_plugin(tmp_path: Path) -> None:
    (tmp_path / "test_example.py").write_text(_readme_example(), encoding="utf-8")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:rmq_query",
            "-p",
            "clients.testkit.pytest_plugin",
            "--rootdir",
            str(tmp_path),
            str(tmp_path / "test_example.py"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert "5 passed" in done.stdout, done.stdout + done.stderr


def test_a_fresh_server_writes_only_a_handful_of_small_files(tmp_path: Path) -> None:
    """Start-up is bounded by work, not time: a fresh store is five small files and no CommitLog."""
    server = RmqServer(kit_store_config(tmp_path / "s"))
    try:
        files = {p.name: p.stat().st_size for p in (tmp_path / "s").rglob("*") if p.is_file()}
        assert set(files) == {"checkpoint", "topics.json", "lock", "abort"}
        assert sum(files.values()) < 16 * 1024
        client, writer = RmqClient(server), RmqWriter(server)
        sent = client.send("Kit", "via SEND", keys="kit-1")
        stored = writer.add("Kit", b"\x00direct", keys="kit-2", store_timestamp=1_800_000_000_000)
        assert [m.body for m in client.query_by_key("Kit", "kit-1")] == [b"via SEND"]
        assert [m.unique_key for m in client.query_by_key("Kit", "kit-2")] == [stored.unique_key]
        assert client.view(sent.offset_msg_id).body == b"via SEND"
        assert client.query_by_key("Kit", "absent") == []
        assert client.query_by_key("NeverSent", "absent") == []  # no route yet: nothing found
        assert client.query_by_unique_key("Kit", "0A0000010000000000000000000000FF") == []
    finally:
        server.close()
    assert not (tmp_path / "s" / "abort").exists()


def test_startup_is_well_under_a_second(tmp_path: Path) -> None:
    """About 15-20 ms on the 2-core CI machine (store, topic table, both ports, the thread); the bound
    is a second per start, 50x that, so a loaded machine does not make it flaky."""
    import time

    started = time.perf_counter()
    for i in range(3):
        RmqServer(kit_store_config(tmp_path / f"s{i}")).close()
    assert (time.perf_counter() - started) / 3 < 1.0
