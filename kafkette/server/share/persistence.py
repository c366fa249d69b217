"""A share partition's state as ``__share_group_state`` records, and back.

Kafka's share coordinator keeps, per (group, topic id, partition), the start
offset and the written state batches, in two record types:

- ``ShareSnapshot`` (record type 0): the whole state. Written when a partition is
  initialized, and in place of an update once ``snapshot_every`` updates
  (``share.coordinator.snapshot.update.records.per.snapshot``, 500) followed the
  last snapshot; it then carries the merged state and the next snapshot epoch.
- ``ShareUpdate`` (record type 1): one write's changed batches and start offset
  (-1: unchanged), applied on top of what came before.

Replaying the records in order rebuilds the state: an update's batches replace
the earlier state of the offsets they cover, and batches below the start offset
are dropped (Kafka's ``PersisterStateBatchCombiner``). A snapshot key with no value
is a tombstone (the state deleted). The key's version field is the record type,
the value's is its own version (0), as Kafka 4 writes them.

:class:`ShareStateBook` is that bookkeeping without I/O: it turns writes into
records and replays records into states; whoever owns the topic appends and reads.
"""

from __future__ import annotations

import base64
import struct
import uuid

import attrs

from kafkette.protocol.errors import ProtocolError
from kafkette.protocol.messages.share_snapshot_key import ShareSnapshotKey
from kafkette.protocol.messages.share_snapshot_value import ShareSnapshotValue
from kafkette.protocol.messages.share_snapshot_value import StateBatch as SnapshotBatch
from kafkette.protocol.messages.share_update_key import ShareUpdateKey
from kafkette.protocol.messages.share_update_value import ShareUpdateValue
from kafkette.protocol.messages.share_update_value import StateBatch as UpdateBatch
from kafkette.server.share.state import RecordState, StateBatch, StateWrite

STATE_TOPIC = "__share_group_state"
"""The share coordinator's internal topic."""
STATE_TOPIC_PARTITIONS = 50
"""``share.coordinator.state.topic.num.partitions``'s default."""
STATE_TOPIC_CONFIGS = {
    "cleanup.policy": "delete",
    "compression.type": "producer",
    "segment.bytes": str(100 * 1024 * 1024),
    "retention.ms": "-1",
}
"""The topic's configs as Kafka creates it (KIP-932: not compacted; the
coordinator deletes the records a later snapshot made redundant)."""

