"""The one declaration of the CommitLog record layout: the C header says the same, and Java agrees.

``protocol/record_layout.py`` and ``protocol/_record_layout.h`` must state the same layout: every
``RECORD_X`` macro of the header is compared with the Python ``X`` (read from the header's text, no
compiler needed). Then the layout is checked against records the real RocketMQ wrote: the
``MessageDecoder.encode`` vectors (every field known, IPv4 and IPv6 hosts) and all 5000 records of the
4.9.7 store (IPv6 born-only and store-only hosts, compressed bodies, end-of-file blanks). Expected
values come from Java's JSON next to those bytes, read here with nothing but the layout's offsets.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
import struct
from pathlib import Path

import pytest

from protocol import record_layout as layout
from tests.support.paths import REPO_ROOT

HEADER = REPO_ROOT / "protocol" / "_record_layout.h"
#: The compiled twins that read CommitLog records: each must take the layout from the header.
RECORD_READING_TWINS = (
    "store/commitlog/_record_fast.c",
    "store/commitlog/_view_read_fast.c",
    "store/commitlog/_view_read_core.h",
    "server/remoting/_request_path_fast.c",
    "server/remoting/_request_path_offsets.h",
    "store/index/_index_range_fast.c",
    "store/index/_query_walk_fast.c",
)
STORE = "java-4.9.7-a"


def _header_defines() -> dict[str, int]:
    """``RECORD_*`` macros of the header as Python ints (int32 casts applied)."""
    text = re.sub(r"/\*.*?\*/", "", HEADER.read_text(encoding="utf-8"), flags=re.S)
    out: dict[str, int] = {}
    for name, value in re.findall(r"^#define RECORD_(\w+)\s+(.+?)\s*$", text, flags=re.M):
        int32 = "(int32_t)" in value
        literal = re.fullmatch(r"\(*(?:\(int32_t\))?(0x[0-9A-Fa-f]+|\d+)u?\)*", value.replace(" ", ""))
        assert literal, f"RECORD_{name}: {value!r} is not a plain literal"
        number = int(literal.group(1), 0)
        if int32 and number >= 1 << 31:
            number -= 1 << 32
        out[name] = number
    return out


def test_the_header_states_the_python_values() -> None:
    defines = _header_defines()
    assert len(defines) >= 25
    for name, value in defines.items():
        assert hasattr(layout, name), f"RECORD_{name} has no Python twin in protocol/record_layout.py"
        assert getattr(layout, name) == value, name


def test_the_header_inline_helpers_use_only_its_constants() -> None:
    """The offsets that move with the IPv6 bits are computed from the named widths, no literal."""
    text = re.sub(r"/\*.*?\*/", "", HEADER.read_text(encoding="utf-8"), flags=re.S)
    bodies = re.findall(r"static inline [^{]+\{(.*?)\n\}", text, flags=re.S)
    assert len(bodies) == 4
    for body in bodies:
        assert not re.search(r"\b\d+\b", body), body


def test_the_moving_offsets_are_calmsglength_s() -> None:
    """Java's sums (``CommitLog.calMsgLength``), written out here independently of the module."""
    head = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8  # TOTALSIZE .. BORNTIMESTAMP
    for sys_flag, born, store in ((0, 8, 8), (0x10, 20, 8), (0x20, 8, 20), (0x30, 20, 20)):
        assert layout.store_timestamp_at(sys_flag) == head + born
        assert layout.body_length_at(sys_flag) == head + born + 8 + store + 4 + 8
        assert (
            layout.record_size(sys_flag, 5, 6, 7) == head + born + 8 + store + 4 + 8 + 4 + 5 + 1 + 6 + 2 + 7
        )
        assert layout.record_size(sys_flag, 5, 6, 7, layout.MAGIC_CODE_V2) == layout.record_size(
            sys_flag, 5, 7, 7
        )
        kind = layout.host_kind(sys_flag)
        assert layout.FIXED_PART[kind].size == layout.body_length_at(sys_flag) + 4
    assert layout.MIN_RECORD_SIZE == 91
    assert (layout.MAGIC_CODE_V1, layout.BLANK_MAGIC_CODE) == (-626843481, -875286124)


def test_head_struct_skips_the_fields_not_asked_for() -> None:
    assert layout.head_struct("TOTALSIZE", "MAGICCODE", "QUEUEID", "QUEUEOFFSET").format == ">ii4xi4xq"
    assert layout.head_struct("PHYSICALOFFSET").format == ">28xq"
    with pytest.raises(ValueError):
        layout.head_struct("QUEUEID", "TOTALSIZE")
    with pytest.raises(ValueError):
        layout.head_struct("BODYLEN")


