"""The SimpleConsumer lease table without a store or sockets: a list of messages per queue."""

from __future__ import annotations

import pytest

from protocol.message import MessageExt
from server.broker.receive_leases import MAX_RECEIVE_BYTES, InvalidReceiptHandle, ReceiptHandle, ReceiveLeases

TOPIC = "T"
GROUP = "G"
MIB = 1024 * 1024


class FakeQueues:
    """Queues of messages, each message's tag code its position's parity (for filtering)."""

    def __init__(self, counts: dict[int, int], start: int = 0) -> None:
        self.messages = {
            q: [
                MessageExt(topic=TOPIC, queue_id=q, queue_offset=start + i, commit_log_offset=1000 * q + i)
                for i in range(n)
            ]
            for q, n in counts.items()
        }
        self.start = start

    def add(self, queue_id: int) -> None:
        queue = self.messages[queue_id]
        offset = self.start + len(queue)
        queue.append(MessageExt(topic=TOPIC, queue_id=queue_id, queue_offset=offset))

    def read(self, topic, queue_id, offset, n, tags_codes, record_filter=None):
        queue = self.messages.get(queue_id, [])
        found, position = [], max(offset, self.start)
        while position < self.start + len(queue) and len(found) < n:
            message = queue[position - self.start]
            if tags_codes is None or (position % 2) in tags_codes:
                found.append(message)
            position += 1
        return found, position

    def bounds(self, topic, queue_id):
        return self.start, self.start + len(self.messages.get(queue_id, []))


def make(queues: FakeQueues, offsets: dict | None = None):
    offsets = {} if offsets is None else offsets
    dead: list[MessageExt] = []
    leases = ReceiveLeases(
        queues,
        broker_name="b",
        commit=lambda g, t, q, o: offsets.__setitem__((g, t, q), o),
        committed=lambda g, t, q: offsets.get((g, t, q), -1),
        dead_letter=lambda g, m: dead.append(m),
    )
    return leases, offsets, dead


def test_receive_ack_moves_committed_offset_over_acked_prefix_only() -> None:
    leases, offsets, _ = make(FakeQueues({0: 3}))
    got = leases.receive(GROUP, TOPIC, [0], 3, 30_000, 1000, max_attempts=17)
    assert [d.message.queue_offset for d in got] == [0, 1, 2]
    assert [d.attempt for d in got] == [1, 1, 1]
    assert offsets[(GROUP, TOPIC, 0)] == 0
    leases.ack(GROUP, TOPIC, got[1].handle)
    assert offsets[(GROUP, TOPIC, 0)] == 0  # offset 0 still out
    leases.ack(GROUP, TOPIC, got[0].handle)
    assert offsets[(GROUP, TOPIC, 0)] == 2
    leases.ack(GROUP, TOPIC, got[2].handle)
    assert offsets[(GROUP, TOPIC, 0)] == 3
    assert leases.receive(GROUP, TOPIC, [0], 3, 30_000, 10**9, max_attempts=17) == []
    with pytest.raises(InvalidReceiptHandle):
        leases.ack(GROUP, TOPIC, got[2].handle)  # acked twice


def test_leased_messages_are_invisible_until_the_lease_expires_then_redelivered_with_attempt_2() -> None:
    leases, _, _ = make(FakeQueues({0: 2}))
    first = leases.receive(GROUP, TOPIC, [0], 1, 5_000, 1000, max_attempts=17)
    assert [d.message.queue_offset for d in first] == [0]
    second = leases.receive(GROUP, TOPIC, [0], 5, 5_000, 2000, max_attempts=17)
    assert [d.message.queue_offset for d in second] == [1]  # offset 0 is still invisible
    again = leases.receive(GROUP, TOPIC, [0], 5, 5_000, 6000, max_attempts=17)
    assert [(d.message.queue_offset, d.attempt) for d in again] == [(0, 2)]
    with pytest.raises(InvalidReceiptHandle):
        leases.ack(GROUP, TOPIC, first[0].handle)  # redelivered: the old handle is stale
    leases.ack(GROUP, TOPIC, again[0].handle)


