"""Store configuration: a broker.conf (Java properties) read with the broker's own defaults.

The query server must open exactly the files a broker wrote, with the geometry it wrote them in: the
IndexFile slot and entry counts are not stored in the files, so a wrong ``maxHashSlotNum`` or
``maxIndexNum`` would silently misread every index. ``StoreConfig`` is therefore the single place
those numbers come from, and ``index_file_size`` is what an IndexFile must measure.
"""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import Mapping
from pathlib import Path

from store.platform.memory import in_memory_bytes

#: The broker's defaults (MessageStoreConfig / BrokerConfig / NettyServerConfig).
DEFAULT_MAPPED_FILE_SIZE_COMMIT_LOG = 1024 * 1024 * 1024
DEFAULT_MAX_HASH_SLOT_NUM = 5_000_000
DEFAULT_MAX_INDEX_NUM = 5_000_000 * 4
DEFAULT_MAX_MSGS_NUM_BATCH = 64
DEFAULT_QUERY_MAX_NUM = 32
DEFAULT_LISTEN_PORT = 10911
#: 300,000 consume queue entries of 20 bytes per file.
DEFAULT_MAPPED_FILE_SIZE_CONSUME_QUEUE = 300_000 * 20
DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024
DEFAULT_MESSAGE_DELAY_LEVEL = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
DEFAULT_CLUSTER_NAME = "DefaultCluster"
#: Ours (no Java key): the CommitLog bytes behind the write position a writer keeps in the page
#: cache; older pages are handed back (``store.write.cache_window``). 0: the kernel's own policy.
#: When ``accessMessageInMemoryMaxRatio`` is set (in broker.conf or in code) and
#: ``commitLogCacheWindow`` is not, the window is what that ratio counts as in memory instead
#: (``cache_window_for_ratio``).
DEFAULT_COMMIT_LOG_CACHE_WINDOW = 256 * 1024 * 1024
#: The broker's ``accessMessageInMemoryMaxRatio`` default (percent of physical memory).
DEFAULT_ACCESS_MESSAGE_IN_MEMORY_MAX_RATIO = 40
#: The smallest window a ratio gives (a ratio of 0 counts nothing as in memory): one worker step of
#: ``store.write.cache_window``, so its jobs stay one per 8 MiB written, not one per page.
MIN_RATIO_CACHE_WINDOW = 8 * 1024 * 1024

INDEX_HEADER_SIZE = 40
INDEX_SLOT_SIZE = 4
INDEX_ENTRY_SIZE = 20


def cache_window_for_ratio(ratio: int) -> int:
    """The CommitLog page cache window for an ``accessMessageInMemoryMaxRatio`` that was set (in
    broker.conf or in code: ``StoreConfig.__post_init__``).

    That ratio is the 4.9.7 broker's statement of how much of the CommitLog's tail its pulls read
    from memory: a record within it is answered with the in-memory batch limits (32 messages,
    256 KiB) and a new consumer group may start at offset 0, a record past it is "in disk" (8
    messages, 64 KiB, suggest pulling from a slave). The broker hands nothing back itself (the
    kernel's page cache holds what it holds); the window here does. So an operator who sets the
    ratio gets a window of exactly what it counts as in memory: nothing the pull rules treat as in
    memory is dropped, and what they treat as in disk is not kept. Without the key, the pull rules
    keep the broker's default (40 %) and the window ours (``DEFAULT_COMMIT_LOG_CACHE_WINDOW``,
    docs/configuration.md says why they differ); ``commitLogCacheWindow`` always wins.
    """
    return max(in_memory_bytes(ratio), MIN_RATIO_CACHE_WINDOW)


class _Implied(int):
    """A field's value that no one gave: its default, or one worked out from another field.

    The Java broker's ``MessageStoreConfig`` has one ``accessMessageInMemoryMaxRatio`` field whichever
    way it is set, and the window follows the ratio only when someone set it (the broker's 40 % of
    memory as page cache is what the window exists to avoid). An int, so every reader sees the
    number; its type says that it was not given, so ``StoreConfig(..., ratio)``, ``for_store``,
    ``from_properties`` and ``dataclasses.replace`` all size the window by the same rule. (An
    encoder that takes exact ints only, as msgspec's, needs ``int(value)``.)"""

    __slots__ = ()


