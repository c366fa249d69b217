"""``kafkette consume --share-group``: a share group member printing and accepting records."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from kafkette import AdminClient, NewTopic, Producer
from kafkette.cli import main
from tests.brokers import BrokerProcess, kafkette_broker
from tests.cli.cli import kafkette, ok


@pytest.fixture
def share_broker() -> Iterator[BrokerProcess]:
    """``kafkette serve --memory`` with a short share heartbeat interval, topic "jobs"."""
    for broker in kafkette_broker(None, "--set", "group.share.heartbeat.interval.ms=200"):
        with AdminClient(bootstrap_servers=broker.bootstrap) as admin:
            admin.create_topics([NewTopic("jobs", 1)], timeout=30).all()
        yield broker


def test_share_group_members_print_each_record_once(share_broker: BrokerProcess) -> None:
    """A first member prints 3 records and exits (-c 3); a second one of the same group
    prints exactly the records after them, none again: printed ones were accepted, any
    acquired beyond -c released."""
    bootstrap = share_broker.bootstrap
    command = ["consume", "jobs", "--share-group", "g", "-c", "3", "-f", "%o:%s\\n"]
    first = subprocess.Popen(
        [sys.executable, "-m", "kafkette", *command, "-b", bootstrap],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    produced = 0
    with Producer(bootstrap_servers=bootstrap, linger_ms=0) as producer:
        try:
            deadline = time.monotonic() + 60
            while first.poll() is None:
                assert time.monotonic() < deadline, "the first member printed too little"
                producer.send_and_wait("jobs", b"r%d" % produced, timeout=10)
                produced += 1
                with contextlib.suppress(subprocess.TimeoutExpired):
                    first.wait(0.3)
            out, err = first.communicate()
        finally:
            if first.poll() is None:
                first.kill()
                first.communicate()
        assert (first.returncode, err) == (0, "")
        lines = out.splitlines()
        start = int(lines[0].split(":")[0])  # records before the share partition began: never
        assert lines == [f"{start + i}:r{start + i}" for i in range(3)]
        producer.send_and_wait("jobs", b"last", timeout=10)
    rest = list(range(start + 3, produced))
    out = ok(
        kafkette(
            "consume",
            "jobs",
            "--share-group",
            "g",
            "-c",
            str(len(rest) + 1),
            "--json",
            bootstrap=bootstrap,
        )
    )
    printed = [json.loads(line) for line in out.splitlines()]
    assert [(r["offset"], r["value"]) for r in printed] == [
        *((offset, f"r{offset}") for offset in rest),
        (produced, "last"),
    ]
    assert all(r["delivery_count"] >= 1 for r in printed)


def test_share_group_refuses_options_that_choose_positions(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Options choosing partitions or positions are usage errors (exit 2) before any
    connection (in-process, no broker)."""
    for options, message in (
        (["-o", "beginning"], "-o cannot be used with --share-group"),
        (["-G", "x"], "-G cannot be used with --share-group"),
        (["-e"], "-e cannot be used with --share-group"),
        (["-p", "0"], "-p cannot be used with --share-group"),
        (["-c", "0"], "-c must be at least 1"),
    ):
        argv = ["consume", "jobs", "--share-group", "g", *options, "-b", "memory://none"]
        assert main(argv) == 2, options
        assert message in capsys.readouterr().err