def test_expired_lease_not_yet_redelivered_can_still_be_acked() -> None:
    leases, offsets, _ = make(FakeQueues({0: 1}))
    got = leases.receive(GROUP, TOPIC, [0], 1, 1_000, 0, max_attempts=17)
    leases.ack(GROUP, TOPIC, got[0].handle)
    assert offsets[(GROUP, TOPIC, 0)] == 1
    assert leases.receive(GROUP, TOPIC, [0], 1, 1_000, 50_000, max_attempts=17) == []


def test_change_invisible_gives_a_new_handle_and_deadline_and_refuses_expired_ones() -> None:
    leases, _, _ = make(FakeQueues({0: 1}))
    got = leases.receive(GROUP, TOPIC, [0], 1, 1_000, 0, max_attempts=17)[0]
    changed = leases.change_invisible(GROUP, TOPIC, got.handle, 10_000, 500)
    assert changed is not None and changed.handle != got.handle and changed.deadline == 10_500
    assert changed.attempt == 1
    with pytest.raises(InvalidReceiptHandle):
        leases.ack(GROUP, TOPIC, got.handle)
    assert leases.receive(GROUP, TOPIC, [0], 1, 1_000, 5_000, max_attempts=17) == []  # not due yet
    with pytest.raises(InvalidReceiptHandle, match="expired"):
        leases.change_invisible(GROUP, TOPIC, changed.handle, 1_000, 10_500)
    assert [d.attempt for d in leases.receive(GROUP, TOPIC, [0], 1, 1_000, 10_500, max_attempts=17)] == [2]


def test_past_max_attempts_goes_to_the_dead_letter_queue_and_is_acked() -> None:
    leases, offsets, dead = make(FakeQueues({0: 1}))
    now = 0
    attempts = []
    for _ in range(3):
        got = leases.receive(GROUP, TOPIC, [0], 1, 1_000, now, max_attempts=3)
        attempts += [d.attempt for d in got]
        now += 1_000
    assert attempts == [1, 2, 3]
    assert leases.receive(GROUP, TOPIC, [0], 1, 1_000, now, max_attempts=3) == []
    assert [m.queue_offset for m in dead] == [0]
    assert offsets[(GROUP, TOPIC, 0)] == 1


def test_record_reconsume_times_count_in_the_attempt() -> None:
    queues = FakeQueues({0: 1})
    queues.messages[0][0].reconsume_times = 4
    leases, _, _ = make(queues)
    assert [d.attempt for d in leases.receive(GROUP, TOPIC, [0], 1, 1_000, 0, max_attempts=17)] == [5]
    leases2, _, dead2 = make(queues)
    assert leases2.receive(GROUP, TOPIC, [0], 1, 1_000, 0, max_attempts=4) == []
    assert len(dead2) == 1


def test_starts_at_committed_offset_and_groups_are_independent() -> None:
    queues = FakeQueues({0: 5})
    leases, _, _ = make(queues, {(GROUP, TOPIC, 0): 3})
    assert [
        d.message.queue_offset for d in leases.receive(GROUP, TOPIC, [0], 9, 1_000, 0, max_attempts=17)
    ] == [3, 4]
    assert len(leases.receive("other", TOPIC, [0], 9, 1_000, 0, max_attempts=17)) == 5


def test_a_new_group_on_a_trimmed_queue_starts_at_its_end() -> None:
    queues = FakeQueues({0: 2}, start=10)
    leases, _, _ = make(queues)
    assert leases.receive(GROUP, TOPIC, [0], 9, 1_000, 0, max_attempts=17) == []
    queues.add(0)
    assert [
        d.message.queue_offset for d in leases.receive(GROUP, TOPIC, [0], 9, 1_000, 0, max_attempts=17)
    ] == [12]


