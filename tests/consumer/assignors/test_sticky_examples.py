"""StickyAssignor and CooperativeStickyAssignor: exact results for known cases."""

from __future__ import annotations

import struct

import pytest
from kafka.coordinator.assignors.sticky.user_data import (  # type: ignore[import-untyped]
    StickyAssignorUserData,
)

from kafkette.consumer.assignors import (
    Assignment,
    CooperativeStickyAssignor,
    RebalanceProtocol,
    StickyAssignor,
    Subscription,
    decode_subscription,
    encode_subscription,
)
from kafkette.consumer.assignors.sticky_core import Claim
from kafkette.consumer.assignors.sticky_user_data import (
    decode_sticky_user_data,
    encode_sticky_user_data,
)
from kafkette.structs import TopicPartition
from tests.consumer.assignors.helpers import subs, tps


def with_user_data(topics: str, owned: str, generation: int) -> Subscription:
    """An eager sticky member's subscription: what it owned travels in user data."""
    return Subscription(
        topics=tuple(topics.split()), user_data=encode_sticky_user_data(tps(owned), generation)
    )


def test_java_example_all_subscribed_then_one_leaves() -> None:
    """StickyAssignor javadoc example 1: C1 leaves and only its partitions move."""
    partitions = {"t0": 2, "t1": 2, "t2": 2, "t3": 2}
    first = StickyAssignor().assign(
        partitions, subs(C0="t0 t1 t2 t3", C1="t0 t1 t2 t3", C2="t0 t1 t2 t3")
    )
    assert first == {
        "C0": Assignment(partitions=tps("t0p0 t1p1 t3p0")),
        "C1": Assignment(partitions=tps("t0p1 t2p0 t3p1")),
        "C2": Assignment(partitions=tps("t1p0 t2p1")),
    }
    second = StickyAssignor().assign(
        partitions,
        {
            "C0": with_user_data("t0 t1 t2 t3", "t0p0 t1p1 t3p0", 1),
            "C2": with_user_data("t0 t1 t2 t3", "t1p0 t2p1", 1),
        },
    )
    assert second == {
        "C0": Assignment(partitions=tps("t0p0 t1p1 t2p0 t3p0")),
        "C2": Assignment(partitions=tps("t0p1 t1p0 t2p1 t3p1")),
    }


def test_java_example_unequal_subscriptions_then_one_leaves() -> None:
    """StickyAssignor javadoc example 2: better balanced than round robin, and sticky."""
    partitions = {"t0": 1, "t1": 2, "t2": 3}
    first = StickyAssignor().assign(partitions, subs(C0="t0", C1="t0 t1", C2="t0 t1 t2"))
    assert first == {
        "C0": Assignment(partitions=tps("t0p0")),
        "C1": Assignment(partitions=tps("t1p0 t1p1")),
        "C2": Assignment(partitions=tps("t2p0 t2p1 t2p2")),
    }
    second = StickyAssignor().assign(
        partitions,
        {
            "C1": with_user_data("t0 t1", "t1p0 t1p1", 1),
            "C2": with_user_data("t0 t1 t2", "t2p0 t2p1 t2p2", 1),
        },
    )
    assert second == {
        "C1": Assignment(partitions=tps("t0p0 t1p0 t1p1")),
        "C2": Assignment(partitions=tps("t2p0 t2p1 t2p2")),
    }


def test_new_member_takes_the_excess_only() -> None:
    """A joining member gets partitions from the members above their share, the highest ones."""
    result = StickyAssignor().assign(
        {"t": 6},
        {
            "a": with_user_data("t", "tp0 tp1 tp2", 3),
            "b": with_user_data("t", "tp3 tp4 tp5", 3),
            "c": Subscription(topics=("t",)),
        },
    )
    assert result == {
        "a": Assignment(partitions=tps("tp0 tp1")),
        "b": Assignment(partitions=tps("tp3 tp4")),
        "c": Assignment(partitions=tps("tp2 tp5")),
    }


def owned(partitions: str, generation: int, topics: str = "t") -> Subscription:
    """A member's subscription with owned partitions (v2+)."""
    return Subscription(
        topics=tuple(topics.split()), owned_partitions=tps(partitions), generation_id=generation
    )


