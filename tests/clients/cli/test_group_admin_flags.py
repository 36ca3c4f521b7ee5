"""The group admin subcommands' flags and layouts without a server: usage errors, mqadmin's parsing
of ``-s`` times and numbers, and the text forms checked against lines written out by hand from the
4.9.7 printf formats (the byte-for-byte check against the real mqadmin is
``test_group_admin_vs_mqadmin``)."""

from __future__ import annotations

import argparse
import socket
import time

import msgspec
import pytest

from clients.cli import main
from clients.cli.reset_offset_by_time import parse_timestamp
from clients.group_admin import (
    ConsumerConnection,
    ConsumeStats,
    ProducerConnection,
    SubscriptionGroupConfig,
    merged_queue_map,
    putall_capacity,
)
from clients.group_output import (
    consumer_connection_text,
    consumer_progress_text,
    group_list_row,
    java_fixed2,
    producer_connection_text,
    reset_offset_text,
    subscription_group_text,
    version_desc,
)
from protocol.admin_bodies import OffsetWrapper, QueueKey


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["update-sub-group", "-g", "G"], "one of -b/--brokerAddr or -c/--clusterName is required"),
        (["delete-sub-group", "-g", "G"], "one of -b/--brokerAddr or -c/--clusterName is required"),
        (["update-sub-group", "-c", "C"], "the following arguments are required: -g/--groupName"),
        (
            ["update-sub-group", "-c", "C", "-g", "G", "-q", "two"],
            "argument -q/--retryQueueNums: not an integer",
        ),
        (["update-sub-group", "-c", "C", "-g", "G", "-r", "2147483648"], "out of the 32-bit range"),
        (["update-sub-group", "-c", "C", "-g", " "], "argument -g/--groupName: must not be empty"),
        (["update-sub-group", "-b", "nohostport", "-g", "G"], "argument -b/--brokerAddr"),
        (["consumer-connection"], "the following arguments are required: -g/--consumerGroup"),
        (["producer-connection", "-g", "P"], "the following arguments are required: -t/--topic"),
        (
            ["reset-offset-by-time", "-g", "G", "-t", "T"],
            "the following arguments are required: -s/--timestamp",
        ),
        (
            ["reset-offset-by-time", "-g", "G", "-t", "T", "-s", "yesterday"],
            "argument -s/--timestamp: not now",
        ),
        (["reset-offset-by-time", "-g", "G", "-t", "T", "-s", "2024-02-30#00:00:00:000"], "not a valid time"),
    ],
)
def test_bad_flags_are_usage_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([argv[0], "-n", "127.0.0.1:9876", *argv[1:]])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert message in err and f"rmq-query {argv[0]}: error:" in err


def test_unreachable_name_server_exits_3(capsys: pytest.CaptureFixture[str]) -> None:
    addr = f"127.0.0.1:{_free_port()}"
    assert main(["consumer-progress", "-n", addr, "-g", "G", "--timeout", "2"]) == 3
    assert "rmq-query consumer-progress:" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "expected"),
    [("now", -1), (" now ", -1), ("1700000000123", 1700000000123), ("+5", 5), ("-7", -7)],
)
def test_timestamp_forms_as_mqadmin_reads_them(text: str, expected: int) -> None:
    assert parse_timestamp(text) == expected


def test_timestamp_date_form_is_local_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "Asia/Shanghai")
    time.tzset()
    try:
        # 2024-01-02 03:04:05.067 in UTC+8 is 2024-01-01 19:04:05.067 UTC = 1704135845067.
        assert parse_timestamp("2024-01-02#03:04:05:067") == 1704135845067
        assert parse_timestamp("2024-01-02#03:04:05:7") == 1704135845007  # SSS read as a number
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    with pytest.raises(argparse.ArgumentTypeError):
        parse_timestamp("99999999999999999999")


def test_version_names() -> None:
    assert version_desc(407) == "V4_9_7"  # what a 4.9.7 client sends (MQVersion.CURRENT_VERSION)
    assert version_desc(0) == "V3_0_0_SNAPSHOT"
    assert version_desc(15) == "V3_0_0_FINAL"
    assert version_desc(86) == "V3_3_1_SNAPSHOT"  # 3.3 has no patch 0
    assert version_desc(10_000) == "HIGHER_VERSION"


def test_fixed2_rounds_half_up_like_java() -> None:
    assert java_fixed2(0.0) == "0.00"
    assert java_fixed2(0.125) == "0.13"  # Python's "%.2f" gives 0.12
    assert java_fixed2(12.5) == "12.50"