def test_filtered_out_offsets_do_not_hold_back_the_committed_offset() -> None:
    leases, offsets, _ = make(FakeQueues({0: 4}))
    got = leases.receive(GROUP, TOPIC, [0], 9, 1_000, 0, max_attempts=17, tags_codes=frozenset({1}))
    assert [d.message.queue_offset for d in got] == [1, 3]
    for d in got:
        leases.ack(GROUP, TOPIC, d.handle)
    assert offsets[(GROUP, TOPIC, 0)] == 4


def test_receive_spans_queues_in_the_order_given_up_to_n() -> None:
    leases, _, _ = make(FakeQueues({0: 2, 1: 2}))
    got = leases.receive(GROUP, TOPIC, [1, 0], 3, 1_000, 0, max_attempts=17)
    assert [(d.message.queue_id, d.message.queue_offset) for d in got] == [(1, 0), (1, 1), (0, 0)]


def test_receipt_handle_has_the_proxy_fields_and_garbage_is_refused() -> None:
    leases, _, _ = make(FakeQueues({2: 1}))
    got = leases.receive(GROUP, TOPIC, [2], 1, 7_000, 100, max_attempts=17)[0]
    handle = ReceiptHandle.decode(got.handle)
    assert (
        handle.retrieve_time,
        handle.invisible_time,
        handle.broker_name,
        handle.queue_id,
        handle.offset,
    ) == (
        100,
        7_000,
        "b",
        2,
        0,
    )
    assert handle.commit_log_offset == 2000 and handle.encode() == got.handle
    for bad in ("", "x", "1 2 3 4 N b 2 0", "a b c d N b 2 0 0"):
        with pytest.raises(InvalidReceiptHandle):
            leases.ack(GROUP, TOPIC, bad)
    with pytest.raises(InvalidReceiptHandle):
        leases.ack("other", TOPIC, got.handle)


def test_orderly_queue_hands_out_nothing_while_a_lease_is_out_then_the_next_after_the_ack() -> None:
    leases, offsets, _ = make(FakeQueues({0: 3, 1: 1}))
    (first,) = leases.receive(GROUP, TOPIC, [0], 1, 10_000, 1000, max_attempts=17, orderly=True)
    assert first.message.queue_offset == 0
    # queue 0 is locked while offset 0 is out: only queue 1 has something to give
    later = leases.receive(GROUP, TOPIC, [0, 1], 5, 10_000, 2000, max_attempts=17, orderly=True)
    assert [(d.message.queue_id, d.message.queue_offset) for d in later] == [(1, 0)]
    assert leases.receive(GROUP, TOPIC, [0], 5, 10_000, 3000, max_attempts=17, orderly=True) == []
    # the same table not orderly (another group's view of it) would have handed out offset 1
    assert [
        d.message.queue_offset for d in leases.receive("Other", TOPIC, [0], 1, 10_000, 3000, max_attempts=17)
    ] == [0]
    leases.ack(GROUP, TOPIC, first.handle)
    assert offsets[(GROUP, TOPIC, 0)] == 1
    after = leases.receive(GROUP, TOPIC, [0], 1, 10_000, 4000, max_attempts=17, orderly=True)
    assert [d.message.queue_offset for d in after] == [1]


def test_orderly_batch_locks_its_queue_until_every_message_of_it_is_acked() -> None:
    leases, _, _ = make(FakeQueues({0: 4}))
    batch = leases.receive(GROUP, TOPIC, [0], 2, 10_000, 1000, max_attempts=17, orderly=True)
    assert [d.message.queue_offset for d in batch] == [0, 1]
    leases.ack(GROUP, TOPIC, batch[1].handle)  # the later one acked first: offset 0 still out
    assert leases.receive(GROUP, TOPIC, [0], 2, 10_000, 2000, max_attempts=17, orderly=True) == []
    leases.ack(GROUP, TOPIC, batch[0].handle)
    nxt = leases.receive(GROUP, TOPIC, [0], 2, 10_000, 3000, max_attempts=17, orderly=True)
    assert [d.message.queue_offset for d in nxt] == [2, 3]


