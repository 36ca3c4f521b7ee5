"""The ``rmq-query`` dispatcher: every registered entry point appears under the one help and loads."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from clients.cli import SUBCOMMANDS, build_parser, main
from tests.support.paths import REPO_ROOT


def test_every_subcommand_is_listed_in_the_help(capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for name in SUBCOMMANDS:
        assert f"    {name}" in out, name


@pytest.mark.parametrize("name", ["query-key", "query-id", "query-uniq", "bench"])
def test_clients_subcommands_are_registered(name: str) -> None:
    module = importlib.import_module(SUBCOMMANDS[name])
    assert module.HELP and callable(module.add_arguments) and callable(module.run)
    assert build_parser().parse_args([name, *_minimal_args(name)])._run is module.run


def _minimal_args(name: str) -> list[str]:
    return {
        "query-key": ["-n", "h:1", "-t", "T", "-k", "k"],
        "query-id": ["-i", "7F00000100002A9F0000000000004431"],
        "query-uniq": ["-n", "h:1", "-t", "T", "-i", "u"],
        "bench": ["-n", "h:1", "--requests", "1"],
    }[name]


def test_no_subcommand_is_a_usage_error(capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main([])
    assert info.value.code == 2


def test_a_query_command_does_not_import_the_server_or_the_store_tools() -> None:
    code = (
        "import sys\n"
        "from clients.cli import main\n"
        "try:\n"
        "    main(['query-key', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = ('server.app', 'clients.cli.serve', 'clients.cli.rebuild_index')\n"
        "print('IMPORTED=' + ','.join(m for m in heavy if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip().splitlines()[-1] == "IMPORTED="


def test_a_named_subcommand_still_parses_its_own_arguments_only() -> None:
    args = build_parser(only="query-key").parse_args(["query-key", "-n", "h:1", "-t", "T", "-k", "serve"])
    assert args.command == "query-key" and args.key == "serve"
