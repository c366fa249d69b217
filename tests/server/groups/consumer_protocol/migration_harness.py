"""A classic GroupEngine and a ConsumerGroupCoordinator sharing group ids through a
GroupMigration, on a manual clock; classic clients that speak the consumer protocol
embedded in JoinGroup/SyncGroup (eager, as the range assignor does: everything revoked
before a rejoin); consumer-protocol clients from :mod:`.harness`."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterable
from typing import Any

import attrs

from kafkette.consumer.assignors.base import Assignment as WireAssignment
from kafkette.consumer.assignors.base import Subscription
from kafkette.consumer.assignors.protocol import (
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from kafkette.server.config.broker_config import BrokerConfig
from kafkette.server.groups.consumer_protocol import (
    ConsumerGroupConfig,
    ConsumerGroupCoordinator,
    HeartbeatRequest,
    HeartbeatResponse,
    TopicInfo,
)
from kafkette.server.groups.consumer_protocol import partitions as ps
from kafkette.server.groups.consumer_protocol.partitions import Assignment
from kafkette.server.groups.engine import GroupEngine, JoinParams
from kafkette.server.groups.group import JoinResult, SyncResult
from kafkette.server.groups.migration import GroupMigration
from kafkette.server.groups.store import CommittedOffset, MemoryGroupStore
from kafkette.structs import TopicPartition

SESSION = 10_000
REBALANCE = 20_000
MEMBER_ID_REQUIRED = 79
REBALANCE_IN_PROGRESS = 27


def topic_id(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_DNS, name)


class _Front:
    """What a ConsumerGroupHeartbeat meets at the broker: the migration, then the
    coordinator (the shape :class:`~.harness.Client` calls)."""

    def __init__(self, mixed: Mixed) -> None:
        self.mixed = mixed

    def heartbeat(self, now_ms: int, request: HeartbeatRequest) -> HeartbeatResponse:
        return self.mixed.migration.consumer_heartbeat(now_ms, request)


class Mixed:
    """Both kinds of group over one set of ids, and the time."""

    def __init__(self, topics: dict[str, int] | None = None, **config: Any) -> None:
        self.topics: dict[str, TopicInfo] = {
            name: TopicInfo(topic_id(name), name, count)
            for name, count in (topics or {"a": 4}).items()
        }
        self.store = MemoryGroupStore()
        classic_ids = itertools.count(1)
        self.engine = GroupEngine(
            BrokerConfig(group_min_session_timeout_ms=1_000, group_max_session_timeout_ms=60_000),
            self.store,
            id_factory=lambda: str(next(classic_ids)),
        )
        consumer_ids = itertools.count(1)
        self.consumer = ConsumerGroupCoordinator(
            ConsumerGroupConfig(
                **{"session_timeout_ms": 30_000, "heartbeat_interval_ms": 1_000, **config}
            ),
            lambda: self.topics,
            id_factory=lambda: f"generated-{next(consumer_ids)}",
        )
        self.migration = GroupMigration(self.engine, self.consumer)
        self.migration.classic_members._new_id = lambda: f"cm-{next(consumer_ids)}"
        self.coordinator = _Front(self)
        self.now = 0

    def advance(self, ms: int) -> None:
        self.now += ms
        self.engine.tick(self.now)
        self.consumer.tick(self.now)

    def tp(self, spec: dict[str, Iterable[int]]) -> dict[uuid.UUID, frozenset[int]]:
        return ps.make((self.topics[name].topic_id, parts) for name, parts in spec.items())

    def named(self, assignment: Assignment | None) -> dict[str, list[int]] | None:
        if assignment is None:
            return None
        names = {info.topic_id: name for name, info in self.topics.items()}
        return {names[t]: sorted(p) for t, p in sorted(assignment.items(), key=str)}

    def commit(self, group_id: str, offsets: dict[tuple[str, int], int]) -> dict[Any, int]:
        return self.engine.commit(
            self.now,
            group_id=group_id,
            generation_id=-1,
            member_id="",
            group_instance_id=None,
            offsets={
                k: CommittedOffset(offset=o, commit_timestamp_ms=self.now)
                for k, o in offsets.items()
            },
        )


@attrs.define
class ClassicClient:
    """A classic consumer of the consumer protocol: range over the topics it subscribes
    to when it leads; eager (it gives up everything before joining again)."""

    mixed: Mixed
    topics: tuple[str, ...] = ("a",)
    protocols: tuple[str, ...] = ("range",)
    group_id: str = "g"
    protocol_type: str = "consumer"
    member_id: str = ""
    generation: int = -1
    owned: tuple[TopicPartition, ...] = ()
    instance: str | None = None
    """``group.instance.id``: a static member."""
    cooperative: bool = False
    """Report owned partitions in the subscription on a rejoin (else revoke them first)."""
    last_join: JoinResult | None = None

    def metadata(self) -> bytes:
        owned = self.owned if self.cooperative else ()
        return encode_subscription(Subscription(topics=self.topics, owned_partitions=owned))

    def join(self) -> list[JoinResult]:
        """One JoinGroup (v9); the list gets the answer when it comes."""
        if not self.cooperative:
            self.owned = ()
        results: list[JoinResult] = []

        def got(result: JoinResult) -> None:
            results.append(result)
            if result.error_code in (0, MEMBER_ID_REQUIRED):
                self.member_id = result.member_id
            if result.error_code == 0:
                self.generation = result.generation_id
                self.last_join = result

        self.mixed.migration.join(
            self.mixed.now,
            JoinParams(
                group_id=self.group_id,
                member_id=self.member_id,
                group_instance_id=self.instance,
                client_id="classic",
                client_host="/10.0.0.1",
                session_timeout_ms=SESSION,
                rebalance_timeout_ms=REBALANCE,
                protocol_type=self.protocol_type,
                protocols=tuple((name, self.metadata()) for name in self.protocols),
            ),
            got,
        )
        return results

    def join_new(self) -> list[JoinResult]:
        first = self.join()
        if first and first[0].error_code == MEMBER_ID_REQUIRED:
            return self.join()
        return first

    def sync(self, assignments: dict[str, bytes] | None = None) -> list[SyncResult]:
        results: list[SyncResult] = []

        def got(result: SyncResult) -> None:
            results.append(result)
            if result.error_code == 0:
                self.owned = decode_assignment(result.assignment).partitions

        self.mixed.migration.sync(
            self.mixed.now,
            group_id=self.group_id,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=self.instance,
            protocol_type="consumer",
            protocol_name=self.protocols[0],
            assignments=assignments or {},
            callback=got,
        )
        return results

    def heartbeat(self) -> int:
        return self.mixed.migration.heartbeat(
            self.mixed.now,
            group_id=self.group_id,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=self.instance,
        )

    def leave(self) -> list[int]:
        self.owned = ()
        return self.mixed.migration.leave(self.mixed.now, self.group_id, [(self.member_id, None)])[
            1
        ]

    def commit(self, offsets: dict[tuple[str, int], int]) -> dict[Any, int]:
        """OffsetCommit as this member, at its generation (classic side only)."""
        return self.mixed.engine.commit(
            self.mixed.now,
            group_id=self.group_id,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=None,
            offsets={
                k: CommittedOffset(offset=o, commit_timestamp_ms=self.mixed.now)
                for k, o in offsets.items()
            },
        )

    def holds(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for tp in self.owned:
            out.setdefault(tp.topic, []).append(tp.partition)
        return {t: sorted(p) for t, p in sorted(out.items())}


def range_assignments(mixed: Mixed, join: JoinResult) -> dict[str, bytes]:
    """What a leader running range over topic partitions gives each member of ``join``."""
    from kafkette.consumer.assignors.protocol import decode_subscription

    members = sorted(m for m, _, _ in join.members)
    subs = {m: decode_subscription(meta) for m, _, meta in join.members}
    given: dict[str, list[TopicPartition]] = {m: [] for m in members}
    for topic in sorted({t for s in subs.values() for t in s.topics}):
        count = mixed.topics[topic].partitions if topic in mixed.topics else 0
        takers = [m for m in members if topic in subs[m].topics]
        per, extra = divmod(count, len(takers))
        start = 0
        for i, m in enumerate(takers):
            n = per + (1 if i < extra else 0)
            given[m] += [TopicPartition(topic, p) for p in range(start, start + n)]
            start += n
    return {m: encode_assignment(WireAssignment(partitions=tuple(tps))) for m, tps in given.items()}


def classic_round(mixed: Mixed, clients: list[ClassicClient]) -> None:
    """Every client (re)joins a classic group, the leader assigns range, all sync."""
    for client in clients:
        if not client.member_id:
            assert client.join()[0].error_code == MEMBER_ID_REQUIRED
    for _ in range(3):  # a member joining after the first completes a generation
        pending = [c.join() for c in clients]
        results = [p[-1] for p in pending if p]
        if len(results) == len(clients) and len({r.generation_id for r in results}) == 1:
            break
    assert all(r.error_code == 0 for r in results), results
    leader = next(r for r in results if r.members)
    for client in clients:
        if client.member_id != leader.member_id:
            assert client.sync() == []
    (lead,) = [c for c in clients if c.member_id == leader.member_id]
    assert lead.sync(range_assignments(mixed, leader))[0].error_code == 0
