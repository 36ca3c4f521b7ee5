"""The 5.x timer message rules, sans-IO: parsing, the wheel's precision, the limits and their answers.

Expected values are written out from the 5.x broker's sources (``HookUtils.transformTimerMessage``,
``checkIfTimerMessage``, ``SendMessageProcessor.handlePutMessageResult``,
``MessageStoreConfig.setTimerPrecisionMs``, ``TimerMessageStore.convert``), never computed by the
code under test.
"""

from __future__ import annotations

import pytest

from protocol.codes import ResponseCode
from protocol.message import MessageExt
from protocol.send_message import SendMessageRequestHeader
from server.broker.put_message import PutContext, PutRefused, single_record
from server.broker.timer_messages import (
    TimerRefused,
    TimerSettings,
    deliver_ms,
    delivery_record,
    due_ms,
    is_delivery_of,
    is_timer_request,
    timer_out_ms,
    wheel_time,
)
from store.config.store_config import StoreConfig, parse_properties
from store.errors import StoreError

NOW = 1_700_000_000_400
DEFAULT = TimerSettings()
ILLEGAL_REMARK = (
    "timer message illegal, the delay time should not be bigger than the max delay 259200000ms; or if set "
    "del msg, the delay time should be bigger than the current time"
)


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({"TIMER_DELIVER_MS": "1700000005000"}, 1_700_000_005_000),
        ({"TIMER_DELAY_MS": "2500"}, NOW + 2500),
        ({"TIMER_DELAY_SEC": "3"}, NOW + 3000),
        # TIMER_DELAY_SEC is read first, then TIMER_DELAY_MS, then TIMER_DELIVER_MS
        ({"TIMER_DELIVER_MS": "1", "TIMER_DELAY_MS": "7", "TIMER_DELAY_SEC": "2"}, NOW + 2000),
        ({"TIMER_DELIVER_MS": "1", "TIMER_DELAY_MS": "7"}, NOW + 7),
        # Long.parseLong: a sign, leading zeros, another script's digits
        ({"TIMER_DELAY_SEC": "+0002"}, NOW + 2000),
        ({"TIMER_DELAY_MS": "-5"}, NOW - 5),
        ({"TIMER_DELAY_MS": "\u0661\u0660"}, NOW + 10),
        # seconds * 1000 overflowing Java's long wraps (into the past: stored at once)
        ({"TIMER_DELAY_SEC": "9223372036854775"}, NOW + 9223372036854775000 - 2**64),
    ],
)
def test_the_delivery_time_each_property_asks_for(props: dict[str, str], expected: int) -> None:
    assert deliver_ms(props, NOW, DEFAULT) == expected


@pytest.mark.parametrize(
    "props",
    [
        {"TIMER_DELIVER_MS": ""},
        {"TIMER_DELIVER_MS": " 1700000005000"},
        {"TIMER_DELIVER_MS": "1.5"},
        {"TIMER_DELAY_SEC": "1_0"},
        {"TIMER_DELAY_MS": "9223372036854775808"},
        {"TIMER_DELAY_SEC": "0x2", "TIMER_DELIVER_MS": "1700000005000"},  # read first, refused
    ],
)
def test_a_time_java_cannot_parse_is_message_illegal(props: dict[str, str]) -> None:
    with pytest.raises(TimerRefused) as refused:
        deliver_ms(props, NOW, DEFAULT)
    assert refused.value.code == ResponseCode.MESSAGE_ILLEGAL == 13
    assert refused.value.remark == ILLEGAL_REMARK


@pytest.mark.parametrize(
    ("deliver", "precision", "out", "due"),
    [
        (1_700_000_002_400, 1000, 1_700_000_002_000, 1_700_000_003_000),
        (1_700_000_002_999, 1000, 1_700_000_002_000, 1_700_000_003_000),
        # on a slot's edge: one slot back, so the slot is handed out at the time itself
        (1_700_000_003_000, 1000, 1_700_000_002_000, 1_700_000_003_000),
        (1_700_000_003_001, 1000, 1_700_000_003_000, 1_700_000_004_000),
        (1_700_000_000_250, 100, 1_700_000_000_200, 1_700_000_000_300),
        (1_700_000_000_500, 500, 1_700_000_000_000, 1_700_000_000_500),
    ],
)
def test_the_wheel_slot_and_when_it_is_handed_out(deliver: int, precision: int, out: int, due: int) -> None:
    assert timer_out_ms(deliver, precision) == out
    assert due_ms(out, precision) == due
    assert deliver <= due < deliver + precision + 1  # never before the time, at most a precision after


