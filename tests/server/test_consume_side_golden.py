"""Issue #19: the consume-side script replayed against ``serve --writable``, answer by answer against
the real 4.9.7 broker's recording (``golden/consume_side_broker_4.9.7.json``).

The script, its fake clients and its normalisation are the recorder's own (``tests.support.
consume_side``), so any difference is the server's. Each step compares the answer's code, remark,
ext fields (in wire order: the recorder keeps it) and body, and what the server sent to each fake
client connection meanwhile (NOTIFY_CONSUMER_IDS_CHANGED, RESET_CONSUMER_CLIENT_OFFSET, relayed
CONSUME_MESSAGE_DIRECTLY and GET_CONSUMER_RUNNING_INFO). Where we answer differently on purpose the
step is in ``ALLOWED`` with the reason (and a line in RELIABILITY.md); the transaction steps are not
replayed yet (``NOT_REPLAYED``). After the sequence, with the server stopped, the config files it
wrote are compared with the broker's own (``golden/broker_config_4.9.7/``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from protocol.codes import SerializeType
from server.app import QueryServer, ServerSettings
from server.broker.writable_store import WritableStore
from server.remoting.write_path import write_path
from store.config.store_config import StoreConfig
from tests.support.consume_side import TRANSACTIONS_SKIPPED, Recorder

GOLDEN = Path(__file__).parent / "golden"
RECORDING = json.loads((GOLDEN / "consume_side_broker_4.9.7.json").read_text(encoding="utf-8"))

#: The transaction steps of the recording: END_TRANSACTION and the check-back are being built on
#: another branch (txn19); until they are merged these steps are left out of the replay.
NOT_REPLAYED_REASON = "transactions (END_TRANSACTION, check-back) are not built yet (branch txn19)"
FIRST_TX_STEP = "send half message (commit)"
LAST_TX_STEPS = (
    "end transaction: commit from the check-back",
    "broker check-back for the UNKNOW half message",
)

#: Where the broker answers with a Java exception's text about input it could not read (a JDK 17
#: NullPointerException for a missing header field or body, fastjson's JSONException for a body that
#: is not JSON), we keep our remark naming the field or the body: same code and serialization, the
#: remark says what is wrong instead of where the JVM tripped (RELIABILITY.md, "Null header fields").
JAVA_EXCEPTION_TEXT = "the broker's remark is a Java exception's text; ours names the missing field or body"

#: Steps where our answer differs from the broker's on purpose: (serialization or None for both,
#: step) -> why. Each reason has a line in RELIABILITY.md.
ALLOWED: dict[tuple[str | None, str], str] = {
    (None, "consumer list: no consumerGroup"): JAVA_EXCEPTION_TEXT,
    (None, "heartbeat: no body"): JAVA_EXCEPTION_TEXT,
    (None, "heartbeat: not JSON"): JAVA_EXCEPTION_TEXT,
    (None, "check client config: no body"): JAVA_EXCEPTION_TEXT,
    (None, "query offset: no queueId"): JAVA_EXCEPTION_TEXT,
    (None, "update offset: no commitOffset"): JAVA_EXCEPTION_TEXT,
    (None, "pull: missing queueOffset"): JAVA_EXCEPTION_TEXT,
    (None, "send back: no offset field"): JAVA_EXCEPTION_TEXT,
    (None, "lock: not JSON"): JAVA_EXCEPTION_TEXT,
    (None, "unlock: no body"): JAVA_EXCEPTION_TEXT,
    (None, "create subscription group: not JSON"): JAVA_EXCEPTION_TEXT,
    (None, "create subscription group: no body"): JAVA_EXCEPTION_TEXT,
    (None, "delete subscription group: no groupName"): JAVA_EXCEPTION_TEXT,
}

#: Fields an allowed step may differ in: anything else in it must still match.
ALLOWED_FIELDS = {"answer.remark"}

#: What the left-out transaction steps changed in the recorded answers after them: undone in the
#: expectation (step -> how), so the rest of those answers is still compared.
#: - the half topic's creation by the first half message bumped the topic table's data version;
#: - the committed messages (commit, then the check-back's commit) are queue 2's brokerOffset 2.
TRANSACTION_EFFECTS = {
    "all topic config": "dataVersion.counter - 1",
    "consume stats: group + topic": "CsTopic queue 2 brokerOffset 2 -> 0",
    "consume stats: group only": "CsTopic queue 2 brokerOffset 2 -> 0",
}


def without_transactions(step: dict[str, Any]) -> dict[str, Any]:
    """The recorded step as it would be without the transaction steps (``TRANSACTION_EFFECTS``)."""
    what = TRANSACTION_EFFECTS.get(step["step"])
    if what is None:
        return step
    step = json.loads(json.dumps(step))
    body = step["answer"]["body"]
    if what.startswith("dataVersion"):
        body["json"]["dataVersion"]["counter"] -= 1
    else:
        body["fastjson"] = re.sub(
            r'("queueId":2,"topic":"CsTopic_\w+"\}:\{"brokerOffset":)2,',
            r"\g<1>0,",
            body["fastjson"],
        )
    return step


#: ``consumeTps`` is a rate (varies per run); inside fastjson text (GET_CONSUME_STATS) it escaped
#: the recorder's normalisation, so it is blanked here, on both sides.
_TPS = re.compile(r'"consumeTps":[-0-9.E]+')


def blank_tps(step: dict[str, Any]) -> dict[str, Any]:
    body = (step.get("answer") or {}).get("body") or {}
    if "fastjson" in body:
        step = json.loads(json.dumps(step))
        step["answer"]["body"]["fastjson"] = _TPS.sub('"consumeTps":"<tps>"', body["fastjson"])
    return step


_OFFSET_ID = re.compile(r"<storehost>([0-9A-F]{16})")


def rebased(value: Any, base: int, key: str = "") -> Any:
    """CommitLog offsets at or past ``base`` as ``+n`` from it (offset message ids and the decoded
    records' ``commitLogOffset``).

    The JSON run's transaction steps wrote records the ROCKETMQ run's offsets count on the broker
    and not here: with them left out, the ROCKETMQ run's records are compared from where its first
    SEND landed. Offsets below (the JSON run's records) stay as they are."""
    if isinstance(value, dict):
        return {k: rebased(v, base, k) for k, v in value.items()}
    if isinstance(value, list):
        return [rebased(v, base) for v in value]
    if key == "commitLogOffset" and isinstance(value, int) and value >= base:
        return f"+{value - base}"
    if isinstance(value, str):

        def one(m: re.Match[str]) -> str:
            offset = int(m[1], 16)
            return f"<storehost>+{offset - base}" if offset >= base else m[0]

        return _OFFSET_ID.sub(one, value)
    return value


def run_base(steps: list[dict[str, Any]]) -> int:
    """Where the run's first SEND landed in the CommitLog (its offset message id)."""
    first = next(s for s in steps if s["step"].startswith("send message 0"))
    return int(first["answer"]["extFields"]["msgId"][-16:], 16)


def golden_steps(ser: str) -> list[dict[str, Any]]:
    """The recorded steps of one run, the transaction steps replaced by the one placeholder step."""
    steps = RECORDING["runs"][ser]
    names = [s["step"] for s in steps]
    first = names.index(FIRST_TX_STEP)
    last = max(i for i, n in enumerate(names) if n in LAST_TX_STEPS)
    return [
        *steps[:first],
        {"step": TRANSACTIONS_SKIPPED, "notReplayed": NOT_REPLAYED_REASON},
        *steps[last + 1 :],
    ]


def differences(expected: dict[str, Any], got: dict[str, Any]) -> list[str]:
    """What differs between a recorded step and ours, field by field (empty when they match)."""
    out = []
    for key in ("answer", "brokerRequests", "noAnswerWithinSeconds"):
        want, have = expected.get(key), got.get(key)
        if key == "brokerRequests":
            want, have = want or {}, have or {}
        if want == have:
            continue
        if key == "answer" and isinstance(want, dict) and isinstance(have, dict):
            for field in ("code", "serializeType", "flag", "remark", "extFields", "body"):
                w, h = want.get(field), have.get(field)
                if field == "extFields":
                    w, h = list((w or {}).items()), list((h or {}).items())
                if w != h:
                    out.append(f"answer.{field}: broker {json.dumps(w)[:600]} / ours {json.dumps(h)[:600]}")
        else:
            out.append(f"{key}: broker {json.dumps(want)[:800]} / ours {json.dumps(have)[:800]}")
    return out


#: What the transaction steps leave in the broker's config files, left out of the comparison while
#: those steps are not replayed: file -> (its table, the entries they added, how much they bumped
#: its data version). The op-half topic and the internal group's offsets are theirs; the half topic's
#: creation bumped the topic table's version (the topic itself is one ours has from the start).
TRANSACTION_ENTRIES: dict[str, tuple[str, tuple[str, ...], int]] = {
    "topics.json": ("topicConfigTable", ("RMQ_SYS_TRANS_OP_HALF_TOPIC",), 1),
    "consumerOffset.json": (
        "offsetTable",
        ("RMQ_SYS_TRANS_OP_HALF_TOPIC@CID_RMQ_SYS_TRANS", "RMQ_SYS_TRANS_HALF_TOPIC@CID_RMQ_SYS_TRANS"),
        0,
    ),
    "subscriptionGroup.json": ("subscriptionGroupTable", (), 0),
}

_SAVED_AT = re.compile(r'"timestamp":\d+')


def fastjson_file(text: str) -> dict[str, Any]:
    """A config file as the broker writes it (fastjson: integer map keys unquoted) as ordered data,
    ``dataVersion.timestamp`` (when it was saved) blanked."""
    data = json.loads(re.sub(r"([{,]\s*)(-?\d+):", r'\1"\2":', text))
    if isinstance(data.get("dataVersion"), dict) and "timestamp" in data["dataVersion"]:
        data["dataVersion"]["timestamp"] = "<timestamp>"
    return data


def config_file_report(ours: Path) -> list[str]:
    """The files our server left after the sequence against the broker's own after its clean stop:
    the same text but for the save time (``dataVersion.timestamp``); where the transaction steps
    left entries, the same entries in the same order with the same fields, theirs left out. The
    ``.bak`` files are the content before the last save, which depends on when saves happened, so
    only their presence is compared."""
    report = []
    for name, (table, tx_keys, tx_versions) in TRANSACTION_ENTRIES.items():
        path = ours / name
        if not path.exists():
            report.append(f"config/{name}: not written")
            continue
        if not (ours / f"{name}.bak").exists():
            report.append(f"config/{name}.bak: not written")
        text = (GOLDEN / "broker_config_4.9.7" / name).read_text(encoding="utf-8")
        have_text = path.read_text(encoding="utf-8")
        if not tx_keys and not tx_versions:
            if _SAVED_AT.sub("", text) != _SAVED_AT.sub("", have_text):
                report.append(f"config/{name}: broker's text:\n{text}\nours:\n{have_text}")
            continue
        want = fastjson_file(text)
        for key in tx_keys:
            want[table].pop(key, None)
        if tx_versions:
            want["dataVersion"]["counter"] -= tx_versions
        have = fastjson_file(have_text)
        if json.dumps(want) != json.dumps(have):
            report.append(f"config/{name}: broker {json.dumps(want)} / ours {json.dumps(have)}")
    return report


async def replay(port: int) -> dict[str, list[dict[str, Any]]]:
    """Both runs on one server, JSON then ROCKETMQ, as the recorder played them on one broker (the
    second run's commit log offsets and tables follow from the first's)."""
    runs = {}
    for ser in (SerializeType.JSON, SerializeType.ROCKETMQ):
        runs[ser.name] = await Recorder(port, ser, transactions=False).run()
    return runs


def step_report(ser: str, ours: list[dict[str, Any]]) -> list[str]:
    """One entry per step that differs from the recording and is not allowed to (or is allowed to
    but no longer does: the allow-list must not outlive the difference)."""
    expected = golden_steps(ser)
    assert [s["step"] for s in ours] == [s["step"] for s in expected]
    if ser == "ROCKETMQ":
        expected = rebased(expected, run_base(expected))
        ours = rebased(ours, run_base(ours))
    report = []
    for want, got in zip(expected, ours, strict=True):
        if want["step"] == TRANSACTIONS_SKIPPED:
            continue
        diffs = differences(blank_tps(without_transactions(want)), blank_tps(got))
        allowed = (ser, want["step"]) in ALLOWED or (None, want["step"]) in ALLOWED
        if allowed:
            outside = [d for d in diffs if d.split(":", 1)[0] not in ALLOWED_FIELDS]
            if outside:
                report.append(f"{ser} [{want['step']}] (allowed remark only)\n    " + "\n    ".join(outside))
        elif diffs:
            report.append(f"{ser} [{want['step']}]\n    " + "\n    ".join(diffs))
        if allowed and not diffs:
            report.append(f"{ser} [{want['step']}] is allowed to differ but matches: drop it from ALLOWED")
    return report


async def test_consume_side_answers_and_files_match_the_broker(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = WritableStore(StoreConfig.for_store(root, broker_name="broker-a"))
    srv = QueryServer(
        store.reader, ServerSettings(port=0, broker_name="broker-a"), configure=write_path(store)
    )
    await srv.start()
    try:
        runs = await replay(srv.port)
    finally:
        await srv.stop()
        store.close()
    report = step_report("JSON", runs["JSON"]) + step_report("ROCKETMQ", runs["ROCKETMQ"])
    report += config_file_report(root / "config")
    assert not report, f"{len(report)} differences from the broker:\n" + "\n".join(report)
