"""Message traces as the 4.x Java client writes them to ``RMQ_SYS_TRACE_TOPIC``.

A trace message's body is text: contexts separated by the character 2 (``FIELD_SPLITOR``), each a list
of fields separated by the character 1 (``CONTENT_SPLITOR``), the first field naming its type. The
field order of each type is the client's ``TraceDataEncoder`` (4.9.x), read from its source:

- ``Pub``: time, region, producer group, topic, msgId, tags, keys, store host, body length, cost (ms),
  message type (ordinal), then optionally offset msgId, success, client host;
- ``SubBefore``: time, region, consumer group, request id, msgId, retry times, keys;
- ``SubAfter``: request id, msgId, cost (ms), success, keys, then optionally context code, time;
- ``EndTransaction``: time, region, group, topic, msgId, tags, keys, store host, message type,
  transaction id, transaction state, from transaction check.

The trace messages are keyed by the traced msgId (and its keys), so a trace is a key query on the
trace topic followed by this decoding, keeping the contexts of the msgId asked for. A context that
does not parse (another client's format, a cut body) is returned as ``unparsed`` with its fields
rather than dropped: an operator then sees that something was written.
"""

from __future__ import annotations

from typing import Any

#: ``TopicValidator.RMQ_SYS_TRACE_TOPIC``: where traces go unless the client names another topic.
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"

CONTENT_SPLITOR = "\x01"
FIELD_SPLITOR = "\x02"

#: ``org.apache.rocketmq.common.message.MessageType`` of 4.9.x, by ordinal.
MESSAGE_TYPES = ("Normal_Msg", "Trans_Msg_Half", "Trans_msg_Commit", "Delay_Msg")


def _bool(text: str) -> bool:
    """``Boolean.parseBoolean``: true only for "true", any case."""
    return text.lower() == "true"


def _message_type(text: str) -> str:
    ordinal = int(text)
    return MESSAGE_TYPES[ordinal] if 0 <= ordinal < len(MESSAGE_TYPES) else str(ordinal)


def _pub(f: list[str]) -> dict[str, Any]:
    event: dict[str, Any] = {
        "type": "Pub",
        "timestamp": int(f[1]),
        "regionId": f[2],
        "groupName": f[3],
        "topic": f[4],
        "msgId": f[5],
        "tags": f[6],
        "keys": f[7],
        "storeHost": f[8],
        "bodyLength": int(f[9]),
        "costTime": int(f[10]),
        "msgType": _message_type(f[11]),
    }
    if len(f) == 13:
        event["success"] = _bool(f[12])
    elif len(f) >= 14:
        event["offsetMsgId"] = f[12]
        event["success"] = _bool(f[13])
        if len(f) >= 15:
            event["clientHost"] = f[14]
    return event


def _sub_before(f: list[str]) -> dict[str, Any]:
    return {
        "type": "SubBefore",
        "timestamp": int(f[1]),
        "regionId": f[2],
        "groupName": f[3],
        "requestId": f[4],
        "msgId": f[5],
        "retryTimes": int(f[6]),
        "keys": f[7],
    }


def _sub_after(f: list[str]) -> dict[str, Any]:
    event: dict[str, Any] = {
        "type": "SubAfter",
        "requestId": f[1],
        "msgId": f[2],
        "costTime": int(f[3]),
        "success": _bool(f[4]),
        "keys": f[5],
    }
    if len(f) >= 7:
        event["contextCode"] = int(f[6])
    if len(f) >= 8:
        event["timestamp"] = int(f[7])
    return event


def _end_transaction(f: list[str]) -> dict[str, Any]:
    return {
        "type": "EndTransaction",
        "timestamp": int(f[1]),
        "regionId": f[2],
        "groupName": f[3],
        "topic": f[4],
        "msgId": f[5],
        "tags": f[6],
        "keys": f[7],
        "storeHost": f[8],
        "msgType": _message_type(f[9]),
        "transactionId": f[10],
        "transactionState": f[11],
        "fromTransactionCheck": _bool(f[12]),
    }


_DECODERS = {
    "Pub": (_pub, 12),
    "SubBefore": (_sub_before, 8),
    "SubAfter": (_sub_after, 6),
    "EndTransaction": (_end_transaction, 13),
}


def decode_trace_body(text: str) -> list[dict[str, Any]]:
    """Every context in one trace message's body, in order."""
    events: list[dict[str, Any]] = []
    for context in text.split(FIELD_SPLITOR):
        if not context:
            continue
        fields = context.split(CONTENT_SPLITOR)
        decoder = _DECODERS.get(fields[0])
        if decoder is not None and len(fields) >= decoder[1]:
            try:
                events.append(decoder[0](fields))
                continue
            except (ValueError, IndexError):
                pass
        events.append({"type": "unparsed", "fields": fields})
    return events
