"""Record what the real 4.9.7 broker does with a request's reply (issue 32; run by hand, about a minute):

    RMQ_ROCKETMQ_HOME=../shared/rocketmq-4.9.7-bin python tests/server/golden/record_request_reply.py

For each serialization of the replier's requests (JSON, then ROCKETMQ) it starts the real broker as
``record_consume_side.py`` does (a copy of ``../shared/rocketmq-4.9.7-bin``, a fresh temp store, no
name server, ``autoCreateTopicEnable=true``) and plays ``tests/support/request_reply.py``'s script:
SEND_REPLY_MESSAGE and SEND_REPLY_MESSAGE_V2 answers, the PUSH_REPLY_MESSAGE_TO_CLIENT frames the
broker sends the requesters, the replies it stored. Output:
``request_reply_4.9.7.json`` (``runs.JSON`` / ``runs.ROCKETMQ``, each a list of steps in
``consume_side``'s format, values normalised by its ``Normaliser``).
``tests/server/test_request_reply_golden.py`` replays it against ``serve --writable``.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, __file__.rsplit("/tests/", 1)[0])

from protocol.codes import SerializeType
from tests.server.golden.record_consume_side import BIN, Broker, free_port
from tests.support.consume_side import NORMALISED
from tests.support.request_reply import play

HERE = Path(__file__).resolve().parent
OUT_JSON = HERE / "request_reply_4.9.7.json"

BROKER_CONF = """\
autoCreateTopicEnable=true
transactionCheckInterval=600000
"""


def record(ser: SerializeType) -> list[dict]:
    """One run on a broker of its own (a fresh store: the offsets of one run do not depend on how
    far the other's delayed reply got)."""
    with tempfile.TemporaryDirectory(prefix="rmq-golden32-") as tmp:
        work = Path(tmp)
        root = work / "rmq"
        shutil.copytree(BIN, root, symlinks=True)
        store = work / "main" / "store"
        store.parent.mkdir(parents=True)
        (store.parent / "broker.conf").write_text(BROKER_CONF)
        port = free_port()
        broker = Broker(root, store, port)
        broker.start()
        try:
            return asyncio.run(play(port, ser))
        finally:
            broker.stop()


def main() -> int:
    runs = {ser.name: record(ser) for ser in (SerializeType.JSON, SerializeType.ROCKETMQ)}
    doc = {
        "recordedFrom": "Apache RocketMQ 4.9.7 broker (JDK 17, ../shared/rocketmq-4.9.7-bin), fresh store, "
        "no name server",
        "recorder": "tests/server/golden/record_request_reply.py",
        "brokerConf": BROKER_CONF,
        "header": NORMALISED,
        "runs": runs,
    }
    OUT_JSON.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {OUT_JSON}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