def test_orderly_unacked_message_comes_back_first_once_due_and_keeps_the_queue_locked() -> None:
    leases, _, _ = make(FakeQueues({0: 2}))
    (first,) = leases.receive(GROUP, TOPIC, [0], 1, 10_000, 1000, max_attempts=17, orderly=True)
    assert first.message.queue_offset == 0
    assert leases.receive(GROUP, TOPIC, [0], 2, 10_000, 10_999, max_attempts=17, orderly=True) == []
    # due at 11 000: the same message again (attempt 2) before offset 1, and alone when asked for one
    (again,) = leases.receive(GROUP, TOPIC, [0], 1, 10_000, 11_000, max_attempts=17, orderly=True)
    assert (again.message.queue_offset, again.attempt) == (0, 2)
    assert leases.receive(GROUP, TOPIC, [0], 2, 10_000, 12_000, max_attempts=17, orderly=True) == []
    # ChangeInvisibleDuration keeps it locked for the new time
    changed = leases.change_invisible(GROUP, TOPIC, again.handle, 30_000, 13_000)
    assert changed is not None
    assert leases.receive(GROUP, TOPIC, [0], 2, 10_000, 42_999, max_attempts=17, orderly=True) == []
    leases.ack(GROUP, TOPIC, changed.handle)
    (second,) = leases.receive(GROUP, TOPIC, [0], 2, 10_000, 43_000, max_attempts=17, orderly=True)
    assert (second.message.queue_offset, second.attempt) == (1, 1)


def renewing(queues: FakeQueues, live: set[str]) -> ReceiveLeases:
    return ReceiveLeases(
        queues,
        broker_name="b",
        commit=lambda g, t, q, o: None,
        committed=lambda g, t, q: -1,
        dead_letter=lambda g, m: None,
        alive=lambda g, client: (g, client) in live,
    )


def test_an_auto_renew_lease_stays_invisible_while_its_client_lives_and_its_first_handle_acks() -> None:
    live = {(GROUP, "c1")}
    leases = renewing(FakeQueues({0: 1}), live)
    got = leases.receive(GROUP, TOPIC, [0], 1, 60_000, 0, max_attempts=17, client_id="c1", auto_renew=True)
    # Before its deadline a look is due (10 s ahead), to renew it.
    assert leases.next_deadline(GROUP, TOPIC) == 50_000
    # Looked at 55 s in (a receive of the same group), it is renewed to 55 s + 60 s, not handed out.
    assert leases.receive(GROUP, TOPIC, [0], 1, 60_000, 55_000, max_attempts=17) == []
    assert leases.next_deadline(GROUP, TOPIC) == 115_000 - 10_000
    # The periodic sweep renews it too, and past the first deadline it is still invisible.
    leases.renew_all(110_000)
    assert leases.receive(GROUP, TOPIC, [0], 1, 60_000, 150_000, max_attempts=17) == []
    leases.ack(GROUP, TOPIC, got[0].handle)  # the client's original handle
    assert leases.receive(GROUP, TOPIC, [0], 1, 60_000, 10**9, max_attempts=17) == []


def test_an_auto_renew_lease_of_a_client_gone_runs_out_and_the_message_comes_again() -> None:
    live = {(GROUP, "c1")}
    leases = renewing(FakeQueues({0: 1}), live)
    leases.receive(GROUP, TOPIC, [0], 1, 60_000, 0, max_attempts=17, client_id="c1", auto_renew=True)
    live.clear()
    leases.renew_all(55_000)
    again = leases.receive(GROUP, TOPIC, [0], 1, 60_000, 60_000, max_attempts=17, client_id="c2")
    assert [(d.message.queue_offset, d.attempt) for d in again] == [(0, 2)]


