"""Record what the real 4.9.7 broker does with a second END_TRANSACTION for the same half message (issue 31,
item 6; run by hand, about 30 s):

    python tests/server/golden/record_end_transaction_twice.py

It starts the real broker as ``record_consume_side.py`` does (a copy of ``../shared/rocketmq-4.9.7-bin``,
a fresh temp store, no name server; the check-back interval is ten minutes so no check-back runs
during the script) and, with JSON headers, sends two half messages to ``TxTwiceTopic`` queue 0, then:
commit A, commit A again, roll A back after the commits; roll B back, commit B after the rollback.
Each END_TRANSACTION is sent as a request (not oneway) so the broker's answer is kept. Last, the topic's
max offset in queue 0 (GET_MAX_OFFSET) says how many real messages the broker wrote.

The script is ``tests/support/end_transaction_twice.py``'s ``play``, shared with the replay. Output:
``end_transaction_twice_4.9.7.json`` (the steps in ``consume_side``'s format, values normalised by its
``Normaliser``). ``tests/server/test_end_transaction_twice.py`` replays it: our server
answers what the broker answers where the broker is right, and deliberately stores no second copy.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, __file__.rsplit("/tests/", 1)[0])

from tests.server.golden.record_consume_side import BIN, Broker, free_port
from tests.support.consume_side import NORMALISED
from tests.support.end_transaction_twice import play

HERE = Path(__file__).resolve().parent
OUT_JSON = HERE / "end_transaction_twice_4.9.7.json"

BROKER_CONF = """\
autoCreateTopicEnable=true
transactionCheckInterval=600000
transactionTimeOut=600000
"""


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="rmq-golden31-") as tmp:
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
            steps = asyncio.run(play(port))
        finally:
            broker.stop()
    doc = {
        "recordedFrom": "Apache RocketMQ 4.9.7 broker (JDK 17, ../shared/rocketmq-4.9.7-bin), fresh store, "
        "no name server",
        "recorder": "tests/server/golden/record_end_transaction_twice.py",
        "brokerConf": BROKER_CONF,
        "header": NORMALISED,
        "steps": steps,
    }
    OUT_JSON.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {OUT_JSON}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
