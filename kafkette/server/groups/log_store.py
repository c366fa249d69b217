"""The broker's :class:`~kafkette.server.groups.store.GroupStore`: Kafka's
``__consumer_offsets`` records in the compacted internal topic.

Each change the coordinator makes is one record batch appended to the
partition of its group, ``Utils.abs(groupId.hashCode()) % partitions`` as
Kafka computes it (:mod:`~kafkette.server.internal_topic`). Keys and values
are Kafka's own, each prefixed by its int16 version as Kafka's record serde
writes them, so that Kafka's tools (``kafka-console-consumer --formatter
...OffsetsMessageFormatter``, ``kafka-dump-log --offsets-decoder``) read them:

=====================  ===========  ==========================================
record                 key version  value version
=====================  ===========  ==========================================
committed offset       1            3; 1 when the commit has an expiry
                                    (the only version holding one)
group membership       2            3 (GroupMetadataValue)
consumer group         3-8          0 (the six ConsumerGroup* records of
(KIP-848)                           :mod:`...consumer_protocol.records`)
=====================  ===========  ==========================================

A removed offset or group is a tombstone (a null value). The topic is
created on the first write with ``offsets.topic.num.partitions`` partitions,
``cleanup.policy=compact`` and ``segment.bytes=offsets.topic.segment.bytes``,
as Kafka creates it; compaction keeps the last record of each key, which is
all :meth:`LogGroupStore.load` needs.

Loading reads every partition from its start: the latest value of a key
wins and a tombstone removes it. Keys of other versions (Kafka's share
group records, versions 9 and up) are skipped with a log line, as are values
this broker cannot decode. Transactional offset
commits count once their transaction's COMMIT marker is read; aborted ones
are dropped.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

import attrs

from kafkette.backends import Log
from kafkette.errors import (
    ApiError,
    InvalidCommitOffsetSizeError,
    MessageTooLargeError,
    RecordListTooLargeError,
    UnknownServerError,
)
from kafkette.protocol.codec import decode_message, encode_message
from kafkette.protocol.errors import ProtocolError
from kafkette.protocol.messages import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
)
from kafkette.protocol.messages.group_metadata_value import MemberMetadata
from kafkette.protocol.records import (
    ControlRecordType,
    RecordBatch,
    RecordBatchBuilder,
    iter_batches,
    parse_control_record,
)
from kafkette.server.groups.consumer_protocol import records as consumer_records
from kafkette.server.groups.consumer_protocol.records import Change
from kafkette.server.groups.consumer_protocol.records import RecordKey as ConsumerGroupKey
from kafkette.server.groups.store import (
    CommittedOffset,
    LoadedGroups,
    PartitionKey,
    StoredGroup,
    StoredMember,
)
from kafkette.server.internal_topic import InternalTopic, partition_for

if TYPE_CHECKING:
    from kafkette.server.cluster import Cluster, Topic

logger = logging.getLogger("kafkette.server.groups")

OFFSETS_TOPIC = "__consumer_offsets"
OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3
READ_CHUNK_BYTES = 1 << 20
_VERSION = struct.Struct(">h")


# ---- record keys and values


@attrs.frozen
class OffsetKey:
    """The key of a committed offset record."""

    group_id: str
    topic: str
    partition: int


@attrs.frozen
class GroupKey:
    """The key of a group metadata record."""

    group_id: str


RecordKey = OffsetKey | GroupKey | ConsumerGroupKey


_Coordinator = GroupMetadataKey | GroupMetadataValue | OffsetCommitKey | OffsetCommitValue


def _versioned(version: int, message: _Coordinator) -> bytes:
    out = bytearray(_VERSION.pack(version))
    encode_message(message, version, out)
    return bytes(out)


def encode_offset_key(group_id: str, topic: str, partition: int) -> bytes:
    """An OffsetCommitKey record key (version 1)."""
    return _versioned(
        OFFSET_COMMIT_KEY_VERSION, OffsetCommitKey(group=group_id, topic=topic, partition=partition)
    )


def encode_group_key(group_id: str) -> bytes:
    """A GroupMetadataKey record key (version 2)."""
    return _versioned(GROUP_METADATA_KEY_VERSION, GroupMetadataKey(group=group_id))


def encode_offset_value(offset: CommittedOffset) -> bytes:
    """An OffsetCommitValue: version 1 when it has an expiry (which drops the
    leader epoch, as in Kafka), else version 3."""
    expire = offset.expire_timestamp_ms
    value = OffsetCommitValue(
        offset=offset.offset,
        leader_epoch=offset.leader_epoch,
        metadata=offset.metadata,
        commit_timestamp=offset.commit_timestamp_ms,
        expire_timestamp=-1 if expire is None else expire,
    )
    version = (
        OFFSET_COMMIT_VALUE_VERSION if expire is None else OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
    )
    return _versioned(version, value)


def encode_group_value(group: StoredGroup) -> bytes:
    """A GroupMetadataValue (version 3)."""
    value = GroupMetadataValue(
        protocol_type=group.protocol_type,
        generation=group.generation,
        protocol=group.protocol_name,
        leader=group.leader_id,
        current_state_timestamp=group.current_state_timestamp_ms,
        members=[
            MemberMetadata(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms,
                session_timeout=m.session_timeout_ms,
                subscription=m.subscription,
                assignment=m.assignment,
            )
            for m in group.members
        ],
    )
    return _versioned(GROUP_METADATA_VALUE_VERSION, value)


class UnknownRecordKey(Exception):
    """A key of a version this broker does not read (e.g. a Kafka 4 consumer group record)."""

    def __init__(self, version: int) -> None:
        super().__init__(f"unknown __consumer_offsets key version {version}")
        self.version = version


def _split_version(data: bytes) -> tuple[int, int]:
    if len(data) < 2:
        raise ProtocolError(f"record of {len(data)} bytes has no version")
    return _VERSION.unpack_from(data)[0], 2


def decode_key(data: bytes) -> RecordKey:
    """The key of a ``__consumer_offsets`` record.

    Raises :class:`UnknownRecordKey` for versions other than 0-1 (offsets),
    2 (groups) and 3-8 (consumer groups), and a :class:`ProtocolError` for
    malformed bytes.
    """
    version, pos = _split_version(data)
    if version in (0, 1):
        key, _ = decode_message(OffsetCommitKey, data, pos, version)
        return OffsetKey(key.group, key.topic, key.partition)
    if version == GROUP_METADATA_KEY_VERSION:
        group_key, _ = decode_message(GroupMetadataKey, data, pos, version)
        return GroupKey(group_key.group)
    if version in consumer_records.KEY_VERSIONS:
        return consumer_records.decode_key(version, data, pos)
    raise UnknownRecordKey(version)


def decode_offset_value(data: bytes) -> CommittedOffset:
    """An OffsetCommitValue of any version (0-4)."""
    version, pos = _split_version(data)
    value, _ = decode_message(OffsetCommitValue, data, pos, version)
    return CommittedOffset(
        offset=value.offset,
        leader_epoch=value.leader_epoch,
        metadata=value.metadata,
        commit_timestamp_ms=value.commit_timestamp,
        expire_timestamp_ms=None if value.expire_timestamp == -1 else value.expire_timestamp,
    )


def decode_group_value(data: bytes) -> StoredGroup:
    """A GroupMetadataValue of any version (0-4)."""
    version, pos = _split_version(data)
    value, _ = decode_message(GroupMetadataValue, data, pos, version)
    return StoredGroup(
        protocol_type=value.protocol_type,
        generation=value.generation,
        protocol_name=value.protocol,
        leader_id=value.leader,
        current_state_timestamp_ms=value.current_state_timestamp,
        members=tuple(
            StoredMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                # Version 0 had no rebalance timeout: Kafka reads the session timeout.
                rebalance_timeout_ms=m.session_timeout if version == 0 else m.rebalance_timeout,
                session_timeout_ms=m.session_timeout,
                subscription=m.subscription,
                assignment=m.assignment,
            )
            for m in value.members
        ),
    )


# ---- the store


def offsets_topic(
    cluster: Cluster,
    *,
    partitions: int,
    segment_bytes: int,
    clock: Callable[[], int],
    appended: Callable[[Log], None],
) -> InternalTopic:
    """``__consumer_offsets`` as Kafka creates it: ``partitions``
    (``offsets.topic.num.partitions``), compacted, ``segment_bytes``
    (``offsets.topic.segment.bytes``), the producer's compression."""
    return InternalTopic(
        cluster,
        OFFSETS_TOPIC,
        partitions=partitions,
        configs={
            "cleanup.policy": "compact",
            "segment.bytes": str(segment_bytes),
            "compression.type": "producer",
        },
        clock=clock,
        appended=appended,
        logger=logger,
    )