def test_renewal_stops_at_the_maximum_and_a_plain_lease_is_never_renewed() -> None:
    from server.broker.receive_leases import RENEW_MAX_MS

    live = {(GROUP, "c1")}
    leases = renewing(FakeQueues({0: 2}), live)
    leases.receive(GROUP, TOPIC, [0], 1, 60_000, 0, max_attempts=17, client_id="c1", auto_renew=True)
    plain = leases.receive(GROUP, TOPIC, [0], 1, 60_000, 0, max_attempts=17, client_id="c1")
    assert [d.message.queue_offset for d in plain] == [1]
    now = 0
    while now < RENEW_MAX_MS:
        now += 5_000
        leases.renew_all(now)
        if now == 60_000:
            # the plain lease ran out at 60 s and is due again; the auto-renew one is not
            due = leases.receive(GROUP, TOPIC, [0], 2, 60_000, now, max_attempts=17)
            assert [d.message.queue_offset for d in due] == [1]
    again = leases.receive(GROUP, TOPIC, [0], 2, 60_000, RENEW_MAX_MS + 1, max_attempts=17)
    assert 0 in [d.message.queue_offset for d in again]


def test_committed_offset_is_the_lowest_outstanding_after_redeliveries_changes_and_acks_in_any_order() -> (
    None
):
    """The committed offset is read off the first lease (``QueueState``'s ascending order): it must
    stay the lowest offset still out while expired leases are handed out again, handles changed and
    acks come in any order. The model here is the test's own set of offsets received and not acked."""
    import random

    rng = random.Random(7)
    leases, offsets, _ = make(FakeQueues({0: 400}))
    out: dict[int, str] = {}  # offset -> its current handle
    now = 1000
    for _ in range(300):
        now += 700
        step = rng.random()
        if step < 0.4 or not out:
            for d in leases.receive(GROUP, TOPIC, [0], rng.randint(1, 6), 10_000, now, max_attempts=10**6):
                out[d.message.queue_offset] = d.handle
        elif step < 0.55:
            offset = rng.choice(sorted(out))
            try:
                changed = leases.change_invisible(GROUP, TOPIC, out[offset], rng.choice((1_000, 30_000)), now)
            except InvalidReceiptHandle:
                continue  # expired: still out, handed out again by a later receive
            assert changed is not None
            out[offset] = changed.handle
        else:
            offset = rng.choice(sorted(out))
            leases.ack(GROUP, TOPIC, out.pop(offset))  # an expired lease not handed out again acks too
        if (GROUP, TOPIC, 0) in offsets and out:
            assert offsets[(GROUP, TOPIC, 0)] == min(out), sorted(out)[:5]


def test_a_receive_hands_out_first_every_lease_due_in_offset_order_whatever_the_invisible_times() -> None:
    """The receive skips its walk over the leases while none can be due (``QueueState.due_from``);
    the model here is the test's own table of offsets out and their deadlines: each receive must
    hand out first exactly the model's due offsets (in offset order, up to n), then new ones."""
    import random

    rng = random.Random(11)
    leases, _, _ = make(FakeQueues({0: 2000}))
    deadline: dict[int, int] = {}  # offset -> deadline of its current lease
    handles: dict[int, str] = {}
    now = 0
    for _ in range(400):
        now += rng.choice((0, 100, 700, 3_000))
        n = rng.randint(1, 8)
        step = rng.random()
        if step < 0.6 or not handles:
            invisible = rng.choice((1_000, 2_500, 10_000, 60_000))
            got = leases.receive(GROUP, TOPIC, [0], n, invisible, now, max_attempts=10**6)
            due = sorted(o for o, d in deadline.items() if d <= now)[:n]
            assert [d.message.queue_offset for d in got][: len(due)] == due
            assert all(d.message.queue_offset not in deadline for d in got[len(due) :])
            for d in got:
                deadline[d.message.queue_offset] = d.deadline
                handles[d.message.queue_offset] = d.handle
                assert d.deadline == now + invisible
        elif step < 0.75:
            offset = rng.choice(sorted(handles))
            if deadline[offset] <= now:
                continue
            changed = leases.change_invisible(
                GROUP, TOPIC, handles[offset], rng.choice((0, 500, 20_000)), now
            )
            assert changed is not None
            deadline[offset], handles[offset] = changed.deadline, changed.handle
        else:
            offset = rng.choice(sorted(handles))
            leases.ack(GROUP, TOPIC, handles.pop(offset))
            del deadline[offset]
    # the table's handle index holds the current leases' handles only (no growth with redeliveries)
    assert set(leases._issued) == set(handles.values())


