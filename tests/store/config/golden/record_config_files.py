"""Record the config files the real 4.9.7 broker writes, for ``test_config_golden.py``.

Runs the real broker (``tests/support/real_broker.py``) on an empty store, does over raw requests
what ``tests/server/test_store_handover.py`` does on its side (two topics created by
UPDATE_AND_CREATE_TOPIC, one of them read-only, a group with settings of its own, SENDs, offsets of
two groups, heartbeats that auto-create groups and their ``%RETRY%`` topics), stops it with SIGTERM
and copies ``config/{topics,subscriptionGroup,consumerOffset}.json`` here. Needs Java::

    python -m tests.store.config.golden.record_config_files
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from pathlib import Path

from protocol.codes import RequestCode
from tests.support.handover import COMMITTED, QUEUES, TOPIC, commit, heartbeat_body, ok, send
from tests.support.harness import RawClient
from tests.support.real_broker import copy_rmq, real_broker

HERE = Path(__file__).parent
FILES = ("topics.json", "subscriptionGroup.json", "consumerOffset.json")


async def drive(port: int) -> None:
    client = await RawClient.connect("127.0.0.1", port)
    try:
        create = {"topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": "8", "writeQueueNums": "8",
                  "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0",
                  "order": "false"}  # fmt: skip
        await ok(client, RequestCode.UPDATE_AND_CREATE_TOPIC, create)
        read_only = {**create, "topic": "ReadOnlyTopic", "readQueueNums": "2", "writeQueueNums": "2",
                     "perm": "4"}  # fmt: skip
        await ok(client, RequestCode.UPDATE_AND_CREATE_TOPIC, read_only)
        group = {"groupName": "GroupB", "consumeEnable": True, "consumeFromMinEnable": True,
                 "consumeBroadcastEnable": False, "retryQueueNums": 1, "retryMaxTimes": 5, "brokerId": 0,
                 "whichBrokerWhenConsumeSlowly": 1, "notifyConsumerIdsChangedEnable": True}  # fmt: skip
        await ok(client, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, json.dumps(group).encode())
        for queue_id in range(QUEUES):
            await send(client, TOPIC, queue_id, b"m")
        for name, queues in COMMITTED.items():
            for queue_id, offset in queues.items():
                await commit(client, name, TOPIC, queue_id, offset)
        for name in ("GroupA", "GroupB", "GroupC"):
            await ok(client, RequestCode.HEART_BEAT, None, heartbeat_body("c1", name, TOPIC))
    finally:
        await client.close()


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        with real_broker(copy_rmq(Path(tmp)), store) as broker:
            asyncio.run(drive(broker.port))
        for name in FILES:
            shutil.copyfile(store / "config" / name, HERE / name)
            print("recorded", HERE / name)


if __name__ == "__main__":
    main()
