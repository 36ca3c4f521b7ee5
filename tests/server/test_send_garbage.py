"""Garbage SENDs: every one gets an answer with a RocketMQ code, none a traceback in the log.

Seeded random mutations of real SEND requests (header values, properties with bad UTF-16 halves,
control bytes and huge numbers, batch bodies cut or overwritten) through the dispatcher, as a
connection would hand them over.
"""

from __future__ import annotations

import asyncio
import logging
import random
from pathlib import Path

import pytest

from protocol.codes import RequestCode, ResponseCode
from protocol.command import RemotingCommand
from protocol.send_message import SendMessageRequestHeader, client_properties, encode_batch_body
from server.broker.writable_store import WritableStore
from server.remoting.dispatch import Dispatcher
from server.remoting.processors.send_message import SEND_CODES, SendMessageProcessor
from store.config.store_config import StoreConfig

VALUES = ["", "-1", "0", "1", "4", "99999999999999999999", "true", "x", "\ud800", "T", "TBW102", "%RETRY%g"]


def _header(rng: random.Random, batch: bool) -> dict[str, str]:
    props = client_properties(
        rng.choice(["k", "a b", "\ud800", "\x01\x02"]), rng.choice([None, "t", "\ud83d"]), {"p": "v"}, "U"
    )
    if rng.random() < 0.3:
        props += rng.choice(["\x02DELAY\x01x", "\x02DELAY\x0199", "\x02TRAN_MSG\x01true", "\x02\x01\x01"])
    header = SendMessageRequestHeader(
        "g", "T", "TBW102", 4, rng.randrange(-2, 6), 0, 1, 0, props, batch=batch
    )
    fields = header.to_ext_fields(v2=True)
    for _ in range(rng.randrange(0, 3)):
        key = rng.choice(list(fields))
        if rng.random() < 0.2:
            del fields[key]
        else:
            fields[key] = rng.choice(VALUES)
    return fields


def _body(rng: random.Random, batch: bool) -> bytes | None:
    if batch:
        body = bytearray(
            encode_batch_body([(0, b"m" * rng.randrange(0, 50), {"KEYS": "k"})] * rng.randrange(1, 4))
        )
        for _ in range(rng.randrange(0, 3)):
            if body:
                body[rng.randrange(len(body))] = rng.randrange(256)
        return bytes(body[: rng.randrange(len(body) + 1)])
    return rng.choice([None, b"", b"x" * rng.randrange(0, 5000)])


def test_garbage_sends_are_answered_without_tracebacks(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = StoreConfig.for_store(tmp_path / "s", mapped_file_size_commit_log=1 << 20, max_message_size=4096)
    rng = random.Random(20261122)
    with WritableStore(config) as store:
        store.create_topic("T", 4)
        processor = SendMessageProcessor(store, cluster="C", max_message_size=4096)
        dispatcher = Dispatcher()
        for code in SEND_CODES:
            dispatcher.register(code, processor.process)
        codes: set[int] = set()
        with caplog.at_level(logging.WARNING):
            for i in range(600):
                batch = rng.random() < 0.4
                code = RequestCode.SEND_BATCH_MESSAGE if batch else rng.choice(SEND_CODES)
                request = RemotingCommand(
                    code=code, opaque=i, ext_fields=_header(rng, batch), body=_body(rng, batch)
                )
                answer = dispatcher.dispatch(request)
                if answer is not None and not isinstance(answer, RemotingCommand):
                    # A SEND that created a topic is answered once topics.json holds it.
                    answer = asyncio.run(answer)
                assert isinstance(answer, RemotingCommand)
                codes.add(answer.code)
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text[:2000]
    assert codes <= {
        ResponseCode.SUCCESS,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.MESSAGE_ILLEGAL,
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.NO_PERMISSION,
    }
    assert ResponseCode.SUCCESS in codes and ResponseCode.SYSTEM_ERROR in codes
