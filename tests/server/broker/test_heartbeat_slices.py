"""A heartbeat naming thousands of groups is registered in slices, the loop serving others between
them (issue 30: one 1 MB heartbeat held every other client for 60 ms)."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.codes import RequestCode, ResponseCode
from protocol.command import RemotingCommand
from server.broker.controller import BrokerController, ConsumeSettings
from server.broker.creation_limits import CreationLimits
from server.broker.writable_store import WritableStore
from server.loop_budget import LoopBudget
from server.remoting.channel import CURRENT_CHANNEL
from server.remoting.processors.client_manage import SLICED_BODY_BYTES, ClientManageProcessor
from store.config.store_config import StoreConfig
from tests.support.channels import FakeChannel
from tests.support.consume_side import consumer, heartbeat

pytestmark = pytest.mark.asyncio

GROUPS = 3000


class Connection(FakeChannel):
    """A broker channel that is also a connection kept alive by its heartbeats."""

    beats = 0

    def heart_beat(self) -> None:
        self.beats += 1


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerController]:
    store = WritableStore(StoreConfig.for_store(tmp_path / "s", mapped_file_size_commit_log=1024 * 1024))
    settings = ConsumeSettings(
        auto_create_subscription_group=True, creation=CreationLimits(per_connection=2 * GROUPS)
    )
    made = BrokerController(store, settings=settings)
    yield made
    made.close()
    store.close()


def _request(groups: int) -> RemotingCommand:
    cons = [
        consumer(
            f"G{i:05d}",
            {"T": "*"},
            type_="CONSUME_PASSIVELY",
            model="CLUSTERING",
            where="CONSUME_FROM_LAST_OFFSET",
        )
        for i in range(groups)
    ]
    return RemotingCommand(code=RequestCode.HEART_BEAT, body=heartbeat("c", cons))


def _call(processor: ClientManageProcessor, channel: FakeChannel, request: RemotingCommand) -> object:
    def run() -> object:
        CURRENT_CHANNEL.set(channel)  # type: ignore[arg-type]
        return processor.heart_beat(request)

    return contextvars.copy_context().run(run)


async def test_a_big_heartbeat_lets_the_loop_run_between_its_slices(broker: BrokerController) -> None:
    request = _request(GROUPS)
    assert request.body is not None and len(request.body) > SLICED_BODY_BYTES
    processor = ClientManageProcessor(broker, LoopBudget(0.002))
    pending = _call(processor, Connection(), request)
    assert asyncio.iscoroutine(pending)
    task = asyncio.ensure_future(pending)
    probes = 0
    while not task.done():
        probes += 1  # another client's request, served while the heartbeat is under way
        await asyncio.sleep(0)
    answer = task.result()
    assert answer.code == ResponseCode.SUCCESS
    assert (
        broker.consumers.get("G00000") is not None and broker.consumers.get(f"G{GROUPS - 1:05d}") is not None
    )
    assert {f"G{i:05d}" for i in range(GROUPS)} <= set(broker.groups.groups)
    # 3,000 groups (and retry topics) take tens of milliseconds: many slices, the loop between them
    assert probes >= 5, probes


async def test_a_small_heartbeat_is_answered_at_once(broker: BrokerController) -> None:
    answer = _call(ClientManageProcessor(broker), Connection(), _request(3))
    assert isinstance(answer, RemotingCommand) and answer.code == ResponseCode.SUCCESS
    assert broker.consumers.get("G00002") is not None


async def test_a_connection_closed_mid_heartbeat_registers_no_more(broker: BrokerController) -> None:
    channel = Connection()
    processor = ClientManageProcessor(broker, LoopBudget(0.001))
    task = asyncio.ensure_future(_call(processor, channel, _request(GROUPS)))  # type: ignore[arg-type]
    while broker.consumers.get("G00000") is None:
        await asyncio.sleep(0)
    channel.lose()
    await task
    assert broker.consumers.get(f"G{GROUPS - 1:05d}") is None  # the rest not registered for a dead one
    assert broker.consumers.get("G00000") is None  # and what was, left with the connection
