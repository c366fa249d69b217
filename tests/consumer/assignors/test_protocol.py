"""The consumer protocol's subscription and assignment bytes."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer.metadata import (  # type: ignore[import-untyped]
    ConsumerProtocolAssignment as KpAssignment,
)
from kafka.protocol.consumer.metadata import (
    ConsumerProtocolSubscription as KpSubscription,
)
from kafka.protocol.old.consumer_protocol import (  # type: ignore[import-untyped]
    ConsumerProtocolMemberAssignment_v0,
    ConsumerProtocolMemberMetadata_v0,
)

from kafkette.consumer.assignors import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kafkette.protocol.errors import DecodeError, TruncatedError, UnsupportedVersionError
from kafkette.structs import TopicPartition

names = st.text(alphabet="abcxyz.-_", min_size=1, max_size=8)
user_data = st.none() | st.binary(max_size=20)


@st.composite
def partition_lists(draw: st.DrawFn) -> tuple[TopicPartition, ...]:
    """Partitions grouped by topic, as a decoder gives them back."""
    topics = draw(st.lists(names, unique=True, max_size=4))
    return tuple(
        TopicPartition(topic, p)
        for topic in topics
        for p in draw(st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=4))
    )


subscriptions = st.builds(
    Subscription,
    topics=st.lists(names, max_size=5).map(tuple),
    user_data=user_data,
    owned_partitions=partition_lists(),
    generation_id=st.integers(-1, 2**31 - 1),
    rack_id=st.none() | names,
)


def expected_at(sub: Subscription, version: int) -> Subscription:
    """What survives a trip at ``version``: the fields that version carries."""
    return Subscription(
        topics=sub.topics,
        user_data=sub.user_data,
        owned_partitions=sub.owned_partitions if version >= 1 else (),
        generation_id=sub.generation_id if version >= 2 else -1,
        rack_id=sub.rack_id if version >= 3 else None,
    )


def kp_subscription(sub: Subscription, version: int) -> bytes:
    """kafka-python 3's encoding of the same subscription (the oracle)."""
    grouped: dict[str, list[int]] = {}
    for tp in sub.owned_partitions:
        grouped.setdefault(tp.topic, []).append(tp.partition)
    fields: dict[str, object] = {"topics": list(sub.topics), "user_data": sub.user_data}
    if version >= 1:
        fields["owned_partitions"] = list(grouped.items())
    if version >= 2:
        fields["generation_id"] = sub.generation_id
    if version >= 3:
        fields["rack_id"] = sub.rack_id
    return bytes(KpSubscription(version=version, **fields).encode())


@pytest.mark.parametrize("version", [0, 1, 2, 3])
@settings(max_examples=60, deadline=None)
@given(sub=subscriptions)
def test_subscription_round_trip_and_oracle(version: int, sub: Subscription) -> None:
    """Every version decodes back to the fields it carries, in kafka-python's exact bytes."""
    data = encode_subscription(sub, version)
    assert data[:2] == struct.pack(">h", version)
    assert decode_subscription(data) == expected_at(sub, version)
    assert data == kp_subscription(sub, version)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
@settings(max_examples=60, deadline=None)
@given(partitions=partition_lists(), data=user_data)
def test_assignment_round_trip_and_oracle(
    version: int, partitions: tuple[TopicPartition, ...], data: bytes | None
) -> None:
    """Assignments decode back exactly, in kafka-python's exact bytes."""
    encoded = encode_assignment(Assignment(partitions=partitions, user_data=data), version)
    assert decode_assignment(encoded) == Assignment(partitions=partitions, user_data=data)
    grouped: dict[str, list[int]] = {}
    for tp in partitions:
        grouped.setdefault(tp.topic, []).append(tp.partition)
    oracle = KpAssignment(
        version=version, assigned_partitions=list(grouped.items()), user_data=data
    )
    assert encoded == bytes(oracle.encode())


def test_subscription_v0_bytes_match_legacy_kafka_python() -> None:
    """Version 0 is the old MemberMetadata layout: version, topics, user data."""
    sub = Subscription(topics=("t0", "t1"), user_data=b"\x01\x02")
    data = encode_subscription(sub, 0)
    legacy = ConsumerProtocolMemberMetadata_v0(0, ["t0", "t1"], b"\x01\x02").encode()
    assert data == legacy
    assert data == (
        b"\x00\x00"  # version
        b"\x00\x00\x00\x02\x00\x02t0\x00\x02t1"  # topics
        b"\x00\x00\x00\x02\x01\x02"  # user data
    )


