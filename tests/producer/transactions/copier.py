"""A kafkette copier process for the exactly-once test: ``python -m
tests.producer.transactions.copier BOOTSTRAP TRANSACTIONAL_ID``.

Consumes ``in`` as a member of the group ``copiers`` (static membership: a restarted
copier takes its place at once), copies each poll's records to the same partition of
``out`` in one transaction with the consumed offsets, and commits; every 7th
transaction is aborted instead (and its records copied again). On any error it aborts
(or exits, to be restarted). Runs until killed.
"""

from __future__ import annotations

import sys

from kafkette import Consumer, Producer, TopicPartition
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


def main(bootstrap: str, transactional_id: str) -> None:
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
    while True:
        records = consumer.poll(200)
        if not records:
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
        except KafkaError as exc:
            print(f"{transactional_id}: {exc!r}; aborting", flush=True)
            try:
                producer.abort_transaction()
                rewind(consumer)
            except KafkaError as fatal:
                print(f"{transactional_id}: cannot recover ({fatal!r}); exiting", flush=True)
                sys.exit(3)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
