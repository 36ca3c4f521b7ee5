"""Flags that would make a query hang or fail obscurely are refused up front, with exit code 2."""

from __future__ import annotations

import argparse

import pytest

from clients.cli import main
from clients.cli.arg_types import addr_arg, namesrv_arg, timeout_arg

_QUERIES = {
    "query-key": ["-t", "T", "-k", "k"],
    "query-id": ["-i", "7F00000100002A9F0000000000004431"],
    "query-uniq": ["-t", "T", "-i", "0A0100091F906D06D69C0000001A0002"],
    "bench": ["--requests", "1"],
}


@pytest.mark.parametrize("command", sorted(_QUERIES))
@pytest.mark.parametrize("timeout", ["nan", "inf", "-inf", "0", "-1", "3601", "soon"])
def test_a_timeout_that_never_or_always_fires_is_a_usage_error(command: str, timeout: str, capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main([command, "-n", "127.0.0.1:1", *_QUERIES[command], "--timeout", timeout])
    assert info.value.code == 2
    assert "argument --timeout" in capsys.readouterr().err


@pytest.mark.parametrize("command", sorted(_QUERIES))
@pytest.mark.parametrize("addr", ["localhost", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:70000", ":9876", ";"])
def test_a_malformed_server_address_is_a_usage_error(command: str, addr: str, capsys, monkeypatch) -> None:
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    with pytest.raises(SystemExit) as info:
        main([command, "-n", addr, *_QUERIES[command]])
    assert info.value.code == 2
    assert "argument -n/--namesrv" in capsys.readouterr().err


def test_a_malformed_namesrv_addr_in_the_environment_is_a_usage_error(capsys, monkeypatch) -> None:
    monkeypatch.setenv("NAMESRV_ADDR", "nameserver-without-port")
    with pytest.raises(SystemExit) as info:
        main(["query-key", *_QUERIES["query-key"]])
    assert info.value.code == 2
    assert "bad address" in capsys.readouterr().err


def test_the_checks_accept_what_the_client_accepts() -> None:
    assert timeout_arg("0.25") == 0.25
    assert timeout_arg("3600") == 3600.0
    assert addr_arg(" [::1]:9876 ") == "[::1]:9876"
    assert namesrv_arg("127.0.0.1:9876;10.0.0.2:9876;") == "127.0.0.1:9876;10.0.0.2:9876;"
    with pytest.raises(argparse.ArgumentTypeError, match="bad address"):
        namesrv_arg("127.0.0.1:9876;other")