SNAPSHOT = ShareSnapshotKey.RECORD_TYPE
UPDATE = ShareUpdateKey.RECORD_TYPE
_VERSION = struct.Struct(">h")
_PERSISTED = (RecordState.AVAILABLE, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


@attrs.frozen
class ShareKey:
    """Which share partition a record is about."""

    group_id: str
    topic_id: uuid.UUID
    partition: int


@attrs.frozen
class PersistedState:
    """A share partition's state as the coordinator holds it."""

    start_offset: int
    batches: tuple[StateBatch, ...] = ()
    state_epoch: int = 0
    leader_epoch: int = -1
    snapshot_epoch: int = 0
    create_timestamp: int = -1
    write_timestamp: int = -1


def coordinator_key(key: ShareKey) -> str:
    """Kafka's ``SharePartitionKey.asCoordinatorKey``: ``group:topicId:partition``
    with the topic id as Kafka prints it (URL-safe base64, no padding). Its Java
    string hash picks the ``__share_group_state`` partition, as
    ``server.internal_topic.partition_for`` computes it."""
    topic = base64.urlsafe_b64encode(key.topic_id.bytes).rstrip(b"=").decode()
    return f"{key.group_id}:{topic}:{key.partition}"


def encode_key(key: ShareKey, record_type: int) -> bytes:
    """A record key: the record type as its version, then the key's fields."""
    if record_type not in (SNAPSHOT, UPDATE):
        raise ValueError(f"unknown share state record type {record_type}")
    cls = ShareSnapshotKey if record_type == SNAPSHOT else ShareUpdateKey
    out = bytearray(_VERSION.pack(record_type))
    cls(group_id=key.group_id, topic_id=key.topic_id, partition=key.partition).encode_into(out, 0)
    return bytes(out)


def encode_snapshot(state: PersistedState) -> bytes:
    """A ShareSnapshot value (version 0)."""
    value = ShareSnapshotValue(
        snapshot_epoch=state.snapshot_epoch,
        state_epoch=state.state_epoch,
        leader_epoch=state.leader_epoch,
        start_offset=state.start_offset,
        create_timestamp=state.create_timestamp,
        write_timestamp=state.write_timestamp,
        state_batches=[
            SnapshotBatch(b.first_offset, b.last_offset, int(b.state), b.delivery_count)
            for b in state.batches
        ],
    )
    out = bytearray(_VERSION.pack(0))
    value.encode_into(out, 0)
    return bytes(out)


def encode_update(
    snapshot_epoch: int, leader_epoch: int, start_offset: int, batches: tuple[StateBatch, ...]
) -> bytes:
    """A ShareUpdate value (version 0); ``start_offset`` -1 leaves it unchanged."""
    value = ShareUpdateValue(
        snapshot_epoch=snapshot_epoch,
        leader_epoch=leader_epoch,
        start_offset=start_offset,
        state_batches=[
            UpdateBatch(b.first_offset, b.last_offset, int(b.state), b.delivery_count)
            for b in batches
        ],
    )
    out = bytearray(_VERSION.pack(0))
    value.encode_into(out, 0)
    return bytes(out)


def decode_key(data: bytes) -> tuple[ShareKey, int]:
    """The share partition and record type of a record key; ProtocolError if malformed."""
    if len(data) < 2:
        raise ProtocolError(f"share state key of {len(data)} bytes has no version")
    (record_type,) = _VERSION.unpack_from(data)
    if record_type == SNAPSHOT:
        snap, _ = ShareSnapshotKey.decode_from(data, 2, 0)
        return ShareKey(snap.group_id, snap.topic_id, snap.partition), SNAPSHOT
    if record_type == UPDATE:
        upd, _ = ShareUpdateKey.decode_from(data, 2, 0)
        return ShareKey(upd.group_id, upd.topic_id, upd.partition), UPDATE
    raise ProtocolError(f"unknown share state record type {record_type}")


def _batches(raw: list[SnapshotBatch] | list[UpdateBatch]) -> tuple[StateBatch, ...]:
    out = []
    for b in raw:
        if b.delivery_state not in _PERSISTED or b.first_offset > b.last_offset:
            raise ProtocolError(
                f"invalid state batch {b.first_offset}-{b.last_offset} state {b.delivery_state}"
            )
        out.append(
            StateBatch(
                b.first_offset, b.last_offset, RecordState(b.delivery_state), b.delivery_count
            )
        )
    return tuple(out)


def _value(data: bytes, cls: type[ShareSnapshotValue] | type[ShareUpdateValue]) -> object:
    if len(data) < 2:
        raise ProtocolError(f"share state value of {len(data)} bytes has no version")
    (version,) = _VERSION.unpack_from(data)
    if version != 0:
        raise ProtocolError(f"{cls.NAME} version {version} is not 0")
    return cls.decode_from(data, 2, 0)[0]


def decode_snapshot(data: bytes) -> PersistedState:
    """The state a ShareSnapshot value holds."""
    value = _value(data, ShareSnapshotValue)
    assert isinstance(value, ShareSnapshotValue)
    return PersistedState(
        start_offset=value.start_offset,
        batches=combine((), _batches(value.state_batches), value.start_offset),
        state_epoch=value.state_epoch,
        leader_epoch=value.leader_epoch,
        snapshot_epoch=value.snapshot_epoch,
        create_timestamp=value.create_timestamp,
        write_timestamp=value.write_timestamp,
    )


def decode_update(data: bytes) -> ShareUpdateValue:
    """A ShareUpdate value (its batches checked)."""
    value = _value(data, ShareUpdateValue)
    assert isinstance(value, ShareUpdateValue)
    _batches(value.state_batches)
    return value


def combine(
    so_far: tuple[StateBatch, ...], new: tuple[StateBatch, ...], start_offset: int
) -> tuple[StateBatch, ...]:
    """``so_far`` with ``new`` laid over it (a new batch wins on the offsets it
    covers, later ones over earlier ones), nothing below ``start_offset``, and
    neighbours with equal state and count joined."""
    pieces = list(so_far)
    for batch in new:
        kept: list[StateBatch] = []
        for old in pieces:
            if old.last_offset < batch.first_offset or old.first_offset > batch.last_offset:
                kept.append(old)
                continue
            if old.first_offset < batch.first_offset:
                kept.append(attrs.evolve(old, last_offset=batch.first_offset - 1))
            if old.last_offset > batch.last_offset:
                kept.append(attrs.evolve(old, first_offset=batch.last_offset + 1))
        kept.append(batch)
        pieces = kept
    joined: list[StateBatch] = []
    for piece in sorted(pieces, key=lambda b: b.first_offset):
        if piece.last_offset < start_offset:
            continue
        if piece.first_offset < start_offset:
            piece = attrs.evolve(piece, first_offset=start_offset)
        last = joined[-1] if joined else None
        if (
            last is not None
            and last.last_offset + 1 == piece.first_offset
            and (last.state, last.delivery_count) == (piece.state, piece.delivery_count)
        ):
            joined[-1] = attrs.evolve(last, last_offset=piece.last_offset)
        else:
            joined.append(piece)
    return tuple(joined)


class ShareStateBook:
    """The share coordinator's states by share partition, kept by its records."""

    def __init__(self, snapshot_every: int = 500) -> None:
        """``snapshot_every``: ``share.coordinator.snapshot.update.records.per.snapshot``
        (0: every write is a snapshot)."""
        if snapshot_every < 0:
            raise ValueError(f"snapshot_every {snapshot_every} is negative")
        self.snapshot_every = snapshot_every
        self._states: dict[ShareKey, PersistedState] = {}
        self._updates: dict[ShareKey, int] = {}

    def state(self, key: ShareKey) -> PersistedState | None:
        """The state of ``key``, None when it has none (never initialized, or deleted)."""
        return self._states.get(key)

    def share_keys(self) -> list[ShareKey]:
        """Every share partition with a state."""
        return list(self._states)

    def initialize(
        self, key: ShareKey, start_offset: int, state_epoch: int, now_ms: int
    ) -> tuple[bytes, bytes]:
        """Start ``key`` afresh at ``start_offset``: a snapshot record, already applied."""
        previous = self._states.get(key)
        state = PersistedState(
            start_offset=start_offset,
            state_epoch=state_epoch,
            snapshot_epoch=0 if previous is None else previous.snapshot_epoch + 1,
            create_timestamp=now_ms,
            write_timestamp=now_ms,
        )
        return self._snapshot(key, state)

    def write(
        self, key: ShareKey, write: StateWrite, now_ms: int, *, leader_epoch: int = -1
    ) -> tuple[bytes, bytes]:
        """Persist a share partition's change: the record to append, already applied."""
        current = self._states.get(key)
        if current is None:
            current = PersistedState(
                start_offset=write.start_offset, create_timestamp=now_ms, write_timestamp=now_ms
            )
            merged = attrs.evolve(current, batches=combine((), write.batches, write.start_offset))
            return self._snapshot(key, merged)
        epoch = current.leader_epoch if leader_epoch == -1 else leader_epoch
        if self._updates.get(key, 0) >= self.snapshot_every:
            merged = attrs.evolve(
                current,
                start_offset=write.start_offset,
                batches=combine(current.batches, write.batches, write.start_offset),
                leader_epoch=epoch,
                snapshot_epoch=current.snapshot_epoch + 1,
                create_timestamp=now_ms,
                write_timestamp=now_ms,
            )
            return self._snapshot(key, merged)
        value = encode_update(current.snapshot_epoch, epoch, write.start_offset, write.batches)
        # Applied as replay() would apply the record, without decoding what was just encoded.
        self._update(key, write.start_offset, leader_epoch, write.batches)
        return encode_key(key, UPDATE), value

    def delete(self, key: ShareKey) -> tuple[bytes, None]:
        """Forget ``key``: a tombstone, already applied."""
        record = (encode_key(key, SNAPSHOT), None)
        self.replay(*record)
        return record

    def replay(self, key_data: bytes, value_data: bytes | None) -> None:
        """Apply one ``__share_group_state`` record (ProtocolError if malformed;
        nothing changes then)."""
        key, record_type = decode_key(key_data)
        if value_data is None:
            self._states.pop(key, None)
            self._updates.pop(key, None)
            return
        if record_type == SNAPSHOT:
            self._states[key] = decode_snapshot(value_data)
            self._updates[key] = 0
            return
        update = decode_update(value_data)
        self._update(key, update.start_offset, update.leader_epoch, _batches(update.state_batches))

    def _update(
        self, key: ShareKey, start: int, leader_epoch: int, batches: tuple[StateBatch, ...]
    ) -> None:
        """Apply a ShareUpdate's fields (start offset -1 and leader epoch -1: unchanged)."""
        current = self._states.get(key)
        if current is None:
            current = PersistedState(start_offset=max(start, 0))
        if start == -1:
            start = current.start_offset
        self._states[key] = attrs.evolve(
            current,
            start_offset=start,
            leader_epoch=current.leader_epoch if leader_epoch == -1 else leader_epoch,
            batches=combine(current.batches, batches, start),
        )
        self._updates[key] = self._updates.get(key, 0) + 1

    def _snapshot(self, key: ShareKey, state: PersistedState) -> tuple[bytes, bytes]:
        record = (encode_key(key, SNAPSHOT), encode_snapshot(state))
        self.replay(*record)
        return record
