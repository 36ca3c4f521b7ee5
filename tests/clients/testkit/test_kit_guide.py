"""The test kit guide's (docs/testkit.md) script for the kit without pytest, run as written.

It runs in a child Python with pytest and every optional library hidden (``sys.modules[name] =
None``), as on a base install of ``rmq-query`` with no extra: the kit's server, client, consumer and
writer must need none of them.
"""

from __future__ import annotations

import re
import subprocess
import sys

from tests.support.paths import REPO_ROOT

HIDDEN = ("pytest", "grpc", "google.protobuf", "rocketmq", "cryptography", "aiohttp", "prometheus_client")


def _guide_script() -> str:
    guide = (REPO_ROOT / "docs" / "testkit.md").read_text(encoding="utf-8")
    section = guide.split("\n## Without pytest: RmqServer and its helpers", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    return block


def test_the_guides_script_without_pytest_runs_on_a_base_install() -> None:
    prelude = f"import sys\nfor name in {HIDDEN!r}: sys.modules[name] = None\n"
    done = subprocess.run(
        [sys.executable, "-c", prelude + _guide_script()],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert re.fullmatch(r"name server and broker at 127\.0\.0\.1:\d+", lines[0]), lines
    assert lines[-1] == "kit example passed"
