"""Random steps of classic members (eager, range: JoinGroup, SyncGroup, Heartbeat,
LeaveGroup) and consumer-protocol members on one group id, with time, so that the group
is upgraded and downgraded again and again: no partition is ever held by two members,
neither in the consumer coordinator's view nor in what the clients hold; and once every
member keeps up, each partition is held by exactly one member."""

from __future__ import annotations

import contextlib
import uuid

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kafkette.errors import FencedMemberEpochError, GroupIdNotFoundError, UnknownMemberIdError
from kafkette.server.groups.consumer_protocol import partitions as ps
from kafkette.server.groups.group import JoinResult, SyncResult
from tests.server.groups.consumer_protocol.harness import Client
from tests.server.groups.consumer_protocol.migration_harness import (
    MEMBER_ID_REQUIRED,
    REBALANCE_IN_PROGRESS,
    ClassicClient,
    Mixed,
    range_assignments,
)

CLASSIC = ("k0", "k1", "k2")
CONSUMER = ("n0", "n1")


class Classic:
    """A classic client stepping through join, sync and heartbeats as a consumer does."""

    def __init__(self, mixed: Mixed) -> None:
        self.mixed = mixed
        self.client = ClassicClient(mixed)
        self.active = False
        self.joining: list[JoinResult] | None = None
        self.syncing: list[SyncResult] | None = None
        self.synced = False

    def start(self) -> None:
        self.active = True
        self._join()

    def _join(self) -> None:
        self.synced = False
        self.syncing = None
        self.joining = self.client.join()  # eager: gives up everything first

    def _restart(self) -> None:
        """Out of the group (unknown member): start again with no member id."""
        self.client.member_id = ""
        self.client.generation = -1
        self._join()

    def step(self) -> None:
        """One thing a consumer's poll loop would do next."""
        if not self.active:
            return
        if self.joining is not None:
            if not self.joining:
                return  # the join phase is still open
            result = self.joining[-1]
            self.joining = None
            if result.error_code in (MEMBER_ID_REQUIRED, REBALANCE_IN_PROGRESS):
                self._join()
            elif result.error_code != 0:
                self._restart()
            else:
                assignments = range_assignments(self.mixed, result) if result.members else None
                self.syncing = self.client.sync(assignments)
            return
        if self.syncing is not None:
            if not self.syncing:
                return
            result_sync = self.syncing[-1]
            self.syncing = None
            if result_sync.error_code == 0:
                self.synced = True
            elif result_sync.error_code == 25:
                self._restart()
            else:
                self._join()
            return
        error = self.client.heartbeat()
        if error in (REBALANCE_IN_PROGRESS, 22):  # rejoin (ILLEGAL_GENERATION: after a downgrade)
            self._join()
        elif error == 25:
            self._restart()
        else:
            assert error == 0, error

    def leave(self) -> None:
        if self.active and self.client.member_id:
            self.client.leave()
        self.active = False
        self.client.member_id = ""
        self.client.owned = ()
        self.joining = self.syncing = None
        self.synced = False


class MixedMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.mixed = Mixed({"a": 4, "b": 2}, session_timeout_ms=20_000)
        self.classic = {name: Classic(self.mixed) for name in CLASSIC}
        self.consumers = {
            name: Client(self.mixed, name, topics=("a", "b"))  # type: ignore[arg-type]
            for name in CONSUMER
        }
        for c in self.classic.values():
            c.client.topics = ("a", "b")
        self.joined: set[str] = set()

    @initialize(count=st.integers(0, 2))
    def classic_group(self, count: int) -> None:
        """Most runs start from a classic group with members, the case an upgrade needs."""
        for name in CLASSIC[:count]:
            self.classic[name].start()
        for _ in range(4):
            for name in CLASSIC[:count]:
                self.classic[name].step()

    @rule(name=st.sampled_from(CLASSIC))
    def classic_starts(self, name: str) -> None:
        if not self.classic[name].active:
            self.classic[name].start()

    @rule(name=st.sampled_from(CLASSIC), times=st.integers(1, 3))
    def classic_steps(self, name: str, times: int) -> None:
        for _ in range(times):
            self.classic[name].step()

    @rule(name=st.sampled_from(CLASSIC))
    def classic_leaves(self, name: str) -> None:
        self.classic[name].leave()

    @rule(name=st.sampled_from(CONSUMER))
    def consumer_joins(self, name: str) -> None:
        if name in self.joined:
            return
        try:
            self.consumers[name].join()
        except GroupIdNotFoundError:
            return  # a classic group that cannot be upgraded right now
        self.joined.add(name)

    @rule(name=st.sampled_from(CONSUMER), acks=st.booleans())
    def consumer_heartbeats(self, name: str, acks: bool) -> None:
        if name not in self.joined:
            return
        client = self.consumers[name]
        client.revokes = acks
        try:
            client.heartbeat()
        except (FencedMemberEpochError, UnknownMemberIdError, GroupIdNotFoundError):
            client.owned, client.given = {}, {}  # lost: abandoned
            self.joined.discard(name)

    @rule(name=st.sampled_from(CONSUMER))
    def consumer_leaves(self, name: str) -> None:
        if name not in self.joined:
            return
        with contextlib.suppress(UnknownMemberIdError, GroupIdNotFoundError):
            self.consumers[name].leave()  # unless a timer removed it already
        self.consumers[name].owned = {}
        self.joined.discard(name)

    @rule(ms=st.sampled_from([100, 3_000, 9_000, 21_000]))
    def advance(self, ms: int) -> None:
        self.mixed.advance(ms)

    @rule()
    def settle(self) -> None:
        """Everybody keeps up for a while: every subscribed partition held exactly once."""
        for _ in range(25):
            for c in self.classic.values():
                c.step()
                c.step()
            for name in sorted(self.joined):
                self.consumer_heartbeats(name, True)
            self.mixed.advance(1_000)
        holders = self._client_holdings()
        active = [c for c in self.classic.values() if c.active] + [
            self.consumers[n] for n in self.joined
        ]
        if active:
            assert sorted(holders) == [
                (t, p) for t in ("a", "b") for p in range(4 if t == "a" else 2)
            ]

    # -- invariants ---------------------------------------------------------------------

    def _client_holdings(self) -> dict[tuple[str, int], str]:
        """What every client that is still a member of the group holds."""
        group = self.mixed.consumer.groups.get("g")
        classic = self.mixed.engine.groups.get("g")
        members = set(group.members) if group else set()
        if classic is not None:
            members |= set(classic.members)
        held: dict[tuple[str, int], str] = {}
        for name, c in self.classic.items():
            if c.client.member_id not in members:
                continue
            for tp in c.client.owned:
                key = (tp.topic, tp.partition)
                assert key not in held, f"{key} held by {held[key]} and {name}"
                held[key] = name
        for name in self.joined:
            client = self.consumers[name]
            if name not in members:
                continue
            for topic, partitions in (self.mixed.named(client.owned) or {}).items():
                for p in partitions:
                    assert (topic, p) not in held, (
                        f"{(topic, p)} held by {held[(topic, p)]} and {name}"
                    )
                    held[(topic, p)] = name
        return held

    @invariant()
    def no_partition_held_twice(self) -> None:
        self._client_holdings()
        group = self.mixed.consumer.groups.get("g")
        if group is None:
            return
        assert "g" not in self.mixed.engine.groups or not self.mixed.engine.groups["g"].members
        seen: dict[tuple[uuid.UUID, int], str] = {}
        for member in group.members.values():
            for tp in ps.each(member.owned()):
                assert tp not in seen, f"{tp} held by {seen[tp]} and {member.member_id}"
                seen[tp] = member.member_id
        # A classic client holds no more than the coordinator has it holding.
        for c in self.classic.values():
            member = group.members.get(c.client.member_id)
            if member is None:
                continue
            owned = ps.make(
                (self.mixed.topics[tp.topic].topic_id, [tp.partition]) for tp in c.client.owned
            )
            assert ps.is_subset(owned, member.owned()), (c.client.member_id, owned, member)


MixedMachine.TestCase.settings = settings(
    max_examples=100,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_mixed_group = MixedMachine.TestCase
