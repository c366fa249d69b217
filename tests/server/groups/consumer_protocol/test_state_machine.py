"""Random joins, leaves, heartbeats (with and without acks, some answers lost), time and
topic changes on one consumer group: no partition is ever held by two members, neither
in the coordinator's view (assigned or pending revocation) nor in what the clients were
sent; and once every member acknowledges, the group reaches its target assignment."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kafkette.errors import (
    FencedMemberEpochError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
)
from kafkette.server.groups.consumer_protocol import ConsumerGroupState, HeartbeatRequest
from kafkette.server.groups.consumer_protocol import partitions as ps
from tests.server.groups.consumer_protocol.harness import Client, Cluster

NAMES = ("m0", "m1", "m2", "m3")
STATIC = "m3"
Subscription = tuple[tuple[str, ...], str | None]
SUBSCRIPTIONS: list[Subscription] = [
    (("a",), None),
    (("a", "b"), None),
    (("b",), None),
    ((), "[ac]"),
    (("b",), "c"),
]
ASSIGNORS = [None, "uniform", "range"]


class GroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.cluster = Cluster(
            {"a": 4, "b": 3}, session_timeout_ms=20_000, heartbeat_interval_ms=2_000
        )
        self.clients = {
            name: Client(
                self.cluster,
                name,
                instance_id="static-3" if name == STATIC else None,
                rebalance_timeout_ms=10_000,
            )
            for name in NAMES
        }
        self.joined: set[str] = set()
        self.static_away = False
        self.restarts = 0
        self.answers_lost: set[str] = set()
        """Clients whose last answer was lost: their next heartbeat is a full one."""

    # -- rules ------------------------------------------------------------------------

    @rule(
        name=st.sampled_from(NAMES),
        subscription=st.sampled_from(SUBSCRIPTIONS),
        assignor=st.sampled_from(ASSIGNORS),
    )
    def join(
        self, name: str, subscription: tuple[tuple[str, ...], str | None], assignor: str | None
    ) -> None:
        client = self.clients[name]
        client.topics, client.regex = subscription
        client.assignor = assignor
        self.answers_lost.discard(name)
        try:
            client.join()
        except UnreleasedInstanceIdError:
            assert name == STATIC and not self.static_away
            return
        self.joined.add(name)
        if name == STATIC:
            self.static_away = False

    @rule(name=st.sampled_from(NAMES), acks=st.booleans())
    def heartbeat(self, name: str, acks: bool) -> None:
        if name not in self.joined:
            return
        self.clients[name].revokes = acks
        self._heartbeat(name)

    @rule(name=st.sampled_from(NAMES), subscription=st.sampled_from(SUBSCRIPTIONS))
    def change_subscription(
        self, name: str, subscription: tuple[tuple[str, ...], str | None]
    ) -> None:
        if name not in self.joined:
            return
        client = self.clients[name]
        client.topics, client.regex = subscription
        full = name in self.answers_lost
        self.answers_lost.discard(name)
        self._send(
            name,
            lambda: client.heartbeat(
                full=full,
                subscribed_topic_names=client.topics,
                subscribed_topic_regex=client.regex or "",
            ),
        )

    @rule(name=st.sampled_from(NAMES))
    def answer_lost(self, name: str) -> None:
        """The coordinator handles the heartbeat; the client never sees the answer."""
        if name not in self.joined:
            return
        client = self.clients[name]
        with contextlib.suppress(FencedMemberEpochError, UnknownMemberIdError):
            self.cluster.coordinator.heartbeat(
                self.cluster.now,
                HeartbeatRequest(
                    group_id="g",
                    member_id=client.member_id,
                    member_epoch=client.epoch,
                    owned=dict(client.owned),
                ),
            )
        self.answers_lost.add(name)

    @rule(name=st.sampled_from(NAMES))
    def leave(self, name: str) -> None:
        if name not in self.joined:
            return
        with contextlib.suppress(UnknownMemberIdError):  # maybe removed by a timer already
            self.clients[name].leave()
        self.joined.discard(name)

    @precondition(lambda self: STATIC in self.joined)
    @rule()
    def static_leaves_for_now(self) -> None:
        with contextlib.suppress(UnknownMemberIdError):
            self.clients[STATIC].leave(epoch=-2)
        self.joined.discard(STATIC)
        self.static_away = self.clients[STATIC].member_id in self.cluster.group().members

    @rule()
    def static_restarts(self) -> None:
        """The static member's process restarts: a new member id, the same instance id. It
        replaces the old member if that one left for now, is refused while it is active."""
        client = self.clients[STATIC]
        old = (client.member_id, client.epoch, client.owned, client.given)
        self.restarts += 1
        client.member_id = f"{STATIC}-{self.restarts}"
        try:
            client.join()
        except UnreleasedInstanceIdError:
            assert STATIC in self.joined and not self.static_away
            # The new process was refused; the old one carries on as it was.
            client.member_id, client.epoch, client.owned, client.given = old
            return
        self.answers_lost.discard(STATIC)
        self.joined.add(STATIC)
        self.static_away = False

    @rule(ms=st.sampled_from([100, 2_000, 9_000, 15_000]))
    def advance(self, ms: int) -> None:
        self.cluster.advance(ms)
        group = self.cluster.coordinator.groups.get("g")
        if group is not None and self.clients[STATIC].member_id not in group.members:
            self.static_away = False

    @rule(
        topic=st.sampled_from(["a", "b", "c"]),
        partitions=st.integers(0, 5),
        tell=st.booleans(),
    )
    def change_topic(self, topic: str, partitions: int, tell: bool) -> None:
        """Create, grow or delete (0 partitions) a topic."""
        if partitions == 0:
            self.cluster.topics.pop(topic, None)
        else:
            old = self.cluster.topics.get(topic)
            if old is None or partitions >= old.partitions:
                self.cluster.create(topic, partitions)
        if tell:
            self.cluster.coordinator.topics_changed()

    @rule()
    def settle(self) -> None:
        """Every member acknowledges on every heartbeat: the group reaches its target."""
        if STATIC not in self.joined and self.static_away:
            self.join(STATIC, (self.clients[STATIC].topics or (), self.clients[STATIC].regex), None)
        for _ in range(12):
            for name in sorted(self.joined):
                self.clients[name].revokes = True
                self._heartbeat(name)
        group = self.cluster.coordinator.groups.get("g")
        if group is None:
            return
        if not group.members:
            assert not self.joined
            return
        assert group.state is ConsumerGroupState.STABLE, group.state
        assert group.group_epoch == group.assignment_epoch
        assert sorted(group.members) == sorted(self.clients[n].member_id for n in self.joined)
        for name in self.joined:
            member = group.members[self.clients[name].member_id]
            assert member.member_epoch == group.group_epoch
            assert member.assigned == group.target.get(member.member_id, {})
            assert member.pending_revocation == {}
            assert self.clients[name].owned == member.assigned
        every_target = ps.make(
            (info.topic_id, range(info.partitions)) for info in group.subscription_metadata.values()
        )
        held = [p for m in group.members.values() for p in ps.each(m.assigned)]
        assert sorted(held) == sorted(ps.each(every_target))

    def _heartbeat(self, name: str) -> None:
        client = self.clients[name]
        full = name in self.answers_lost
        self.answers_lost.discard(name)
        self._send(name, lambda: client.heartbeat(full=full))

    def _send(self, name: str, send: Callable[[], object]) -> None:
        try:
            send()
        except (FencedMemberEpochError, UnknownMemberIdError):
            # As a consumer does: abandon every partition and rejoin with epoch 0.
            client = self.clients[name]
            client.owned, client.given = {}, {}
            self.joined.discard(name)
            self.answers_lost.discard(name)
            try:
                client.join()
            except UnreleasedInstanceIdError:
                return
            self.joined.add(name)

    # -- invariants ---------------------------------------------------------------------

    @invariant()
    def no_partition_held_twice(self) -> None:
        group = self.cluster.coordinator.groups.get("g")
        if group is None:
            return
        seen: dict[tuple[object, int], str] = {}
        for member in group.members.values():
            assert not ps.overlaps(member.assigned, member.pending_revocation)
            for tp in ps.each(member.owned()):
                assert tp not in seen, f"{tp} held by {seen[tp]} and {member.member_id}"
                seen[tp] = member.member_id
                assert group.partition_epochs[tp] == member.member_epoch
        assert len(seen) == len(group.partition_epochs)
        # What the clients hold: within what the coordinator has them holding.
        client_seen: dict[tuple[object, int], str] = {}
        for name, client in self.clients.items():
            current = group.members.get(client.member_id)
            if current is None or name not in self.joined:
                continue
            assert ps.is_subset(client.owned, current.owned()), (name, client.owned, current)
            for tp in ps.each(client.owned):
                assert tp not in client_seen, f"clients {client_seen[tp]} and {name} hold {tp}"
                client_seen[tp] = name

    @invariant()
    def target_gives_each_partition_once(self) -> None:
        group = self.cluster.coordinator.groups.get("g")
        if group is None:
            return
        targets = [tp for t in group.target.values() for tp in ps.each(t)]
        assert len(targets) == len(set(targets))
        assert set(group.target) <= set(group.members)
        assert group.assignment_epoch <= group.group_epoch


GroupMachine.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_group = GroupMachine.TestCase
