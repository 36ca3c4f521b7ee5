"""The compiled request path reads the pulls' context at a batch's first pull, not per call.

Under ``serve --writable`` every ``answer_batch`` call is handed the pulls' context (the processor's
calls and the store's transfer limits); a batch of VIEWs or QUERYs holds no pull, and parsing the
context there was a lookup's largest per-call cost beyond the read-only server's (h42). These tests
call the C side directly with a context whose limits are not five ints: a batch without a pull must
be answered as if there were no pulls context at all, and the first pull must still refuse it.
"""

from __future__ import annotations

import json

import pytest

from protocol.codes import RequestCode
from server.remoting import request_path
from store.message_store import MessageStore
from tests.support.request_path import frame, view

pytestmark = pytest.mark.skipif(request_path._fast is None, reason="the compiled request path is not built")

#: Limits a pull could not be answered by: the C side must not read them before a pull.
BAD_PULLS = (print, print, ("not", "five", "ints"))


def _pull_frame() -> bytes:
    fields = {
        "commitOffset": "0",
        "consumerGroup": "G",
        "maxMsgNums": "32",
        "queueId": "0",
        "queueOffset": "0",
        "subVersion": "1",
        "suspendTimeoutMillis": "20",
        "sysFlag": "4",
        "topic": "TopicA",
        "subscription": "*",
        "expressionType": "TAG",
    }
    header = {"code": int(RequestCode.PULL_MESSAGE), "extFields": fields, "flag": 0, "language": "JAVA",
              "opaque": 9, "serializeTypeCurrentRPC": "JSON", "version": 407}  # fmt: skip
    return frame(json.dumps(header, separators=(",", ":")))


def _answer(store: MessageStore, data: bytes, pulls: object) -> tuple[object, ...]:
    maps, starts, lengths, shrunk, max_offset = store.view_snapshot()
    commitlog = store.commitlog
    offsets = (
        store.opened_queues(),
        commitlog,
        commitlog.mapped_file_size,
        [0] * request_path._N_COUNTS,
        pulls,
    )
    return request_path._fast.answer_batch(  # type: ignore[union-attr, no-any-return]
        data,
        0,
        maps,
        starts,
        lengths,
        max_offset,
        1 << 24,
        shrunk,
        1 << 24,
        1 << 16,
        1 << 20,
        None,
        offsets,
        None,
    )


def test_a_batch_without_a_pull_does_not_read_the_pulls_context(java_store: MessageStore) -> None:
    data = view(0, opaque=1) + view(0, opaque=2)
    with_bad = _answer(java_store, data, BAD_PULLS)
    without = _answer(java_store, data, None)
    assert with_bad[1] == len(data)  # both frames taken
    assert with_bad[2] == 2 and with_bad[3] == 2  # two VIEWs, both found
    assert with_bad == without


def test_the_first_pull_still_refuses_a_bad_context(java_store: MessageStore) -> None:
    with pytest.raises(TypeError):
        _answer(java_store, view(0) + _pull_frame(), BAD_PULLS)


def test_a_context_of_the_wrong_shape_is_refused_at_once(java_store: MessageStore) -> None:
    with pytest.raises(TypeError, match="pulls context"):
        _answer(java_store, view(0), (print, print))
