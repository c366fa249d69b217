"""What the share consumer hands out and takes back: :class:`ShareConsumerRecord`,
:class:`AcknowledgeType` and the acknowledgement-commit callback's type."""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any, NamedTuple

from kafkette.protocol.records import Header
from kafkette.structs import TopicPartition


class AcknowledgeType(enum.IntEnum):
    """How a share consumer settles a record it was given (Kafka's ``AcknowledgeType``).

    ACCEPT: processed, never delivered again; RELEASE: give it back for another
    delivery (its delivery count grows); REJECT: unprocessable, never delivered
    again; RENEW: keep it, its acquisition lock starts again (KIP-1222, brokers
    serving ShareFetch/ShareAcknowledge v2), to be acknowledged later.
    """

    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


class ShareConsumerRecord(NamedTuple):
    """One record a share consumer acquired: the fields of
    :class:`~kafkette.consumer.ConsumerRecord` and ``delivery_count``, how many times
    the share group has delivered it (1 the first time)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: Any
    value: Any
    headers: tuple[Header, ...]
    timestamp_type: int
    leader_epoch: int | None
    delivery_count: int


AcknowledgementCommitCallback = Callable[[dict[TopicPartition, set[int]], Exception | None], Any]
"""Called with the offsets whose acknowledgements a broker answered, per partition, and
None or the error it answered (Java's ``AcknowledgementCommitCallback.onComplete``). It
runs in the thread (or task) calling ``poll``, a commit or ``close``."""