@pytest.mark.parametrize(
    ("configured", "used"),
    [
        (1, 100),
        (150, 100),
        (199, 100),
        (200, 200),
        (499, 200),
        (500, 500),
        (999, 500),
        (1000, 1000),
        (5000, 1000),
    ],
)
def test_timer_precision_from_broker_conf_is_rounded_as_the_setter_rounds_it(
    configured: int, used: int
) -> None:
    config = StoreConfig.from_properties(
        parse_properties(f"timerPrecisionMs={configured}\n"), base_dir="/tmp"
    )
    assert config.timer_precision_ms == used
    assert StoreConfig.for_store("/tmp/x").timer_precision_ms == 1000
    assert StoreConfig.for_store("/tmp/x").timer_max_delay_sec == 259_200


def test_limits_past_time_and_the_wheel_switched_off() -> None:
    # exactly timerMaxDelaySec ahead is taken, one ms more is refused
    assert wheel_time({"TIMER_DELIVER_MS": str(NOW + 259_200_000)}, NOW, DEFAULT) == 1_700_259_200_000
    with pytest.raises(TimerRefused) as refused:
        wheel_time({"TIMER_DELIVER_MS": str(NOW + 259_200_001)}, NOW, DEFAULT)
    assert refused.value.code == ResponseCode.MESSAGE_ILLEGAL and refused.value.remark == ILLEGAL_REMARK
    short = TimerSettings(max_delay_sec=10)
    with pytest.raises(TimerRefused) as refused:
        wheel_time({"TIMER_DELAY_SEC": "11"}, NOW, short)
    assert "max delay 10000ms" in refused.value.remark
    # not after now: no timer (stored in its topic at once) ...
    assert wheel_time({"TIMER_DELIVER_MS": str(NOW)}, NOW, DEFAULT) is None
    assert wheel_time({"TIMER_DELAY_MS": "0"}, NOW, DEFAULT) is None
    # ... unless it is a delete marker, which must name a future slot
    with pytest.raises(TimerRefused):
        wheel_time({"TIMER_DELIVER_MS": str(NOW - 1), "TIMER_DEL_UNIQKEY": "k"}, NOW, DEFAULT)
    off = TimerSettings(enabled=False)
    with pytest.raises(TimerRefused) as refused:
        wheel_time({"TIMER_DELAY_SEC": "1"}, NOW, off)
    assert refused.value.code == ResponseCode.SYSTEM_ERROR
    assert refused.value.remark == "accurate timer message is not enabled, timerWheelEnable is false"


def test_which_messages_are_timer_requests() -> None:
    assert is_timer_request("T", {"TIMER_DELAY_MS": "1"})
    assert not is_timer_request("T", {"KEYS": "k"})
    assert not is_timer_request("rmq_sys_wheel_timer", {"TIMER_DELAY_MS": "1"})  # rolled already
    assert not is_timer_request("T", {"TIMER_DELAY_MS": "1", "TIMER_OUT_MS": "5"})


def _header(props: str, sys_flag: int = 0) -> SendMessageRequestHeader:
    return SendMessageRequestHeader("g", "T", "TBW102", 4, 2, sys_flag, NOW - 10, 0, props)


def _ctx(**timer: object) -> PutContext:
    return PutContext("C", 4096, "10.0.0.1", 7, timer=TimerSettings(**timer), now_ms=NOW)  # type: ignore[arg-type]


def test_a_timer_send_is_stored_in_the_timer_topic() -> None:
    rec = single_record(_header("TIMER_DELAY_SEC\x012\x02UNIQ_KEY\x01U\x02WAIT\x01true"), b"b", _ctx())
    assert rec.topic == "rmq_sys_wheel_timer" and rec.queue_id == 0
    props = bytes(rec.properties).decode()
    pairs = dict(p.split("\x01") for p in props.split("\x02") if p)
    assert pairs == {
        "TIMER_DELAY_SEC": "2",
        "UNIQ_KEY": "U",
        "WAIT": "true",
        "CLUSTER": "C",
        "TIMER_OUT_MS": "1700000002000",
        "REAL_TOPIC": "T",
        "REAL_QID": "2",
    }


