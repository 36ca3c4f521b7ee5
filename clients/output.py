"""What ``rmq-query`` prints: mqadmin's text layouts to the character, and a JSON-lines form.

Operators read and grep mqadmin's output, so the text forms copy it exactly: the key table
(``%-50s %4s %40s``), the ``%-20s`` detail block, Java's ``HashMap.toString`` order for properties,
``UtilAll.timeMillisToHumanString2`` times (local time zone, like the JVM) and Java's socket address
text (``[fd00:0:0:0:0:0:1234:5678]:40003`` for IPv6). The JSON lines use the field names and order of
the Java reference client's JSON dump, so the two can be compared line for line.
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from protocol.custom_headers import java_string
from protocol.java_hashmap import java_hashmap_order
from protocol.message import MessageExt

KEY_TABLE_HEADER = f"{'#Message ID':<50} {'#QID':>4} {'#Offset':>40}"
NO_CONSUMER_TRAILER = "\n\nWARN: No Consumer"

_JSON = msgspec.json.Encoder()


def format_properties(properties: Mapping[str, str] | None) -> str:
    """``HashMap.toString()`` of the message properties: ``{k=v, k2=v2}`` in HashMap order."""
    if properties is None:
        return ""
    return "{" + ", ".join(f"{k}={properties[k]}" for k in java_hashmap_order(properties)) + "}"


def human_time(millis: int) -> str:
    """``UtilAll.timeMillisToHumanString2``: ``yyyy-MM-dd HH:mm:ss,SSS`` in the local time zone."""
    try:
        tm = time.localtime(millis // 1000)
    except (OverflowError, OSError, ValueError):
        return str(millis)
    return time.strftime("%Y-%m-%d %H:%M:%S", tm) + f",{millis % 1000:03d}"


def java_host_text(host: str) -> str:
    """``InetAddress.getHostAddress()``: IPv6 as eight uncompressed lower-case hex groups."""
    if ":" not in host:
        return host
    try:
        packed = ipaddress.IPv6Address(host.strip("[]")).packed
    except ValueError:
        return host
    return ":".join(f"{int.from_bytes(packed[i : i + 2], 'big'):x}" for i in range(0, 16, 2))


def socket_addr_text(host: str, port: int) -> str:
    """``RemotingHelper.parseSocketAddressAddr``: ``ip:port``, IPv6 in brackets."""
    text = java_host_text(host)
    return f"[{text}]:{port}" if ":" in text else f"{text}:{port}"


def key_table(messages: Sequence[MessageExt]) -> str:
    """queryMsgByKey's table: header, then one ``%-50s %4d %40d`` row per message (newline-ended)."""
    lines = [KEY_TABLE_HEADER]
    lines.extend(f"{m.msg_id:<50} {m.queue_id:>4} {m.queue_offset:>40}" for m in messages)
    return "\n".join(lines) + "\n"


def _field(label: str, value: object) -> str:
    return f"{label:<20} {value}"


def message_detail(
    msg: MessageExt,
    *,
    body_path: str,
    with_offset_id: bool,
    body_text: str | None = None,
) -> str:
    """The ``%-20s`` block of queryMsgById (``with_offset_id``) or queryMsgByUniqueKey (newline-ended).

    ``body_text`` adds the ``Message Body:`` line mqadmin 5.x prints for ``-f CHARSET``.
    """
    props = msg.properties
    lines = []
    if with_offset_id:
        lines.append(_field("OffsetID:", msg.offset_msg_id))
    lines += [
        _field("Topic:", msg.topic),
        _field("Tags:", f"[{java_string(props.get('TAGS'))}]"),
        _field("Keys:", f"[{java_string(props.get('KEYS'))}]"),
        _field("Queue ID:", msg.queue_id),
        _field("Queue Offset:", msg.queue_offset),
        _field("CommitLog Offset:", msg.commit_log_offset),
        _field("Reconsume Times:", msg.reconsume_times),
        _field("Born Timestamp:", human_time(msg.born_timestamp)),
        _field("Store Timestamp:", human_time(msg.store_timestamp)),
        _field("Born Host:", socket_addr_text(msg.born_host, msg.born_port)),
        _field("Store Host:", socket_addr_text(msg.store_host, msg.store_port)),
        _field("System Flag:", msg.sys_flag),
        _field("Properties:", format_properties(props)),
        _field("Message Body Path:", body_path),
    ]
    if body_text is not None:
        lines.append(_field("Message Body:", body_text))
    return "\n".join(lines) + "\n"


def consumer_trailer(groups: Sequence[str]) -> str:
    """What follows the detail block: mqadmin's no-consumer warning, or the groups found.

    mqadmin goes on to classify each group's consumption state (more requests this tool does not
    make); here the groups are listed by name only, and said to be unchecked.
    """
    if not groups:
        return NO_CONSUMER_TRAILER + "\n"
    return "\n\n" + "".join(f"Consumer group: {g} (consumption state not checked)\n" for g in groups)


def body_as_text(body: bytes) -> str:
    """The body as UTF-8 text (undecodable bytes replaced), as ``new String(body, UTF_8)`` does."""
    return body.decode("utf-8", errors="replace")