def test_same_generation_conflict_frees_the_partition() -> None:
    """Two claims on tp1 in one generation: neither member keeps it (Java's rule)."""
    result = StickyAssignor().assign(
        {"t": 3}, {"a": owned("tp0 tp1", 5), "b": owned("tp1", 5), "c": owned("", -1)}
    )
    assert result == {
        "a": Assignment(partitions=tps("tp0")),
        "b": Assignment(partitions=tps("tp1")),
        "c": Assignment(partitions=tps("tp2")),
    }


@pytest.mark.parametrize(
    ("gen_a", "gen_b", "expected_a", "expected_b"),
    [(6, 5, "tp0 tp1", "tp2 tp3"), (5, 6, "tp0 tp3", "tp1 tp2")],
)
def test_higher_generation_claim_wins(
    gen_a: int, gen_b: int, expected_a: str, expected_b: str
) -> None:
    """Claims on one partition from two generations: the newer one keeps it."""
    result = StickyAssignor().assign(
        {"t": 4}, {"a": owned("tp0 tp1", gen_a), "b": owned("tp1 tp2", gen_b)}
    )
    assert result == {
        "a": Assignment(partitions=tps(expected_a)),
        "b": Assignment(partitions=tps(expected_b)),
    }


def test_claims_outside_the_subscription_are_dropped() -> None:
    """Claims on an unsubscribed topic, a missing topic or a missing partition count for nothing."""
    result = StickyAssignor().assign(
        {"t": 2, "u": 2},
        {
            "a": owned("tp5 up0 up1 gonep0", 2, topics="t"),
            "b": owned("", 2, topics="t u"),
        },
    )
    assert result == {
        "a": Assignment(partitions=tps("tp0 tp1")),
        "b": Assignment(partitions=tps("up0 up1")),
    }


def test_sticky_user_data_java_layout() -> None:
    """v1 bytes built by hand: [topic string, [int32]] array, then the generation."""
    data = encode_sticky_user_data(tps("bp1 ap2 ap0"), 7)
    expected = (
        b"\x00\x00\x00\x02"  # two topics
        b"\x00\x01a" + b"\x00\x00\x00\x02" + b"\x00\x00\x00\x00\x00\x00\x00\x02"
        b"\x00\x01b" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x01"
        b"\x00\x00\x00\x07"  # generation
    )
    assert data == expected
    oracle = StickyAssignorUserData(
        previous_assignment=[("a", [0, 2]), ("b", [1])], generation=7
    ).encode(header=False)
    assert data == bytes(oracle)
    assert decode_sticky_user_data(data) == Claim(tps("ap0 ap2 bp1"), 7)


def test_sticky_user_data_v0_and_garbage() -> None:
    """v0 (no generation) reads with generation -1; unreadable bytes are no claim."""
    v0 = b"\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x01\x00\x00\x00\x03"
    assert decode_sticky_user_data(v0) == Claim(tps("tp3"), -1)
    assert decode_sticky_user_data(v0 + b"\x00\x00\x00\x09\xff") == Claim(tps("tp3"), 9)
    for garbage in (
        b"\x00\x00\x00\x01\x00\x05t",
        b"\xff\xff\xff\xff",
        b"\x00",
        b"\x00\x00\x00\x01\xff\xfft",
    ):
        assert decode_sticky_user_data(garbage) is None
    assert decode_sticky_user_data(None) is None
    assert decode_sticky_user_data(b"") is None


def test_eager_members_remember_through_user_data() -> None:
    """Each member's StickyAssignor sends back what it was given, through the protocol bytes."""
    members = {"m1": StickyAssignor(), "m2": StickyAssignor()}
    assert members["m1"].user_data(["t"]) is None
    leader = StickyAssignor()
    first = leader.assign({"t": 4}, subs(m1="t", m2="t"))
    for member, assignor in members.items():
        assignor.on_assignment(first[member], 1)
    members["m3"] = StickyAssignor()
    wire = {
        m: decode_subscription(
            encode_subscription(Subscription(topics=("t",), user_data=a.user_data(["t"])))
        )
        for m, a in members.items()
    }
    second = leader.assign({"t": 4}, wire)
    assert first == {
        "m1": Assignment(partitions=tps("tp0 tp2")),
        "m2": Assignment(partitions=tps("tp1 tp3")),
    }
    assert second == {
        "m1": Assignment(partitions=tps("tp0")),
        "m2": Assignment(partitions=tps("tp1 tp3")),
        "m3": Assignment(partitions=tps("tp2")),
    }
    assert members["m1"].user_data(["t"]) == encode_sticky_user_data(tps("tp0 tp2"), 1)


