"""Online migration between classic and consumer groups (``group.consumer.migration.policy``),
driven without sockets on a manual clock: upgrade when a consumer-protocol member joins a
classic group, classic members inside a consumer group (JoinGroup, SyncGroup, Heartbeat,
LeaveGroup and their timers), downgrade when the last consumer-protocol member leaves,
Empty groups replaced either way, and Kafka's errors where migration does not apply."""

from __future__ import annotations

import attrs
import pytest

from kafkette.errors import (
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    IllegalGenerationError,
    InvalidRequestError,
    StaleMemberEpochError,
)
from kafkette.server.groups.consumer_protocol import offsets
from kafkette.server.groups.group import ClassicGroupState
from kafkette.server.groups.offsets import OFFSETS_RETENTION_CHECK_INTERVAL_MS
from tests.server.groups.consumer_protocol.harness import Client
from tests.server.groups.consumer_protocol.migration_harness import (
    MEMBER_ID_REQUIRED,
    REBALANCE,
    REBALANCE_IN_PROGRESS,
    SESSION,
    ClassicClient,
    Mixed,
    classic_round,
)

INCONSISTENT_GROUP_PROTOCOL = 23
UNKNOWN_MEMBER_ID = 25
ILLEGAL_GENERATION = 22


def classic_group(mixed: Mixed, count: int = 2) -> list[ClassicClient]:
    clients = [ClassicClient(mixed) for _ in range(count)]
    classic_round(mixed, clients)
    return clients


def rejoin(client: ClassicClient) -> None:
    """Heartbeat answered REBALANCE_IN_PROGRESS: join and sync again."""
    (joined,) = client.join()
    assert joined.error_code == 0, joined
    (synced,) = client.sync()
    assert synced.error_code == 0, synced


def test_upgrade_keeps_classic_members_assignments_and_offsets() -> None:
    """A consumer member joining a Stable classic group of two converts it: the classic
    members keep their generation as epoch and their partitions, the group epoch moves
    past it, the new member gets partitions only once a classic member gave them up on a
    rejoin; committed offsets stay."""
    mixed = Mixed()
    c1, c2 = classic_group(mixed)
    generation = c1.generation
    assert (c1.holds(), c2.holds()) == ({"a": [0, 1]}, {"a": [2, 3]})
    assert c1.commit({("a", 0): 10, ("a", 2): 20}) == {("a", 0): 0, ("a", 2): 0}

    new = Client(mixed, "n1")  # type: ignore[arg-type]
    joined = new.join()
    group = mixed.consumer.groups["g"]
    assert set(group.members) == {c1.member_id, c2.member_id, "n1"}
    assert group.group_epoch == generation + 1
    first = group.members[c1.member_id]
    assert first.uses_classic_protocol
    assert mixed.named(first.assigned) == {"a": [0, 1]}
    assert mixed.named(joined.assignment) == {}  # its partitions are still held
    assert mixed.engine.groups["g"].members == {}  # the classic side keeps the offsets only
    assert {k: o.offset for k, o in mixed.engine.groups["g"].offsets.items()} == {
        ("a", 0): 10,
        ("a", 2): 20,
    }

    assert c1.heartbeat() == REBALANCE_IN_PROGRESS
    assert c2.heartbeat() == REBALANCE_IN_PROGRESS
    rejoin(c1)
    rejoin(c2)
    assert c1.generation == c2.generation == generation + 1
    assert new.heartbeat().member_epoch == generation + 1
    held = [c1.holds(), c2.holds(), mixed.named(new.owned)]
    flat = sorted(p for h in held if h for p in h.get("a", []))
    assert flat == [0, 1, 2, 3]  # every partition once
    assert all(h for h in held)  # each of the three holds some
    assert c1.heartbeat() == c2.heartbeat() == 0
    assert mixed.engine.fetch_offsets("g", [("a", 0)])[("a", 0)] is not None


