"""The ``__consumer_offsets`` record formats and the group partitioning, byte for byte."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.protocol.errors import ProtocolError
from kafkette.server.groups.consumer_protocol.records import RecordKey as ConsumerGroupRecordKey
from kafkette.server.groups.consumer_protocol.records import encode_key
from kafkette.server.groups.log_store import (
    GroupKey,
    OffsetKey,
    UnknownRecordKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)
from kafkette.server.groups.store import CommittedOffset, StoredGroup, StoredMember
from kafkette.server.internal_topic import java_string_hash, partition_for


def s16(text: str) -> bytes:
    """A non-flexible string: int16 length + UTF-8."""
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def b32(raw: bytes) -> bytes:
    return struct.pack(">i", len(raw)) + raw


# Values printed by OpenJDK 17: s.hashCode() and Utils.abs(s.hashCode()) % 50.
JAVA_HASHES = [
    ("hello", 99162322, 22),
    ("polygenelubricants", -(2**31), 0),  # Integer.MIN_VALUE: Utils.abs gives 0
    ("my-group", -1906497762, 12),  # a mask with 0x7fffffff would give 36
    ("consumer-group", -1738392088, 38),
    ("abc-group-7", -1722928642, 42),
    ("orders", -1008770331, 31),
    ("\U0001f600", 1772899, 49),  # one code point, two UTF-16 units
    ("группа-1", -1936320450, 0),
    ("", 0, 0),
]


@pytest.mark.parametrize(("group", "java_hash", "partition"), JAVA_HASHES)
def test_partition_matches_java(group: str, java_hash: int, partition: int) -> None:
    """The hash is Java's String.hashCode and the partition Utils.abs(hash) % 50, as Java
    computes them (including Integer.MIN_VALUE and characters outside the BMP)."""
    assert java_string_hash(group) == java_hash
    assert partition_for(group, 50) == partition


@settings(max_examples=200, deadline=None)
@given(st.text(), st.text())
def test_hash_of_concatenation(a: str, b: str) -> None:
    """Java's hash is a base-31 polynomial over UTF-16 units: h(a+b) = h(a)*31^|b| + h(b)."""
    units = len(b.encode("utf-16-be", "surrogatepass")) // 2
    expected = (java_string_hash(a) * pow(31, units, 2**32) + java_string_hash(b)) % 2**32
    assert java_string_hash(a + b) % 2**32 == expected
    assert -(2**31) <= java_string_hash(a + b) < 2**31
    assert 0 <= partition_for(a + b, 7) < 7


def test_offset_key_bytes() -> None:
    """OffsetCommitKey v1 after its int16 version: group, topic, partition."""
    assert encode_offset_key("g", "t", 3) == bytes.fromhex("0001 0001 67 0001 74 00000003")
    assert decode_key(encode_offset_key("grp", "topic-a", 7)) == OffsetKey("grp", "topic-a", 7)


def test_offset_key_version_0_reads_the_same() -> None:
    """Version 0 keys (Kafka before 0.10) have the same layout and are read as offsets."""
    assert decode_key(bytes.fromhex("0000 0001 67 0001 74 00000003")) == OffsetKey("g", "t", 3)


def test_group_key_bytes() -> None:
    """GroupMetadataKey v2 after its version: the group id."""
    assert encode_group_key("grp") == bytes.fromhex("0002 0003 677270")
    assert decode_key(bytes.fromhex("0002 0003 677270")) == GroupKey("grp")


def test_offset_value_v3_bytes() -> None:
    """Without an expiry Kafka writes OffsetCommitValue v3: offset, leader epoch,
    metadata, commit timestamp."""
    value = CommittedOffset(offset=5, leader_epoch=7, metadata="m", commit_timestamp_ms=10)
    raw = encode_offset_value(value)
    assert raw == (
        bytes.fromhex("0003") + struct.pack(">qi", 5, 7) + s16("m") + struct.pack(">q", 10)
    )
    assert decode_offset_value(raw) == value