def test_a_shorter_lease_taken_after_a_longer_one_falls_due_first() -> None:
    leases, _, _ = make(FakeQueues({0: 2}))
    leases.receive(GROUP, TOPIC, [0], 1, 60_000, 0, max_attempts=17)
    leases.receive(GROUP, TOPIC, [0], 1, 10_000, 1_000, max_attempts=17)
    assert leases.receive(GROUP, TOPIC, [0], 2, 10_000, 10_999, max_attempts=17) == []
    again = leases.receive(GROUP, TOPIC, [0], 2, 10_000, 11_000, max_attempts=17)
    assert [(d.message.queue_offset, d.attempt) for d in again] == [(1, 2)]


def test_a_batch_ack_answers_each_handle_and_commits_each_queue_once() -> None:
    commits: list[tuple[int, int]] = []
    offsets: dict = {}

    def commit(g: str, t: str, q: int, o: int) -> None:
        commits.append((q, o))
        offsets[(g, t, q)] = o

    leases = ReceiveLeases(
        FakeQueues({0: 4, 1: 2}),
        broker_name="b",
        commit=commit,
        committed=lambda g, t, q: offsets.get((g, t, q), -1),
        dead_letter=lambda g, m: None,
    )
    got = leases.receive(GROUP, TOPIC, [0, 1], 6, 30_000, 0, max_attempts=17)
    commits.clear()
    handles = [d.handle for d in got]
    results, queues = leases.ack_all(
        GROUP, TOPIC, [handles[0], "garbage", handles[1], handles[4], handles[0]]
    )
    assert results == [
        None,
        "parse failed",
        None,
        None,
        "the receipt handle names no message received and not acked",
    ]
    assert queues == {0, 1}
    assert sorted(commits) == [(0, 2), (1, 1)]  # one commit per queue, over the acked prefix
    with pytest.raises(InvalidReceiptHandle):
        leases.ack(GROUP, TOPIC, handles[1])


def test_a_handle_is_judged_by_its_decoded_fields_whether_or_not_it_is_the_text_handed_out() -> None:
    """The ack finds a handle as handed out by its text, any other by decoding it: a handle whose
    retrieve time or commit log offset the client changed (fields the ack does not look at) still
    acks, written with a '+' too; one of another group, or made stale by a redelivery, is refused."""
    leases, _, _ = make(FakeQueues({0: 3}))
    got = leases.receive(GROUP, TOPIC, [0], 3, 1_000, 0, max_attempts=17)
    fields = got[0].handle.split(" ")
    fields[1], fields[8] = "123", "+77"
    leases.ack(GROUP, TOPIC, " ".join(fields))
    with pytest.raises(InvalidReceiptHandle):
        leases.ack(GROUP, TOPIC, got[0].handle)  # acked through its changed twin
    with pytest.raises(InvalidReceiptHandle):
        leases.ack("other", TOPIC, got[1].handle)
    with pytest.raises(InvalidReceiptHandle):
        leases.ack(GROUP, "other", got[1].handle)
    again = leases.receive(GROUP, TOPIC, [0], 1, 1_000, 5_000, max_attempts=17)
    assert [d.message.queue_offset for d in again] == [1]
    with pytest.raises(InvalidReceiptHandle):
        leases.ack(GROUP, TOPIC, got[1].handle)
    leases.ack(GROUP, TOPIC, got[2].handle)  # expired, not handed out again: still acks
    leases.ack(GROUP, TOPIC, again[0].handle)


