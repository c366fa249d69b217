"""Small value types shared by the producer, consumer and admin client."""

from __future__ import annotations

import attrs


@attrs.frozen(order=True)
class TopicPartition:
    """One partition of one topic."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"
