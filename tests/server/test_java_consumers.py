"""Issue 19's acceptance table: the official Java 4.9.7 client's consumers against ``serve --writable``.

Each row of the issue's table is a subcommand of ``tests/support/java/Scenarios.java`` (producer,
push / orderly / broadcasting / lite-pull consumers, retry and dead letters, delay, transactions,
trace, mqadmin), run here against ``serve --writable`` on an empty temporary store and held to what
the same program observed against the real 4.9.7 name server and broker
(``golden/java_scenarios_4.9.7.json``, written by ``golden/record_java_scenarios.py``; the pass rules
are ``tests/support/scenario_checks.py``'s).

All rows start at once when the module's first test asks for them (one shared server; each row
under its own topics and groups, so they are independent) and each test waits for its own. Two rows
need a server of their own: the transaction row (the check-back interval made short with
``--transaction-check-interval-ms``, as ``transactionCheckInterval`` was on the real broker) and the
restart row (rows 1 and 2 run, the server restarted on the same store, rows 1 and 2 run again, and the
group committed before the restart resumes after it). Slow rows when they pass: retry (10 s delay
level 3, up to 40 s when the client's first route lookup missed the retry topic), transaction (the
broker checks a half message only after 6 s), restart (two rounds); the module takes about a
minute.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.support.java_scenarios import ROWS, RUN_TIMEOUT, JavaKit, WritableServer, java_available, run_row
from tests.support.scenario_checks import check, committed, consumer_progress, push, update_topic

pytestmark = pytest.mark.skipif(java_available() is not None, reason=str(java_available()))

GOLDEN = Path(__file__).parent / "golden" / "java_scenarios_4.9.7.json"
#: What the check-back interval is made on both sides (ms): broker.conf transactionCheckInterval=3000.
TRANSACTION_CHECK_INTERVAL_MS = "3000"
#: Seconds a test waits for its row: a round of the restart row is two scenarios, plus the restart.
ROW_TIMEOUT = 3 * RUN_TIMEOUT


def run_id() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def golden() -> dict[str, dict[str, Any]]:
    return json.loads(GOLDEN.read_text(encoding="utf-8"))["scenarios"]


def transaction_row(kit: JavaKit, root: Path) -> dict[str, Any]:
    server = WritableServer(
        root / "store",
        "--transaction-check-interval-ms",
        TRANSACTION_CHECK_INTERVAL_MS,
        log=root / "serve.log",
    ).start()
    try:
        return run_row(kit, server.address, server.address, "transaction", run_id())
    finally:
        assert server.stop() == 0


def restart_rows(kit: JavaKit, root: Path) -> dict[str, Any]:
    """Rows 1 and 2, a restart on the same store, rows 1 and 2 again; a group consumes 10 before the
    restart and must get exactly the 10 sent after it."""
    server = WritableServer(root / "store", log=root / "serve.log").start()
    resumed = run_id()
    rounds: dict[str, Any] = {}
    try:
        for name, half in (("before", "first"), ("after", "second")):
            with ThreadPoolExecutor(3) as pool:
                jobs = {
                    "push": pool.submit(run_row, kit, server.address, server.address, "push", run_id()),
                    "committed": pool.submit(
                        run_row, kit, server.address, server.address, "committed", run_id()
                    ),
                    "resumed": pool.submit(kit.run, server.address, "committed", resumed, half),
                }
                rounds[name] = {k: f.result() for k, f in jobs.items()}
            if name == "before":
                rounds["stopStatus"] = server.stop()
                server.start()
    finally:
        server.kill()
    return rounds


@pytest.fixture(scope="module")
def rows(
    kit: JavaKit, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Future[dict[str, Any]]]]:
    """Every row started at once; the shared server stops once all of them ended."""
    root = tmp_path_factory.mktemp("java-consumers")
    server = WritableServer(root / "store", log=root / "serve.log").start()
    jobs: dict[str, Callable[[], dict[str, Any]]] = {
        row: (lambda row=row: run_row(kit, server.address, server.address, row, run_id()))
        for row in ROWS
        if row != "transaction"
    }
    jobs["transaction"] = lambda: transaction_row(kit, tmp_path_factory.mktemp("java-tx"))
    jobs["restart"] = lambda: restart_rows(kit, tmp_path_factory.mktemp("java-restart"))
    pool = ThreadPoolExecutor(len(jobs))
    try:
        yield {name: pool.submit(job) for name, job in jobs.items()}
    finally:
        pool.shutdown(wait=True)
        assert server.stop() == 0


def observed(rows: dict[str, Future[dict[str, Any]]], row: str) -> dict[str, Any]:
    return rows[row].result(timeout=ROW_TIMEOUT)


def test_push_consumer_receives_every_message(rows: dict, golden: dict) -> None:
    check("push", observed(rows, "push"), golden["push"])


def test_a_restarted_group_gets_only_what_it_had_not_consumed(rows: dict, golden: dict) -> None:
    check("committed", observed(rows, "committed"), golden["committed"])


def test_reconsume_later_redelivers_through_the_retry_topic(rows: dict, golden: dict) -> None:
    # slow: delay level 3 is 10 s
    check("retry", observed(rows, "retry"), golden["retry"])


def test_past_max_reconsume_times_the_message_is_in_the_dlq(rows: dict, golden: dict) -> None:
    check("dlq", observed(rows, "dlq"), golden["dlq"])


def test_orderly_consumer_gets_each_keys_messages_in_order(rows: dict, golden: dict) -> None:
    check("orderly", observed(rows, "orderly"), golden["orderly"])


def test_delay_level_2_is_delivered_after_about_5_s(rows: dict, golden: dict) -> None:
    check("delay", observed(rows, "delay"), golden["delay"])


def test_transactions_commit_rollback_and_check_back(rows: dict, golden: dict) -> None:
    # slow: the broker checks a half message only after 6 s
    check("transaction", observed(rows, "transaction"), golden["transaction"])


def test_batch_async_and_oneway_sends_are_all_consumed(rows: dict, golden: dict) -> None:
    check("sendkinds", observed(rows, "sendkinds"), golden["sendkinds"])


def test_tag_filter_gets_only_its_tags(rows: dict, golden: dict) -> None:
    check("tags", observed(rows, "tags"), golden["tags"])


def test_two_broadcasting_consumers_each_get_everything(rows: dict, golden: dict) -> None:
    check("broadcast", observed(rows, "broadcast"), golden["broadcast"])


def test_lite_pull_consumer_subscribe_and_poll(rows: dict, golden: dict) -> None:
    check("litepull", observed(rows, "litepull"), golden["litepull"])


def test_message_trace_shows_pub_and_sub(rows: dict, golden: dict) -> None:
    check("trace", observed(rows, "trace"), golden["trace"])


def test_mqadmin_consumer_progress(rows: dict, golden: dict) -> None:
    consumer_progress(observed(rows, "admin"), golden["admin"])


def test_mqadmin_update_topic_to_8_queues_then_topic_route(rows: dict, golden: dict) -> None:
    update_topic(observed(rows, "admin"), golden["admin"])


def test_rows_1_and_2_pass_again_after_a_restart_on_the_same_store(rows: dict, golden: dict) -> None:
    # slow: two rounds of two rows and a restart
    rounds = observed(rows, "restart")
    for name in ("before", "after"):
        push(rounds[name]["push"], golden["push"])
        check("committed", rounds[name]["committed"], golden["committed"])
    assert rounds["stopStatus"] == 0
    committed(rounds["before"]["resumed"], {"first": golden["committed"]["first"]})
    committed(rounds["after"]["resumed"], {"second": golden["committed"]["second"]})
