"""The real 4.9.7 broker as a child process, for tests that hand a store between it and ours.

The broker runs from a copy of the real 4.9.7 in ``RMQ_ROCKETMQ_HOME`` (its scripts write beside
themselves, and the shared folder is read-only in CI) through ``bin/start-broker.sh STORE PORT
NAMESRV``, on free loopback ports, with a name server nobody listens on (the broker only logs
warnings; raw requests go to its own port). ``RMQ_REGISTER_STORE_TOPICS=0`` keeps the harness from
adding topics it infers from ``consumequeue/`` directories: a handover test must see what the
store's ``config/topics.json`` says, nothing else. Start-up is waited for by the broker's
"boot success" line, stop is a SIGTERM (its shutdown hook persists offsets and removes ``abort``),
both bounded; a broker left running by a failing test is killed by its pid.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.paths import HAVE_ROCKETMQ, ROCKETMQ_HOME, ROCKETMQ_SKIP_REASON

RMQ_BIN = ROCKETMQ_HOME

#: Seconds the broker gets to boot (about 10 s on a busy 2-core machine) or to stop.
JAVA_TIMEOUT = 60

needs_java = pytest.mark.skipif(
    shutil.which("java") is None or not HAVE_ROCKETMQ,
    reason=ROCKETMQ_SKIP_REASON,
)


def free_broker_port() -> int:
    """A port P with P - 2 (the broker's VIP channel) and P + 1 (its HA port) free as well."""
    for _ in range(100):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        try:
            for p in (port - 2, port, port + 1):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
        except OSError:
            continue
        return port
    raise OSError("no free port triple")


def copy_rmq(into: Path) -> Path:
    """A private copy of the prebuilt 4.9.7 (its ``bin`` writes logs beside itself)."""
    rmq = into / "rmq"
    if not rmq.is_dir():
        shutil.copytree(RMQ_BIN, rmq)
    return rmq


class RealBroker:
    """A running broker: its process, port and log."""

    def __init__(self, proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
        self.proc = proc
        self.port = port
        self.log = log

    def stop(self) -> int:
        """SIGTERM, then wait (bounded) for the shutdown hook to finish; the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(JAVA_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                pytest.fail(f"the broker did not stop in {JAVA_TIMEOUT} s after SIGTERM")
        return self.proc.returncode


@contextmanager
def real_broker(rmq: Path, store: Path) -> Iterator[RealBroker]:
    """The real broker serving ``store`` for the block, stopped by SIGTERM after it (killed if a
    failure left it running). ``store``'s parent gets the broker's logs (and its ``broker.conf``, if
    there is one, is read by ``start-broker.sh``)."""
    port = free_broker_port()
    log = store.parent / f"broker-{port}.out"
    env = {**os.environ, "RMQ_REGISTER_STORE_TOPICS": "0"}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(rmq / "bin" / "start-broker.sh"), str(store), str(port), f"127.0.0.1:{free_broker_port()}"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    broker = RealBroker(proc, port, log)
    try:
        deadline = time.monotonic() + JAVA_TIMEOUT
        while "boot success" not in log.read_text(errors="replace"):
            if proc.poll() is not None:
                pytest.fail(f"the broker exited ({proc.returncode}):\n{log.read_text(errors='replace')}")
            if time.monotonic() > deadline:
                pytest.fail(f"the broker did not boot in {JAVA_TIMEOUT} s")
            time.sleep(0.2)
        yield broker
        assert broker.stop() in (0, 143), log.read_text(errors="replace")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
