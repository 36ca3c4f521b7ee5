"""mqadmin's text for the topic commands where the comparison with mqadmin on our server cannot tell:
``topicList`` prints the name server's list in the order of the ``HashSet`` fastjson decodes it into,
and our name server already answers in that order, so here the order is checked against the JDK's own
``HashSet`` on a list in another order (``java/HashSetOrder.java``, run as a single-file program)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from clients.topic_admin import TopicSpec, perm_to_string
from clients.topic_admin_text import topic_list_text
from tests.support.paths import REPO_ROOT

SOURCE = REPO_ROOT / "tests" / "server" / "java" / "HashSetOrder.java"


@pytest.mark.skipif(shutil.which("java") is None, reason="needs a JDK")
def test_topic_list_is_printed_in_a_java_hash_sets_order() -> None:
    # 40 names: the set grows from 16 to 64 buckets as they are added; several share a bucket.
    names = sorted(
        [f"Topic{i}" for i in range(30)]
        + ["%RETRY%g1", "%DLQ%g1", "TBW102", "a", "b", "Zz", "x-y", "q_1", "Q", "SELF_TEST_TOPIC"]
    )
    java = subprocess.run(
        ["java", str(SOURCE), *names], capture_output=True, text=True, timeout=60, check=True
    ).stdout  # fmt: skip
    assert topic_list_text(names) == java
    assert java != "".join(f"{n}\n" for n in names)  # the order is not the list's own


def test_topic_config_text_and_perm_names() -> None:
    # TopicConfig.toString and PermName.perm2String (4.9.7): R, W, X or '-' each
    assert [perm_to_string(p) for p in (0, 1, 2, 4, 6, 7)] == ["---", "--X", "-W-", "R--", "RW-", "RWX"]
    assert TopicSpec("T", 2, 3, 4, topic_sys_flag=1).java_string() == (
        "TopicConfig [topicName=T, readQueueNums=2, writeQueueNums=3, perm=R--, "
        "topicFilterType=SINGLE_TAG, topicSysFlag=1, order=false]"
    )
