"""Replaying the real producer's SEND frames gives the real broker's CommitLog and answers.

The frames of ``vectors/wire/v4_send`` and ``v4_send_v1header`` (captured between the 4.9.7
producer and a 4.9.7 broker that started from an empty store) are fed to the send processor over an
empty store with the broker's settings, the store clock pinned to the store timestamps the broker
recorded and each request's born host set to the socket the broker saw. Every record must have the
raw sha256 ``java-4.9.7-send.expected.json`` lists, the CommitLog file must be byte-identical, and
every answer must be the recorded response frame, byte for byte (oneway: no answer at all).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.send_replay import check_against_java, replay, send_expected


@pytest.fixture(scope="module")
def expected(stores_dir: Path) -> dict:
    return send_expected(stores_dir)


def test_replay_gives_the_brokers_records_and_answers(
    tmp_path: Path, stores_dir: Path, vectors_dir: Path, expected: dict
) -> None:
    config, exchanges = replay(tmp_path, stores_dir, vectors_dir, expected)
    check_against_java(config, exchanges, stores_dir, expected)
