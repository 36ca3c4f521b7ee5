"""Record what the real 4.9.7 broker answers to time-range key queries over a hot key (run by hand).

    python tests/server/golden/record_hot_window.py > tests/server/golden/hot_window_4.9.7.json

Writes the store of ``tests/support/hot_window.py`` (the same bytes every time: its sha256 is kept
in the file, and the replay checks it rebuilt that very store) into a temporary directory with its
geometry in ``broker.conf`` beside it, starts the real broker from ``../shared/rocketmq-4.9.7-bin``
on it (name server ``127.0.0.1:1``: none is needed for QUERY_MESSAGE), sends QUERY_MESSAGE for every
(maxNum, begin, end) of ``windows()`` as the Java client sends it, and keeps per query the response
code, both ``indexLastUpdate`` fields and each returned record's CommitLog offset and raw sha256.
The broker is stopped by its pid (SIGTERM). ``tests/store/index/test_time_window.py`` replays it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, __file__.rsplit("/tests/", 1)[0])

from protocol.codes import RequestCode
from tests.support.harness import RawClient
from tests.support.hot_window import BROKER_CONF, HOT, TOPIC, fingerprint, windows, write_hot_window_store
from tests.support.java_scenarios import JAVA_BIN, _wait_for, free_port_triple


def _records(body: bytes) -> list[list[object]]:
    out: list[list[object]] = []
    pos = 0
    while pos + 4 <= len(body):
        size = int.from_bytes(body[pos : pos + 4], "big")
        raw = body[pos : pos + size]
        out.append([int.from_bytes(raw[28:36], "big"), hashlib.sha256(raw).hexdigest()])
        pos += size
    return out


async def _ask(port: int, queries: list[tuple[int, int, int]]) -> list[dict[str, object]]:
    client = await RawClient.connect("127.0.0.1", port)
    answers: list[dict[str, object]] = []
    try:
        for max_num, begin, end in queries:
            fields = {"topic": TOPIC, "key": HOT, "maxNum": str(max_num), "beginTimestamp": str(begin),
                      "endTimestamp": str(end)}  # fmt: skip
            answer = await client.call(RawClient.request(RequestCode.QUERY_MESSAGE, fields))
            ext = answer.ext_fields or {}
            answers.append(
                {
                    "topic": TOPIC,
                    "key": HOT,
                    "maxNum": max_num,
                    "begin": begin,
                    "end": end,
                    "code": answer.code,
                    "indexLastUpdateTimestamp": ext.get("indexLastUpdateTimestamp"),
                    "indexLastUpdatePhyoffset": ext.get("indexLastUpdatePhyoffset"),
                    "records": _records(bytes(answer.body or b"")),
                }
            )
    finally:
        await client.close()
    return answers


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="hot-window-") as tmp:
        root = Path(tmp)
        config = write_hot_window_store(root / "store")
        store_sha = fingerprint(config)
        queries = windows(config)
        (root / "broker.conf").write_text(BROKER_CONF)
        port = free_port_triple()
        log = root / "broker.out"
        with open(log, "wb") as out:
            broker = subprocess.Popen(
                [str(JAVA_BIN / "bin" / "start-broker.sh"), str(root / "store"), str(port), "127.0.0.1:1"],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            _wait_for(log, "boot success", timeout=120)
            answers = asyncio.run(_ask(port, queries))
        finally:
            broker.send_signal(signal.SIGTERM)
            broker.wait(60)
    source = "Apache RocketMQ 4.9.7 broker (JDK 17) over the store of tests/support/hot_window.py"
    sys.stdout.write(f'{{"recordedFrom": "{source}",\n')
    sys.stdout.write(f' "storeSha256": "{store_sha}",\n "queries": [\n')
    sys.stdout.write(",\n".join("  " + json.dumps(a) for a in answers))
    sys.stdout.write("\n ]}\n")


if __name__ == "__main__":
    main()
