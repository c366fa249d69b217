"""One consumer-group member in a child process, for group tests across clients.

``python -m tests.group_member CLIENT BOOTSTRAP GROUP TOPIC [--assignor NAME]
[--instance-id ID] [--session-timeout-ms N] [--group-protocol consumer] [--log FILE]``
joins ``GROUP`` with one of ``confluent``, ``kafka-python``, ``aiokafka`` or ``kafkette``
(the sync Consumer), subscribed to ``TOPIC``, and loops: poll, "process" the records
(report them), commit their offsets synchronously (commit after processing). It
writes JSON lines to stdout:

- ``{"event": "assigned", "partitions": [...]}`` whenever its assignment
  changes (also to empty);
- ``{"event": "processed", "records": [[partition, offset, value], ...]}``
  as the records are processed, before their offsets are committed (a member
  killed in between has reported records that the next owner gets again:
  at least once, never lost from the report);
- ``{"event": "commit_failed", "error": "..."}`` when that commit failed (as
  it may for a member caught by a rebalance: the records go to the next owner
  again, at least once);
- ``{"event": "rebalance", "partitions": [...]}`` from the client's
  partitions-assigned callback, once per rebalance the member takes part in.

A line ``stop`` on stdin closes the consumer cleanly (LeaveGroup for a dynamic
member) and exits; SIGKILL is the hard bounce. Each member runs in its own
process, so a killed member leaves its group the way a crashed one does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import select
import sys
from collections.abc import Awaitable, Callable
from typing import Any

POLL_S = 0.1


def emit(**fields: Any) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def try_commit(commit: Callable[[], object]) -> None:
    try:
        commit()
    except Exception as exc:  # a client's commit error, whatever its class
        emit(event="commit_failed", error=repr(exc))


async def try_commit_async(commit: Callable[[], Awaitable[object]]) -> None:
    try:
        await commit()
    except Exception as exc:
        emit(event="commit_failed", error=repr(exc))


def stop_requested() -> bool:
    ready, _, _ = select.select([sys.stdin], [], [], 0)
    if not ready:
        return False
    line = sys.stdin.readline()
    return line == "" or line.strip() == "stop"


class Reporter:
    """Emits assignment changes and processed records."""

    def __init__(self) -> None:
        self.assigned: list[int] | None = None

    def assignment(self, partitions: list[int]) -> None:
        partitions = sorted(partitions)
        if partitions != self.assigned:
            self.assigned = partitions
            emit(event="assigned", partitions=partitions)

    def rebalance(self, partitions: list[int]) -> None:
        emit(event="rebalance", partitions=sorted(partitions))

    def processed(self, records: list[tuple[int, int, str]]) -> None:
        if records:
            emit(event="processed", records=records)


def run_confluent(args: argparse.Namespace, reporter: Reporter) -> None:
    from confluent_kafka import Consumer

    config: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": args.session_timeout_ms,
        "heartbeat.interval.ms": max(args.session_timeout_ms // 10, 100),
        "partition.assignment.strategy": args.assignor,
    }
    if args.group_protocol == "consumer":  # KIP-848: the broker assigns and times sessions
        for name in (
            "session.timeout.ms",
            "heartbeat.interval.ms",
            "partition.assignment.strategy",
        ):
            del config[name]
        config["group.protocol"] = "consumer"
    if args.instance_id:
        config["group.instance.id"] = args.instance_id
    consumer = Consumer(config)
    consumer.subscribe(
        [args.topic],
        on_assign=lambda _, partitions: reporter.rebalance([tp.partition for tp in partitions]),
    )
    while not stop_requested():
        messages = consumer.consume(num_messages=500, timeout=POLL_S)
        records = [
            (m.partition(), m.offset(), m.value().decode()) for m in messages if not m.error()
        ]
        reporter.processed(records)
        if records:
            try_commit(lambda: consumer.commit(asynchronous=False))
        reporter.assignment([tp.partition for tp in consumer.assignment()])
    consumer.close()


def run_kafka_python(args: argparse.Namespace, reporter: Reporter) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    assignor = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}[
        args.assignor
    ]

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            pass

        def on_partitions_assigned(self, assigned: Any) -> None:
            reporter.rebalance([tp.partition for tp in assigned])

    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=max(args.session_timeout_ms // 10, 100),
        partition_assignment_strategy=[assignor],
        **({"group_instance_id": args.instance_id} if args.instance_id else {}),
    )
    # kafka-python 3.0.12 joins before it has the topic's metadata, assigns nothing, and
    # rejoins once the metadata arrives. When that second join completes after a poll gave
    # up waiting for it, need_rejoin() is already False (the leader's assignment matches the
    # metadata), so the finished join is never applied: no assignment and no heartbeat
    # until the session expires. Metadata fetched first makes the first join the only one.
    consumer.partitions_for_topic(args.topic)
    consumer.subscribe([args.topic], listener=Listener())
    while not stop_requested():
        batches = consumer.poll(timeout_ms=int(POLL_S * 1000))
        records = [
            (m.partition, m.offset, m.value.decode()) for batch in batches.values() for m in batch
        ]
        reporter.processed(records)
        if records:
            try_commit(consumer.commit)
        reporter.assignment([tp.partition for tp in consumer.assignment()])
    consumer.close()


def run_aiokafka(args: argparse.Namespace, reporter: Reporter) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    assignor = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}[
        args.assignor
    ]

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        async def on_partitions_revoked(self, revoked: Any) -> None:
            pass

        async def on_partitions_assigned(self, assigned: Any) -> None:
            reporter.rebalance([tp.partition for tp in assigned])

    async def main() -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=args.bootstrap,
            group_id=args.group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=args.session_timeout_ms,
            heartbeat_interval_ms=max(args.session_timeout_ms // 10, 100),
            partition_assignment_strategy=(assignor,),
            **({"group_instance_id": args.instance_id} if args.instance_id else {}),
        )
        consumer.subscribe([args.topic], listener=Listener())
        await consumer.start()
        while not stop_requested():
            batches = await consumer.getmany(timeout_ms=int(POLL_S * 1000))
            records = [
                (m.partition, m.offset, m.value.decode())
                for batch in batches.values()
                for m in batch
            ]
            reporter.processed(records)
            if records:
                await try_commit_async(consumer.commit)
            reporter.assignment([tp.partition for tp in consumer.assignment()])
        await consumer.stop()

    asyncio.run(main())


def run_kafkette(args: argparse.Namespace, reporter: Reporter) -> None:
    from kafkette import Consumer
    from kafkette.consumer.group import ConsumerRebalanceListener

    class Listener(ConsumerRebalanceListener):
        def on_partitions_assigned(self, partitions: Any) -> None:
            reporter.rebalance([tp.partition for tp in partitions])

    settings: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": args.session_timeout_ms,
        "heartbeat.interval.ms": max(args.session_timeout_ms // 10, 100),
        "partition.assignment.strategy": args.assignor,
    }
    if args.group_protocol == "consumer":
        for name in (
            "session.timeout.ms",
            "heartbeat.interval.ms",
            "partition.assignment.strategy",
        ):
            del settings[name]
        settings["group.protocol"] = "consumer"
    if args.instance_id:
        settings["group.instance.id"] = args.instance_id
    with Consumer(settings) as consumer:
        consumer.subscribe([args.topic], listener=Listener())
        while not stop_requested():
            batches = consumer.poll(timeout_ms=POLL_S * 1000)
            records = [
                (r.partition, r.offset, r.value.decode())
                for batch in batches.values()
                for r in batch
            ]
            reporter.processed(records)
            if records:
                try_commit(consumer.commit)
            reporter.assignment([tp.partition for tp in consumer.assignment()])


CLIENTS: dict[str, Callable[[argparse.Namespace, Reporter], None]] = {
    "confluent": run_confluent,
    "kafka-python": run_kafka_python,
    "aiokafka": run_aiokafka,
    "kafkette": run_kafkette,
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("client", choices=sorted(CLIENTS))
    parser.add_argument("bootstrap")
    parser.add_argument("group")
    parser.add_argument("topic")
    parser.add_argument("--assignor", default="range")
    parser.add_argument("--instance-id", default=None)
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--group-protocol", choices=("classic", "consumer"), default="classic")
    parser.add_argument("--log", default=None, help="file for the client library's INFO log")
    args = parser.parse_args()
    if args.log:
        logging.basicConfig(
            filename=args.log, level=logging.INFO, format="%(asctime)s %(name)s %(message)s"
        )
    CLIENTS[args.client](args, Reporter())


if __name__ == "__main__":
    main()
