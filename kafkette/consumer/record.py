"""What the consumer hands to the application: :class:`ConsumerRecord`."""

from __future__ import annotations

from typing import Any, Final, NamedTuple

from kafkette.protocol.records import Header

NO_TIMESTAMP_TYPE: Final = -1
"""A magic 0 record: it has no timestamp (Java's ``TimestampType.NO_TIMESTAMP_TYPE``)."""
CREATE_TIME: Final = 0
"""The timestamp is the producer's (``CreateTime``)."""
LOG_APPEND_TIME: Final = 1
"""The timestamp is the broker's append time (``LogAppendTime``)."""


class ConsumerRecord(NamedTuple):
    """One record read from one partition.

    A tuple subclass rather than an attrs class because ``poll`` makes one per
    record and a tuple is the cheapest object Python builds; the field order
    (``timestamp_type`` after ``headers``) lets the fetch path build it by
    concatenating the parser's record tuple with a per-batch prefix and suffix.
    ``timestamp_type`` is :data:`CREATE_TIME`, :data:`LOG_APPEND_TIME` or
    :data:`NO_TIMESTAMP_TYPE`; ``leader_epoch`` is the batch's partition
    leader epoch, None when the batch has none. ``key`` and ``value`` are
    bytes (or None), or what the deserializers made of them.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: Any
    value: Any
    headers: tuple[Header, ...]
    timestamp_type: int
    leader_epoch: int | None