def test_upgrade_answers_waiting_requests_with_rebalance_in_progress() -> None:
    """A classic group in the middle of a rebalance is converted too: the JoinGroup that
    waited is answered REBALANCE_IN_PROGRESS, and the member joins again the new way."""
    mixed = Mixed()
    c1, c2 = classic_group(mixed)
    waiting = c1.join()  # starts a rebalance; c2 has not rejoined yet
    assert waiting == []
    Client(mixed, "n1").join()  # type: ignore[arg-type]
    assert [r.error_code for r in waiting] == [REBALANCE_IN_PROGRESS]
    assert c2.heartbeat() == REBALANCE_IN_PROGRESS
    rejoin(c1)
    rejoin(c2)
    assert c1.heartbeat() == 0


@pytest.mark.parametrize("policy", ["disabled", "downgrade", "DISABLED"])
def test_upgrade_refused_by_policy(policy: str) -> None:
    """With the upgrade not allowed, a consumer member naming a classic group with members
    gets GROUP_ID_NOT_FOUND ("Group g is not a consumer group") and the classic group goes
    on unchanged."""
    mixed = Mixed(migration_policy=policy.lower())
    c1, _ = classic_group(mixed)
    with pytest.raises(GroupIdNotFoundError, match=r"\(Group g is not a consumer group\)$"):
        Client(mixed, "n1").join()  # type: ignore[arg-type]
    assert "g" not in mixed.consumer.groups
    assert mixed.engine.groups["g"].is_in(ClassicGroupState.STABLE)
    assert c1.heartbeat() == 0


def test_only_a_joining_member_upgrades() -> None:
    """A heartbeat with an epoch above 0 naming a classic group is GROUP_ID_NOT_FOUND."""
    mixed = Mixed()
    classic_group(mixed)
    client = Client(mixed, "n1")  # type: ignore[arg-type]
    client.epoch = 3
    with pytest.raises(GroupIdNotFoundError):
        client.heartbeat()
    assert "g" not in mixed.consumer.groups


def test_classic_group_of_another_protocol_type_is_not_upgraded() -> None:
    mixed = Mixed()
    clients = [ClassicClient(mixed, protocol_type="connect") for _ in range(1)]
    for c in clients:
        assert c.join()[0].error_code == MEMBER_ID_REQUIRED
        assert c.join()[0].error_code == 0
    with pytest.raises(GroupIdNotFoundError, match="not a consumer group"):
        Client(mixed, "n1").join()  # type: ignore[arg-type]


def test_empty_classic_group_is_replaced_keeping_offsets() -> None:
    """A classic group whose members all left is replaced by a consumer group; its
    committed offsets stay readable."""
    mixed = Mixed()
    c1, c2 = classic_group(mixed)
    c1.leave()
    c2.leave()
    assert mixed.engine.groups["g"].is_in(ClassicGroupState.EMPTY)
    assert mixed.commit("g", {("a", 1): 5}) == {("a", 1): 0}
    new = Client(mixed, "n1")  # type: ignore[arg-type]
    new.join()
    assert mixed.named(new.heartbeat().assignment) is None
    assert mixed.named(new.owned) == {"a": [0, 1, 2, 3]}
    assert mixed.engine.fetch_offsets("g", [("a", 1)])[("a", 1)].offset == 5  # type: ignore[union-attr]


