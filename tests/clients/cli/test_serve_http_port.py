"""``serve --http``: the listen port + 2 by default, 0 with ``--port 0``, ``off`` for none."""

from __future__ import annotations

import argparse

import pytest

from clients.cli.arg_types import PORT_OFF, port_or_off
from clients.cli.serve_ports import http_port_of


def test_the_default_is_beside_the_brokers_ports() -> None:
    assert http_port_of(None, 10911) == 10913
    assert http_port_of(None, 0) == 0
    assert http_port_of(0, 10911) == 0
    assert http_port_of(8080, 0) == 8080
    assert http_port_of(PORT_OFF, 10911) is None
    with pytest.raises(ValueError):
        http_port_of(None, 65535)


def test_the_flag_reads_a_port_or_off() -> None:
    assert port_or_off("off") == PORT_OFF
    assert port_or_off("OFF") == PORT_OFF
    assert port_or_off("9000") == 9000
    with pytest.raises(argparse.ArgumentTypeError):
        port_or_off("70000")
