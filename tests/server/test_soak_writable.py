"""Issue 18's done condition, bounded: ``benchmarks/soak_writable.py`` for 20 s with two or three kill -9s and
one full-disk cycle, then its checks (no acknowledged message lost, every one consumed, committed
offsets never ahead, fsck clean, the real 4.9.7 broker answering as ours).

The long version (10 minutes) is run by hand and recorded in RELIABILITY.md ("Soak (issue 18 done
condition)"). The second test feeds the soak's checks a loss, a misplaced message and an offset
committed ahead, so a report with empty problem lists means they were looked for.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from benchmarks.soak_attacks import ATTACKS, FUZZED, Attacks
from benchmarks.soak_writable import Acked, Soak
from server.broker.creation_limits import DEFAULT_MAX_PER_CONNECTION
from tests.support.paths import HAVE_ROCKETMQ, REPO_ROOT
from tests.support.serve_process import start_writable_grpc

#: The soak's own bound: 20 s of chaos (longer under load, until the second kill -9: at most one more
#: kill interval and start-up), start-ups, the drain, the checks and the broker's boot.
SOAK_TIMEOUT = 240


def test_a_short_soak_loses_nothing_and_the_broker_agrees(tmp_path: Path) -> None:
    work = tmp_path / "soak"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.soak_writable", "--minutes", str(20 / 60), "--store", str(work),
         "--disk-mib", "16", "--producers", "2", "--rate", "40", "--kill-every", "7", "--min-kills", "2",
         "--fill-every", "11",
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
    if shutil.which("java") and HAVE_ROCKETMQ:
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


class _Target:
    """``soak_writable.Server`` as the attacks see it, for one ``serve --writable`` child."""

    def __init__(self, pid: int, port: int, endpoints: dict[str, str]) -> None:
        self.port, self._pid, self._endpoints = port, pid, endpoints
        self.lock = asyncio.Lock()
        self.up = asyncio.Event()
        self.up.set()

    def endpoint(self, name: str) -> str | None:
        return self._endpoints.get(name)

    def pid(self) -> int | None:
        return self._pid


async def test_one_round_of_each_issue_31_attack_is_answered_as_refused(tmp_path: Path) -> None:
    """The soak's ``--attacks`` rounds, once each against one server: what they count is what the
    server's defences answer (the caps, 421 and 403, the eviction, the gRPC size refusal), and no
    fuzzed frame is left unanswered. No file is full yet, which the overwrite round says."""
    store = tmp_path / "store"
    args = ("--max-connections", "16", "--http", "0", "--grpc-port", "0")
    proc, port, grpc_port = await start_writable_grpc(store, *args, log=tmp_path / "serve.log")
    try:
        assert proc.stdout is not None
        http_url = (await asyncio.wait_for(proc.stdout.readline(), 20)).decode().strip()
        assert http_url.startswith("HTTP_URL=")
        endpoints = {"HTTP_URL": http_url.split("=", 1)[1], "GRPC_ENDPOINTS": f"127.0.0.1:{grpc_port}"}
        options = argparse.Namespace(
            seed=1, attack_pause=0.0, planted_groups=1200, heartbeat_groups=1500, idle_holders=16,
            overwrite_seconds=2.0, grpc_calls=3, grpc_mib=5.0,
        )  # fmt: skip
        attacks = Attacks(ATTACKS, _Target(proc.pid, port, endpoints), store, [], ["SoakA", "SoakB"], options)
        for name in ATTACKS:
            attacks.rounds += 1
            await asyncio.wait_for(attacks.round_of(name)(), 60)
    finally:
        proc.terminate()
        assert await asyncio.wait_for(proc.wait(), 20) == 0
    counts = attacks.report()
    share = DEFAULT_MAX_PER_CONNECTION
    assert counts["planted-groups"] == {"code 0": share, "code 26": 1200 - share}
    assert counts["heartbeat-groups"] == {"code 0": 1}
    assert sum(counts["nested-json"].values()) == len(FUZZED)
    assert all(k.startswith("code ") for k in counts["nested-json"]), counts["nested-json"]
    assert counts["http-rebind"] == {
        "read 200": 1, "rebound read 421": 1, "rebound resend 421": 1,
        "resend without token 403": 1, "resend from another origin 403": 1,
    }  # fmt: skip
    idle = counts["idle-holders"]
    assert idle["fresh code 0"] == 5 and idle["holders closed by the server"] >= 1, idle
    assert counts["grpc-large"] == {"MESSAGE_BODY_TOO_LARGE": 3}
    assert counts["server_rss_peak_mib"] > 0
    assert counts["overwrite-files"] == {"index: no full file yet": 1, "consume queue: no full file yet": 1}
    assert attacks.problems == []
    kept = attacks.kept(store / "config")
    assert kept["planted groups in consumerOffset.json"] == share
    # The heartbeat's groups and their %RETRY% topics share the one connection's creations.
    groups, retry = (
        kept["heartbeat groups in subscriptionGroup.json"],
        kept["heartbeat retry topics in topics.json"],
    )
    assert groups + retry == share and groups > 0, kept
    assert "Traceback" not in (tmp_path / "serve.log").read_text(errors="replace")
