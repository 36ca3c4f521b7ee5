"""The half message's state machine, and the records of a transaction's second phase (sans-IO).

The moves are 4.9.7's (``TransactionalMessageServiceImpl.needDiscard``, ``EndTransactionProcessor``);
the record expectations come from the golden capture of the real broker (the committed message's
properties, the check-back's ``WAIT=false``) and from its sources (the op record's two properties).
"""

from __future__ import annotations

import pytest

from protocol.message import MessageExt, decode_message
from protocol.message_properties import string_to_properties
from server.broker.transaction_states import HalfEvent, HalfMessageState, HalfState, HalfStateError
from server.broker.transactions import check_back, committed_record, op_record, renewed_half_record

MAX = 3


def test_checks_count_up_then_the_message_is_discarded() -> None:
    state = HalfMessageState()
    assert state.state is HalfState.PREPARED
    seen = []
    while not state.must_discard(MAX):
        state = state.apply(HalfEvent.CHECK, MAX)
        seen.append(state.check_times_property())
    assert seen == ["1", "2", "3"]
    with pytest.raises(HalfStateError):
        state.apply(HalfEvent.CHECK, MAX)
    assert state.apply(HalfEvent.DISCARD, MAX) == HalfMessageState(HalfState.DISCARDED, 3)


@pytest.mark.parametrize("event", [HalfEvent.COMMIT, HalfEvent.ROLLBACK])
@pytest.mark.parametrize("start", [HalfMessageState(), HalfMessageState(HalfState.CHECKING, 2)])
def test_a_decision_is_final(event: HalfEvent, start: HalfMessageState) -> None:
    done = start.apply(event, MAX)
    assert (
        done.state
        is {HalfEvent.COMMIT: HalfState.COMMITTED, HalfEvent.ROLLBACK: HalfState.ROLLED_BACK}[event]
    )
    assert done.final
    for later in HalfEvent:
        with pytest.raises(HalfStateError):
            done.apply(later, MAX)


def test_discard_before_the_limit_and_check_property_of_a_prepared_one_are_refused() -> None:
    with pytest.raises(HalfStateError):
        HalfMessageState(HalfState.CHECKING, 1).apply(HalfEvent.DISCARD, MAX)
    with pytest.raises(HalfStateError):
        HalfMessageState().check_times_property()
    # Too old to keep asking about: given up on whatever its count.
    assert HalfMessageState().apply(HalfEvent.EXPIRE, MAX).state is HalfState.DISCARDED


@pytest.mark.parametrize(
    ("stored", "expected"),
    [(None, HalfMessageState()), ("4", HalfMessageState(HalfState.CHECKING, 4)),
     ("x", HalfMessageState(HalfState.CHECKING, -1)), (" 2", HalfMessageState(HalfState.CHECKING, -1))],
)  # fmt: skip
def test_state_from_the_stored_property(stored: str | None, expected: HalfMessageState) -> None:
    """Java's ``getInt``: what ``Integer.parseInt`` refuses counts -1, so the next check stores 0."""
    state = HalfMessageState.from_check_times(stored)
    assert state == expected
    if stored is not None and expected.checks == -1:
        assert state.apply(HalfEvent.CHECK, MAX).check_times_property() == "0"


def half_message() -> MessageExt:
    props = {
        "REAL_TOPIC": "T",
        "TRAN_MSG": "true",
        "UNIQ_KEY": "C0FFEE00000000000000000000000004",
        "CLUSTER": "DefaultCluster",
        "PGROUP": "G",
        "WAIT": "true",
        "TAGS": "Txcommit",
        "REAL_QID": "2",
    }
    return MessageExt(
        queue_id=0,
        flag=7,
        queue_offset=5,
        commit_log_offset=1735,
        born_timestamp=1700000000000,
        store_timestamp=1700000000100,
        born_host="10.0.0.1",
        born_port=5000,
        store_host="127.0.0.1",
        store_port=10911,
        reconsume_times=1,
        body=b"half-commit",
        topic="RMQ_SYS_TRANS_HALF_TOPIC",
        properties=props,
    )


def test_the_committed_record_keeps_the_half_properties_in_the_broker_order() -> None:
    rec = committed_record(half_message())
    assert (rec.topic, rec.queue_id, rec.sys_flag, rec.prepared_transaction_offset) == ("T", 2, 8, 1735)
    assert (rec.flag, rec.reconsume_times, rec.born_host, rec.born_port) == (7, 1, "10.0.0.1", 5000)
    # The order the real broker stored them in (golden capture, step 66).
    expected = ["REAL_TOPIC", "TRAN_MSG", "UNIQ_KEY", "CLUSTER", "PGROUP", "WAIT", "TAGS", "REAL_QID"]
    props = rec.properties if isinstance(rec.properties, str) else rec.properties.decode()
    assert list(string_to_properties(props)) == expected


def raw(properties: str | bytes) -> bytes:
    return properties if isinstance(properties, bytes) else properties.encode()


def test_op_record_and_renewed_copy() -> None:
    half = half_message()
    op = op_record(half, "192.168.0.9", 10911, 1800000000000)
    assert (op.topic, op.queue_id, op.body, op.sys_flag) == ("RMQ_SYS_TRANS_OP_HALF_TOPIC", 0, b"5", 0)
    # Two keys of a default HashMap: WAIT's bucket comes before TAGS' (as in the golden committed
    # record's 16-bucket map), no trailing separator.
    assert op.properties == b"WAIT\x01true\x02TAGS\x01d"
    assert (op.born_host, op.store_host, op.born_timestamp) == ("192.168.0.9", "192.168.0.9", 1800000000000)
    half.properties["TRANSACTION_CHECK_TIMES"] = "1"
    copy = renewed_half_record(half)
    # renewHalfMessageInner copies neither the flag nor the reconsume times.
    assert (copy.topic, copy.flag, copy.reconsume_times, copy.sys_flag) == (half.topic, 0, 0, 0)
    assert b"TRANSACTION_CHECK_TIMES\x011" in raw(copy.properties)
    immune = renewed_half_record(half, immunity=True)
    assert b"TRAN_PREPARED_QUEUE_OFFSET\x015" in raw(immune.properties)


def test_check_back_shows_the_real_queue_and_the_copy() -> None:
    half = half_message()
    half.properties["TRANSACTION_CHECK_TIMES"] = "1"
    check = check_back(half, 3143, 3, "7F00000100002A9F0000000000000C47")
    assert check.group == "G"
    assert check.ext_fields == {
        "commitLogOffset": "3143",
        "msgId": "C0FFEE00000000000000000000000004",
        "tranStateTableOffset": "3",
        "offsetMsgId": "7F00000100002A9F0000000000000C47",
        "transactionId": "C0FFEE00000000000000000000000004",
    }
    shown = decode_message(check.body)
    assert (shown.topic, shown.queue_id, shown.queue_offset, shown.commit_log_offset) == ("T", 2, 3, 3143)
    assert (shown.store_timestamp, shown.flag, shown.body) == (1700000000100, 7, b"half-commit")
    # Golden step 67: the copy's property map is the original's, which Java sets WAIT=false in.
    assert list(shown.properties) == [
        "REAL_TOPIC", "TRANSACTION_CHECK_TIMES", "TRAN_MSG", "UNIQ_KEY", "CLUSTER", "PGROUP", "WAIT", "TAGS",
        "REAL_QID",
    ]  # fmt: skip
    assert shown.properties["WAIT"] == "false"
