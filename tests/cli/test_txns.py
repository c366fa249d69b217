"""``kafkette txns list|describe`` and ``kafkette producers`` against ``kafkette serve``."""

from __future__ import annotations

import json

import pytest

from kafkette import AdminClient, Consumer, Producer, TopicPartition
from kafkette.cli import main
from tests.brokers import BrokerProcess
from tests.cli.cli import kafkette, ok
from tests.cli.records import create_topic


def test_txns_and_producers(memory_broker: BrokerProcess) -> None:
    """An open transaction on both partitions, a committed one on partition 0 and an
    idempotent producer on partition 1: listed, described and seen by the leaders."""
    bootstrap = memory_broker.bootstrap
    create_topic(bootstrap, "pay", 2)
    with Producer(bootstrap_servers=bootstrap, transactional_id="open-tx") as hanging:
        hanging.init_transactions()
        hanging.begin_transaction()
        hanging.send("pay", b"a", partition=0, timestamp=5000)
        hanging.send("pay", b"b", partition=1, timestamp=5001)
        hanging.flush()
        with Producer(bootstrap_servers=bootstrap, transactional_id="done-tx") as done:
            done.init_transactions()
            done.begin_transaction()
            done.send("pay", b"c", partition=0, timestamp=6000)
            done.commit_transaction()
        with Producer(bootstrap_servers=bootstrap) as plain:
            plain.send("pay", b"d", partition=1, timestamp=7000).result(10)
        with AdminClient(bootstrap_servers=bootstrap) as admin:
            started = {
                i: d.transaction_start_time_ms
                for i, d in admin.describe_transactions(["open-tx", "done-tx"]).all().items()
            }

        def txns(*args: str) -> str:
            return ok(kafkette("txns", *args, bootstrap=bootstrap))

        assert txns("list") == (
            "TRANSACTIONAL_ID  PRODUCER_ID  STATE           COORDINATOR\n"
            "done-tx           1            CompleteCommit  1\n"
            "open-tx           0            Ongoing         1\n"
        )
        assert json.loads(txns("list", "--state", "ongoing", "--json")) == [
            {"transactional_id": "open-tx", "producer_id": 0, "state": "Ongoing", "coordinator": 1}
        ]
        described = json.loads(txns("describe", "open-tx", "done-tx", "--json"))
        open_ms = described[0].pop("open_ms")
        assert 0 <= open_ms < 60_000
        assert described == [
            {
                "transactional_id": "open-tx",
                "coordinator": 1,
                "producer_id": 0,
                "epoch": 0,
                "state": "Ongoing",
                "timeout_ms": 60000,
                "start_time_ms": started["open-tx"],
                "partitions": ["pay-0", "pay-1"],
            },
            {
                "transactional_id": "done-tx",
                "coordinator": 1,
                "producer_id": 1,
                "epoch": 0,
                "state": "CompleteCommit",
                "timeout_ms": 60000,
                "start_time_ms": started["done-tx"],
                "open_ms": None,
                "partitions": [],
            },
        ]
        # the open transaction starts at offset 0 of both partitions; the committed
        # producer's marker gave it a coordinator epoch
        assert ok(kafkette("producers", "pay", bootstrap=bootstrap)) == (
            "TOPIC  PARTITION  PRODUCER_ID  EPOCH  LAST_SEQUENCE  LAST_TIMESTAMP  "
            "COORDINATOR_EPOCH  TXN_START_OFFSET\n"
            "pay    0          0            0      0              5000            "
            "-                  0\n"
            "pay    0          1            0      0              6000            "
            "0                  -\n"
            "pay    1          0            0      0              5001            "
            "-                  0\n"
            "pay    1          2            0      0              7000            "
            "-                  -\n"
        )
        hanging.abort_transaction()
    missing = kafkette("txns", "describe", "nope", bootstrap=bootstrap)
    assert (missing.returncode, missing.stdout) == (1, "")
    assert missing.stderr == (
        "kafkette txns describe: TRANSACTIONAL_ID_NOT_FOUND (105): The transactionalId could "
        "not be found. (describing transaction 'nope')\n"
    )


