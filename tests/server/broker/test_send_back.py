"""CONSUMER_SEND_MSG_BACK's rules without sockets: where a failed message goes and the record stored.

The expected properties strings were printed by Java 4.9.7 itself (``MessageDecoder`` of the
rocketmq-all-4.9.7 jar): the original's properties read into a ``HashMap``, then the puts of
``consumerSendMsgBack`` and ``CommitLog.asyncPutMessage`` in their order, serialized after each
stage (``\\x01``/``\\x02`` written here as ``|``/``#``).
"""

from __future__ import annotations

import pytest

from protocol.message import MessageExt
from protocol.message_flags import TRANSACTION_PREPARED_TYPE
from server.broker.send_back import (
    Destination,
    SendBackRefused,
    destination,
    is_dead_letter,
    max_reconsume_times,
    pick_queue,
    send_back_record,
)

UNIQ = "7F0000017B2A18B4AAC2A1B2C3D40000"
#: The offset id of a record at CommitLog offset 0 stored by 192.168.0.1:10911.
ORIGIN_ID = "C0A8000100002A9F0000000000000000"


def wire(text: str) -> bytes:
    return text.replace("|", "\x01").replace("#", "\x02").encode()


def original(**overrides: object) -> MessageExt:
    fields: dict[str, object] = {
        "topic": "T1",
        "queue_id": 2,
        "flag": 7,
        "sys_flag": 0,
        "born_timestamp": 1_700_000_000_000,
        "born_host": "10.1.2.3",
        "born_port": 50_000,
        "store_host": "192.168.0.1",
        "store_port": 10911,
        "commit_log_offset": 0,
        "reconsume_times": 0,
        "body": b"payload",
        "properties": {
            "KEYS": "k1",
            "UNIQ_KEY": UNIQ,
            "CLUSTER": "DefaultCluster",
            "WAIT": "true",
            "TAGS": "TagA",
        },
    }
    fields.update(overrides)
    return MessageExt(**fields)  # type: ignore[arg-type]


def to_retry(level: int, queue_id: int = 0) -> Destination:
    return Destination("%RETRY%G1", queue_id, level, False)


def test_first_retry_waits_in_level_3_of_the_schedule() -> None:
    rec = send_back_record(original(), to_retry(3), max_delay_level=18, max_message_size=4096)
    assert (rec.topic, rec.queue_id) == ("SCHEDULE_TOPIC_XXXX", 2)
    assert rec.properties == wire(
        "REAL_TOPIC|%RETRY%G1#ORIGIN_MESSAGE_ID|C0A8000100002A9F0000000000000000#RETRY_TOPIC|T1#"
        "KEYS|k1#UNIQ_KEY|7F0000017B2A18B4AAC2A1B2C3D40000#CLUSTER|DefaultCluster#WAIT|false#DELAY|3#"
        "TAGS|TagA#REAL_QID|0"
    )
    # The original's body, flag, sysFlag, hosts and born time; one more reconsume.
    assert (rec.body, rec.flag, rec.sys_flag, rec.born_timestamp) == (b"payload", 7, 0, 1_700_000_000_000)
    assert (rec.born_host, rec.born_port, rec.store_host, rec.store_port) == (
        "10.1.2.3",
        50_000,
        "192.168.0.1",
        10911,
    )
    assert rec.reconsume_times == 1


def test_second_retry_keeps_the_first_topic_and_origin_id() -> None:
    delivered_retry = original(
        topic="%RETRY%G1",
        queue_id=0,
        commit_log_offset=200,
        reconsume_times=1,
        properties={
            "REAL_TOPIC": "%RETRY%G1",
            "ORIGIN_MESSAGE_ID": ORIGIN_ID,
            "RETRY_TOPIC": "T1",
            "KEYS": "k1",
            "UNIQ_KEY": UNIQ,
            "CLUSTER": "DefaultCluster",
            "WAIT": "false",
            "DELAY": "3",
            "TAGS": "TagA",
            "REAL_QID": "0",
        },
    )
    rec = send_back_record(delivered_retry, to_retry(4), max_delay_level=18, max_message_size=4096)
    assert (rec.topic, rec.queue_id, rec.reconsume_times) == ("SCHEDULE_TOPIC_XXXX", 3, 2)
    assert rec.properties == wire(
        "REAL_TOPIC|%RETRY%G1#ORIGIN_MESSAGE_ID|C0A8000100002A9F0000000000000000#RETRY_TOPIC|T1#"
        "KEYS|k1#UNIQ_KEY|7F0000017B2A18B4AAC2A1B2C3D40000#CLUSTER|DefaultCluster#WAIT|false#DELAY|4#"
        "TAGS|TagA#REAL_QID|0"
    )


def test_blank_origin_id_is_replaced_by_the_records_offset_id() -> None:
    props = {"ORIGIN_MESSAGE_ID": "  ", "TAGS": "TagA"}
    rec = send_back_record(
        original(properties=props, commit_log_offset=0x10),
        Destination("%DLQ%G1", 0, 0, True),
        max_delay_level=18,
        max_message_size=4096,
    )
    assert b"ORIGIN_MESSAGE_ID\x01C0A8000100002A9F0000000000000010" in rec.properties


