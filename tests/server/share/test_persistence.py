"""``__share_group_state`` records: Kafka's bytes, and the state they rebuild."""

from __future__ import annotations

import contextlib
import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.protocol.errors import ProtocolError
from kafkette.server.share.partition import SharePartition
from kafkette.server.share.persistence import (
    SNAPSHOT,
    UPDATE,
    PersistedState,
    ShareKey,
    ShareStateBook,
    combine,
    decode_key,
    encode_key,
    encode_snapshot,
    encode_update,
)
from kafkette.server.share.state import RecordState, StateBatch, StateWrite

TOPIC = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
KEY = ShareKey("g1", TOPIC, 3)
AVAILABLE, ACKED, ARCHIVED = RecordState.AVAILABLE, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED


def test_keys_carry_the_record_type_as_their_version() -> None:
    """ShareSnapshotKey is type 0, ShareUpdateKey type 1: int16, then GroupId
    (int16-length string), TopicId (16 bytes), Partition (int32)."""
    body = b"\x00\x02g1" + TOPIC.bytes + b"\x00\x00\x00\x03"
    assert encode_key(KEY, SNAPSHOT) == b"\x00\x00" + body
    assert encode_key(KEY, UPDATE) == b"\x00\x01" + body
    assert decode_key(b"\x00\x01" + body) == (KEY, UPDATE)


def test_a_snapshot_value_is_kafkas_flexible_version_0() -> None:
    state = PersistedState(
        start_offset=7,
        batches=(StateBatch(7, 9, ACKED, 1), StateBatch(10, 10, AVAILABLE, 2)),
        state_epoch=1,
        leader_epoch=4,
        snapshot_epoch=2,
        create_timestamp=1000,
        write_timestamp=2000,
    )
    batch = struct.Struct(">qqbhB")  # first, last, state, count, no tagged fields
    expected = (
        struct.pack(">hiiiqqq", 0, 2, 1, 4, 7, 1000, 2000)
        + b"\x03"  # compact array of two
        + batch.pack(7, 9, 2, 1, 0)
        + batch.pack(10, 10, 0, 2, 0)
        + b"\x00"  # DeliveryCompleteCount is -1, its default: no tagged field
    )
    assert encode_snapshot(state) == expected


def test_an_update_value_with_an_unchanged_start_offset() -> None:
    value = encode_update(2, -1, -1, (StateBatch(5, 5, ARCHIVED, 3),))
    assert (
        value
        == struct.pack(">hiiq", 0, 2, -1, -1)
        + b"\x02"
        + struct.pack(">qqbhB", 5, 5, 4, 3, 0)
        + b"\x00"
    )


def test_combine_lays_new_batches_over_old_drops_below_start_and_joins() -> None:
    old = (StateBatch(0, 9, AVAILABLE, 1), StateBatch(10, 12, ACKED, 1))
    new = (StateBatch(3, 4, ACKED, 1), StateBatch(9, 9, ACKED, 1), StateBatch(4, 5, ARCHIVED, 2))
    assert combine(old, new, 2) == (
        StateBatch(2, 2, AVAILABLE, 1),
        StateBatch(3, 3, ACKED, 1),
        StateBatch(4, 5, ARCHIVED, 2),
        StateBatch(6, 8, AVAILABLE, 1),
        StateBatch(9, 12, ACKED, 1),
    )


def test_updates_then_a_snapshot_every_n_and_replay_rebuilds_the_same_state() -> None:
    book = ShareStateBook(snapshot_every=2)
    records = [book.initialize(KEY, 0, 1, now_ms=5)]
    writes = [
        StateWrite(0, (StateBatch(0, 1, AVAILABLE, 1),)),
        StateWrite(3, (StateBatch(3, 4, AVAILABLE, 2),)),
        StateWrite(5, ()),
        StateWrite(5, (StateBatch(6, 6, ACKED, 1),)),
    ]
    for at, write in enumerate(writes):
        records.append(book.write(KEY, write, now_ms=10 + at))
    assert [decode_key(k)[1] for k, _ in records] == [SNAPSHOT, UPDATE, UPDATE, SNAPSHOT, UPDATE]
    expected = PersistedState(
        start_offset=5,
        batches=(StateBatch(6, 6, ACKED, 1),),
        state_epoch=1,
        snapshot_epoch=1,
        create_timestamp=12,
        write_timestamp=12,
    )
    assert book.state(KEY) == expected
    again = ShareStateBook(snapshot_every=2)
    for key, value in records:
        again.replay(key, value)
    assert again.state(KEY) == expected


