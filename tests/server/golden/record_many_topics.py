"""Record what the real 4.9.7 broker answers on a many-topic store (issue 30; run by hand, about a
minute):

    python tests/server/golden/record_many_topics.py

It starts the real broker as ``record_consume_side.py`` does (a copy of ``../shared/rocketmq-4.9.7-bin``,
a fresh temp store, no name server: ``127.0.0.1:1``; ``broker.conf`` below) and plays
``tests/support/many_topics.py``'s script: 3,000 topics and 3,000 subscription groups created one
request at a time, some updated, deleted and created again, messages sent to 30 topics and to two
topics the send creates, then GET_TOPIC_STATS_INFO of 15 topics, GET_ALL_TOPIC_CONFIG and
GET_ALL_SUBSCRIPTIONGROUP_CONFIG (the module's docstring lists the steps in order). Then its
``config/topics.json`` and ``config/subscriptionGroup.json`` are copied (before the broker is stopped:
see ``main``) and the broker is stopped (SIGTERM). Last, the broker is started again on the same
store and its GET_ALL_TOPIC_CONFIG and GET_ALL_SUBSCRIPTIONGROUP_CONFIG kept (``afterRestart``: the
tables as it loads them; its stop had added ``RMQ_SYS_TRANS_HALF_TOPIC``).

Outputs, all gzip (``mtime`` 0, so the same data gives the same bytes), verbatim, nothing normalised:
``many_topics_4.9.7.json.gz`` (``play``'s result: every answer's code and remark, the bodies) and
``broker_config_many_topics_4.9.7/{topics,subscriptionGroup}.json.gz``. The replay
(``tests/server/test_many_topics_golden.py``) blanks only the clock's values (``many_topics.normalised``).
"""

from __future__ import annotations

import asyncio
import gzip
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, __file__.rsplit("/tests/", 1)[0])

from tests.server.golden.record_consume_side import BIN, Broker, free_port
from tests.support.many_topics import all_configs, play

HERE = Path(__file__).resolve().parent
OUT_JSON = HERE / "many_topics_4.9.7.json.gz"
OUT_CONFIG = HERE / "broker_config_many_topics_4.9.7"
CONFIG_FILES = ("topics.json", "subscriptionGroup.json")

#: ``transactionCheckInterval``: the broker's first transaction check creates
#: ``RMQ_SYS_TRANS_HALF_TOPIC`` (a minute after start by default, which a first recording caught in
#: ``topics.json`` after the script's GET_ALL_TOPIC_CONFIG); ten minutes keeps it out of the run.
BROKER_CONF = """\
autoCreateTopicEnable=true
transactionCheckInterval=600000
"""


def write_gzip(path: Path, data: bytes) -> None:
    path.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="rmq-golden30-") as tmp:
        work = Path(tmp)
        root = work / "rmq"
        shutil.copytree(BIN, root, symlinks=True)
        store = work / "main" / "store"
        store.parent.mkdir(parents=True)
        (store.parent / "broker.conf").write_text(BROKER_CONF)
        port = free_port()
        broker = Broker(root, store, port)
        broker.start()
        started = time.monotonic()
        try:
            result = asyncio.run(play(port))
            # taken while the broker runs: it writes both files before answering each change, and
            # its clean stop would add RMQ_SYS_TRANS_HALF_TOPIC (stopping wakes the transaction
            # check service, whose one last check creates the half topic; seen in a first recording)
            files = {name: (store / "config" / name).read_bytes() for name in CONFIG_FILES}
        finally:
            broker.stop()
        print(f"played in {time.monotonic() - started:.1f} s", file=sys.stderr)
        # the same store started again: the tables as the broker loads them from its files
        broker = Broker(root, store, port)
        broker.start()
        try:
            result["afterRestart"] = asyncio.run(all_configs(port))
        finally:
            broker.stop()
    doc = {
        "recordedFrom": "Apache RocketMQ 4.9.7 broker (JDK 17, ../shared/rocketmq-4.9.7-bin), fresh store, "
        "no name server",
        "recorder": "tests/server/golden/record_many_topics.py",
        "script": "tests/support/many_topics.py",
        "brokerConf": BROKER_CONF,
        **result,
    }
    write_gzip(OUT_JSON, (json.dumps(doc, indent=0, ensure_ascii=False) + "\n").encode())
    OUT_CONFIG.mkdir(exist_ok=True)
    for name, data in files.items():
        write_gzip(OUT_CONFIG / f"{name}.gz", data)
    print(f"wrote {OUT_JSON} and {OUT_CONFIG}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