def test_owned_partitions_preferred_over_user_data() -> None:
    """A subscription's owned partitions win over user data; a missing generation comes from it."""
    sub = Subscription(
        topics=("t",),
        owned_partitions=tps("tp1"),
        user_data=encode_sticky_user_data(tps("tp0"), 4),
    )
    other = Subscription(topics=("t",), owned_partitions=tps("tp1"), generation_id=3)
    result = StickyAssignor().assign({"t": 2}, {"a": sub, "b": other})
    assert result == {
        "a": Assignment(partitions=tps("tp1")),
        "b": Assignment(partitions=tps("tp0")),
    }


def test_cooperative_withholds_moving_partitions() -> None:
    """A joining member gets nothing the first time: its partitions are only revoked."""
    assignor = CooperativeStickyAssignor()
    first = assignor.assign(
        {"t": 4},
        {"a": owned("tp0 tp1", 1), "b": owned("tp2 tp3", 1), "c": owned("", -1)},
    )
    assert first == {
        "a": Assignment(partitions=tps("tp0")),
        "b": Assignment(partitions=tps("tp2 tp3")),
        "c": Assignment(partitions=()),
    }
    second = assignor.assign(
        {"t": 4},
        {"a": owned("tp0", 2), "b": owned("tp2 tp3", 2), "c": owned("", 2)},
    )
    assert second == {
        "a": Assignment(partitions=tps("tp0")),
        "b": Assignment(partitions=tps("tp2 tp3")),
        "c": Assignment(partitions=tps("tp1")),
    }


def test_cooperative_gives_freed_partitions_at_once() -> None:
    """Partitions of a member that left, or that nobody owns, are assigned straight away."""
    result = CooperativeStickyAssignor().assign(
        {"t": 4}, {"a": owned("tp0", 4), "b": owned("tp2", 4)}
    )
    assert result == {
        "a": Assignment(partitions=tps("tp0 tp1")),
        "b": Assignment(partitions=tps("tp2 tp3")),
    }


def test_cooperative_conflict_is_kept_by_one_claimant() -> None:
    """A same-generation double claim can land on one claimant: the other only revokes it."""
    result = CooperativeStickyAssignor().assign(
        {"t": 2}, {"a": owned("tp0", 3), "b": owned("tp0", 3)}
    )
    assert result == {
        "a": Assignment(partitions=tps("tp0")),
        "b": Assignment(partitions=tps("tp1")),
    }


def test_cooperative_reads_java_generation_user_data() -> None:
    """Before subscription v2 a Java member sends its generation as an int32 of user data."""
    old = Subscription(topics=("t",), owned_partitions=tps("tp0"), user_data=struct.pack(">i", 9))
    newer = Subscription(topics=("t",), owned_partitions=tps("tp0"), generation_id=8)
    result = CooperativeStickyAssignor().assign({"t": 2}, {"a": old, "b": newer})
    # a's generation 9 wins tp0; b revokes it and gets the free tp1
    assert result == {
        "a": Assignment(partitions=tps("tp0")),
        "b": Assignment(partitions=tps("tp1")),
    }


def test_protocols() -> None:
    """sticky is eager; cooperative-sticky prefers cooperative and can run eager."""
    assert StickyAssignor.protocols == (RebalanceProtocol.EAGER,)
    assert CooperativeStickyAssignor.protocols == (
        RebalanceProtocol.COOPERATIVE,
        RebalanceProtocol.EAGER,
    )
    assert (StickyAssignor.name, CooperativeStickyAssignor.name) == ("sticky", "cooperative-sticky")
    assert CooperativeStickyAssignor().user_data(["t"]) is None
    assert TopicPartition("t", 0) in tps("tp0")