class ConfigError(ValueError):
    """A broker.conf value is missing, malformed or inconsistent."""


def index_file_size(hash_slot_num: int, index_num: int) -> int:
    """The fixed size of an IndexFile for this geometry (header + slots + entries)."""
    return INDEX_HEADER_SIZE + hash_slot_num * INDEX_SLOT_SIZE + index_num * INDEX_ENTRY_SIZE


#: The precisions ``MessageStoreConfig.setTimerPrecisionMs`` accepts, smallest first.
TIMER_PRECISIONS_MS = (100, 200, 500, 1000)


def timer_precision(value: int) -> int:
    """``setTimerPrecisionMs``: the largest accepted precision not above ``value`` (100 below 200,
    1000 from 1000 up), as the broker sets a ``timerPrecisionMs`` read from broker.conf."""
    chosen = TIMER_PRECISIONS_MS[0]
    for candidate in TIMER_PRECISIONS_MS[1:]:
        if value < candidate:
            return chosen
        chosen = candidate
    return chosen


def _default_ip() -> str:
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text: comments, ``=``/``:``/space separators, continuations, escapes."""
    result: dict[str, str] = {}
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        logical.append(pending + line)
        pending = ""
    if pending:
        logical.append(pending)
    for line in logical:
        key_chars: list[str] = []
        i = 0
        while i < len(line):
            ch = line[i]
            if ch == "\\" and i + 1 < len(line):
                key_chars.append(line[i : i + 2])
                i += 2
                continue
            if ch in "=: \t\f":
                break
            key_chars.append(ch)
            i += 1
        rest = line[i:].lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        result[_unescape("".join(key_chars))] = _unescape(rest)
    return result


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out: list[str] = []
    i = 0
    while i < len(s):
        ch = s[i]
        if ch != "\\" or i + 1 >= len(s):
            out.append(ch)
            i += 1
            continue
        nxt = s[i + 1]
        if nxt == "u" and i + 6 <= len(s):
            try:
                out.append(chr(int(s[i + 2 : i + 6], 16)))
                i += 6
                continue
            except ValueError:
                pass
        out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(nxt, nxt))
        i += 2
    return "".join(out)


def _parse_bool(name: str, value: str) -> bool:
    # Java's Boolean.parseBoolean: "true" (any case) is true, everything else false.
    del name
    return value.strip().lower() == "true"


def _parse_int(name: str, value: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise ConfigError(f"{name}={value!r} is not an integer") from None


@dataclasses.dataclass(frozen=True, slots=True)
class StoreConfig:
    """The settings the store reads; field names are the broker.conf keys in snake_case."""

    store_path_root_dir: Path
    store_path_commit_log: Path
    mapped_file_size_commit_log: int = DEFAULT_MAPPED_FILE_SIZE_COMMIT_LOG
    max_hash_slot_num: int = DEFAULT_MAX_HASH_SLOT_NUM
    max_index_num: int = DEFAULT_MAX_INDEX_NUM
    message_index_enable: bool = True
    broker_name: str = dataclasses.field(default_factory=socket.gethostname)
    broker_cluster_name: str = DEFAULT_CLUSTER_NAME
    listen_port: int = DEFAULT_LISTEN_PORT
    broker_ip1: str = dataclasses.field(default_factory=_default_ip)
    max_msgs_num_batch: int = DEFAULT_MAX_MSGS_NUM_BATCH
    default_query_max_num: int = DEFAULT_QUERY_MAX_NUM
    #: As written in broker.conf; ``consume_queue_file_size`` is what the broker uses (rounded up).
    mapped_file_size_consume_queue: int = DEFAULT_MAPPED_FILE_SIZE_CONSUME_QUEUE
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    #: getMessage's batch limits (MessageStoreConfig), for messages "in memory" and "in disk".
    max_transfer_count_on_message_in_memory: int = 32
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    max_transfer_count_on_message_in_disk: int = 8
    max_transfer_bytes_on_message_in_disk: int = 64 * 1024
    #: ``accessMessageInMemoryMaxRatio``; set (any way) without ``commit_log_cache_window``, it
    #: sizes the page cache window too (``cache_window_for_ratio``).
    access_message_in_memory_max_ratio: int = _Implied(DEFAULT_ACCESS_MESSAGE_IN_MEMORY_MAX_RATIO)
    #: The delay levels: a scheduled record's consume queue tagsCode is its delivery time.
    message_delay_level: str = DEFAULT_MESSAGE_DELAY_LEVEL
    #: ``autoCreateTopicEnable``: a SEND to an unknown topic creates it from TBW102 (write path only).
    auto_create_topic_enable: bool = True
    #: ``autoCreateSubscriptionGroup``: a heartbeat or pull of an unknown group creates its config;
    #: off, an offset update for a group the broker does not know is refused (write path only).
    auto_create_subscription_group: bool = True
    #: 5.x timer messages (``TIMER_DELIVER_MS``/``TIMER_DELAY_SEC``/``TIMER_DELAY_MS``, a gRPC
    #: delivery time): ``timerWheelEnable``, ``timerPrecisionMs`` (one of 100, 200, 500, 1000, as
    #: the broker's setter rounds it: ``timer_precision``) and ``timerMaxDelaySec``.
    timer_wheel_enable: bool = True
    timer_precision_ms: int = 1000
    timer_max_delay_sec: int = 3 * 24 * 3600
    #: ``enablePropertyFilter`` when broker.conf sets it (None: not set, the server decides).
    enable_property_filter: bool | None = None
    #: ``storeReplyMessageEnable`` (BrokerConfig): a request's reply is also stored in the reply topic.
    store_reply_message_enable: bool = True
    #: ``commitLogCacheWindow`` (ours, not the Java broker's): ``DEFAULT_COMMIT_LOG_CACHE_WINDOW``,
    #: or what a ratio that was set counts as in memory; a window given always wins.
    commit_log_cache_window: int = _Implied(DEFAULT_COMMIT_LOG_CACHE_WINDOW)

    def __post_init__(self) -> None:
        for name in (
            "mapped_file_size_commit_log",
            "max_hash_slot_num",
            "max_index_num",
            "mapped_file_size_consume_queue",
        ):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")
        if isinstance(self.commit_log_cache_window, _Implied):
            # not given: the ratio's, when someone set the ratio (again at each replace)
            ratio = self.access_message_in_memory_max_ratio
            window = (
                DEFAULT_COMMIT_LOG_CACHE_WINDOW
                if isinstance(ratio, _Implied)
                else cache_window_for_ratio(ratio)
            )
            object.__setattr__(self, "commit_log_cache_window", _Implied(window))
        if self.commit_log_cache_window < 0:
            window = self.commit_log_cache_window
            raise ConfigError(f"commit_log_cache_window must be 0 or more, got {window}")
        if self.timer_precision_ms not in TIMER_PRECISIONS_MS:
            object.__setattr__(self, "timer_precision_ms", timer_precision(self.timer_precision_ms))
        if index_file_size(self.max_hash_slot_num, self.max_index_num) > 2**31 - 1:
            raise ConfigError("maxHashSlotNum/maxIndexNum give an IndexFile over 2 GiB")

    @property
    def index_dir(self) -> Path:
        return self.store_path_root_dir / "index"

    @property
    def checkpoint_path(self) -> Path:
        return self.store_path_root_dir / "checkpoint"

    @property
    def abort_path(self) -> Path:
        return self.store_path_root_dir / "abort"

    @property
    def index_file_size(self) -> int:
        return index_file_size(self.max_hash_slot_num, self.max_index_num)

    @property
    def consume_queue_dir(self) -> Path:
        return self.store_path_root_dir / "consumequeue"

    @property
    def consume_queue_file_size(self) -> int:
        """``getMappedFileSizeConsumeQueue``: the configured size rounded up to whole 20-byte entries."""
        return -(-self.mapped_file_size_consume_queue // 20) * 20

    @classmethod
    def for_store(cls, root: str | os.PathLike[str], **overrides: object) -> StoreConfig:
        """Defaults for a store at ``root`` (CommitLog under ``root/commitlog`` unless overridden).

        ``overrides`` are field names; ``None`` values mean "not given".
        """
        values = {k: v for k, v in overrides.items() if v is not None}
        root_path = Path(str(values.pop("store_path_root_dir", root)))
        commit = values.pop("store_path_commit_log", None)
        commit_path = Path(str(commit)) if commit is not None else root_path / "commitlog"
        return cls(store_path_root_dir=root_path, store_path_commit_log=commit_path, **values)  # type: ignore[arg-type]

    @classmethod
    def from_properties(
        cls,
        props: Mapping[str, str],
        *,
        base_dir: str | os.PathLike[str] | None = None,
        overrides: Mapping[str, object] | None = None,
    ) -> StoreConfig:
        """Build from broker.conf keys; relative paths resolve against ``base_dir``.

        Unknown keys are ignored (a broker.conf holds many settings this store does not use);
        ``overrides`` (snake_case names, ``None`` meaning "not given") win over the file.
        """
        base = Path(base_dir) if base_dir is not None else Path.cwd()

        def path_of(value: str) -> Path:
            p = Path(os.path.expanduser(value.strip()))
            return p if p.is_absolute() else base / p

        values: dict[str, object] = {}
        if "storePathRootDir" in props:
            values["store_path_root_dir"] = path_of(props["storePathRootDir"])
        if "storePathCommitLog" in props:
            values["store_path_commit_log"] = path_of(props["storePathCommitLog"])
        ints = {
            "mappedFileSizeCommitLog": "mapped_file_size_commit_log",
            "maxHashSlotNum": "max_hash_slot_num",
            "maxIndexNum": "max_index_num",
            "listenPort": "listen_port",
            "maxMsgsNumBatch": "max_msgs_num_batch",
            "defaultQueryMaxNum": "default_query_max_num",
            "mappedFileSizeConsumeQueue": "mapped_file_size_consume_queue",
            "maxMessageSize": "max_message_size",
            "maxTransferCountOnMessageInMemory": "max_transfer_count_on_message_in_memory",
            "maxTransferBytesOnMessageInMemory": "max_transfer_bytes_on_message_in_memory",
            "maxTransferCountOnMessageInDisk": "max_transfer_count_on_message_in_disk",
            "maxTransferBytesOnMessageInDisk": "max_transfer_bytes_on_message_in_disk",
            "accessMessageInMemoryMaxRatio": "access_message_in_memory_max_ratio",
            "timerMaxDelaySec": "timer_max_delay_sec",
            "timerPrecisionMs": "timer_precision_ms",  # rounded as the broker's setter (__post_init__)
            "commitLogCacheWindow": "commit_log_cache_window",
        }
        for key, name in ints.items():
            if key in props:
                values[name] = _parse_int(key, props[key])
        for key, name in (
            ("messageIndexEnable", "message_index_enable"),
            ("autoCreateTopicEnable", "auto_create_topic_enable"),
            ("autoCreateSubscriptionGroup", "auto_create_subscription_group"),
            ("timerWheelEnable", "timer_wheel_enable"),
            ("enablePropertyFilter", "enable_property_filter"),
            ("storeReplyMessageEnable", "store_reply_message_enable"),
        ):
            if key in props:
                values[name] = _parse_bool(key, props[key])
        for key, name in (
            ("brokerName", "broker_name"),
            ("brokerClusterName", "broker_cluster_name"),
            ("brokerIP1", "broker_ip1"),
            ("messageDelayLevel", "message_delay_level"),
        ):
            if key in props:
                values[name] = props[key].strip()
        for name, value in (overrides or {}).items():
            if value is not None:
                values[name] = value
        root = values.pop("store_path_root_dir", None)
        return cls.for_store(Path.home() / "store" if root is None else Path(str(root)), **values)

    @classmethod
    def load(
        cls, path: str | os.PathLike[str], *, overrides: Mapping[str, object] | None = None
    ) -> StoreConfig:
        """Read a broker.conf file; relative store paths resolve against the file's directory."""
        conf = Path(path)
        try:
            data = conf.read_bytes()
        except OSError as exc:
            raise ConfigError(f"cannot read {conf}: {exc}") from exc
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            # Java's Properties.load(InputStream) reads ISO-8859-1, so a broker.conf the broker
            # accepts may hold Latin-1 bytes (in a comment, say); UTF-8 is tried first because
            # that is what most editors write today.
            text = data.decode("latin-1")
        return cls.from_properties(parse_properties(text), base_dir=conf.parent, overrides=overrides)
