"""``plain_acl.yml`` parsing and whitelist patterns, with RocketMQ's rules (PlainPermissionManager,
RemoteAddressStrategyFactory, Permission)."""

from __future__ import annotations

from pathlib import Path

import pytest

from server.acl.address import parse_pattern
from server.acl.config import (
    ANY,
    DENY,
    GET,
    PUB,
    SUB,
    acl_config_from,
    check_permission,
    load_acl_config,
    parse_perm,
)
from server.acl.errors import AclConfigError

#: RocketMQ 4.9's sample conf/plain_acl.yml, with an unquoted numeric secretKey as it ships.
SAMPLE = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      # the group should convert to retry topic
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    # if it is admin, it could access all resources
    admin: true
"""


def test_the_sample_file_reads_like_java(tmp_path: Path) -> None:
    path = tmp_path / "plain_acl.yml"
    path.write_text(SAMPLE, encoding="utf-8")
    config = load_acl_config(path)
    assert [p.text for p in config.global_white] == ["10.10.103.*", "192.168.0.*"]
    first, second = config.accounts["RocketMQ"], config.accounts["rocketmq2"]
    assert first.secret_key == "12345678"  # an int in YAML, a String in Java
    assert first.white_remote_address is None
    assert (first.admin, first.default_topic_perm, first.default_group_perm) == (False, DENY, SUB)
    assert dict(first.resource_perms) == {
        "topicA": DENY,
        "topicB": PUB | SUB,
        "topicC": SUB,
        "%RETRY%groupA": DENY,
        "%RETRY%groupB": PUB | SUB,
        "%RETRY%groupC": SUB,
    }
    assert second.admin and not second.resource_perms
    assert second.white_remote_address is not None
    assert second.white_remote_address.matches("192.168.1.77")
    assert second.default_topic_perm == DENY  # absent default: DENY, as parsePermFromString(null)


@pytest.mark.parametrize(
    ("text", "perm"),
    [
        ("PUB", PUB),
        ("SUB", SUB),
        (" PUB|SUB ", PUB | SUB),
        ("SUB|PUB", PUB | SUB),
        ("DENY", DENY),
        ("GET", GET),
        ("GET|SUB", GET | SUB),
        ("PUB|GET", PUB | GET),
        ("GET|GET", DENY),
        ("GET|BAD", DENY),
        ("get", DENY),
        ("sub", DENY),
        ("PUB | SUB", DENY),
        (None, DENY),
    ],
)
def test_permission_words(text: str | None, perm: int) -> None:
    assert parse_perm(text) == perm


def test_check_permission_like_java() -> None:
    assert check_permission(SUB, SUB) and check_permission(SUB, PUB | SUB)
    assert not check_permission(SUB, PUB) and not check_permission(SUB, DENY)
    assert not check_permission(SUB, DENY | SUB)  # DENY wins
    assert check_permission(ANY, PUB) and not check_permission(ANY, DENY)


@pytest.mark.parametrize(
    ("pattern", "yes", "no"),
    [
        ("*", ["1.2.3.4", "::1"], []),
        ("*.*.*.*", ["8.8.8.8"], []),
        ("192.168.0.*", ["192.168.0.0", "192.168.0.255"], ["192.168.1.1", "192.168.00.1x", "::1"]),
        ("192.168.*.*", ["192.168.200.3"], ["192.169.0.1"]),
        ("10.*.*.*", ["10.200.3.4"], ["11.0.0.1"]),
        ("192.168.1.1-100", ["192.168.1.1", "192.168.1.100"], ["192.168.1.0", "192.168.1.101"]),
        ("192.168.1-2.*", ["192.168.2.9"], ["192.168.3.9"]),
        ("192.168.0.{1,2}", ["192.168.0.1", "192.168.0.2"], ["192.168.0.3", "192.168.0.12"]),
        ("10.0.0.1,10.0.0.2", ["10.0.0.2"], ["10.0.0.3"]),
        ("127.0.0.1", ["127.0.0.1", "::ffff:127.0.0.1"], ["127.0.0.2"]),
        ("::1", ["0:0:0:0:0:0:0:1"], ["127.0.0.1"]),
        ("fe80:0:0:0:0:0:0:*", ["fe80::5"], ["fe81::5"]),
        ("fe80:0:0:0:0:0:a-f:*", ["fe80::b:1"], ["fe80::10:1"]),
        ("fe80::{1,2}", ["fe80::2"], ["fe80::3"]),
    ],
)
def test_whitelist_forms(pattern: str, yes: list[str], no: list[str]) -> None:
    parsed = parse_pattern(pattern)
    assert parsed is not None
    for host in yes:
        assert parsed.matches(host), host
    for host in no if parsed.any_address else [*no, None, "not-an-ip"]:
        assert not parsed.matches(host), host


def test_a_blank_whitelist_matches_nothing() -> None:
    assert parse_pattern("") is None and parse_pattern("   ") is None and parse_pattern(None) is None


@pytest.mark.parametrize(
    "pattern",
    [
        "*.1.2.3",
        "192.168.*.1",
        "1.2.3",
        "300.1.1.*",
        "1.2.3.5-4",
        "1.2.3.-4",
        "fe80::*",
        "x.y.z.w",
        "1.2.3.{}",
        "1.2.3.4,banana",
        "1.2.{3,4}.5",
    ],
)
def test_bad_whitelists_are_refused_at_load(pattern: str) -> None:
    with pytest.raises(AclConfigError, match="whitelist"):
        parse_pattern(pattern)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([1, 2], "YAML mapping"),
        ({"accounts": {"a": 1}}, "accounts: expected a list"),
        ({"accounts": ["x"]}, r"accounts\[0\]: expected a mapping"),
        ({"accounts": [{"accessKey": "short", "secretKey": "12345678"}]}, "longer than 6"),
        ({"accounts": [{"accessKey": "rocketmq2", "secretKey": "123456"}]}, "longer than 6"),
        ({"accounts": [{"accessKey": "rocketmq2"}]}, "cannot be null"),
        (
            {"accounts": [{"accessKey": "rocketmq2", "secretKey": "1234567", "topicPerms": ["A=B=SUB"]}]},
            "topic:A=B=SUB",
        ),
        ({"accounts": [{"accessKey": "rocketmq2", "secretKey": "1234567", "groupPerms": "g=SUB"}]}, "list"),
        ({"globalWhiteRemoteAddresses": "1.2.3.4"}, "expected a list"),
        ({"globalWhiteRemoteAddresses": ["1.2.3.*.5"]}, "whitelist"),
    ],
)
def test_bad_files_say_what_is_wrong(data: object, message: str) -> None:
    with pytest.raises(AclConfigError, match=message):
        acl_config_from(data)


def test_a_secret_never_appears_in_a_load_error() -> None:
    with pytest.raises(AclConfigError) as info:
        acl_config_from({"accounts": [{"accessKey": "ak", "secretKey": "s3cr3t-value"}]})
    assert "s3cr3t-value" not in str(info.value)


def test_empty_file_means_no_accounts_and_a_repeated_key_keeps_the_first(tmp_path: Path) -> None:
    empty = tmp_path / "empty.yml"
    empty.write_text("", encoding="utf-8")
    assert not load_acl_config(empty).accounts
    config = acl_config_from(
        {
            "accounts": [
                {"accessKey": "rocketmq2", "secretKey": "first-secret"},
                {"accessKey": "rocketmq2", "secretKey": "second-secret"},
            ]
        }
    )
    assert config.accounts["rocketmq2"].secret_key == "first-secret"
    # StringUtils.split drops the empty piece, so "A==SUB" still names topic A.
    assert acl_config_from(
        {"accounts": [{"accessKey": "rocketmq2", "secretKey": "1234567", "topicPerms": ["A==SUB"]}]}
    ).accounts["rocketmq2"].resource_perms == {"A": SUB}


def test_unreadable_or_invalid_yaml_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(AclConfigError, match="cannot read"):
        load_acl_config(tmp_path / "missing.yml")
    bad = tmp_path / "bad.yml"
    bad.write_text("accounts: [\n", encoding="utf-8")
    with pytest.raises(AclConfigError, match="not valid YAML"):
        load_acl_config(bad)