def message_record(msg: MessageExt, *, include_body: bool) -> dict[str, Any]:
    """A message as the JSON object of the reference client's dump (same names, same order)."""
    props = msg.properties
    record: dict[str, Any] = {
        "type": "message",
        "msgId": msg.msg_id,
        "offsetMsgId": msg.offset_msg_id,
        "uniqKey": msg.unique_key,
        "topic": msg.topic,
        "keys": props.get("KEYS"),
        "tags": props.get("TAGS"),
        "queueId": msg.queue_id,
        "queueOffset": msg.queue_offset,
        "commitLogOffset": msg.commit_log_offset,
        "storeTimestamp": msg.store_timestamp,
        "bornTimestamp": msg.born_timestamp,
        "bornHost": f"{java_host_text(msg.born_host)}:{msg.born_port}",
        "storeHost": f"{java_host_text(msg.store_host)}:{msg.store_port}",
        "sysFlag": msg.sys_flag,
        "flag": msg.flag,
        "reconsumeTimes": msg.reconsume_times,
        "storeSize": msg.store_size,
        "bodyCRC": msg.body_crc,
        "properties": dict(sorted(props.items())),
        "bodyLen": len(msg.body),
    }
    if include_body:
        record["bodyHex"] = msg.body.hex()
        try:
            record["bodyUtf8"] = msg.body.decode("utf-8")
        except UnicodeDecodeError:
            record["bodyUtf8"] = None
    return record


def json_line(record: Mapping[str, Any]) -> str:
    """One compact JSON object and a newline (UTF-8 text, non-ASCII kept as is)."""
    return _JSON.encode(record).decode("utf-8") + "\n"


# -- the pull-based tools (printMsg, printMsgByQueue, queryMsgByOffset, topicStatus) -------------

#: printMsg's line after each queue.
QUEUE_SEPARATOR = "-" * 56


def java_byte_array(body: bytes | None) -> str:
    """``Arrays.toString(byte[])``: signed bytes, ``null`` for no body."""
    if body is None:
        return "null"
    return "[" + ", ".join(str(b - 256 if b > 127 else b) for b in body) + "]"


def java_socket_address(host: str, port: int) -> str:
    """``InetSocketAddress.toString()`` of an unresolved-name address: ``/ip:port``, IPv6 bracketed."""
    return "/" + socket_addr_text(host, port)


def message_ext_text(msg: MessageExt, broker_name: str) -> str:
    """``MessageExt.toString()`` of a pulled message (the client sets ``brokerName``; ``msgId`` is the
    offset id; a body the record does not have prints as ``null``)."""
    props = msg.properties
    transaction_id = props.get("UNIQ_KEY") if (props.get("TRAN_MSG") or "").lower() == "true" else None
    body = msg.body if msg.body else None
    return (
        f"MessageExt [brokerName={broker_name}, queueId={msg.queue_id}, storeSize={msg.store_size}, "
        f"queueOffset={msg.queue_offset}, sysFlag={msg.sys_flag}, bornTimestamp={msg.born_timestamp}, "
        f"bornHost={java_socket_address(msg.born_host, msg.born_port)}, "
        f"storeTimestamp={msg.store_timestamp}, "
        f"storeHost={java_socket_address(msg.store_host, msg.store_port)}, msgId={msg.offset_msg_id}, "
        f"commitLogOffset={msg.commit_log_offset}, bodyCRC={msg.body_crc}, "
        f"reconsumeTimes={msg.reconsume_times}, preparedTransactionOffset={msg.prepared_transaction_offset}, "
        f"toString()=Message{{topic='{msg.topic}', flag={msg.flag}, properties={format_properties(props)}, "
        f"body={java_byte_array(body)}, transactionId='{java_string(transaction_id)}'}}]"
    )


def print_msg_line(msg: MessageExt, broker_name: str, body_text: str) -> str:
    """One message of printMsg / printMsgByQueue: ``MSGID: <id> <MessageExt> BODY: <text>``."""
    return f"MSGID: {msg.msg_id} {message_ext_text(msg, broker_name)} BODY: {body_text}\n"


def tag_count_lines(counts: Mapping[str, int]) -> str:
    """printMsgByQueue ``-f true``: ``Tag: %-30s Count: %s`` per tag, most frequent first.

    Java sorts a list built from a ``HashMap`` (so ties keep the map's order) with a stable sort.
    """
    ordered = sorted(java_hashmap_order(counts), key=lambda tag: -counts[tag])
    return "".join(f"Tag: {tag:<30} Count: {counts[tag]}\n" for tag in ordered)


TOPIC_STATUS_HEADER = (
    f"{'#Broker Name':<32}  {'#QID':<4}  {'#Min Offset':<20}  {'#Max Offset':<20}    #Last Updated"
)


def topic_status_table(rows: Sequence[Any]) -> str:
    """topicStatus: header, then a row per queue sorted like Java's ``MessageQueue.compareTo``."""
    lines = [TOPIC_STATUS_HEADER]
    for row in sorted(rows, key=lambda r: (r.topic, r.broker_name, r.queue_id)):
        updated = human_time(row.last_update_timestamp) if row.last_update_timestamp > 0 else ""
        broker = row.broker_name[:32]  # UtilAll.frontStringAtLeast(name, 32)
        lines.append(
            f"{broker:<32}  {row.queue_id:<4}  {row.min_offset:<20}  {row.max_offset:<20}    {updated}"
        )
    return "\n".join(lines) + "\n"
