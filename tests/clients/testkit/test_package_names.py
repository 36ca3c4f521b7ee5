"""The test kit's names are importable from the package, as they were before it became one."""

from __future__ import annotations

import subprocess
import sys

from tests.support.paths import REPO_ROOT


def test_the_kit_names_come_from_the_package_and_are_the_server_module_ones() -> None:
    import clients.testkit as kit
    from clients.testkit import server

    for name in ("RmqServer", "RmqWriter", "RmqClient", "kit_store_config", "TEST_GEOMETRY"):
        assert getattr(kit, name) is getattr(server, name)


def test_an_unknown_name_is_an_attribute_error() -> None:
    code = "import clients.testkit as k\ntry:\n    k.Nope\nexcept AttributeError as e:\n    print(e)\n"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "module 'clients.testkit' has no attribute 'Nope'"