def test_assignment_v0_bytes_match_legacy_kafka_python() -> None:
    """Version 0 assignment bytes are the old MemberAssignment layout, null user data as -1."""
    a = Assignment(partitions=(TopicPartition("t", 0), TopicPartition("t", 2)))
    data = encode_assignment(a, 0)
    assert data == ConsumerProtocolMemberAssignment_v0(0, [("t", [0, 2])], None).encode()
    assert data == (
        b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t"
        b"\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x02" + b"\xff\xff\xff\xff"
    )


def test_owned_partitions_are_grouped_by_topic() -> None:
    """Owned partitions of one topic go in one entry, topics in order of first appearance."""
    sub = Subscription(
        topics=("b", "a"),
        owned_partitions=(TopicPartition("b", 1), TopicPartition("a", 0), TopicPartition("b", 0)),
        generation_id=7,
    )
    decoded = decode_subscription(encode_subscription(sub, 1))
    assert decoded.owned_partitions == (
        TopicPartition("b", 1),
        TopicPartition("b", 0),
        TopicPartition("a", 0),
    )
    assert decoded.generation_id == -1  # v1 has no generation


def test_group_instance_id_comes_from_the_caller() -> None:
    """The static id is not in the bytes; the decoder takes it from JoinGroup."""
    data = encode_subscription(Subscription(topics=("t",)))
    assert decode_subscription(data, "instance-1") == Subscription(
        topics=("t",), group_instance_id="instance-1"
    )


def test_newer_version_is_read_with_ours() -> None:
    """Bytes of a future version 7 with fields appended decode with our v3 layout."""
    sub = Subscription(
        topics=("t",),
        owned_partitions=(TopicPartition("t", 1),),
        generation_id=4,
        rack_id="r1",
    )
    v3 = encode_subscription(sub, 3)
    future = struct.pack(">h", 7) + v3[2:] + b"\x00\x00\x00\x2a"  # a field we do not know
    assert decode_subscription(future) == sub
    a = Assignment(partitions=(TopicPartition("t", 3),), user_data=b"u")
    future_a = struct.pack(">h", 9) + encode_assignment(a)[2:] + b"\x01"
    assert decode_assignment(future_a) == a


def test_encoding_above_our_version_is_clamped() -> None:
    """Asking for a version we do not know writes our highest, as Java does."""
    sub = Subscription(topics=("t",), generation_id=3)
    assert encode_subscription(sub, 5) == encode_subscription(sub, 3)
    assert encode_assignment(Assignment(partitions=()), 4)[:2] == b"\x00\x03"


def test_empty_assignment_bytes_are_an_empty_assignment() -> None:
    """The broker sends empty bytes to a member the leader left out."""
    assert decode_assignment(b"") == Assignment(partitions=(), user_data=None)


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"", TruncatedError),
        (b"\x00", TruncatedError),
        (b"\xff\xff\x00\x00\x00\x00\xff\xff\xff\xff", UnsupportedVersionError),
        (b"\x00\x00\x00\x00\x00\x01\x00\x05ab", TruncatedError),
        (b"\x00\x01\x00\x00\x00\x00\xff\xff\xff\xff", TruncatedError),  # v1 without owned
    ],
)
def test_malformed_subscription_is_rejected(data: bytes, error: type[Exception]) -> None:
    """Short or negative-version bytes raise the protocol error for it."""
    with pytest.raises(error):
        decode_subscription(data)


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"\x00", TruncatedError),
        (b"\xff\xfe\x00\x00\x00\x00\xff\xff\xff\xff", UnsupportedVersionError),
        (b"\x00\x00\xff\xff\xff\xf0", DecodeError),
    ],
)
def test_malformed_assignment_is_rejected(data: bytes, error: type[Exception]) -> None:
    """Truncated, negative-version or negative-length assignments raise protocol errors."""
    with pytest.raises(error):
        decode_assignment(data)


def test_negative_version_is_refused_when_encoding() -> None:
    """A negative version is a caller bug."""
    with pytest.raises(UnsupportedVersionError):
        encode_subscription(Subscription(topics=()), -1)