def test_a_delay_level_wins_and_drops_the_timer_properties() -> None:
    rec = single_record(
        _header("DELAY\x013\x02TIMER_DELIVER_MS\x011700000005000\x02TIMER_DELAY_MS\x019"), b"b", _ctx()
    )
    assert rec.topic == "SCHEDULE_TOPIC_XXXX" and rec.queue_id == 2
    props = bytes(rec.properties).decode()
    assert "TIMER_" not in props and "DELAY\x013" in props


def test_a_past_time_is_stored_at_once_and_a_half_message_is_no_timer() -> None:
    rec = single_record(_header("TIMER_DELIVER_MS\x011600000000000"), b"b", _ctx())
    assert rec.topic == "T" and "TIMER_DELIVER_MS\x011600000000000" in bytes(rec.properties).decode()
    half = single_record(_header("TIMER_DELAY_SEC\x012\x02TRAN_MSG\x01true", sys_flag=0x4), b"b", _ctx())
    assert half.topic == "RMQ_SYS_TRANS_HALF_TOPIC"


@pytest.mark.parametrize(
    ("props", "code"),
    [
        ("TIMER_DELAY_SEC\x01soon", ResponseCode.MESSAGE_ILLEGAL),
        ("TIMER_DELAY_SEC\x01259201", ResponseCode.MESSAGE_ILLEGAL),
    ],
)
def test_a_refused_timer_send_is_the_brokers_answer(props: str, code: int) -> None:
    with pytest.raises(PutRefused) as refused:
        single_record(_header(props), b"b", _ctx())
    assert refused.value.code == code and refused.value.remark == ILLEGAL_REMARK
    with pytest.raises(PutRefused) as refused:
        single_record(_header("TIMER_DELAY_SEC\x011"), b"b", _ctx(enabled=False))
    assert refused.value.code == ResponseCode.SYSTEM_ERROR


def test_the_delivery_record() -> None:
    timer = MessageExt(
        topic="rmq_sys_wheel_timer",
        queue_id=0,
        body=b"body",
        flag=3,
        sys_flag=0,
        born_timestamp=NOW - 10,
        born_host="10.0.0.1",
        born_port=7,
        store_host="10.0.0.2",
        store_port=10911,
        reconsume_times=1,
        properties={"UNIQ_KEY": "U", "TIMER_OUT_MS": "1700000002000", "REAL_TOPIC": "T", "REAL_QID": "2"},
    )
    rec = delivery_record(timer, NOW, NOW + 2600)
    assert (rec.topic, rec.queue_id, rec.body, rec.flag, rec.born_timestamp) == ("T", 2, b"body", 3, NOW - 10)
    assert (rec.store_host, rec.store_port, rec.reconsume_times) == ("10.0.0.2", 10911, 1)
    pairs = dict(p.split("\x01") for p in bytes(rec.properties).decode().split("\x02") if p)
    # REAL_TOPIC/REAL_QID stay in the stored string (serialized before they are cleared)
    assert pairs == {
        "UNIQ_KEY": "U",
        "TIMER_OUT_MS": "1700000002000",
        "REAL_TOPIC": "T",
        "REAL_QID": "2",
        "TIMER_ENQUEUE_MS": "1700000000400",
        "TIMER_DEQUEUE_MS": "1700000003000",
    }
    for bad in ({"REAL_QID": "-1"}, {"REAL_QID": "1_0"}, {"REAL_TOPIC": None}):
        props = {k: v for k, v in (timer.properties | bad).items() if v is not None}
        with pytest.raises(StoreError, match="REAL_TOPIC/REAL_QID"):
            delivery_record(MessageExt(topic="rmq_sys_wheel_timer", properties=props), NOW, NOW)
    delivered = MessageExt(
        topic="T", queue_id=2, body=b"body", born_timestamp=NOW - 10, properties=pairs, stored_body=None
    )
    assert is_delivery_of(delivered, timer)
    for other in (
        MessageExt(topic="T", queue_id=1, body=b"body", born_timestamp=NOW - 10, properties=pairs),
        MessageExt(topic="T", queue_id=2, body=b"bodY", born_timestamp=NOW - 10, properties=pairs),
        MessageExt(topic="T", queue_id=2, body=b"body", born_timestamp=NOW - 9, properties=pairs),
        MessageExt(topic="T", queue_id=2, body=b"body", born_timestamp=NOW - 10, properties=timer.properties),
        MessageExt(
            topic="T", queue_id=2, body=b"body", born_timestamp=NOW - 10, properties=pairs | {"UNIQ_KEY": "V"}
        ),
    ):
        assert not is_delivery_of(other, timer)
