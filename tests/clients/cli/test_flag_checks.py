"""Store commands and ``serve`` refuse a flag value or combination they would ignore or misread.

Each is an argparse-style usage error: exit 2, ``rmq-query COMMAND: error: ...`` naming the flag,
before any store is opened or any port bound (so these need no store at all). Until this change
``serve --workers -5`` served with one process, ``rebuild-index --range-mib -3`` and ``--interval``
without ``--follow`` ran as if they were not given, ``--log-level LOUD`` logged at INFO, and ``nan``
seconds were taken for a refresh interval.
"""

from __future__ import annotations

import pytest

from clients.cli import build_parser, main

STORE = ["--store", "/nonexistent-store"]

REFUSED = [
    ("serve", ["--workers", "-5"], "argument --workers"),
    ("serve", ["--workers", "0"], "argument --workers"),
    ("serve", ["--port", "-1"], "argument --port"),
    ("serve", ["--port", "70000"], "argument --port"),
    ("serve", ["--refresh-interval", "nan"], "argument --refresh-interval"),
    ("serve", ["--refresh-interval", "-1"], "argument --refresh-interval"),
    ("serve", ["--idle-timeout", "inf"], "argument --idle-timeout"),
    ("serve", ["--idle-timeout", "-2"], "argument --idle-timeout"),
    ("serve", ["--log-level", "LOUD"], "argument --log-level"),
    ("serve", ["--max-index-num", "-3"], "argument --max-index-num"),
    ("rebuild-index", ["--range-mib", "-3"], "argument --range-mib"),
    ("rebuild-index", ["--range-mib", "3"], "--engine spark is needed for --range-mib"),
    ("rebuild-index", ["--interval", "1"], "argument --interval: only used with --follow"),
    ("rebuild-index", ["--follow", "--interval", "0"], "argument --interval"),
    ("rebuild-index", ["--follow", "--interval", "nan"], "argument --interval"),
    ("rebuild-index", ["--follow", "--index-around-gaps"], "argument --index-around-gaps"),
    ("rebuild-index", ["--follow", "--engine", "spark"], "argument --follow"),
    ("rebuild-index", ["--out", "/tmp/x"], "argument --out: needs --engine spark"),
    ("rebuild-index", ["--engine", "spark", "--range-mib", "0"], "argument --range-mib"),
    ("rebuild-index", ["--mapped-file-size", "-1"], "argument --mapped-file-size"),
    ("fsck", ["--max-hash-slot-num", "0"], "argument --max-hash-slot-num"),
    ("export-keys", ["--out", "/tmp/x", "--range-mib", "-3"], "argument --range-mib"),
    ("export-keys", ["--out", "/tmp/x", "--master", "local[2]"], "--engine spark is needed for --master"),
]


@pytest.mark.parametrize(
    ("command", "flags", "named"), REFUSED, ids=[f"{c} {' '.join(f)}" for c, f, _ in REFUSED]
)
def test_a_flag_that_would_be_ignored_or_misread_is_a_usage_error(
    command: str, flags: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main([command, *STORE, *flags])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"rmq-query {command}: error: " in err and named in err, err


@pytest.mark.parametrize(
    ("flags", "named"),
    [(["--mapped-file-size", "4096"], "--mapped-file-size"), (["--config", "/etc/broker.conf"], "--config")],
)
def test_demo_refuses_the_flags_of_another_store(flags: list[str], named: str) -> None:
    # Checked on the parsed flags, not through main(): a regression must not start a demo server.
    parsed = build_parser(only="serve").parse_args(["serve", "--demo", "--port", "0", *flags])
    assert parsed._check(parsed) == (
        f"argument --demo: writes its own store and broker.conf, so {named} would be ignored"
    )


ACCEPTED = [
    ("serve", ["--workers", "2", "--refresh-interval", "0", "--idle-timeout", "0", "--port", "0"]),
    ("serve", ["--log-level", "debug", "--port", "65535"]),
    ("serve", ["--demo", "--store", "/tmp/demo", "--port", "0"]),
    ("rebuild-index", ["--follow", "--interval", "0.2"]),
    ("rebuild-index", ["--index-around-gaps"]),
    ("rebuild-index", ["--engine", "spark", "--range-mib", "1", "--index-around-gaps", "--out", "/tmp/x"]),
    ("export-keys", ["--out", "/tmp/x", "--range-mib", "8"]),
]


@pytest.mark.parametrize(("command", "flags"), ACCEPTED, ids=[f"{c} {' '.join(f)}" for c, f in ACCEPTED])
def test_the_checks_accept_what_the_commands_use(command: str, flags: list[str]) -> None:
    args = [command, *flags] if "--store" in flags else [command, *STORE, *flags]
    parsed = build_parser(only=command).parse_args(args)
    assert parsed._check is None or parsed._check(parsed) is None
