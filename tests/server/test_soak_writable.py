"""Issue 18's done condition, bounded: ``benchmarks/soak_writable.py`` for 20 s with two or three kill -9s and
one full-disk cycle, then its checks (no acknowledged message lost, every one consumed, committed
offsets never ahead, fsck clean, the real 4.9.7 broker answering as ours).

The long version (10 minutes) is run by hand and recorded in RELIABILITY.md ("Soak (issue 18 done
condition)"). The second test feeds the soak's checks a loss, a misplaced message and an offset
committed ahead, so a report with empty problem lists means they were looked for.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from benchmarks.soak_writable import Acked, Soak
from tests.support.paths import REPO_ROOT
from tests.support.real_broker import RMQ_BIN

#: The soak's own bound: 20 s of chaos, start-ups, the drain, the checks and the broker's boot.
SOAK_TIMEOUT = 150


def test_a_short_soak_loses_nothing_and_the_broker_agrees(tmp_path: Path) -> None:
    work = tmp_path / "soak"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.soak_writable", "--minutes", str(20 / 60), "--store", str(work),
         "--disk-mib", "16", "--producers", "2", "--rate", "40", "--kill-every", "7", "--fill-every", "11",
         "--full-seconds", "3", "--consumer-restart", "6", "--new-topic-every", "5", "--slowloris", "5",
         "--hostile-pulls", "300", "--drain-seconds", "20", "--compare-keys", "1000"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=SOAK_TIMEOUT,
    )  # fmt: skip
    assert done.stdout, done.stderr[-3000:]
    report = json.loads(done.stdout)
    checks, stats = report["checks"], report["stats"]
    assert checks["problem_counts"] == dict.fromkeys(checks["problem_counts"], 0), checks["problems"]
    assert report["ok"] and done.returncode == 0
    assert stats["kills"] >= 2 and stats["unexpected_exits"] == []
    assert checks["acked"] > 300 and checks["acked"] == stats["sends_ok"]
    assert report["final_sigterm_exit"] == 0 and checks["fsck_last_line"] == "OK"
    if os.geteuid() == 0:  # mounting the tmpfs needs root
        assert report["disk"]["tmpfs"] and stats["disk_full_cycles"] == 1
        assert stats["refused_disk_full"] > 0, "the disk never refused a SEND"
    if shutil.which("java") and RMQ_BIN.is_dir():
        assert checks["real_broker"]["keys_compared"] > 300
        assert checks["real_broker"]["committed_compared"] == 16
    else:
        assert "skipped" in checks["real_broker"]


def _soak(tmp_path: Path) -> Soak:
    args = argparse.Namespace(seed=1, groups=1, producers=1, rate=0.0, new_topic_every=0.0)
    return Soak(args, tmp_path, tmp_path / "disk", tmpfs=False)


def test_the_checks_find_a_loss_a_misplaced_message_and_an_offset_committed_ahead(tmp_path: Path) -> None:
    soak = _soak(tmp_path)
    soak.acked = [
        Acked("SoakA", "k0", "u0", "7F00000100002A9F0000000000000000", 0, 0),
        Acked("SoakA", "k1", "u1", "7F00000100002A9F0000000000000100", 0, 1),
        Acked("SoakA", "k2", "u2", "7F00000100002A9F0000000000000200", 0, 2),
        Acked("SoakB", "k3", "u3", "7F00000100002A9F0000000000000200", 1, 0),  # k2's CommitLog offset
    ]
    got = soak.received["SoakGroup0"]
    got[("SoakA", 0, 0)] += ["k0", "k0"]  # received twice: a duplicate, not a problem
    got[("SoakA", 0, 2)].append("other")  # k2's position delivered another message
    consumed, duplicates = soak._check_consumed()
    assert consumed == [
        "SoakGroup0 never received k1 (SoakA/0@1)",
        "SoakGroup0 received ['other'] at SoakA/0@2, acknowledged for k2",
        "SoakGroup0 never received k3 (SoakB/1@0)",
    ]
    assert duplicates == {"SoakGroup0": 1}
    assert soak._check_unique() == ["k3 and k2 were both acknowledged at CommitLog offset 512"]
    committed = [[0, "3"]] + [[22, None]] * 7  # SoakA/0 committed at 3: position 1 never received
    assert soak._check_committed({"SoakGroup0": committed}) == [
        "SoakGroup0 SoakA/0: committed 3, never received [1]"
    ]
    soak.journal.close()
