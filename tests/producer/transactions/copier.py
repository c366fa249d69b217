"""A kafkette copier process for the exactly-once test: ``python -m
tests.producer.transactions.copier BOOTSTRAP TRANSACTIONAL_ID [GATE]``.

Consumes ``in`` as a member of the group ``copiers`` (static membership: a restarted
copier takes its place at once), copies each poll's records to the same partition of
``out`` in one transaction with the consumed offsets, and commits; every 7th
transaction is aborted instead (and its records copied again). On any error it aborts
(or exits, to be restarted). Runs until killed.

GATE names a file holding an offset: no partition is copied past it until the file
says more, so the test can kill a copier or the broker at a point of its choosing
however fast the copy runs. Without the file the copy is not held.
"""

from __future__ import annotations

import sys
from pathlib import Path

from kafkette import Consumer, ConsumerRecord, Producer, TopicPartition
from kafkette.errors import KafkaError

GROUP = "copiers"


def rewind(consumer: Consumer) -> None:
    """Back to the group's committed offsets (the last committed transaction)."""
    assignment = consumer.assignment()
    committed = consumer.committed(assignment)
    for tp in assignment:
        offset = committed.get(tp)
        if offset is None:
            consumer.seek_to_beginning(tp)
        else:
            consumer.seek(tp, offset.offset)


def gate_offset(gate: Path | None) -> int | None:
    """The offset no partition is copied past, or None when the copy is not held."""
    try:
        return int(gate.read_text()) if gate is not None else None
    except (FileNotFoundError, ValueError):  # not written yet, or being replaced
        return None


def hold(
    records: dict[TopicPartition, list[ConsumerRecord]], limit: int | None
) -> tuple[dict[TopicPartition, list[ConsumerRecord]], set[TopicPartition]]:
    """The records below the gate, and the partitions that reached it."""
    if limit is None:
        return records, set()
    below = {tp: [r for r in batch if r.offset < limit] for tp, batch in records.items()}
    held = {tp for tp, batch in records.items() if batch and batch[-1].offset >= limit}
    return {tp: batch for tp, batch in below.items() if batch}, held


def stop_at_gate(consumer: Consumer, held: set[TopicPartition], limit: int | None) -> None:
    """Park the partitions that reached the gate until it moves."""
    if limit is None:
        return
    for tp in held:
        consumer.seek(tp, limit)
    consumer.pause(*held)


def main(bootstrap: str, transactional_id: str, gate: Path | None = None) -> None:
    consumer = Consumer(
        bootstrap_servers=bootstrap,
        group_id=GROUP,
        group_instance_id=transactional_id,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_poll_records=2_000,
        session_timeout_ms=6_000,
        heartbeat_interval_ms=500,
        fetch_max_wait_ms=100,
    )
    producer = Producer(
        bootstrap_servers=bootstrap,
        transactional_id=transactional_id,
        max_block_ms=30_000,
        linger_ms=2,
    )
    producer.init_transactions()
    consumer.subscribe(["in"])
    transactions = 0
    limit = gate_offset(gate)
    while True:
        latest = gate_offset(gate)
        if latest != limit:
            limit = latest
            consumer.resume(*consumer.paused())
        records, held = hold(consumer.poll(200), limit)
        if not records:
            stop_at_gate(consumer, held, limit)
            continue
        try:
            producer.begin_transaction()
            offsets: dict[TopicPartition, int] = {}
            for tp, batch in records.items():
                for record in batch:
                    producer.send("out", record.value, partition=tp.partition)
                offsets[tp] = batch[-1].offset + 1
            producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
            transactions += 1
            if transactions % 7 == 0:
                producer.abort_transaction()
                rewind(consumer)
            else:
                producer.commit_transaction()
                stop_at_gate(consumer, held, limit)
        except KafkaError as exc:
            print(f"{transactional_id}: {exc!r}; aborting", flush=True)
            try:
                producer.abort_transaction()
                rewind(consumer)
            except KafkaError as fatal:
                print(f"{transactional_id}: cannot recover ({fatal!r}); exiting", flush=True)
                sys.exit(3)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], Path(sys.argv[3]) if len(sys.argv) > 3 else None)
