"""Small value types shared by the producer, consumer and admin client: a partition, an
offset to commit, and a consumer's place in its group (which transactions carry)."""

from __future__ import annotations

import attrs


@attrs.frozen(order=True)
class TopicPartition:
    """One partition of one topic."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@attrs.frozen(slots=True)
class OffsetAndMetadata:
    """An offset to commit (the next record to read) with optional metadata text."""

    offset: int
    metadata: str = ""
    leader_epoch: int | None = None


@attrs.frozen(slots=True)
class ConsumerGroupMetadata:
    """Who the consumer is in its group; transactions send it with their offsets."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
