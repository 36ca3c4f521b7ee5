"""PUSH_REPLY_MESSAGE_TO_CLIENT's header (``ReplyMessageRequestHeader``) and the reply names.

The expected extFields are the broker's own, as recorded in ``tests/server/golden/
request_reply_4.9.7.json`` (step "reply to R (SEND_REPLY_MESSAGE)" of the JSON run): its field
order is the broker's ``HashMap`` order, written here by hand from that recording.
"""

from __future__ import annotations

import pytest

from protocol.codes import RequestCode
from protocol.errors import HeaderFieldError
from protocol.reply_message import ReplyMessageRequestHeader, reply_topic, v2_number_java_refuses

#: The recorded push's fields, with the normalised values put back to concrete ones.
RECORDED_ORDER = [
    "queueId",
    "flag",
    "sysFlag",
    "reconsumeTimes",
    "storeTimestamp",
    "unitMode",
    "defaultTopic",
    "bornHost",
    "defaultTopicQueueNums",
    "producerGroup",
    "topic",
    "bornTimestamp",
    "storeHost",
    "properties",
]


def header(**over: object) -> ReplyMessageRequestHeader:
    values: dict[str, object] = {
        "producer_group": "RrReplier",
        "topic": "DefaultCluster_REPLY_TOPIC",
        "default_topic": "TBW102",
        "default_topic_queue_nums": 4,
        "queue_id": 0,
        "sys_flag": 0,
        "born_timestamp": 1700000000000,
        "flag": 0,
        "properties": "MSG_TYPE\x01reply\x02",
        "reconsume_times": 0,
        "unit_mode": False,
        "born_host": "127.0.0.1:5555",
        "store_host": "127.0.0.1:10911",
        "store_timestamp": 1800000000000,
    }
    values.update(over)
    return ReplyMessageRequestHeader(**values)  # type: ignore[arg-type]


def test_the_codes_are_the_broker_s() -> None:
    assert (RequestCode.SEND_REPLY_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2) == (324, 325)
    assert RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT == 326


def test_the_reply_topic_is_named_for_the_cluster() -> None:
    assert reply_topic("DefaultCluster") == "DefaultCluster_REPLY_TOPIC"


def test_the_push_header_is_written_in_the_broker_s_order_with_java_values() -> None:
    fields = header().to_ext_fields()
    assert list(fields) == RECORDED_ORDER
    assert fields["unitMode"] == "false"
    assert fields["storeTimestamp"] == "1800000000000"
    assert fields["bornHost"] == "127.0.0.1:5555"


def test_a_null_reconsume_times_or_properties_is_left_out() -> None:
    fields = header(reconsume_times=None, properties=None).to_ext_fields()
    assert "reconsumeTimes" not in fields and "properties" not in fields
    assert "unitMode" in fields  # a Java boolean: never null


def test_the_header_reads_back_as_the_client_decodes_it() -> None:
    original = header(reconsume_times=3, unit_mode=True)
    assert ReplyMessageRequestHeader.from_ext_fields(original.to_ext_fields()) == original


@pytest.mark.parametrize("missing", ["bornHost", "storeHost", "storeTimestamp", "topic"])
def test_a_missing_required_field_is_named(missing: str) -> None:
    fields = header().to_ext_fields()
    del fields[missing]
    with pytest.raises(HeaderFieldError, match=missing):
        ReplyMessageRequestHeader.from_ext_fields(fields)


@pytest.mark.parametrize(
    ("fields", "refused"),
    [
        ({"a": "g", "d": "4", "e": "0", "g": "1700000000000"}, None),
        ({"a": "g"}, None),  # missing numbers are only logged by the fast decode
        ({"e": "x"}, "x"),
        ({"d": " 4", "e": "x"}, " 4"),  # parsed in declaration order: d before e
        ({"g": "99999999999"}, None),  # a long, not an int
        ({"h": "99999999999"}, "99999999999"),
        ({"j": "1_0"}, "1_0"),
        ({"l": ""}, ""),
        ({"k": "maybe", "i": "x"}, None),  # Boolean.parseBoolean and strings never throw
    ],
)
def test_the_v2_numbers_java_cannot_parse(fields: dict[str, str], refused: str | None) -> None:
    assert v2_number_java_refuses(fields) == refused
