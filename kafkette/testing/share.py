"""A read-out of one share partition's state (KIP-932), for tests:
:meth:`MemoryCluster.share_partition_state <kafkette.testing.MemoryCluster.share_partition_state>`.

Plain values, copied out of the broker core: what a share group's partition holds
between its start offset (everything below is done) and its end offset (the next
offset never fetched), record by record, with Kafka's state names.
"""

from __future__ import annotations

import attrs

from kafkette.server.share.partition import SharePartition


@attrs.frozen
class ShareRecordState:
    """One record in flight."""

    offset: int
    state: str
    """``AVAILABLE``, ``ACQUIRED``, ``ACKNOWLEDGED`` or ``ARCHIVED`` (Kafka's names)."""
    delivery_count: int
    """How many times it was acquired (lowered when a member leaves before using it)."""
    member_id: str | None = None
    """The member holding it, while ACQUIRED."""
    lock_deadline_ms: int | None = None
    """When its acquisition lock expires (broker clock, epoch ms), while ACQUIRED."""


@attrs.frozen
class SharePartitionState:
    """A share partition of one share group."""

    start_offset: int
    """The first offset not yet acknowledged or archived."""
    end_offset: int
    """The offset after the last record ever acquired."""
    records: tuple[ShareRecordState, ...]
    """The records the partition tracks, by offset (done ones past the first
    undone one included); offsets in the window without one hold no record."""

    @property
    def acquired(self) -> dict[int, str]:
        """The offsets ACQUIRED now, with their member."""
        return {r.offset: r.member_id or "" for r in self.records if r.state == "ACQUIRED"}


def read_share_partition(partition: SharePartition) -> SharePartitionState:
    """The state of ``partition``, copied."""
    records = tuple(
        ShareRecordState(
            offset,
            record.state.name,
            record.delivery_count,
            record.member_id or None,
            record.deadline_ms if record.state.name == "ACQUIRED" else None,
        )
        for offset, record in sorted(partition.records().items())
    )
    return SharePartitionState(partition.start_offset, partition.end_offset, records)
