"""The boolean flags of print-msg and print-msg-by-queue, read as mqadmin reads them:
``Boolean.parseBoolean(commandLine.getOptionValue(..).trim())``, with printMsg printing bodies unless
told otherwise and printMsgByQueue printing nothing unless told to."""

from __future__ import annotations

import pytest

from clients.cli import build_parser

NAMESRV = ["-n", "127.0.0.1:9876", "-t", "TopicA"]
QUEUE = ["-a", "broker-a", "-i", "1"]


def test_print_msg_prints_bodies_unless_told_otherwise() -> None:
    parser = build_parser("print-msg")
    assert parser.parse_args(["print-msg", *NAMESRV]).print_body is True
    assert parser.parse_args(["print-msg", *NAMESRV, "-d", "false"]).print_body is False


def test_print_msg_by_queue_prints_nothing_unless_told_to() -> None:
    args = build_parser("print-msg-by-queue").parse_args(["print-msg-by-queue", *NAMESRV, *QUEUE])
    assert (args.print_msg, args.print_body, args.calculate) == (False, False, False)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("true", True),
        ("TRUE", True),
        (" True ", True),
        ("false", False),
        ("yes", False),
        ("1", False),
        ("", False),
    ],
)
def test_a_flag_value_is_parse_boolean_of_the_trimmed_text(value: str, expected: bool) -> None:
    argv = ["print-msg-by-queue", *NAMESRV, *QUEUE, "-p", value, "-d", value, "-f", value]
    args = build_parser("print-msg-by-queue").parse_args(argv)
    assert (args.print_msg, args.print_body, args.calculate) == (expected, expected, expected)
