"""kafkette.producer: AsyncProducer (anyio) and Producer (sync), and their parts.

File map::

    partitioner.py   murmur2 for keys, uniform sticky (KIP-794) without
    accumulator.py   per-partition queues of open batches, buffer.memory,
                     linger, delivery timeout (thread-safe, clock passed in)
    futures.py       RecordMetadata; one BatchResult per batch, a light
                     RecordFuture per record (awaitable and Future-like)
    idempotence.py   producer id, epoch, sequence numbers, header stamping
    transactions.py  the transactional producer's state machine (sans I/O):
                     Java's states, error classification, requests it builds
    txn_runner.py    its coordinator requests, run in the sender's task group
    sender.py        the event-loop task: drain, ProduceRequests, retries,
                     leader hints (KIP-951), epoch bumps (KIP-360)
    core.py          what both producers share: serialization, routing,
                     waiting for a topic's metadata
    producer.py      AsyncProducer      sync_producer.py   Producer

Threads and locks: the accumulator has one lock, taken by ``send`` (any
thread) and by the sender (the event loop thread); batch results share one
module-level lock for their callbacks and waiters. The accumulator's lock may
be held while taking the results' lock, never the reverse; no lock is held
across an ``await`` or while a user callback runs. Everything else belongs to
the event loop thread.
"""

from kafkette.producer.futures import RecordFuture, RecordMetadata
from kafkette.producer.producer import AsyncProducer
from kafkette.producer.sync_producer import Producer
from kafkette.producer.transactions import TransactionAbortedError

__all__ = ["AsyncProducer", "Producer", "RecordFuture", "RecordMetadata", "TransactionAbortedError"]
