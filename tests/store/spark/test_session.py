"""What a remote executor receives is enough to run every pipeline task on its own."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from store.spark.session import package_archive


def test_the_shipped_archive_alone_imports_every_task_module(tmp_path: Path) -> None:
    archive = package_archive(tmp_path)
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "import store.spark.decode, store.spark.index_writer, store.spark.key_table, store.spark.ranges;"
        "assert store.spark.decode.__file__.startswith(sys.argv[1]), store.spark.decode.__file__"
    )
    # -I: isolated, so neither the checkout nor PYTHONPATH can supply the packages.
    result = subprocess.run(
        [sys.executable, "-I", "-c", code, str(archive)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_executors_importing_the_archive_run_the_compiled_walk(tmp_path: Path) -> None:
    """The compiled twins travel in the archive and load from it (copied out by ``accel.load``);
    with ``RMQ_PURE_PYTHON=1`` the executors run the references, as the driver does."""
    pytest.importorskip("store.index._index_range_fast", reason="compiled accelerator not built")
    archive = package_archive(tmp_path)
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "from store.index import index_range; from store.commitlog import record;"
        "assert index_range.__file__.startswith(sys.argv[1]), index_range.__file__;"
        "print(index_range.index_range is index_range.index_range_reference,"
        " record.hop is record.hop_reference)"
    )
    for pure, expected in (("0", "False False"), ("1", "True True")):
        result = subprocess.run(
            [sys.executable, "-I", "-c", code, str(archive)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
            env={"RMQ_PURE_PYTHON": pure, "TMPDIR": str(tmp_path)},
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.split() == expected.split(), pure


def test_a_copy_out_directory_others_can_write_is_never_loaded_from(tmp_path: Path) -> None:
    """Code is loaded from the copied-out modules: a directory under the shared temporary directory
    with the name ``accel`` would use, but writable by others (made first by another user, with a
    module planted in it), is passed over for a private one."""
    from protocol import accel

    tag = "0123456789abcdef"
    planted = tmp_path / f"rmq-accel-{os.getuid()}-{tag}"
    planted.mkdir()
    planted.chmod(0o777)
    tempdir = tempfile.tempdir
    tempfile.tempdir = str(tmp_path)
    try:
        chosen = Path(accel._private_dir(tag))
        assert chosen != planted and chosen.parent == tmp_path
        assert stat.S_IMODE(chosen.stat().st_mode) == 0o700
        planted.rmdir()
        chosen.rmdir()
        fresh = Path(accel._private_dir(tag))  # free: made as this user's own, and used again
        assert fresh == planted and stat.S_IMODE(fresh.stat().st_mode) == 0o700
        assert Path(accel._private_dir(tag)) == fresh
    finally:
        tempfile.tempdir = tempdir


def test_without_pyspark_the_spark_engine_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from clients.cli import main
    from store.spark.synthetic import write_commitlog

    write_commitlog(tmp_path / "store" / "commitlog", file_size=64 * 1024, messages=50)
    for name in ("pyspark", "pyspark.sql"):
        monkeypatch.setitem(sys.modules, name, None)  # as if the spark extra were not installed
    args = ["rebuild-index", "--store", str(tmp_path / "store"), "--mapped-file-size", str(64 * 1024)]
    assert main([*args, "--engine", "spark", "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "the spark engine needs PySpark: pip install 'rmq-query[spark]'" in err
    assert not (tmp_path / "out").exists()


def test_a_malformed_spark_setting_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from clients.cli import main

    (tmp_path / "store" / "commitlog").mkdir(parents=True)
    args = ["export-keys", "--store", str(tmp_path / "store"), "--out", str(tmp_path / "out")]
    assert main([*args, "--engine", "spark", "--spark-conf", "spark.driver.memory"]) == 1
    assert "--spark-conf expects KEY=VALUE, got 'spark.driver.memory'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("command", "flags", "named"),
    [
        ("rebuild-index", ["--master", "spark://10.0.0.1:7077"], "--master"),
        ("rebuild-index", ["--spark-conf", "spark.driver.memory=4g"], "--spark-conf"),
        (
            "export-keys",
            ["--master", "local[2]", "--spark-conf", "spark.driver.memory=4g"],
            "--master, --spark-conf",
        ),
    ],
)
def test_spark_options_without_the_spark_engine_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, flags: list[str], named: str
) -> None:
    # Ignoring them would run the job in one process where the operator asked for a cluster.
    from clients.cli import main
    from store.spark.synthetic import write_commitlog

    write_commitlog(tmp_path / "store" / "commitlog", file_size=64 * 1024, messages=50)
    args = [command, "--store", str(tmp_path / "store"), "--mapped-file-size", str(64 * 1024)]
    if command == "export-keys":
        args += ["--out", str(tmp_path / "out")]
    with pytest.raises(SystemExit) as info:
        main([*args, *flags])
    assert info.value.code == 2  # a usage error, before anything runs
    assert f"{command}: error: --engine spark is needed for {named}" in capsys.readouterr().err
    assert not (tmp_path / "out").exists() and not (tmp_path / "store" / "index").exists()


def test_task_slots_of_local_masters() -> None:
    from types import SimpleNamespace

    from store.spark.session import task_slots

    def slots(master: str) -> int:
        return task_slots(SimpleNamespace(master=master))  # type: ignore[arg-type]

    assert slots("local") == 1
    assert slots("local[3]") == 3
    assert slots("local[2,4]") == 2  # with task retries
    assert slots("local[*]") == (os.cpu_count() or 1)