def test_txns_usage(capsys: pytest.CaptureFixture[str]) -> None:
    """A state that does not exist is a usage error, before any connection."""
    assert main(["txns", "list", "--state", "bogus", "-b", "127.0.0.1:1"]) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == (
        "",
        "kafkette txns list: error: --state bogus: expected one of Ongoing, PrepareAbort, "
        "PrepareCommit, CompleteAbort, CompleteCommit, Empty, PrepareEpochFence\n",
    )


def test_txns_abort_a_hanging_transaction(memory_broker: BrokerProcess) -> None:
    """A producer leaves a transaction open on partition 0 and stays silent: `txns abort`
    by start offset ends it (the records stay unread under read_committed, the last
    stable offset moves past the marker); the same producer given by id and epochs, and
    an offset where no transaction starts, are answered as Kafka would."""
    bootstrap = memory_broker.bootstrap
    create_topic(bootstrap, "stuck", 1)
    with Producer(bootstrap_servers=bootstrap, transactional_id="stuck-tx") as hanging:
        hanging.init_transactions()
        hanging.begin_transaction()
        hanging.send("stuck", b"a", partition=0).result(10)
        hanging.send("stuck", b"b", partition=0).result(10)
        with AdminClient(bootstrap_servers=bootstrap) as admin:
            (state,) = admin.describe_producers([TopicPartition("stuck", 0)]).all()[
                TopicPartition("stuck", 0)
            ]

        def abort(*args: str) -> str:
            return ok(
                kafkette(
                    "txns",
                    "abort",
                    "--topic",
                    "stuck",
                    "--partition",
                    "0",
                    *args,
                    bootstrap=bootstrap,
                )
            )

        nowhere = kafkette(
            "txns",
            "abort",
            "--topic",
            "stuck",
            "--partition",
            "0",
            "--start-offset",
            "1",
            bootstrap=bootstrap,
        )
        assert (nowhere.returncode, nowhere.stdout) == (1, "")
        assert nowhere.stderr == (
            "kafkette txns abort: KAFKA_ERROR: no open transaction starts at offset 1 of "
            "stuck-0 (kafkette producers stuck -p 0 lists them)\n"
        )
        assert abort("--start-offset", "0") == (
            "TOPIC  PARTITION  PRODUCER_ID  EPOCH  COORDINATOR_EPOCH\n"
            f"stuck  0          {state.producer_id:<11}  0      0\n"
        )
        with Consumer(bootstrap_servers=bootstrap, isolation_level="read_committed") as consumer:
            tp = TopicPartition("stuck", 0)
            assert consumer.end_offsets([tp]) == {tp: 3}  # two records and the marker
            consumer.assign([tp])
            consumer.seek(tp, 0)
            assert consumer.poll(timeout=0.5) == {}
        again = json.loads(
            abort(
                "--producer-id",
                str(state.producer_id),
                "--producer-epoch",
                "0",
                "--coordinator-epoch",
                "0",
                "--json",
            )
        )
        assert again == [
            {
                "topic": "stuck",
                "partition": 0,
                "producer_id": state.producer_id,
                "epoch": 0,
                "coordinator_epoch": 0,
            }
        ]


def test_txns_abort_usage(capsys: pytest.CaptureFixture[str]) -> None:
    """The producer is given by start offset or by id and both epochs: anything else is a
    usage error, before any connection."""
    base = ["txns", "abort", "--topic", "t", "--partition", "0", "-b", "127.0.0.1:1"]
    assert main([*base, "--producer-id", "3"]) == 2
    assert main([*base, "--start-offset", "0", "--producer-epoch", "1"]) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == (
        "",
        "kafkette txns abort: error: give --start-offset, or --producer-id, --producer-epoch "
        "and --coordinator-epoch\n"
        "kafkette txns abort: error: give --start-offset or the producer's id and epochs, "
        "not both\n",
    )
