"""examples/testing runs as a user runs it: the whole suite on memory://, and its
portable file unchanged against `kafkette serve` (here with a data directory, so the
disk backend answers it), each in a child pytest as the example's README says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.brokers import BrokerProcess

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "testing"


def run_example(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA", *args],
        cwd=EXAMPLE.parents[1],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )


def passed(output: str) -> list[str]:
    return sorted(re.findall(r"^PASSED (\S+)", output, re.MULTILINE))


PORTABLE = [
    "examples/testing/test_invoices.py::" + name
    for name in (
        "test_a_restarted_service_resumes_after_its_last_commit",
        "test_aborted_invoices_are_never_read",
        "test_each_order_is_invoiced_once",
        "test_orders_are_found_by_time",
        "test_orders_of_one_customer_share_a_partition_in_order",
        "test_topics_are_made_as_asked",
    )
]
IN_MEMORY = [
    "examples/testing/test_invoices_in_memory.py::" + name
    for name in (
        "test_a_hung_transaction_is_aborted_when_its_timeout_passes",
        "test_an_unavailable_coordinator_is_retried",
        "test_lost_produce_answers_do_not_duplicate_invoices",
        "test_not_enough_replicas_is_retried",
    )
]


# The plugins kafkette's own suite uses (pytest's names): a user of the example has none.
WITHOUT_OUR_PLUGINS = [
    f"-pno:{name}" for name in ("asyncio", "timeout", "xdist", "hypothesispytest", "anyio")
]


def test_the_example_suite_passes_in_memory() -> None:
    """With kafkette and pytest alone: the example's pytest.ini keeps pytest from reading
    the repository's settings, which name other plugins."""
    result = run_example("examples/testing", *WITHOUT_OUR_PLUGINS)
    assert result.returncode == 0, result.stdout + result.stderr
    assert passed(result.stdout) == sorted(PORTABLE + IN_MEMORY)


def test_the_portable_examples_pass_unchanged_against_kafkette_serve(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data") as broker:
        result = run_example(
            "examples/testing/test_invoices.py", "--kafka-bootstrap", broker.bootstrap
        )
    assert result.returncode == 0, result.stdout + result.stderr
    assert passed(result.stdout) == PORTABLE