class LogGroupStore:
    """A :class:`~kafkette.server.groups.store.GroupStore` over ``__consumer_offsets``
    (``topic``, made by :func:`offsets_topic`)."""

    def __init__(self, topic: InternalTopic) -> None:
        self.topic = topic

    @property
    def partition_count(self) -> int:
        """Partitions of the offsets topic: those it has, else ``offsets.topic.num.partitions``."""
        return self.topic.partition_count

    def partition_for(self, group_id: str) -> int:
        """The partition holding ``group_id``'s records."""
        return partition_for(group_id, self.partition_count)

    def ensure_topic(self) -> Topic:
        """The offsets topic, created now if it does not exist yet.

        Kafka creates it when a FindCoordinator first needs it, so that no
        group request waits for it: on disk, making 50 partition logs takes a
        few hundred milliseconds (fsyncs), which a SyncGroup or commit should
        not pay.
        """
        return self.topic.ensure()

    def _append(
        self,
        group_id: str,
        builder: RecordBatchBuilder,
        records: Iterable[tuple[bytes, bytes | None]],
        too_large: type[ApiError],
    ) -> None:
        partition = self.topic.partition(group_id)
        now = self.topic.now_ms()
        for key, value in records:
            builder.append(now, key, value)
        try:
            self.topic.append(partition, builder.build())
        except (RecordListTooLargeError, MessageTooLargeError) as exc:
            raise too_large(f"group {group_id!r}: {exc}") from exc

    def write_group(self, group_id: str, group: StoredGroup | None) -> None:
        """Append the group's GroupMetadata record (a tombstone for ``None``).

        A record over the topic's ``max.message.bytes`` raises
        :class:`~kafkette.errors.UnknownServerError`, the code Kafka answers then.
        """
        value = None if group is None else encode_group_value(group)
        self._append(
            group_id,
            RecordBatchBuilder(),
            [(encode_group_key(group_id), value)],
            UnknownServerError,
        )

    def write_consumer_group(self, group_id: str, records: Iterable[Change]) -> None:
        """Append a consumer group's changed records (None values: tombstones) as one batch.

        A batch over the topic's ``max.message.bytes`` raises
        :class:`~kafkette.errors.UnknownServerError`.
        """
        encoded = [
            (
                consumer_records.encode_key(key),
                None if value is None else consumer_records.encode_value(value),
            )
            for key, value in records
        ]
        if encoded:
            self._append(group_id, RecordBatchBuilder(), encoded, UnknownServerError)

    def write_offsets(
        self, group_id: str, offsets: Mapping[PartitionKey, CommittedOffset | None]
    ) -> None:
        """Append one batch of OffsetCommit records (tombstones for ``None``).

        A batch over the topic's ``max.message.bytes`` raises
        :class:`~kafkette.errors.InvalidCommitOffsetSizeError`, as Kafka answers.
        """
        if not offsets:
            return
        self._append(
            group_id,
            RecordBatchBuilder(),
            [
                (
                    encode_offset_key(group_id, topic, partition),
                    None if offset is None else encode_offset_value(offset),
                )
                for (topic, partition), offset in offsets.items()
            ],
            InvalidCommitOffsetSizeError,
        )

    # -- transactional offset commits (TxnOffsetCommit) ---------------------------------

    def write_transactional_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        offsets: Mapping[PartitionKey, CommittedOffset],
    ) -> None:
        """Append a TxnOffsetCommit's offsets as one transactional batch of the producer.

        They count once the transaction coordinator appends the COMMIT marker
        (:meth:`transactional_offsets` reads them back then); an ABORT drops them.
        """
        if not offsets:
            return
        self._append(
            group_id,
            RecordBatchBuilder(
                producer_id=producer_id, producer_epoch=producer_epoch, is_transactional=True
            ),
            [
                (encode_offset_key(group_id, topic, index), encode_offset_value(offset))
                for (topic, index), offset in offsets.items()
            ],
            InvalidCommitOffsetSizeError,
        )

    def transactional_offsets(
        self, partition: int, producer_id: int
    ) -> dict[str, dict[PartitionKey, CommittedOffset]]:
        """The offsets of ``producer_id``'s open transaction in one offsets partition, by group.

        Read from the log, from the transaction's first offset: call it just
        before the COMMIT marker is appended. An offset also committed by a
        plain commit appended later is left out: that commit stays (Kafka's rule).
        """
        topic = self.topic.existing()
        if topic is None or not 0 <= partition < len(topic.partitions):
            return {}
        log = topic.partitions[partition].log
        entry = log.producer_state().producers.get(producer_id)
        if entry is None or entry.txn_first_offset < 0:
            return {}
        pending: dict[OffsetKey, CommittedOffset] = {}
        for batch in _batches(log, entry.txn_first_offset):
            ours = batch.producer_id == producer_id and batch.is_transactional
            if batch.is_control or (batch.is_transactional and not ours):
                continue
            for record in batch:
                if record.key is None:
                    continue
                try:
                    key = decode_key(record.key)
                except (UnknownRecordKey, ProtocolError):
                    continue
                if not isinstance(key, OffsetKey):
                    continue
                if not ours:
                    pending.pop(key, None)  # a later plain commit wins
                elif record.value is not None:
                    try:
                        pending[key] = decode_offset_value(record.value)
                    except ProtocolError as exc:
                        logger.warning("transactional offset of %s skipped: %s", key, exc)
        by_group: dict[str, dict[PartitionKey, CommittedOffset]] = {}
        for key, offset in pending.items():
            by_group.setdefault(key.group_id, {})[(key.topic, key.partition)] = offset
        return by_group

    def load(self) -> LoadedGroups:
        """Read every partition of the offsets topic from its start (empty when absent)."""
        loader = _Loader()
        topic = self.topic.existing()
        if topic is not None:
            for partition in topic.partitions:
                loader.load_log(partition.log)
        return loader.result()


