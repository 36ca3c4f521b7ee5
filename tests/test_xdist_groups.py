"""Which tests share an xdist worker (``tests/support/xdist_groups.py``), and that every collected
test carries its group."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.support.paths import REPO_ROOT
from tests.support.xdist_groups import LONG_FIRST, group_of, schedule_key


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


def test_the_long_groups_go_first_longest_first_then_the_most_tests_first() -> None:
    first, second = LONG_FIRST[0], LONG_FIRST[1]
    keys = {
        "small": schedule_key("tests/protocol/test_codes.py", 3),
        "many": schedule_key("tests/protocol/test_decoder_fuzz.py", 300),
        "first": schedule_key(first, 1),
        "second": schedule_key(second, 200),
    }
    assert sorted(keys, key=keys.__getitem__) == ["first", "second", "many", "small"]


def test_each_long_group_names_a_group_that_exists() -> None:
    named = {"spark", "java-kit"}
    for group in LONG_FIRST:
        assert group in named or (REPO_ROOT / group).is_file(), group
    assert len(set(LONG_FIRST)) == len(LONG_FIRST)


def test_xdist_keeps_the_order_the_workers_collected(request: pytest.FixtureRequest) -> None:
    """xdist's own reordering (most tests first) is off, so the queue is the order below."""
    if not hasattr(request.config.option, "loadscopereorder"):
        pytest.skip("pytest-xdist is not installed")
    assert request.config.option.loadscopereorder is False


def test_a_workers_collection_is_in_schedule_order(request: pytest.FixtureRequest) -> None:
    if not hasattr(request.config, "workerinput"):
        pytest.skip("the groups are ordered in an xdist worker only (-n)")
    groups = [next(item.iter_markers("xdist_group")).args[0] for item in request.session.items]
    sizes = Counter(groups)
    keys = [schedule_key(group, sizes[group]) for group in groups]
    assert keys == sorted(keys)
    present = [group for group in LONG_FIRST if group in sizes]
    assert list(dict.fromkeys(groups))[: len(present)] == present


def test_xdist_sends_this_test_with_its_group(request: pytest.FixtureRequest) -> None:
    """The group reaches xdist: a worker's node id carries it (``@group``), which is what
    ``--dist loadgroup`` schedules by; a mark added after xdist read the marks would not."""
    if not hasattr(request.config, "workerinput"):
        pytest.skip("the group is a node id suffix in an xdist worker only (-n)")
    if not request.config.getoption("loadgroup", False):
        pytest.skip("the suffix is for --dist loadgroup")
    assert (
        request.node.nodeid
        == "tests/test_xdist_groups.py::test_xdist_sends_this_test_with_its_group@tests/test_xdist_groups.py"
    )
