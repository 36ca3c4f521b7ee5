"""Record what the real 4.9.7 broker answers to the consume-side request codes of issue #19 (run by hand).

    python tests/server/golden/record_consume_side.py          # writes the two outputs below
    python tests/server/golden/record_consume_side.py --check  # record again, compare, write nothing

It copies ``../shared/rocketmq-4.9.7-bin`` to a temp dir, starts its ``bin/start-broker.sh`` on a fresh
temp store (``broker.conf``: a short ``transactionCheckInterval`` so a check-back comes within seconds;
half messages carry a real born time, since the check-back immunity, ``transactionTimeOut``, counts
from it: the UNKNOW one's is 2.7 s after the delayed send-back, see ``consume_side``; no name
server: ``127.0.0.1:1``) and plays one scripted sequence per serialization (JSON, then ROCKETMQ
headers; each with its own topic, groups and client ids so the two do not see each other's state).
Every request and answer is kept (code, ext fields in wire order, remark, body), and so is every
request the broker sends to our connections (NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE,
RESET_CONSUMER_CLIENT_OFFSET, relayed CONSUME_MESSAGE_DIRECTLY and GET_CONSUMER_RUNNING_INFO, which our
fake consumer answers). Values that differ between runs are normalised (see ``NORMALISED``), so a second
recording gives the same file.

Outputs: ``consume_side_broker_4.9.7.json`` and, after a clean stop (SIGTERM), the broker's own
``config/{topics,subscriptionGroup,consumerOffset}.json`` (+ ``.bak``) verbatim in
``broker_config_4.9.7/``. Then the broker is started on stores holding config files it did not
write (``FOREIGN_FILES``) and what it makes of them is kept in the JSON's ``foreignConfigFiles``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, __file__.rsplit("/tests/", 1)[0])

from protocol.codes import RequestCode as R
from protocol.codes import SerializeType
from tests.support.consume_side import NORMALISED, Conn, Normaliser, Recorder
from tests.support.harness import RawClient
from tests.support.paths import rocketmq_home

HERE = Path(__file__).resolve().parent
OUT_JSON = HERE / "consume_side_broker_4.9.7.json"
OUT_CONFIG = HERE / "broker_config_4.9.7"
BIN = rocketmq_home()

BROKER_CONF = """\
autoCreateTopicEnable=true
autoCreateSubscriptionGroup=true
transactionCheckInterval=2000
transactionTimeOut=6000
transactionCheckMax=15
flushConsumerOffsetInterval=1000
"""


# ---------------------------------------------------------------------------------------- broker


def free_port() -> int:
    """A port p with p-2 and p+1 also free (the broker binds all three)."""
    for base in range(24911, 30000, 10):
        ok = True
        for p in (base, base - 2, base + 1):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
        if ok:
            return base
    raise RuntimeError("no free port")


class Broker:
    def __init__(self, root: Path, store: Path, port: int) -> None:
        self.root, self.store, self.port = root, store, port
        self.log = store.parent / f"broker-{port}.out"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        out = self.log.open("wb")
        self.proc = subprocess.Popen(
            [
                "bash",
                str(self.root / "bin" / "start-broker.sh"),
                str(self.store),
                str(self.port),
                "127.0.0.1:1",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if b"boot success" in self.log.read_bytes():
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited: {self.log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.3)
        self.stop()
        raise RuntimeError("broker did not boot within 120 s")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# ------------------------------------------------------------------------------ foreign config files

OFFSETS_COMPACT_QUOTED = '{"offsetTable":{"TopicF@GroupF":{"0":5,"1":7},"TopicF@GroupG":{"2":9}}}'
OFFSETS_PRETTY_UNQUOTED_REORDERED = """{
  "offsetTable": {
    "TopicF@GroupG": {
      2: 9
    },
    "TopicF@GroupF": {
      1: 7,
      0: 5
    }
  }
}"""
OFFSETS_EXTRA_FIELD_STRING_VALUES = '{"offsetTable":{"TopicF@GroupF":{"0":"5","1":"7"}},"extra":1}'
GROUPS_COMPACT_REORDERED = (
    '{"subscriptionGroupTable":{"GroupF":{"retryMaxTimes":3,"groupName":"GroupF","consumeEnable":false}},'
    '"dataVersion":{"timestamp":1700000000000,"counter":5}}'
)
GROUPS_PRETTY_PARTIAL = """{
  "dataVersion": {"counter": 2, "timestamp": 1700000000000},
  "subscriptionGroupTable": {
    "GroupG": {"groupName": "GroupG"},
    "GroupH": {"groupName": "GroupH", "retryQueueNums": 4, "unknownField": true}
  }
}"""
GROUPS_NAME_MISMATCH = '{"subscriptionGroupTable":{"KeyName":{"groupName":"OtherName","retryMaxTimes":2}}}'

#: name → (consumerOffset.json, subscriptionGroup.json, put them as .bak instead of the main file)
FOREIGN_FILES: dict[str, tuple[str, str, bool]] = {
    "compact, quoted integer keys, fields reordered": (
        OFFSETS_COMPACT_QUOTED,
        GROUPS_COMPACT_REORDERED,
        False,
    ),
    "pretty, unquoted integer keys, entries reordered, partial group configs": (
        OFFSETS_PRETTY_UNQUOTED_REORDERED,
        GROUPS_PRETTY_PARTIAL,
        False,
    ),
    "string offsets and an unknown top-level field; group key differs from groupName": (
        OFFSETS_EXTRA_FIELD_STRING_VALUES,
        GROUPS_NAME_MISMATCH,
        False,
    ),
    "only the .bak files exist": (OFFSETS_COMPACT_QUOTED, GROUPS_COMPACT_REORDERED, True),
}


async def ask_foreign(port: int, n: Normaliser) -> list[dict[str, Any]]:
    conn = await Conn.open("admin", port)
    out = []
    try:
        for group, queue in (("GroupF", 0), ("GroupF", 1), ("GroupG", 2), ("GroupF", 3)):
            fields = {"consumerGroup": group, "topic": "TopicF", "queueId": str(queue)}
            answer = await conn.call(RawClient.request(R.QUERY_CONSUMER_OFFSET, fields))
            out.append(
                {
                    "request": {"code": int(R.QUERY_CONSUMER_OFFSET), "extFields": fields},
                    "answer": n.command(answer) if answer else None,
                }
            )
        answer = await conn.call(RawClient.request(R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))
        out.append(
            {
                "request": {"code": int(R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)},
                "answer": n.command(answer) if answer else None,
            }
        )
    finally:
        await conn.close()
    return out


# ------------------------------------------------------------------------------------------- main


def record(work: Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    root = work / "rmq"
    shutil.copytree(BIN, root, symlinks=True)
    port = free_port()
    store = work / "main" / "store"
    store.parent.mkdir(parents=True)
    (store.parent / "broker.conf").write_text(BROKER_CONF)
    broker = Broker(root, store, port)
    broker.start()
    try:
        runs = {}
        for ser in (SerializeType.JSON, SerializeType.ROCKETMQ):
            runs[ser.name] = asyncio.run(Recorder(port, ser).run())
    finally:
        broker.stop()
    files = {
        p.name: p.read_bytes()
        for p in sorted((store / "config").iterdir())
        if p.suffix in (".json", ".bak")
        and p.name.split(".")[0] in ("topics", "subscriptionGroup", "consumerOffset")
    }

    foreign = []
    for i, (name, (offsets, groups, as_bak)) in enumerate(FOREIGN_FILES.items()):
        fstore = work / f"foreign{i}" / "store"
        (fstore / "config").mkdir(parents=True)
        suffix = ".bak" if as_bak else ""
        (fstore / "config" / f"consumerOffset.json{suffix}").write_text(offsets)
        (fstore / "config" / f"subscriptionGroup.json{suffix}").write_text(groups)
        port_f = free_port()
        fb = Broker(root, fstore, port_f)
        fb.start()
        try:
            answers = asyncio.run(ask_foreign(port_f, Normaliser(port_f)))
        finally:
            fb.stop()
        foreign.append(
            {
                "case": name,
                "consumerOffset.json" + suffix: offsets,
                "subscriptionGroup.json" + suffix: groups,
                "answers": answers,
            }
        )
    doc = {
        "recordedFrom": "Apache RocketMQ 4.9.7 broker (JDK 17, ../shared/rocketmq-4.9.7-bin), fresh store, "
        "no name server",
        "recorder": "tests/server/golden/record_consume_side.py",
        "brokerConf": BROKER_CONF,
        "header": NORMALISED,
        "runs": runs,
        "foreignConfigFiles": foreign,
    }
    return doc, files


def main() -> int:
    check = "--check" in sys.argv
    with tempfile.TemporaryDirectory(prefix="rmq-golden19-") as tmp:
        doc, files = record(Path(tmp))
    text = json.dumps(doc, indent=1, ensure_ascii=False) + "\n"
    if check:
        same = OUT_JSON.read_text() == text
        print(
            "answers: same as the committed recording"
            if same
            else "answers: DIFFER from the committed recording"
        )
        if not same:
            Path(tempfile.gettempdir(), "consume_side_rerun.json").write_text(text)
            print(f"second recording kept in {tempfile.gettempdir()}/consume_side_rerun.json")
        return 0 if same else 1
    OUT_JSON.write_text(text)
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(OUT_CONFIG)
    OUT_CONFIG.mkdir()
    for name, data in files.items():
        (OUT_CONFIG / name).write_bytes(data)
    print(f"wrote {OUT_JSON} and {len(files)} files in {OUT_CONFIG}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("RMQ_REGISTER_STORE_TOPICS", "0")
    sys.exit(main())