def test_putall_sizes_the_table_for_the_batch() -> None:
    assert putall_capacity([4]) == 8  # 4 / 0.75 + 1 = 6 -> 8, not the default 16
    assert putall_capacity([8]) == 16
    assert putall_capacity([12]) == 32
    assert putall_capacity([4, 4]) == 16


def test_merged_reset_table_follows_the_8_bucket_order() -> None:
    # MessageQueue.hashCode of (X, b, q) is 31*(31*(31+98)+q)+88: with 8 buckets (the putAll-sized
    # table) the queues come out 0 1 2 3; a default 16-bucket table would give 2 3 0 1.
    keys = [QueueKey("X", "b", q) for q in range(4)]
    order = [key.queue_id for key, _ in merged_queue_map([[(k, 0) for k in keys]])]
    hashes = [31 * (31 * (31 + 98) + q) + 88 for q in range(4)]
    assert order == sorted(range(4), key=lambda q: (hashes[q] ^ (hashes[q] >> 16)) & 7) == [0, 1, 2, 3]
    assert sorted(range(4), key=lambda q: (hashes[q] ^ (hashes[q] >> 16)) & 15) == [2, 3, 0, 1]


def test_subscription_group_text() -> None:
    config = SubscriptionGroupConfig("G", retry_max_times=3)
    assert subscription_group_text(config) == (
        "SubscriptionGroupConfig [groupName=G, consumeEnable=true, consumeFromMinEnable=false, "
        "consumeBroadcastEnable=false, retryQueueNums=1, retryMaxTimes=3, brokerId=0, "
        "whichBrokerWhenConsumeSlowly=1, notifyConsumerIdsChangedEnable=true]"
    )


def test_consumer_progress_text(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        stats = ConsumeStats(
            {
                QueueKey("T", "b", 1): OffsetWrapper(10, 4, 1_700_000_000_000),
                QueueKey("T", "b", 0): OffsetWrapper(3, 3, 0),
            }
        )
        text = consumer_progress_text(stats)
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()

    def row(*cells: tuple[str, int], last: str) -> str:  # "%-Ns" cells joined by two spaces
        return "  ".join(text + " " * (width - len(text)) for text, width in cells) + "  " + last

    assert text.splitlines() == [
        row(("#Topic", 64), ("#Broker Name", 32), ("#QID", 4), ("#Broker Offset", 20),
            ("#Consumer Offset", 20), ("#Diff", 20), last="#LastTime"),
        row(("T", 64), ("b", 32), ("0", 4), ("3", 20), ("3", 20), ("0", 20), last="N/A"),
        row(("T", 64), ("b", 32), ("1", 4), ("10", 20), ("4", 20), ("6", 20), last="2023-11-14 22:13:20"),
        "",
        "Consume TPS: 0.00",
        "Diff Total: 6",
    ]  # fmt: skip


def test_group_list_row_offline() -> None:
    row = group_list_row("G", None, None)
    assert (
        row
        == "G" + " " * 63 + "  0       OFFLINE" + " " * 17 + " " + " " * 5 + "  " + " " * 14 + "  0        0"
    )


def test_connection_texts() -> None:
    cc = msgspec.json.decode(
        b'{"connectionSet":[{"clientAddr":"1.2.3.4:5","clientId":"1.2.3.4@9#1","language":"JAVA","version":407}],'
        b'"consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING",'
        b'"subscriptionTable":{"T":{"topic":"T","subString":"a || b"}}}',
        type=ConsumerConnection,
    )
    assert consumer_connection_text(cc) == (
        "#ClientId                            #ClientAddr            #Language  #Version\n"
        "1.2.3.4@9#1                          1.2.3.4:5              JAVA       V4_9_7\n"
        "\nBelow is subscription:\n"
        "#Topic               #SubExpression\n"
        "T                    a || b\n"
        "\nConsumeType: CONSUME_PASSIVELY\nMessageModel: CLUSTERING\nConsumeFromWhere: null\n"
    )
    pc = ProducerConnection(cc.connection_set)
    assert producer_connection_text(pc) == (
        "0001  1.2.3.4@9#1                      1.2.3.4:5              JAVA     V4_9_7\n"
    )


def test_reset_offset_text() -> None:
    text = reset_offset_text("G", "T", True, "now", -1, [(QueueKey("T", "b", 2), 7)])
    assert text == (
        "rollback consumer offset by specified group[G], topic[T], force[true], timestamp(string)[now], "
        "timestamp(long)[-1]\n"
        + "#brokerName".ljust(40) + "  " + "#queueId".ljust(40) + "  " + "#offset".ljust(40) + "\n"
        + "b".ljust(40) + "  " + "2".ljust(40) + "  " + "7".ljust(40) + "\n"
    )  # fmt: skip
