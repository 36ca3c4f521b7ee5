"""``serve --store A --store B``: the stores of a cluster, each served read-only as the broker its
broker.conf names, under one name server: a key present in both stores is found in both through
the one address (by ``mqadmin queryMsgByKey``, which asks every broker of the route)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from clients.testkit.cluster import RmqCluster
from clients.testkit.demo import write_broker_conf
from tests.support import mqadmin_batch
from tests.support.paths import REPO_ROOT, ROCKETMQ_SKIP_REASON

LINE = re.compile(r"^(NAMESRV_ADDR|BROKER_ADDR)=(.+)$")


def two_stores(root: Path) -> list[Path]:
    """Stores broker-a and broker-b, a message with the key ``shared-key`` in each, with broker.conf."""
    with RmqCluster(root, brokers=2) as cluster:
        cluster.writer("broker-a").add("Kept", "in a", keys="shared-key")
        cluster.writer("broker-b").add("Kept", "in b", keys="shared-key")
        configs = [store.config for store in cluster.stores]
    for config in configs:
        write_broker_conf(config)
    return [config.store_path_root_dir for config in configs]


def serve(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "clients.cli", "serve", "--port", "0", "--http", "off", *args],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.skipif(not mqadmin_batch.available(), reason=ROCKETMQ_SKIP_REASON)
def test_a_key_in_two_stores_is_found_in_both_through_one_address(tmp_path: Path) -> None:
    a, b = two_stores(tmp_path / "kept")
    proc = serve("--store", str(a), "--store", str(b))
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline().strip() for _ in range(3)]
        found = [LINE.match(line) for line in lines]
        assert all(found), [*lines, proc.stderr.read() if proc.poll() is not None else ""]  # type: ignore[union-attr]
        namesrv = found[0].group(2)  # type: ignore[union-attr]
        assert sorted(m.group(2).split("=")[0] for m in found[1:]) == ["broker-a", "broker-b"]  # type: ignore[union-attr]
        (output,) = mqadmin_batch.run_batch(
            tmp_path / "mqadmin", [["queryMsgByKey", "-n", namesrv, "-t", "Kept", "-k", "shared-key"]]
        )
        assert len(re.findall(r"^[0-9A-F]{32}\s", output, re.MULTILINE)) == 2, output
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0


def test_two_stores_of_one_broker_name_are_refused_with_a_message(tmp_path: Path) -> None:
    a, b = two_stores(tmp_path / "kept")
    (b / "broker.conf").write_text(
        (b / "broker.conf").read_text().replace("brokerName=broker-b", "brokerName=broker-a")
    )
    done = subprocess.run(
        [sys.executable, "-m", "clients.cli", "serve", "--port", "0", "--store", str(a), "--store", str(b)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2
    assert "two stores would be broker broker-a: name each with --broker-name" in done.stderr
    assert "Traceback" not in done.stderr


def test_broker_names_must_match_the_stores(tmp_path: Path) -> None:
    a, b = two_stores(tmp_path / "kept")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "clients.cli",
            "serve",
            "--port",
            "0",
            "--store",
            str(a),
            "--store",
            str(b),
            "--broker-name",
            "only-one",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2
    assert "1 --broker-name for 2 --store" in done.stderr