def test_dead_letter_is_stored_at_once_with_delay_0() -> None:
    rec = send_back_record(
        original(reconsume_times=16),
        Destination("%DLQ%G1", 0, 0, True),
        max_delay_level=18,
        max_message_size=4096,
    )
    assert (rec.topic, rec.queue_id, rec.reconsume_times) == ("%DLQ%G1", 0, 17)
    assert rec.properties == wire(
        "ORIGIN_MESSAGE_ID|C0A8000100002A9F0000000000000000#RETRY_TOPIC|T1#KEYS|k1#"
        "UNIQ_KEY|7F0000017B2A18B4AAC2A1B2C3D40000#CLUSTER|DefaultCluster#WAIT|false#DELAY|0#TAGS|TagA"
    )


def test_level_past_the_table_is_capped_and_delay_says_so() -> None:
    rec = send_back_record(original(), to_retry(19), max_delay_level=18, max_message_size=4096)
    assert (rec.topic, rec.queue_id) == ("SCHEDULE_TOPIC_XXXX", 17)
    assert rec.properties == wire(
        "REAL_TOPIC|%RETRY%G1#ORIGIN_MESSAGE_ID|C0A8000100002A9F0000000000000000#RETRY_TOPIC|T1#"
        "KEYS|k1#UNIQ_KEY|7F0000017B2A18B4AAC2A1B2C3D40000#CLUSTER|DefaultCluster#WAIT|false#DELAY|18#"
        "TAGS|TagA#REAL_QID|0"
    )


def test_a_prepared_half_message_is_not_scheduled() -> None:
    rec = send_back_record(
        original(sys_flag=TRANSACTION_PREPARED_TYPE),
        to_retry(3, 1),
        max_delay_level=18,
        max_message_size=4096,
    )
    assert (rec.topic, rec.queue_id, rec.sys_flag) == ("%RETRY%G1", 1, TRANSACTION_PREPARED_TYPE)
    assert b"REAL_TOPIC" not in rec.properties


def test_compressed_body_is_copied_as_stored() -> None:
    msg = original(sys_flag=0x1, body=b"inflated", stored_body=b"\x78\x9cdeflated")
    rec = send_back_record(msg, to_retry(3), max_delay_level=18, max_message_size=4096)
    assert (rec.body, rec.sys_flag) == (b"\x78\x9cdeflated", 0x1)


def test_store_refusals_are_the_put_status_names() -> None:
    with pytest.raises(SendBackRefused) as long_topic:
        send_back_record(
            original(),
            Destination("%RETRY%" + "g" * 121, 0, 3, False),
            max_delay_level=18,
            max_message_size=4096,
        )
    assert long_topic.value.status == "MESSAGE_ILLEGAL"
    with pytest.raises(SendBackRefused) as big_body:
        send_back_record(original(body=b"x" * 4097), to_retry(3), max_delay_level=18, max_message_size=4096)
    assert big_body.value.status == "MESSAGE_ILLEGAL"
    # Under 32767 chars as the processor builds them, over 32767 bytes with REAL_TOPIC/REAL_QID.
    near_limit = original(properties={"K": "v" * 32_670})
    with pytest.raises(SendBackRefused) as props:
        send_back_record(near_limit, to_retry(3), max_delay_level=18, max_message_size=4096)
    assert props.value.status == "PROPERTIES_SIZE_EXCEEDED"
    with pytest.raises(SendBackRefused) as too_many_chars:
        send_back_record(
            original(properties={"K": "v" * 32_767}), to_retry(3), max_delay_level=18, max_message_size=4096
        )
    assert too_many_chars.value.status == "MESSAGE_ILLEGAL"


def test_header_max_counts_from_v3_4_9_clients() -> None:
    assert max_reconsume_times(1, 121, 16) == 1  # V3_4_9
    assert max_reconsume_times(1, 120, 16) == 16  # V3_4_9_SNAPSHOT: the group's retryMaxTimes
    assert max_reconsume_times(None, 409, 5) == 5
    assert max_reconsume_times(-1, 409, 16) == -1


def test_dead_letter_after_max_or_on_negative_level() -> None:
    assert not is_dead_letter(0, 1, 0)
    assert is_dead_letter(1, 1, 0)
    assert is_dead_letter(0, 16, -1)
    assert is_dead_letter(0, 0, 3)


def test_destination_levels_and_queues() -> None:
    first = destination(
        "G1", reconsume_times=0, delay_level=0, max_times=16, retry_queue_nums=4, draw=lambda: 7
    )
    assert first == Destination("%RETRY%G1", 3, 3, False)
    later = destination(
        "G1", reconsume_times=5, delay_level=0, max_times=16, retry_queue_nums=4, draw=lambda: 8
    )
    assert later == Destination("%RETRY%G1", 0, 8, False)
    asked = destination(
        "G1", reconsume_times=5, delay_level=2, max_times=16, retry_queue_nums=1, draw=lambda: 9
    )
    assert asked == Destination("%RETRY%G1", 0, 2, False)
    dead = destination(
        "G1", reconsume_times=16, delay_level=0, max_times=16, retry_queue_nums=4, draw=lambda: 7
    )
    assert dead == Destination("%DLQ%G1", 0, 0, True)
    assert {pick_queue(3) for _ in range(200)} == {0, 1, 2}
