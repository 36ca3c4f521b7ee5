"""``rmq-query serve --store DIR`` opens a store with the geometry it was written with.

The IndexFile slot/entry counts are not stored in the files, so ``serve`` reads ``DIR/broker.conf``
when no ``--config`` is given (as ``rebuild-index`` and ``fsck`` do, and where ``demo-store`` writes
it), and the geometry flags override whatever file is read, as on the store subcommands.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from clients.cli import build_parser, main
from clients.cli.serve import config_file, consume_settings, load_config
from protocol.codes import RequestCode, ResponseCode
from store.config.store_config import DEFAULT_MAX_HASH_SLOT_NUM, DEFAULT_MAX_INDEX_NUM
from tests.support.harness import RawClient, key_query_fields
from tests.support.serve_process import serving


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("serve-conf") / "store"
    assert main(["demo-store", str(root), "--messages", "300"]) == 0
    return root


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["serve", *argv])


def test_store_dir_broker_conf_is_read(demo_dir: Path) -> None:
    args = _args("--store", str(demo_dir))
    config = load_config(args)
    assert (config.max_hash_slot_num, config.max_index_num) == (512, 2048)
    assert config.mapped_file_size_commit_log == 262144
    assert config.store_path_root_dir == demo_dir.resolve()
    conf = config_file(args)
    assert conf is not None and conf.resolve() == demo_dir.resolve() / "broker.conf"


def test_geometry_flags_override_the_file(demo_dir: Path, tmp_path: Path) -> None:
    config = load_config(_args("--store", str(demo_dir), "--max-hash-slot-num", "7", "--max-index-num", "9"))
    assert (config.max_hash_slot_num, config.max_index_num) == (7, 9)
    bare = tmp_path / "bare"
    bare.mkdir()
    config = load_config(
        _args("--store", str(bare), "--mapped-file-size", "4096", "--commitlog", str(tmp_path))
    )
    assert (config.max_hash_slot_num, config.max_index_num) == (
        DEFAULT_MAX_HASH_SLOT_NUM,
        DEFAULT_MAX_INDEX_NUM,
    )
    assert config.mapped_file_size_commit_log == 4096
    assert config.store_path_commit_log == tmp_path.resolve()


async def test_serve_store_dir_answers_with_its_own_geometry(demo_dir: Path) -> None:
    async with serving("--store", str(demo_dir), "--port", "0") as (_, _, port, _):
        client = await RawClient.connect("127.0.0.1", port)
        try:
            fields = key_query_fields("DemoOrders", "order-3")
            answer = await client.call(RawClient.request(RequestCode.QUERY_MESSAGE, fields))
            assert answer.code == ResponseCode.SUCCESS and answer.body
        finally:
            await client.close()


@pytest.mark.parametrize(
    ("conf", "flags", "expected"),
    [
        ("", (), True),  # broker.conf silent: on, unlike the broker's default
        ("enablePropertyFilter=false\n", (), False),
        ("enablePropertyFilter=true\n", (), True),
        ("enablePropertyFilter=false\n", ("--enable-property-filter",), True),
        ("", ("--no-enable-property-filter",), False),
    ],
)
def test_property_filter_setting(tmp_path: Path, conf: str, flags: tuple[str, ...], expected: bool) -> None:
    store = tmp_path / "store"
    store.mkdir()
    (store / "broker.conf").write_text(conf)
    args = _args("--writable", "--store", str(store), *flags)
    assert consume_settings(args, load_config(args)).enable_property_filter is expected
