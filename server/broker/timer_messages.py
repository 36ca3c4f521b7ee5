"""5.x timer messages: which SEND is one, when it is due, what it is stored as and delivered as.

The 5.x broker's put hook (``HookUtils.handleScheduleMessage``/``checkIfTimerMessage``/
``transformTimerMessage``) and ``TimerMessageStore.convert``/``convertMessage``, as rules over
values (the caller passes the time):

- A message is a timer message when it carries ``TIMER_DELIVER_MS`` (an absolute time, ms; what a
  5.x Proxy makes of a gRPC ``delivery_timestamp``), ``TIMER_DELAY_MS`` or ``TIMER_DELAY_SEC``
  (relative to its arrival; a 5.x remoting client's ``setDelayTimeMs``/``setDelayTimeSec``), is not
  a half message, is not already in ``rmq_sys_wheel_timer`` and has no ``TIMER_OUT_MS``. A message
  that also has a delay level (``DELAY``) is not: the level wins and the three are dropped.
- Its delivery time: ``TIMER_DELAY_SEC`` first, then ``TIMER_DELAY_MS``, then ``TIMER_DELIVER_MS``,
  each read as Java's ``Long.parseLong`` (and added as Java's ``long`` adds); one Java cannot read is
  refused (MESSAGE_ILLEGAL). A time not after now is no timer: the message is stored in its topic at
  once, its properties as sent. A time further than ``timerMaxDelaySec`` ahead is refused
  (MESSAGE_ILLEGAL). With ``timerWheelEnable`` off every timer message is refused (SYSTEM_ERROR).
- Otherwise the time is rounded down to the wheel's precision (``timerPrecisionMs``; a time on a
  slot's edge goes one slot back) and stored as ``TIMER_OUT_MS``, with ``REAL_TOPIC``/``REAL_QID``,
  in ``rmq_sys_wheel_timer`` queue 0. The wheel hands a slot out once the clock has passed it by a
  whole slot: the message is due at ``TIMER_OUT_MS`` + precision, which is the asked time rounded
  up to the precision, never before it (``due_ms``).
- Its delivery (``delivery_record``) is the stored record put back into ``REAL_TOPIC``/``REAL_QID``,
  its properties those stored plus ``TIMER_ENQUEUE_MS`` (when the wheel took it: its store time
  here) and ``TIMER_DEQUEUE_MS`` (when it was handed out), serialized before ``REAL_TOPIC`` and
  ``REAL_QID`` are cleared from the map, so they stay in the stored string as the broker's do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from protocol.codes import ResponseCode
from protocol.custom_header_fields import java_parse_int, java_parse_long
from protocol.java_hashmap import JavaHashMap
from protocol.message import MessageExt
from protocol.message_properties import properties_to_string
from store.config.store_config import StoreConfig
from store.errors import StoreError
from store.write.writer import StoreRecord

TIMER_TOPIC = "rmq_sys_wheel_timer"
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
PROPERTY_TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
PROPERTY_TIMER_DELAY_MS = "TIMER_DELAY_MS"
PROPERTY_TIMER_OUT_MS = "TIMER_OUT_MS"
PROPERTY_TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
PROPERTY_TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
PROPERTY_TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QID = "REAL_QID"

#: The properties that make a message a timer message.
TIMER_REQUEST_PROPERTIES = (PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_DELAY_MS, PROPERTY_TIMER_DELAY_SEC)

_LONG = 1 << 64
_LONG_MAX = (1 << 63) - 1


def _java_long(value: int) -> int:
    """``value`` wrapped as Java's ``long`` arithmetic wraps it."""
    value %= _LONG
    return value - _LONG if value > _LONG_MAX else value


@dataclass(frozen=True, slots=True)
class TimerSettings:
    """The broker's timer settings (``MessageStoreConfig``'s defaults)."""

    enabled: bool = True
    precision_ms: int = 1000
    max_delay_sec: int = 3 * 24 * 3600

    @classmethod
    def of(cls, config: StoreConfig) -> TimerSettings:
        return cls(config.timer_wheel_enable, config.timer_precision_ms, config.timer_max_delay_sec)


DEFAULT_TIMER_SETTINGS = TimerSettings()


class TimerRefused(StoreError):
    """A timer message the broker does not store: the response code and remark of its answer."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


def timer_illegal(settings: TimerSettings) -> TimerRefused:
    """``WHEEL_TIMER_MSG_ILLEGAL``'s answer: MESSAGE_ILLEGAL with ``SendMessageProcessor``'s remark."""
    return TimerRefused(
        ResponseCode.MESSAGE_ILLEGAL,
        "timer message illegal, the delay time should not be bigger than the max delay "
        f"{settings.max_delay_sec * 1000}ms; or if set del msg, the delay time should be bigger than "
        "the current time",
    )


def timer_not_enabled(settings: TimerSettings) -> TimerRefused:
    """``WHEEL_TIMER_NOT_ENABLE``'s answer: SYSTEM_ERROR."""
    return TimerRefused(
        ResponseCode.SYSTEM_ERROR,
        f"accurate timer message is not enabled, timerWheelEnable is {str(settings.enabled).lower()}",
    )


def is_timer_request(topic: str, properties: Mapping[str, str]) -> bool:
    """``checkIfTimerMessage`` for a message without a delay level: asks for a delivery time, and
    is neither in the timer topic already nor carries a wheel time of its own."""
    if topic == TIMER_TOPIC or PROPERTY_TIMER_OUT_MS in properties:
        return False
    return any(name in properties for name in TIMER_REQUEST_PROPERTIES)