def test_classic_member_joins_a_consumer_group() -> None:
    """A classic consumer joining a consumer group with members stays a classic member:
    MEMBER_ID_REQUIRED, then its epoch as generation, no leader; SyncGroup gives it its
    partitions once the consumer member revoked them."""
    mixed = Mixed()
    new = Client(mixed, "n1")  # type: ignore[arg-type]
    new.join()
    assert mixed.named(new.owned) == {"a": [0, 1, 2, 3]}
    classic = ClassicClient(mixed)
    (first,) = classic.join()
    assert (first.error_code, first.member_id) == (MEMBER_ID_REQUIRED, classic.member_id)
    (joined,) = classic.join()
    group = mixed.consumer.groups["g"]
    assert (joined.error_code, joined.generation_id, joined.leader_id, joined.members) == (
        0,
        group.group_epoch,
        "",
        (),
    )
    assert (joined.protocol_type, joined.protocol_name) == ("consumer", "range")
    (synced,) = classic.sync()
    assert (synced.error_code, synced.protocol_name) == (0, "range")
    assert classic.holds() == {}  # the consumer member has not revoked yet
    new.heartbeat()  # revokes two partitions
    new.heartbeat()
    assert classic.heartbeat() == REBALANCE_IN_PROGRESS  # its partitions are free now
    rejoin(classic)
    held = sorted([*classic.holds()["a"], *mixed.named(new.owned)["a"]])  # type: ignore[index]
    assert held == [0, 1, 2, 3]
    assert len(classic.holds()["a"]) == 2


def test_classic_join_with_other_protocols_is_inconsistent() -> None:
    """JoinGroup to a consumer group with members: a protocol type other than consumer, or
    no protocol the classic members share, is INCONSISTENT_GROUP_PROTOCOL."""
    mixed = Mixed()
    Client(mixed, "n1").join()  # type: ignore[arg-type]
    other = ClassicClient(mixed, protocol_type="connect")
    assert [r.error_code for r in other.join()] == [INCONSISTENT_GROUP_PROTOCOL]
    first = ClassicClient(mixed, protocols=("range",))
    first.join_new()
    odd = ClassicClient(mixed, protocols=("roundrobin",))
    assert [r.error_code for r in odd.join()] == [INCONSISTENT_GROUP_PROTOCOL]
    assert "g" in mixed.consumer.groups and "g" not in [
        gid for gid, g in mixed.engine.groups.items() if g.members
    ]


def test_downgrade_when_the_last_consumer_member_leaves() -> None:
    """After an upgrade, the consumer member leaving makes the group classic again at the
    group epoch, rebalancing: the classic members are told to rejoin, and a new
    generation forms with the leader's assignment; offsets stay."""
    mixed = Mixed()
    c1, c2 = classic_group(mixed)
    assert c2.commit({("a", 3): 7}) == {("a", 3): 0}
    new = Client(mixed, "n1")  # type: ignore[arg-type]
    new.join()
    epoch = mixed.consumer.groups["g"].group_epoch
    new.leave()
    assert "g" not in mixed.consumer.groups
    classic = mixed.engine.groups["g"]
    assert classic.is_in(ClassicGroupState.PREPARING_REBALANCE)
    assert classic.generation_id == epoch
    assert set(classic.members) == {c1.member_id, c2.member_id}
    assert classic.offsets[("a", 3)].offset == 7
    assert mixed.store.groups["g"].generation == epoch
    # c1 and c2 are still at the old generation: ILLEGAL_GENERATION tells them to rejoin.
    assert c1.heartbeat() == ILLEGAL_GENERATION
    classic_round(mixed, [c1, c2])
    assert c1.generation == c2.generation == epoch + 1
    assert sorted([*c1.holds()["a"], *c2.holds()["a"]]) == [0, 1, 2, 3]


