"""Which tests share an xdist worker (``tests/support/xdist_groups.py``), and that every collected
test carries its group."""

from __future__ import annotations

import pytest

from tests.support.xdist_groups import group_of


def test_a_module_is_its_own_group() -> None:
    assert group_of("tests/server/test_send_server.py::test_x[a]", ["tmp_path"]) == (
        "tests/server/test_send_server.py"
    )
    assert group_of("tests/server/test_send_server.py::test_y", []) == group_of(
        "tests/server/test_send_server.py::test_x", []
    )


def test_the_spark_tests_share_one_group_and_one_session() -> None:
    assert group_of("tests/store/spark/test_session.py::test_a", []) == "spark"
    assert group_of("tests/store/spark/sub/test_b.py::test_b", []) == "spark"
    assert group_of("tests/store/test_sparkless.py::test_c", []) != "spark"


def test_the_tests_of_the_compiled_java_kit_share_one_group() -> None:
    assert group_of("tests/server/test_java_consumers.py::test_row[1]", ["kit", "tmp_path"]) == "java-kit"
    assert group_of("tests/server/grpc/test_java_mixing.py::test_m", ["kit"]) == "java-kit"


def test_this_test_was_given_its_group(request: pytest.FixtureRequest) -> None:
    (mark,) = request.node.iter_markers("xdist_group")
    assert mark.args == ("tests/test_xdist_groups.py",)