def test_offset_value_v1_with_expiry_bytes() -> None:
    """With an expiry Kafka writes v1 (the only version that has it), which has no
    leader epoch: the epoch is dropped."""
    value = CommittedOffset(
        offset=2**40, leader_epoch=7, metadata="", commit_timestamp_ms=10, expire_timestamp_ms=99
    )
    raw = encode_offset_value(value)
    assert raw == bytes.fromhex("0001") + struct.pack(">q", 2**40) + s16("") + struct.pack(
        ">qq", 10, 99
    )
    assert decode_offset_value(raw) == CommittedOffset(
        offset=2**40, leader_epoch=-1, metadata="", commit_timestamp_ms=10, expire_timestamp_ms=99
    )


def test_offset_value_v0_and_v2_read() -> None:
    """Older versions are read: v0 (no expiry, no epoch) and v2 (no epoch)."""
    v0 = bytes.fromhex("0000") + struct.pack(">q", 4) + s16("x") + struct.pack(">q", 6)
    assert decode_offset_value(v0) == CommittedOffset(offset=4, metadata="x", commit_timestamp_ms=6)
    v2 = bytes.fromhex("0002") + struct.pack(">q", 4) + s16("") + struct.pack(">q", 6)
    assert decode_offset_value(v2) == CommittedOffset(offset=4, commit_timestamp_ms=6)


MEMBER = StoredMember(
    member_id="m-1",
    group_instance_id=None,
    client_id="cli",
    client_host="/127.0.0.1",
    rebalance_timeout_ms=300000,
    session_timeout_ms=45000,
    subscription=b"\x00\x01sub",
    assignment=b"asg",
)


def test_group_value_v3_bytes() -> None:
    """GroupMetadataValue v3: protocol type, generation, protocol, leader, current state
    timestamp, then each member with its group instance id (null here)."""
    group = StoredGroup(
        protocol_type="consumer",
        generation=4,
        protocol_name="range",
        leader_id="m-1",
        current_state_timestamp_ms=1234,
        members=(MEMBER,),
    )
    raw = encode_group_value(group)
    assert raw == (
        bytes.fromhex("0003")
        + s16("consumer")
        + struct.pack(">i", 4)
        + s16("range")
        + s16("m-1")
        + struct.pack(">q", 1234)
        + struct.pack(">i", 1)
        + s16("m-1")
        + bytes.fromhex("ffff")  # null group instance id
        + s16("cli")
        + s16("/127.0.0.1")
        + struct.pack(">ii", 300000, 45000)
        + b32(b"\x00\x01sub")
        + b32(b"asg")
    )
    assert decode_group_value(raw) == group


def test_empty_group_value_bytes() -> None:
    """An empty group (as Kafka writes after its members left): null protocol and leader."""
    group = StoredGroup(
        protocol_type="consumer",
        generation=5,
        protocol_name=None,
        leader_id=None,
        current_state_timestamp_ms=77,
    )
    raw = encode_group_value(group)
    assert raw == (
        bytes.fromhex("0003")
        + s16("consumer")
        + struct.pack(">i", 5)
        + bytes.fromhex("ffff ffff")
        + struct.pack(">qi", 77, 0)
    )
    assert decode_group_value(raw) == group


def test_group_value_v0_reads_session_timeout_as_rebalance_timeout() -> None:
    """v0 members have no rebalance timeout: Kafka takes the session timeout; v0/1 have
    no state timestamp (-1)."""
    raw = (
        bytes.fromhex("0000")
        + s16("consumer")
        + struct.pack(">i", 1)
        + s16("range")
        + s16("a")
        + struct.pack(">i", 1)
        + s16("a")
        + s16("c")
        + s16("h")
        + struct.pack(">i", 10000)
        + b32(b"s")
        + b32(b"x")
    )
    assert decode_group_value(raw) == StoredGroup(
        protocol_type="consumer",
        generation=1,
        protocol_name="range",
        leader_id="a",
        current_state_timestamp_ms=-1,
        members=(
            StoredMember(
                member_id="a",
                group_instance_id=None,
                client_id="c",
                client_host="h",
                rebalance_timeout_ms=10000,
                session_timeout_ms=10000,
                subscription=b"s",
                assignment=b"x",
            ),
        ),
    )


def test_group_value_v4_flexible_reads() -> None:
    """v4 (flexible: compact strings and tagged fields) is read too."""
    raw = (
        bytes.fromhex("0004")
        + b"\x09consumer"
        + struct.pack(">i", 2)
        + b"\x00"  # null protocol
        + b"\x00"  # null leader
        + struct.pack(">q", 9)
        + b"\x01"  # no members
        + b"\x00"  # no tagged fields
    )
    assert decode_group_value(raw) == StoredGroup(
        protocol_type="consumer",
        generation=2,
        protocol_name=None,
        leader_id=None,
        current_state_timestamp_ms=9,
    )


