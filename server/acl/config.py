"""``plain_acl.yml``, read the way RocketMQ's ``PlainPermissionManager`` reads it.

Keys used: ``globalWhiteRemoteAddresses`` (list of patterns, see ``server.acl.address``) and
``accounts``, each with ``accessKey``, ``secretKey`` (both required and longer than 6 characters, as
Java checks), ``whiteRemoteAddress``, ``admin``, ``defaultTopicPerm``, ``defaultGroupPerm``,
``topicPerms`` and ``groupPerms`` (``["TopicA=SUB", "groupB=PUB|SUB"]``; a group ``g`` is the resource
``%RETRY%g``, as in Java). A permission is ``PUB``, ``SUB``, ``PUB|SUB``/``SUB|PUB`` or ``DENY``, as
``Permission.parsePermFromString`` reads them, plus ``GET`` (alone or joined with ``|`` to PUB/SUB):
plain ACL 1.0 has no GET, but RocketMQ 5's ACL 2.0 grants message lookups (QUERY_MESSAGE,
VIEW_MESSAGE_BY_ID) with its Get action, so a query-only account can be given exactly the lookups
this server serves, without the right to consume. Any other word, and a missing default, is DENY.
Scalars are read as text the way fastjson converts them, so an unquoted
``secretKey: 12345678`` is the string ``"12345678"``. An accessKey repeated in the file keeps its
first account (Java warns and does the same across files). Other keys (``dataVersion``,
``namespacePerms``, ``resourcePerms``) are ignored: resources that would need them fall back to the
account's defaults.

PyYAML does the YAML (optional extra ``acl``): the file's lists, maps and quoting are YAML proper,
and a home-made subset parser would misread someone's real file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from server.acl.address import AddressPattern, parse_pattern
from server.acl.errors import AclConfigError

# Permission bits of ``org.apache.rocketmq.acl.common.Permission``.
DENY = 1
ANY = 2
PUB = 4
SUB = 8
#: ACL 2.0's Get action (not a bit of Java's 1.0 ``Permission``): message lookups only.
GET = 16

#: ``MixAll.RETRY_GROUP_TOPIC_PREFIX``: a consumer group's permissions are kept under its retry topic.
RETRY_PREFIX = "%RETRY%"

#: ``AclConstants.ACCESS_KEY_MIN_LENGTH`` / ``SECRET_KEY_MIN_LENGTH``: keys must be longer than this.
KEY_MIN_LENGTH = 6

_PERMS = {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "DENY": DENY}


_GRANTS = {"PUB": PUB, "SUB": SUB, "GET": GET}


def parse_perm(text: object) -> int:
    """``Permission.parsePermFromString``, plus GET: unknown or missing is DENY."""
    if text is None:
        return DENY
    word = _text(text).strip()
    known = _PERMS.get(word)
    if known is not None:
        return known
    parts = word.split("|")
    if "GET" not in parts or len(set(parts)) != len(parts) or any(p not in _GRANTS for p in parts):
        return DENY
    perm = 0
    for part in parts:
        perm |= _GRANTS[part]
    return perm


def check_permission(needed: int, owned: int) -> bool:
    """``Permission.checkPermission``: DENY wins; ANY wants PUB or SUB; else any shared bit."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


@dataclass(frozen=True, slots=True)
class Account:
    """One entry of ``accounts``."""

    access_key: str
    secret_key: str
    white_remote_address: AddressPattern | None = None
    admin: bool = False
    default_topic_perm: int = DENY
    default_group_perm: int = DENY
    #: Topic name, or ``%RETRY%group``, to its permission bits.
    resource_perms: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AclConfig:
    """The whole file: global whitelist and accounts by access key."""

    global_white: tuple[AddressPattern, ...] = ()
    accounts: Mapping[str, Account] = field(default_factory=dict)


def _text(value: object) -> str:
    """A YAML scalar as fastjson would turn it into a Java String."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    return _text(value).strip().lower() == "true"


def _resource_perms(entries: object, *, group: bool, where: str) -> dict[str, int]:
    if entries is None:
        return {}
    if not isinstance(entries, list):
        raise AclConfigError(f"{where}: expected a list of NAME=PERM entries")
    perms: dict[str, int] = {}
    for entry in entries:
        # StringUtils.split drops empty pieces: "A==SUB" is two items, "A=B=SUB" three.
        items = [item for item in _text(entry).split("=") if item]
        if len(items) != 2:
            kind = "group" if group else "topic"
            raise AclConfigError(f"{where}: parse resource permission failed for {kind}:{entry}")
        name = items[0].strip()
        perms[RETRY_PREFIX + name if group else name] = parse_perm(items[1])
    return perms


def _account(raw: object, index: int) -> Account:
    where = f"accounts[{index}]"
    if not isinstance(raw, dict):
        raise AclConfigError(f"{where}: expected a mapping")
    access_key = raw.get("accessKey")
    secret_key = raw.get("secretKey")
    access_key = None if access_key is None else _text(access_key)
    secret_key = None if secret_key is None else _text(secret_key)
    if (
        access_key is None
        or secret_key is None
        or len(access_key) <= KEY_MIN_LENGTH
        or len(secret_key) <= KEY_MIN_LENGTH
    ):
        raise AclConfigError(
            f"{where}: accessKey ({access_key!r}) and secretKey cannot be null and must be longer than "
            f"{KEY_MIN_LENGTH} characters"
        )
    white = raw.get("whiteRemoteAddress")
    perms = _resource_perms(raw.get("groupPerms"), group=True, where=f"{where}.groupPerms")
    perms.update(_resource_perms(raw.get("topicPerms"), group=False, where=f"{where}.topicPerms"))
    return Account(
        access_key=access_key,
        secret_key=secret_key,
        white_remote_address=parse_pattern(None if white is None else _text(white)),
        admin=_bool(raw.get("admin", False)),
        default_topic_perm=parse_perm(raw.get("defaultTopicPerm")),
        default_group_perm=parse_perm(raw.get("defaultGroupPerm")),
        resource_perms=perms,
    )


def acl_config_from(data: Any) -> AclConfig:
    """The configuration from the file's decoded YAML (a mapping; empty means 'nobody')."""
    if data is None:
        return AclConfig()
    if not isinstance(data, dict):
        raise AclConfigError("the ACL file must be a YAML mapping")
    white_raw = data.get("globalWhiteRemoteAddresses") or []
    if not isinstance(white_raw, list):
        raise AclConfigError("globalWhiteRemoteAddresses: expected a list")
    white = tuple(p for p in (parse_pattern(_text(w)) for w in white_raw if w is not None) if p is not None)
    accounts_raw = data.get("accounts") or []
    if not isinstance(accounts_raw, list):
        raise AclConfigError("accounts: expected a list")
    accounts: dict[str, Account] = {}
    for index, raw in enumerate(accounts_raw):
        account = _account(raw, index)
        accounts.setdefault(account.access_key, account)
    return AclConfig(global_white=white, accounts=accounts)


def load_acl_config(path: Path) -> AclConfig:
    """Read and check ``path``; ``AclConfigError`` says what is wrong with it."""
    try:
        import yaml
    except ImportError:
        raise AclConfigError("reading an ACL file needs PyYAML: pip install 'rmq-query[acl]'") from None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AclConfigError(f"cannot read {path}: {exc}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise AclConfigError(f"{path} is not valid YAML: {exc}") from exc
    return acl_config_from(data)