def test_downgrade_when_the_consumer_members_session_expires() -> None:
    """The consumer member's session expiring downgrades the group the same way, while
    the classic members keep up (rejoining when told)."""
    mixed = Mixed(session_timeout_ms=30_000)
    c1, c2 = classic_group(mixed)
    Client(mixed, "n1").join()  # type: ignore[arg-type]
    for _ in range(5):
        mixed.advance(SESSION // 2)
        for client in (c1, c2):
            if client.heartbeat() == REBALANCE_IN_PROGRESS:
                rejoin(client)
    assert "g" in mixed.consumer.groups
    assert set(mixed.consumer.groups["g"].members) == {c1.member_id, c2.member_id, "n1"}
    mixed.advance(30_000 - 5 * (SESSION // 2))
    assert "g" not in mixed.consumer.groups
    assert mixed.engine.groups["g"].is_in(ClassicGroupState.PREPARING_REBALANCE)


@pytest.mark.parametrize("policy", ["upgrade", "disabled"])
def test_no_downgrade_when_the_policy_forbids(policy: str) -> None:
    """Without downgrade, the group stays a consumer group of classic members."""
    mixed = Mixed(migration_policy="bidirectional")
    c1, c2 = classic_group(mixed)
    new = Client(mixed, "n1")  # type: ignore[arg-type]
    new.join()
    mixed.consumer.config = type(mixed.consumer.config)(migration_policy=policy)
    new.leave()
    group = mixed.consumer.groups["g"]
    assert set(group.members) == {c1.member_id, c2.member_id}
    assert c1.heartbeat() == REBALANCE_IN_PROGRESS
    rejoin(c1)
    rejoin(c2)
    assert sorted([*c1.holds()["a"], *c2.holds()["a"]]) == [0, 1, 2, 3]


def test_empty_consumer_group_is_replaced_by_a_classic_join() -> None:
    mixed = Mixed()
    new = Client(mixed, "n1")  # type: ignore[arg-type]
    new.join()
    new.leave()
    assert mixed.consumer.groups["g"].members == {}
    (client,) = classic_group(mixed, 1)
    assert "g" not in mixed.consumer.groups
    assert client.holds() == {"a": [0, 1, 2, 3]}


def test_classic_member_that_does_not_rejoin_or_sync_in_time_is_removed() -> None:
    """Told to rejoin, a classic member has its rebalance timeout to send JoinGroup; after
    a JoinGroup answer, the same to send SyncGroup; else it is removed."""
    mixed = Mixed(session_timeout_ms=60_000)
    c1, c2 = classic_group(mixed)
    new = Client(mixed, "n1")  # type: ignore[arg-type]
    new.join()
    assert c1.heartbeat() == REBALANCE_IN_PROGRESS
    assert c2.heartbeat() == REBALANCE_IN_PROGRESS
    (joined,) = c2.join()  # joins but never syncs
    assert joined.error_code == 0
    for step in (5_000, 5_000, 5_000, REBALANCE - 15_001):  # heartbeats keep their sessions
        mixed.advance(step)
        new.heartbeat()
        assert c1.heartbeat() == REBALANCE_IN_PROGRESS
        c2.heartbeat()
    assert mixed.now == REBALANCE - 1
    assert set(mixed.consumer.groups["g"].members) == {c1.member_id, c2.member_id, "n1"}
    mixed.advance(1)
    assert set(mixed.consumer.groups["g"].members) == {"n1"}
    assert c1.heartbeat() == UNKNOWN_MEMBER_ID


def test_classic_member_leave_and_errors() -> None:
    """LeaveGroup removes a classic member; a consumer-protocol member named in classic
    requests is UNKNOWN_MEMBER_ID; a wrong generation is ILLEGAL_GENERATION."""
    mixed = Mixed()
    c1, c2 = classic_group(mixed)
    Client(mixed, "n1").join()  # type: ignore[arg-type]
    stale = ClassicClient(mixed, member_id=c1.member_id, generation=c1.generation + 5)
    assert stale.heartbeat() == ILLEGAL_GENERATION
    impostor = ClassicClient(mixed, member_id="n1", generation=1)
    assert impostor.heartbeat() == UNKNOWN_MEMBER_ID
    assert impostor.leave() == [UNKNOWN_MEMBER_ID]
    assert c2.leave() == [0]
    assert set(mixed.consumer.groups["g"].members) == {c1.member_id, "n1"}


def test_offset_commits_of_classic_members() -> None:
    """A classic member of a consumer group commits with its epoch as generation, with any
    OffsetCommit version; another epoch is ILLEGAL_GENERATION for it, while a consumer
    member gets STALE_MEMBER_EPOCH."""
    mixed = Mixed()
    c1, _ = classic_group(mixed)
    Client(mixed, "n1").join()  # type: ignore[arg-type]
    group = mixed.consumer.groups["g"]
    offsets.validate_offset_commit(group, c1.member_id, c1.generation, api_version=2)
    with pytest.raises(IllegalGenerationError):
        offsets.validate_offset_commit(group, c1.member_id, c1.generation + 1, api_version=8)
    with pytest.raises(StaleMemberEpochError):
        offsets.validate_offset_commit(group, "n1", 99, api_version=9)


def test_static_consumer_member_replaced_by_a_classic_one_downgrades() -> None:
    """The last consumer-protocol member is static and a classic member with its instance
    id takes its place: the group becomes classic at once (Kafka's downgrade on a replaced
    member), and the two classic members form a generation that splits the partitions."""
    mixed = Mixed()
    (k1,) = classic_group(mixed, 1)
    static = Client(mixed, "s1", instance_id="i1")  # type: ignore[arg-type]
    static.join()
    assert set(mixed.consumer.groups["g"].members) == {k1.member_id, "s1"}
    k2 = ClassicClient(mixed, instance="i1")
    (joined,) = k2.join()
    assert joined.error_code == 0
    assert "g" not in mixed.consumer.groups
    classic = mixed.engine.groups["g"]
    assert set(classic.members) == {k1.member_id, k2.member_id}
    assert classic.static_members == {"i1": k2.member_id}
    classic_round(mixed, [k1, k2])
    assert sorted([*k1.holds()["a"], *k2.holds()["a"]]) == [0, 1, 2, 3]
    assert k1.holds() and k2.holds()


def test_upgrade_undone_when_the_joining_heartbeat_fails() -> None:
    """The upgrade takes effect only with the heartbeat that asked for it: a classic group
    of two with group.consumer.max.size 2 converts, but the newcomer is refused
    (GROUP_MAX_SIZE_REACHED), so the group stays classic, its waiting JoinGroup still
    waiting; an invalid joining heartbeat converts nothing either."""
    mixed = Mixed(max_size=2)
    c1, c2 = classic_group(mixed)
    waiting = c1.join()
    with pytest.raises(GroupMaxSizeReachedError):
        Client(mixed, "n1").join()  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError):
        Client(mixed, "n2", rebalance_timeout_ms=-1).join()  # type: ignore[arg-type]
    assert "g" not in mixed.consumer.groups
    assert waiting == []
    assert set(mixed.engine.groups["g"].members) == {c1.member_id, c2.member_id}
    classic_round(mixed, [c1, c2])
    assert c1.heartbeat() == c2.heartbeat() == 0
    assert "g" in mixed.store.groups


def test_offsets_of_a_consumer_group_expire_as_kafka_s_consumer_group_s() -> None:
    """While the consumer group has members, the offsets of the topics they subscribe to
    never expire (however old their commit), the others expire offsets.retention.minutes
    after their commit; once the group has no member left, every offset does."""
    mixed = Mixed({"a": 2, "b": 2})
    offsets = mixed.engine.offsets
    offsets.config = attrs.evolve(offsets.config, offsets_retention_minutes=1)
    member = Client(mixed, "n1")  # type: ignore[arg-type]
    member.join()
    assert mixed.commit("g", {("a", 0): 5, ("b", 0): 7}) == {("a", 0): 0, ("b", 0): 0}
    for _ in range(OFFSETS_RETENTION_CHECK_INTERVAL_MS // 20_000 + 1):  # past the first check
        mixed.advance(20_000)
        member.heartbeat()
    assert sorted(mixed.engine.groups["g"].offsets) == [("a", 0)]
    member.leave()
    mixed.advance(OFFSETS_RETENTION_CHECK_INTERVAL_MS)
    assert "g" not in mixed.engine.groups
    assert mixed.engine.fetch_offsets("g", [("a", 0)]) == {("a", 0): None}