# ---- loading


@attrs.define
class _Loader:
    """Replays records in log order: the latest value of each key wins."""

    values: dict[RecordKey, tuple[int, bytes]] = attrs.Factory(dict)
    """Key -> (offset of its latest record, value); tombstones remove the key."""
    pending: dict[int, dict[RecordKey, tuple[int, bytes | None]]] = attrs.Factory(dict)
    """Producer id -> records of its open transaction."""

    def load_log(self, log: Log) -> None:
        for batch in _batches(log):
            if batch.is_control:
                self._end_transaction(batch)
                continue
            target: dict[RecordKey, tuple[int, bytes | None]] | None = None
            if batch.is_transactional:
                target = self.pending.setdefault(batch.producer_id, {})
            for record in batch:
                if record.key is None:
                    logger.warning(
                        "%s-%d offset %d: record without a key, skipped",
                        log.topic,
                        log.partition,
                        record.offset,
                    )
                    continue
                try:
                    key = decode_key(record.key)
                except UnknownRecordKey as exc:
                    logger.info(
                        "%s-%d offset %d: skipped a record with key version %d "
                        "(not a group or offset record)",
                        log.topic,
                        log.partition,
                        record.offset,
                        exc.version,
                    )
                    continue
                except ProtocolError as exc:
                    logger.warning(
                        "%s-%d offset %d: undecodable key skipped: %s",
                        log.topic,
                        log.partition,
                        record.offset,
                        exc,
                    )
                    continue
                if target is not None:
                    target[key] = (record.offset, record.value)
                else:
                    self._apply(key, record.offset, record.value)
        self.pending.clear()  # a transaction left open in one partition ends with it

    def _end_transaction(self, batch: RecordBatch) -> None:
        records = batch.records()
        pending = self.pending.pop(batch.producer_id, {})
        try:
            marker = parse_control_record(records[0].key, records[0].value) if records else None
        except ProtocolError as exc:
            logger.warning(
                "%s: unreadable transaction marker, taken as an abort: %s", OFFSETS_TOPIC, exc
            )
            return
        if marker is None or marker.type != ControlRecordType.COMMIT:
            return
        for key, (offset, value) in pending.items():
            latest = self.values.get(key)
            # A commit marker makes the transaction's offsets count, unless a later
            # plain commit of the same key was read meanwhile (Kafka's rule).
            if latest is None or latest[0] < offset:
                self._apply(key, offset, value)

    def _apply(self, key: RecordKey, offset: int, value: bytes | None) -> None:
        if value is None:
            self.values.pop(key, None)
        else:
            self.values[key] = (offset, value)

    def result(self) -> LoadedGroups:
        groups: dict[str, StoredGroup] = {}
        offsets: dict[str, dict[PartitionKey, CommittedOffset]] = {}
        consumer: dict[ConsumerGroupKey, consumer_records.RecordValue] = {}
        for key, (offset, value) in self.values.items():
            try:
                if isinstance(key, ConsumerGroupKey):
                    consumer[key] = consumer_records.decode_value(key, value)
                elif isinstance(key, GroupKey):
                    groups[key.group_id] = decode_group_value(value)
                else:
                    offsets.setdefault(key.group_id, {})[(key.topic, key.partition)] = (
                        decode_offset_value(value)
                    )
            except ProtocolError as exc:
                logger.warning(
                    "%s offset %d: undecodable value of %s skipped: %s",
                    OFFSETS_TOPIC,
                    offset,
                    key,
                    exc,
                )
        return LoadedGroups(groups, offsets, consumer)


def _batches(log: Log, start: int | None = None) -> Iterator[RecordBatch]:
    offset = log.log_start_offset if start is None else max(start, log.log_start_offset)
    end = log.log_end_offset
    while offset < end:
        data = log.read(offset, READ_CHUNK_BYTES, end).to_bytes()
        if not data:
            break
        for batch in iter_batches(data, allow_partial=False):
            assert isinstance(batch, RecordBatch)  # the log holds magic 2 batches only
            offset = batch.next_offset
            yield batch
