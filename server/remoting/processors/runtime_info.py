"""GET_BROKER_RUNTIME_INFO (28): the broker's ``KVTable`` of runtime figures, as mqadmin reads it.

``mqadmin brokerStatus`` prints every entry; ``clusterList`` reads ``brokerVersionDesc``, the TPS
figures, ``earliestMessageTimeStamp``, ``commitLogDiskRatio`` and ``pageCacheLockTimeMills``. The keys
are the 4.9.7 broker's (``AdminBrokerProcessor.prepareRuntimeInfo`` and the store's
``getRuntimeInfo``), in its ``HashMap`` order. Real figures: the CommitLog's min and max offsets,
the store-wide earliest message time (the broker's own reading, -1 when it cannot read it), boot time
and uptime of this server, disk use of the CommitLog and consume-queue partitions and the store
root's capacity (the broker's rounding), messages served by pulls and the get TPS
(``server.runtime_stats``). The put side is that of a broker that stores nothing (this server never
writes): zero puts, ``putMessageTimesTotal`` 1 (the broker's floor). Settings without a counterpart
here are the broker's defaults: the thread-pool capacities, no transient store pool
(``remainTransientStoreBufferNumbs`` = Integer.MAX_VALUE); queues, lock and head-wait times are 0.
Counters the broker snapshots at midnight (``msg*TotalTodayMorning``, ``...YesterdayMorning``) are 0,
as on a broker started today.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import msgspec

from protocol.codes import ResponseCode
from protocol.command import BROKER_VERSION, RemotingCommand
from protocol.java_hashmap import as_java_hashmap
from server.runtime_stats import PullStats
from server.store_api import StoreWithCommitLog, disk_used_ratio

#: ``MQVersion.getVersionDesc(CURRENT_VERSION)`` for the version we answer as.
BROKER_VERSION_DESC = "V4_9_7"

#: BrokerConfig defaults (4.9.7).
SEND_THREAD_POOL_QUEUE_CAPACITY = 10000
PULL_THREAD_POOL_QUEUE_CAPACITY = 100000
QUERY_THREAD_POOL_QUEUE_CAPACITY = 20000
END_TRANSACTION_POOL_QUEUE_CAPACITY = 100000
JAVA_INTEGER_MAX = 2**31 - 1

_encode = msgspec.json.Encoder().encode


def human_readable_bytes(count: int) -> str:
    """``MixAll.humanReadableByteCount(bytes, false)``: ``512 B``, ``1.5 KiB``, ``252.0 GiB``."""
    unit = 1024
    if count < unit:
        return f"{count} B"
    exp = int(math.log(count) / math.log(unit))
    return f"{count / unit**exp:.1f} {'KMGTPE'[exp - 1]}iB"


def format_runtime(millis: int) -> str:
    """``StoreStatsService.getFormatRuntime``."""
    seconds = millis // 1000
    return (
        f"[ {seconds // 86400} days, {seconds // 3600 % 24} hours, {seconds // 60 % 60} minutes, "
        f"{seconds % 60} seconds ]"
    )


def _java_double(value: float) -> str:
    return repr(float(value))


class RuntimeInfoProcessor:
    """Builds the runtime ``KVTable`` from the store and the pull counters on every request."""

    __slots__ = ("_stats", "_store")

    def __init__(self, store: StoreWithCommitLog, stats: PullStats) -> None:
        self._store = store
        self._stats = stats

    def runtime_info(self) -> dict[str, str]:
        """The table, in the broker's ``HashMap`` order."""
        store = self._store
        config = store.config
        root = Path(config.store_path_root_dir)
        commitlog_dir = str(config.store_path_commit_log)
        stats = self._stats
        now_ms = int(time.time() * 1000)
        commitlog_ratio = disk_used_ratio(Path(commitlog_dir)) if os.path.exists(commitlog_dir) else -1.0
        table: dict[str, str] = {
            "bootTimestamp": str(stats.boot_timestamp_ms),
            "runtime": format_runtime(now_ms - stats.boot_timestamp_ms),
            "putMessageEntireTimeMax": "0",
            "putMessageTimesTotal": "1",
            "putMessageFailedTimes": "0",
            "putMessageSizeTotal": "0",
            "putMessageDistributeTime": "null",
            "putMessageAverageSize": "0.0",
            "dispatchMaxBuffer": "0",
            "getMessageEntireTimeMax": str(stats.entire_time_max_ms),
            "putTps": "0.0 0.0 0.0",
            **stats.tps(),
            "putLatency99": "0.00",
            "putLatency999": "0.00",
            f"commitLogDiskRatio_{commitlog_dir}": _java_double(commitlog_ratio),
            "commitLogDiskRatio": _java_double(commitlog_ratio),
            "consumeQueueDiskRatio": _java_double(disk_used_ratio(root / "consumequeue")),
            "commitLogMinOffset": str(store.commitlog.min_offset),
            "commitLogMaxOffset": str(store.commitlog.max_offset),
            "brokerVersionDesc": BROKER_VERSION_DESC,
            "brokerVersion": str(BROKER_VERSION),
            "msgPutTotalYesterdayMorning": "0",
            "msgPutTotalTodayMorning": "0",
            "msgPutTotalTodayNow": "0",
            "msgGetTotalYesterdayMorning": "0",
            "msgGetTotalTodayMorning": "0",
            "msgGetTotalTodayNow": str(stats.messages_got),
            "sendThreadPoolQueueSize": "0",
            "sendThreadPoolQueueCapacity": str(SEND_THREAD_POOL_QUEUE_CAPACITY),
            "pullThreadPoolQueueSize": "0",
            "pullThreadPoolQueueCapacity": str(PULL_THREAD_POOL_QUEUE_CAPACITY),
            "queryThreadPoolQueueSize": "0",
            "queryThreadPoolQueueCapacity": str(QUERY_THREAD_POOL_QUEUE_CAPACITY),
            "EndTransactionQueueSize": "0",
            "EndTransactionThreadPoolQueueCapacity": str(END_TRANSACTION_POOL_QUEUE_CAPACITY),
            "dispatchBehindBytes": "0",
            "pageCacheLockTimeMills": "0",
            "sendThreadPoolQueueHeadWaitTimeMills": "0",
            "pullThreadPoolQueueHeadWaitTimeMills": "0",
            "queryThreadPoolQueueHeadWaitTimeMills": "0",
            "earliestMessageTimeStamp": str(store.store_earliest_message_time()),
            "startAcceptSendRequestTimeStamp": "0",
            "remainTransientStoreBufferNumbs": str(JAVA_INTEGER_MAX),
            "remainHowManyDataToFlush": "0 B",
        }
        try:
            disk = os.statvfs(root)
        except OSError:
            pass
        else:
            table["commitLogDirCapacity"] = (
                f"Total : {human_readable_bytes(disk.f_blocks * disk.f_frsize)}, "
                f"Free : {human_readable_bytes(disk.f_bavail * disk.f_frsize)}."
            )
        return as_java_hashmap(table)

    def get_broker_runtime_info(self, request: RemotingCommand) -> RemotingCommand:
        body = _encode({"table": self.runtime_info()})
        return request.make_response(ResponseCode.SUCCESS, body=body)