def drop_timer_request(properties: JavaHashMap) -> None:
    """A message with a delay level: ``checkIfTimerMessage`` clears the three timer properties."""
    for name in TIMER_REQUEST_PROPERTIES:
        properties.remove(name)


def deliver_ms(properties: Mapping[str, str], now_ms: int, settings: TimerSettings) -> int:
    """The delivery time a timer message asks for (``transformTimerMessage``'s parse), or
    ``TimerRefused`` when Java's ``Long.parseLong`` refuses the property it reads."""
    for name, scale in ((PROPERTY_TIMER_DELAY_SEC, 1000), (PROPERTY_TIMER_DELAY_MS, 1)):
        text = properties.get(name)
        if text is not None:
            value = java_parse_long(text)
            if value is None:
                raise timer_illegal(settings)
            return _java_long(now_ms + _java_long(value * scale))
    value = java_parse_long(properties.get(PROPERTY_TIMER_DELIVER_MS) or "")
    if value is None:
        raise timer_illegal(settings)
    return value


def timer_out_ms(deliver: int, precision_ms: int) -> int:
    """The wheel slot a delivery time is stored under (``TIMER_OUT_MS``): rounded down to the
    precision, and a time exactly on a slot's edge one slot back."""
    if deliver % precision_ms == 0:
        return deliver - precision_ms
    return deliver // precision_ms * precision_ms


def due_ms(out_ms: int, precision_ms: int) -> int:
    """When the wheel hands out the slot ``out_ms``: once the clock is a whole slot past it."""
    return out_ms + precision_ms


def wheel_time(properties: Mapping[str, str], now_ms: int, settings: TimerSettings) -> int | None:
    """``transformTimerMessage``'s decision for a timer request: its ``TIMER_OUT_MS``, None when the
    time is not after ``now_ms`` (stored in its topic at once), or ``TimerRefused``."""
    if not settings.enabled:
        raise timer_not_enabled(settings)
    deliver = deliver_ms(properties, now_ms, settings)
    if deliver <= now_ms:
        if PROPERTY_TIMER_DEL_UNIQKEY in properties:
            raise timer_illegal(settings)
        return None
    if deliver - now_ms > settings.max_delay_sec * 1000:
        raise timer_illegal(settings)
    return timer_out_ms(deliver, settings.precision_ms)


def stored_wheel_time(properties: Mapping[str, str]) -> int | None:
    """The ``TIMER_OUT_MS`` of a record in the timer topic, None when it has none Java can read (a
    record a client put there itself: the broker's wheel skips it too)."""
    text = properties.get(PROPERTY_TIMER_OUT_MS)
    return None if text is None else java_parse_long(text)


def delivery_record(timer: MessageExt, enqueue_ms: int, dequeue_ms: int) -> StoreRecord:
    """``TimerMessageStore.convert``: the record a due timer message is put back as."""
    props = JavaHashMap(timer.properties)
    real_topic = props.get(PROPERTY_REAL_TOPIC)
    real_qid = props.get(PROPERTY_REAL_QID)
    queue_id = java_parse_int(real_qid) if real_qid is not None else None
    if real_topic is None or queue_id is None or queue_id < 0:
        # only a record a client put into the timer topic itself can lack them: a SEND's queue id was
        # checked before it became a timer
        raise StoreError(
            f"timer record at {timer.commit_log_offset} has no REAL_TOPIC/REAL_QID a queue can have"
        )
    props.put(PROPERTY_TIMER_ENQUEUE_MS, str(enqueue_ms))
    props.put(PROPERTY_TIMER_DEQUEUE_MS, str(dequeue_ms))
    return StoreRecord(
        real_topic,
        _raw_body(timer),
        properties_to_string(props.ordered()).encode("utf-8", "replace"),
        queue_id=queue_id,
        flag=timer.flag,
        sys_flag=timer.sys_flag,
        born_timestamp=timer.born_timestamp,
        born_host=timer.born_host,
        born_port=timer.born_port,
        reconsume_times=timer.reconsume_times,
        store_host=timer.store_host,
        store_port=timer.store_port,
    )


def _raw_body(message: MessageExt) -> bytes:
    """The body as stored (compressed when the record is)."""
    return message.stored_body if message.stored_body is not None else message.body


def is_delivery_of(candidate: MessageExt, timer: MessageExt) -> bool:
    """Whether ``candidate`` is the record ``delivery_record`` made of ``timer`` (a restart's check
    of a delivery intent): same destination, born time, body and properties but the two the
    delivery adds."""
    if candidate.topic != timer.properties.get(PROPERTY_REAL_TOPIC):
        return False
    if str(candidate.queue_id) != timer.properties.get(PROPERTY_REAL_QID):
        return False
    if candidate.born_timestamp != timer.born_timestamp or _raw_body(candidate) != _raw_body(timer):
        return False
    added = (PROPERTY_TIMER_ENQUEUE_MS, PROPERTY_TIMER_DEQUEUE_MS)
    mine = {k: v for k, v in candidate.properties.items() if k not in added}
    theirs = {k: v for k, v in timer.properties.items() if k not in added}
    return mine == theirs and all(name in candidate.properties for name in added)