@pytest.mark.parametrize("version", [3, 4, 6])
def test_consumer_group_keys(version: int) -> None:
    """Kafka's consumer group keys of one group (ConsumerGroupMetadataKey 3,
    ConsumerGroupPartitionMetadataKey 4, ConsumerGroupTargetAssignmentMetadataKey 6)."""
    raw = struct.pack(">h", version) + s16("grp")
    assert decode_key(raw) == ConsumerGroupRecordKey(version, "grp")
    assert encode_key(ConsumerGroupRecordKey(version, "grp")) == raw


@pytest.mark.parametrize("version", [5, 7, 8])
def test_consumer_group_member_keys(version: int) -> None:
    """Kafka's consumer group keys of one member (ConsumerGroupMemberMetadataKey 5,
    ConsumerGroupTargetAssignmentMemberKey 7, ConsumerGroupCurrentMemberAssignmentKey 8)."""
    raw = struct.pack(">h", version) + s16("grp") + s16("m-1")
    assert decode_key(raw) == ConsumerGroupRecordKey(version, "grp", "m-1")
    assert encode_key(ConsumerGroupRecordKey(version, "grp", "m-1")) == raw


@pytest.mark.parametrize("version", [9, 10, 16, -1])
def test_other_key_versions_are_unknown(version: int) -> None:
    """Kafka 4's share group records (key versions 9+) are not ours to read."""
    with pytest.raises(UnknownRecordKey) as info:
        decode_key(struct.pack(">h", version) + s16("grp"))
    assert info.value.version == version


def test_malformed_key() -> None:
    """A key too short for its version is a protocol error."""
    with pytest.raises(ProtocolError):
        decode_key(b"\x00")
    with pytest.raises(ProtocolError):
        decode_key(bytes.fromhex("0001 0005 6162"))


members = st.builds(
    StoredMember,
    member_id=st.text(max_size=8),
    group_instance_id=st.none() | st.text(max_size=8),
    client_id=st.text(max_size=8),
    client_host=st.text(max_size=8),
    rebalance_timeout_ms=st.integers(-1, 2**31 - 1),
    session_timeout_ms=st.integers(0, 2**31 - 1),
    subscription=st.binary(max_size=16),
    assignment=st.binary(max_size=16),
)
groups = st.builds(
    StoredGroup,
    protocol_type=st.text(max_size=8),
    generation=st.integers(0, 2**31 - 1),
    protocol_name=st.none() | st.text(max_size=8),
    leader_id=st.none() | st.text(max_size=8),
    current_state_timestamp_ms=st.integers(-1, 2**62),
    members=st.lists(members, max_size=3).map(tuple),
)
offsets = st.builds(
    CommittedOffset,
    offset=st.integers(-1, 2**62),
    leader_epoch=st.integers(-1, 2**31 - 1),
    metadata=st.text(max_size=16),
    commit_timestamp_ms=st.integers(0, 2**62),
)


@settings(max_examples=100, deadline=None)
@given(groups)
def test_group_value_round_trip(group: StoredGroup) -> None:
    """Every group the coordinator can store reads back equal."""
    assert decode_group_value(encode_group_value(group)) == group


@settings(max_examples=100, deadline=None)
@given(offsets, st.none() | st.integers(0, 2**62))
def test_offset_value_round_trip(offset: CommittedOffset, expire: int | None) -> None:
    """Offsets read back equal; with an expiry (v1) the leader epoch reads as -1."""
    value = CommittedOffset(
        offset=offset.offset,
        leader_epoch=offset.leader_epoch,
        metadata=offset.metadata,
        commit_timestamp_ms=offset.commit_timestamp_ms,
        expire_timestamp_ms=expire,
    )
    decoded = decode_offset_value(encode_offset_value(value))
    if expire is None:
        assert decoded == value
    else:
        assert decoded == CommittedOffset(
            offset=offset.offset,
            leader_epoch=-1,
            metadata=offset.metadata,
            commit_timestamp_ms=offset.commit_timestamp_ms,
            expire_timestamp_ms=expire,
        )
