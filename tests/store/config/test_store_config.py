"""broker.conf is read like Java properties with the broker's defaults; overrides win; an index
file of the wrong size for the configured geometry is a clear error naming both."""

from __future__ import annotations

from pathlib import Path

import pytest

from store.config.store_config import (
    DEFAULT_MAX_HASH_SLOT_NUM,
    DEFAULT_MAX_INDEX_NUM,
    ConfigError,
    StoreConfig,
    parse_properties,
)
from store.errors import IndexGeometryError
from store.index.service import IndexService


def test_properties_syntax() -> None:
    text = (
        "# comment\n! also\nbrokerName = b-1\nlistenPort:10000\n"
        "brokerIP1 10.0.0.1\nkey=a\\\n   b\nu=\\u00e9\n"
    )
    props = parse_properties(text)
    assert props == {
        "brokerName": "b-1",
        "listenPort": "10000",
        "brokerIP1": "10.0.0.1",
        "key": "ab",
        "u": "é",
    }


def test_defaults_and_relative_paths(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("storePathRootDir=data\nmessageIndexEnable=false\n", encoding="utf-8")
    config = StoreConfig.load(conf)
    assert config.store_path_root_dir == tmp_path / "data"
    assert config.store_path_commit_log == tmp_path / "data" / "commitlog"
    assert config.max_hash_slot_num == DEFAULT_MAX_HASH_SLOT_NUM
    assert config.max_index_num == DEFAULT_MAX_INDEX_NUM
    assert config.index_file_size == 420_000_040
    assert config.mapped_file_size_commit_log == 1 << 30
    assert config.listen_port == 10911
    assert config.broker_cluster_name == "DefaultCluster"
    assert config.message_index_enable is False


def test_overrides_win(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("storePathRootDir=/x\nlistenPort=1\nmaxIndexNum=100\n", encoding="utf-8")
    config = StoreConfig.load(
        conf, overrides={"listen_port": 2, "store_path_root_dir": tmp_path, "max_index_num": None}
    )
    assert config.listen_port == 2
    assert config.store_path_root_dir == tmp_path
    assert config.store_path_commit_log == tmp_path / "commitlog"
    assert config.max_index_num == 100


def test_bad_values_are_config_errors(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("maxHashSlotNum=lots\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="maxHashSlotNum"):
        StoreConfig.load(conf)
    with pytest.raises(ConfigError):
        StoreConfig.load(tmp_path / "missing.conf")


def test_wrong_geometry_names_both(golden_stores: list[tuple[StoreConfig, dict]]) -> None:
    config, _ = golden_stores[0]
    wrong = StoreConfig.for_store(config.store_path_root_dir, max_hash_slot_num=1024, max_index_num=2048)
    with pytest.raises(IndexGeometryError) as err:
        IndexService(wrong)
    message = str(err.value)
    assert "43048" in message and "maxHashSlotNum=1024" in message and "maxIndexNum=2048" in message


def test_latin1_broker_conf_is_read_like_java(tmp_path: Path) -> None:
    """Java reads broker.conf as ISO-8859-1: a Latin-1 byte (not valid UTF-8) must not crash loading."""
    conf = tmp_path / "broker.conf"
    conf.write_bytes(b"# caf\xe9 cluster\nbrokerName=b\xe9\nmaxHashSlotNum=512\n")
    config = StoreConfig.load(conf)
    assert config.broker_name == "b\u00e9"
    assert config.max_hash_slot_num == 512
    conf.write_bytes("brokerName=b\u00e9\n".encode())  # UTF-8, as most editors write it
    assert StoreConfig.load(conf).broker_name == "b\u00e9"