def test_every_record_reading_twin_includes_the_header_and_states_no_layout_of_its_own() -> None:
    magic_literals = re.compile(r"DAA320A[7B]|CBD43194|\b91\b", re.I)
    sources = [p for package in ("store", "server") for p in sorted((REPO_ROOT / package).rglob("*.[ch]"))]
    for source in sources + sorted((REPO_ROOT / "protocol").glob("*.c")):
        text = source.read_text(encoding="utf-8")
        rel = source.relative_to(REPO_ROOT).as_posix()
        assert not magic_literals.search(text), f"{rel} states a magic code or the minimum size itself"
        if rel in RECORD_READING_TWINS:
            assert '#include "_record_layout.h"' in text, rel


def test_no_python_module_states_the_magic_codes_itself() -> None:
    values = re.compile(r"626843481|626843477|875286124|DAA320A[7B]|CBD43194", re.I)
    for package in ("protocol", "store", "server", "clients", "benchmarks"):
        for source in (REPO_ROOT / package).rglob("*.py"):
            if source.name != "record_layout.py":
                assert not values.search(source.read_text(encoding="utf-8")), source


# -- against records Java wrote ----------------------------------------------------------------------


def _i(buf: bytes, at: int, width: int) -> int:
    return int.from_bytes(buf[at : at + width], "big", signed=True)


def _host(text: str) -> tuple[bytes, int]:
    """``/10.1.2.9:50001`` or ``/[fd00::2]:10911`` as Java prints an InetSocketAddress."""
    host, port = text.lstrip("/").rsplit(":", 1)
    return ipaddress.ip_address(host.strip("[]")).packed, int(port)


@pytest.mark.parametrize(
    "name", ["message_encode_v4_1", "message_encode_v4_2", "message_encode_v6_1", "message_encode_v6_2"]
)
def test_java_encoded_records_have_every_field_where_the_layout_says(
    vectors_by_name: dict, vectors_dir: Path, name: str
) -> None:
    vector = vectors_by_name[name]
    exp = vector["inputs"]
    rec = (vectors_dir / vector["file"]).read_bytes()
    sys_flag = exp["sysFlag"]
    assert _i(rec, layout.TOTAL_SIZE_AT, 4) == vector["length"] == len(rec)
    assert _i(rec, layout.MAGIC_CODE_AT, 4) == layout.MAGIC_CODE_V1
    assert _i(rec, layout.BODY_CRC_AT, 4) == exp["bodyCRC"]
    assert _i(rec, layout.QUEUE_ID_AT, 4) == exp["queueId"]
    assert _i(rec, layout.FLAG_AT, 4) == exp["flag"]
    assert _i(rec, layout.QUEUE_OFFSET_AT, 8) == exp["queueOffset"]
    assert _i(rec, layout.PHYSICAL_OFFSET_AT, 8) == exp["commitLogOffset"]
    assert _i(rec, layout.SYS_FLAG_AT, 4) == sys_flag
    assert _i(rec, layout.BORN_TIMESTAMP_AT, 8) == exp["bornTimestamp"]
    born_ip, born_port = _host(exp["bornHost"])
    born_width = layout.born_host_width(sys_flag)
    assert born_width == len(born_ip) + 4
    at = layout.BORN_HOST_AT
    assert (rec[at : at + len(born_ip)], _i(rec, at + len(born_ip), 4)) == (born_ip, born_port)
    at = layout.store_timestamp_at(sys_flag)
    assert at == layout.BORN_HOST_AT + born_width
    assert _i(rec, at, 8) == exp["storeTimestamp"]
    store_ip, store_port = _host(exp["storeHost"])
    assert layout.store_host_width(sys_flag) == len(store_ip) + 4
    at += 8
    assert (rec[at : at + len(store_ip)], _i(rec, at + len(store_ip), 4)) == (store_ip, store_port)
    at += len(store_ip) + 4
    assert _i(rec, at, 4) == exp["reconsumeTimes"]
    assert _i(rec, at + 4, 8) == exp["preparedTransactionOffset"]
    at += 12
    assert at == layout.body_length_at(sys_flag)
    body = bytes.fromhex(exp["bodyHex"])
    assert _i(rec, at, 4) == len(body)
    at += 4
    assert rec[at : at + len(body)] == body
    at += len(body)
    topic = exp["topic"].encode()
    assert _i(rec, at, layout.TOPIC_LENGTH_WIDTH_V1) == len(topic)
    at += layout.TOPIC_LENGTH_WIDTH_V1
    assert rec[at : at + len(topic)] == topic
    at += len(topic)
    props = exp["propertiesString"].encode()
    assert _i(rec, at, layout.PROPERTIES_LENGTH_WIDTH) == len(props)
    assert rec[at + layout.PROPERTIES_LENGTH_WIDTH :] == props
    assert layout.record_size(sys_flag, len(body), len(topic), len(props)) == len(rec)
    fixed = layout.FIXED_PART[layout.host_kind(sys_flag)].unpack_from(rec)
    assert fixed == (
        len(rec), layout.MAGIC_CODE_V1, exp["bodyCRC"], exp["queueId"], exp["flag"], exp["queueOffset"],
        exp["commitLogOffset"], sys_flag, exp["bornTimestamp"], born_ip, born_port, exp["storeTimestamp"],
        store_ip, store_port, exp["reconsumeTimes"], exp["preparedTransactionOffset"], len(body),
    )  # fmt: skip