@pytest.mark.parametrize(
    "values",
    [
        (0, 0, 0, 1, "b", 0, 0),
        (7, 1_764_434_400_000, 30_000, 123_456, "broker-a", 3, 987_654_321),
        (2**63 - 1, 2**62, 43_200_000, 2**40, "名前", 1023, 2**63 - 1),
    ],
)
def test_a_handle_written_at_once_is_the_handles_encoding(values: tuple) -> None:
    offset, retrieve, invisible, lease_id, broker, queue_id, clo = values
    whole = ReceiptHandle(offset, retrieve, invisible, lease_id, "N", broker, queue_id, offset, clo)
    assert ReceiptHandle.encode_fields(*values) == whole.encode()
    assert ReceiptHandle.decode(whole.encode()) == whole


class BigBodies(FakeQueues):
    """One queue of messages with 1 MiB bodies, read as the store reads: at most 256 KiB of them a
    read, but always the first (``maxTransferBytesOnMessageInMemory``)."""

    def __init__(self, count: int) -> None:
        super().__init__({0: 0})
        body = b"b" * MIB
        self.messages[0] = [
            MessageExt(topic=TOPIC, queue_id=0, queue_offset=i, body=body) for i in range(count)
        ]

    def read(self, topic, queue_id, offset, n, tags_codes, record_filter=None):
        return super().read(topic, queue_id, offset, 1, tags_codes, record_filter)


def test_a_receive_stops_at_its_bytes_and_the_next_one_goes_on_from_there() -> None:
    """Ten bodies of 1 MiB: a receive of 32 hands out the first 4 MiB (``MAX_RECEIVE_BYTES``), not
    10 MiB in one call; the next receives go on from there, each message once, every one in the end."""
    queues = BigBodies(10)
    leases, offsets, _ = make(queues)
    assert leases.max_bytes == MAX_RECEIVE_BYTES == 4 * MIB
    first = leases.receive(GROUP, TOPIC, [0], 32, 30_000, 1000, max_attempts=17)
    assert [d.message.queue_offset for d in first] == [0, 1, 2, 3]
    second = leases.receive(GROUP, TOPIC, [0], 32, 30_000, 1000, max_attempts=17)
    third = leases.receive(GROUP, TOPIC, [0], 32, 30_000, 1000, max_attempts=17)
    assert [d.message.queue_offset for d in second] == [4, 5, 6, 7]
    assert [d.message.queue_offset for d in third] == [8, 9]
    for delivery in first + second + third:
        leases.ack(GROUP, TOPIC, delivery.handle)
    assert offsets[(GROUP, TOPIC, 0)] == 10
    # their leases expired unacked, the messages come back within the same bound
    queues2 = BigBodies(6)
    again, _, _ = make(queues2)
    out = again.receive(GROUP, TOPIC, [0], 32, 5_000, 1000, max_attempts=17)
    assert len(out) == 4
    redelivered = again.receive(GROUP, TOPIC, [0], 32, 5_000, 7000, max_attempts=17)
    assert [(d.message.queue_offset, d.attempt) for d in redelivered] == [(0, 2), (1, 2), (2, 2), (3, 2)]


def test_a_body_larger_than_the_bound_is_still_handed_out() -> None:
    queues = BigBodies(3)
    leases, _, _ = make(queues)
    leases.max_bytes = MIB // 2
    got = leases.receive(GROUP, TOPIC, [0], 32, 30_000, 1000, max_attempts=17)
    assert [d.message.queue_offset for d in got] == [0]
