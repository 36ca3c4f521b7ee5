"""``serve --writable``: the SEND processors, the topic-table routes and the delivery timer.

Registered on top of the read-only dispatcher, so everything a read-only server answers stays as it
is; only SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE and the route lookups change hands.
Scheduled (delay-level) messages are delivered by a timer on the event loop when they fall due; it
is armed when the server starts (for messages pending across a restart) and after every delayed SEND.
"""

from __future__ import annotations

import asyncio
import logging
import time

from protocol.codes import RequestCode
from server.broker.writable_store import WritableStore
from server.identity import BrokerIdentity
from server.remoting.dispatch import Dispatcher
from server.remoting.processors.name_server import NameServerProcessor
from server.remoting.processors.send_message import SEND_CODES, SendMessageProcessor
from server.remoting.processors.write_routes import WritableRoutes

log = logging.getLogger(__name__)


class DeliveryTimer:
    """Runs ``WritableStore.deliver_due`` on the event loop when the next scheduled message is due."""

    def __init__(self, store: WritableStore) -> None:
        self._store = store
        self._handle: asyncio.TimerHandle | None = None
        self._armed_for: int | None = None

    def arm(self) -> None:
        due = self._store.next_delivery()
        if due is None or (
            self._armed_for is not None and self._armed_for <= due and self._handle is not None
        ):
            return
        if self._handle is not None:
            self._handle.cancel()
        loop = asyncio.get_running_loop()
        delay = max(0.0, (due - time.time() * 1000) / 1000)
        self._armed_for = due
        self._handle = loop.call_later(delay, self._fire)

    def _fire(self) -> None:
        self._handle = None
        self._armed_for = None
        if self._store.closed:
            return  # nothing more is delivered, and re-arming for a due message would spin
        try:
            delivered = self._store.deliver_due()
        except Exception:
            log.exception("delivering scheduled messages failed")
        else:
            if delivered:
                log.debug("delivered %d scheduled message(s)", len(delivered))
        self.arm()

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


def write_path(
    store: WritableStore,
    *,
    region: str = "DefaultRegion",
    trace_on: bool = True,
    timer: DeliveryTimer | None = None,
):
    """A ``QueryServer(configure=...)`` hook registering the write path over ``store``.

    ``timer``: the delivery timer to arm, when another front door (the gRPC port's SendMessage)
    shares it; by default one of its own."""

    def configure(dispatcher: Dispatcher, identity: BrokerIdentity) -> None:
        nonlocal timer
        # The store host of new records (and so their offset msg ids) is the address clients are
        # routed to, as a broker's is brokerIP1:listenPort: a tool given such an id dials it.
        host, _, port = identity.address.rpartition(":")
        store.set_store_address(host, int(port))
        if timer is None:
            timer = DeliveryTimer(store)
        sends = SendMessageProcessor(
            store,
            cluster=identity.cluster,
            max_message_size=store.config.max_message_size,
            region=region,
            trace_on=trace_on,
            on_scheduled=timer.arm,
        )
        for code in SEND_CODES:
            dispatcher.register(code, sends.process)
        routes = WritableRoutes(store, identity, NameServerProcessor(store.reader, identity))
        dispatcher.register(RequestCode.GET_ROUTEINFO_BY_TOPIC, routes.get_route_info_by_topic)
        # Scheduled messages the store found pending when it opened (``delayOffset.json`` behind the
        # schedule queues) are due whether or not a new delayed SEND ever comes: the broker's
        # ScheduleMessageService starts its timers at start-up, so does this one.
        timer.arm()

    return configure