@pytest.fixture(scope="module")
def store_expected(stores_dir: Path) -> dict:
    return json.loads((stores_dir / f"{STORE}.expected.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def commitlog_files(stores_dir: Path) -> dict[int, bytes]:
    return {int(p.name): p.read_bytes() for p in (stores_dir / STORE / "commitlog").iterdir()}


def test_every_record_of_the_java_store_lies_where_the_layout_says(
    store_expected: dict, commitlog_files: dict
) -> None:
    file_size = store_expected["messageStoreConfig"]["mappedFileSizeCommitLog"]
    kinds = set()
    for exp in store_expected["messages"]:
        offset = exp["commitLogOffset"]
        data = commitlog_files[offset - offset % file_size]
        pos = offset % file_size
        rec = data[pos : pos + exp["size"]]
        sys_flag = exp["sysFlag"]
        kinds.add(layout.host_kind(sys_flag))
        assert layout.SIZE_MAGIC.unpack_from(rec) == (exp["size"], layout.MAGIC_CODE_V1)
        assert _i(rec, layout.QUEUE_ID_AT, 4) == exp["queueId"]
        assert _i(rec, layout.QUEUE_OFFSET_AT, 8) == exp["queueOffset"]
        assert _i(rec, layout.PHYSICAL_OFFSET_AT, 8) == offset
        assert _i(rec, layout.SYS_FLAG_AT, 4) == sys_flag
        at = layout.store_timestamp_at(sys_flag)
        assert _i(rec, at, 8) == exp["storeTimestamp"]
        # The offset message id is the store host's address and port, then the offset.
        store_host = bytes.fromhex(exp["offsetMsgId"])[:-8]
        assert rec[at + 8 : at + 8 + len(store_host)] == store_host
        assert layout.store_host_width(sys_flag) == len(store_host)
        at = layout.body_length_at(sys_flag)
        body_len = _i(rec, at, layout.BODY_LENGTH_WIDTH)
        at += layout.BODY_LENGTH_WIDTH
        if not sys_flag & 0x1:  # (the hash is of the inflated body; a compressed one is stored deflated)
            assert body_len == exp["bodyLen"]
            assert hashlib.sha256(rec[at : at + body_len]).hexdigest() == exp["bodySha256"]
        at += body_len
        topic_len = _i(rec, at, layout.TOPIC_LENGTH_WIDTH_V1)
        at += layout.TOPIC_LENGTH_WIDTH_V1
        assert rec[at : at + topic_len].decode() == exp["topic"]
        at += topic_len
        props_len = _i(rec, at, layout.PROPERTIES_LENGTH_WIDTH)
        props = rec[at + layout.PROPERTIES_LENGTH_WIDTH :]
        assert len(props) == props_len
        if exp["uniqKey"]:
            assert f"UNIQ_KEY\x01{exp['uniqKey']}".encode() in props
        assert layout.record_size(sys_flag, body_len, topic_len, props_len) == exp["size"]
    assert kinds == {0, 1, 2}  # IPv4, IPv6 born host, IPv6 store host


def test_the_java_store_ends_each_full_file_with_a_blank(store_expected: dict, commitlog_files: dict) -> None:
    file_size = store_expected["messageStoreConfig"]["mappedFileSizeCommitLog"]
    ends: dict[int, int] = {}
    for exp in store_expected["messages"]:
        start = exp["commitLogOffset"] - exp["commitLogOffset"] % file_size
        ends[start] = max(ends.get(start, 0), exp["commitLogOffset"] + exp["size"] - start)
    blanks = 0
    for start in sorted(ends)[:-1]:
        pos = ends[start]
        size, magic = struct.unpack_from(">ii", commitlog_files[start], pos)
        if pos + layout.BLANK_SIZE <= file_size:
            assert (size, magic) == (file_size - pos, layout.BLANK_MAGIC_CODE)
            blanks += 1
    assert blanks >= 10