def test_a_tombstone_deletes_the_state() -> None:
    book = ShareStateBook()
    book.initialize(KEY, 0, 0, now_ms=0)
    key, value = book.delete(KEY)
    assert key == encode_key(KEY, SNAPSHOT)
    assert value is None and book.state(KEY) is None and book.share_keys() == []


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (b"\x00", b""),
        (b"\x00\x07" + encode_key(KEY, SNAPSHOT)[2:], b"\x00\x00"),
        (encode_key(KEY, SNAPSHOT), b"\x00\x05" + encode_snapshot(PersistedState(0))[2:]),
        (encode_key(KEY, SNAPSHOT), encode_snapshot(PersistedState(0))[:-3]),
    ],
)
def test_malformed_records_are_protocol_errors_and_change_nothing(key: bytes, value: bytes) -> None:
    book = ShareStateBook()
    book.initialize(KEY, 4, 0, now_ms=0)
    before = book.state(KEY)
    with pytest.raises(ProtocolError):
        book.replay(key, value)
    assert book.state(KEY) == before


def test_an_acquired_state_is_never_read_from_a_record() -> None:
    value = bytearray(encode_update(0, 0, 0, (StateBatch(0, 0, AVAILABLE, 1),)))
    state_at = len(value) - 5  # state int8, count int16, tagged fields of the batch and the value
    assert value[state_at] == 0
    value[state_at] = 1
    with pytest.raises(ProtocolError, match="state 1"):
        ShareStateBook().replay(encode_key(KEY, UPDATE), bytes(value))


@settings(max_examples=300, deadline=None)
@given(
    key=st.one_of(
        st.binary(max_size=40),
        st.sampled_from([encode_key(KEY, SNAPSHOT), encode_key(KEY, UPDATE)]),
    ),
    value=st.one_of(
        st.none(),
        st.binary(max_size=80),
        st.builds(lambda tail: b"\x00\x00" + tail, st.binary(max_size=80)),
    ),
)
def test_any_bytes_are_read_or_refused_with_a_protocol_error(
    key: bytes, value: bytes | None
) -> None:
    """Whatever a __share_group_state record holds, replay reads it or raises
    ProtocolError and keeps the state as it was; a state it reads restores."""
    book = ShareStateBook()
    book.initialize(KEY, 4, 0, now_ms=0)
    before = {k: book.state(k) for k in book.share_keys()}
    try:
        book.replay(key, value)
    except ProtocolError:
        assert {k: book.state(k) for k in book.share_keys()} == before
        return
    for k in book.share_keys():
        state = book.state(k)
        assert state is not None
        with contextlib.suppress(ValueError):  # refused by name, never a hang
            SharePartition(start_offset=max(state.start_offset, 0), batches=state.batches)


def test_the_coordinator_key_names_the_topic_id_as_kafka_prints_it() -> None:
    """Kafka's Uuid.toString is URL-safe base64 without padding; the key's Java
    hash then picks the __share_group_state partition."""
    from kafkette.server.internal_topic import partition_for
    from kafkette.server.share.persistence import STATE_TOPIC_PARTITIONS, coordinator_key

    key = ShareKey("orders-workers", uuid.UUID(int=1), 7)
    assert coordinator_key(key) == "orders-workers:AAAAAAAAAAAAAAAAAAAAAQ:7"
    assert coordinator_key(ShareKey("g", TOPIC, 0)) == "g:ABEiM0RVZneImaq7zN3u_w:0"
    assert 0 <= partition_for(coordinator_key(key), STATE_TOPIC_PARTITIONS) < 50


def test_snapshot_every_zero_writes_only_snapshots() -> None:
    book = ShareStateBook(snapshot_every=0)
    book.initialize(KEY, 0, 0, now_ms=0)
    key, _ = book.write(KEY, StateWrite(2, ()), now_ms=1)
    assert decode_key(key) == (KEY, SNAPSHOT)
    with pytest.raises(ValueError, match="negative"):
        ShareStateBook(snapshot_every=-1)
