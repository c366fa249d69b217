""":class:`MemoryCluster`: a ``memory://`` Kafka for one test, with its clock, faults and
read-outs.

The cluster is the broker core of ``kafkette serve`` over the memory backend,
in this process (:mod:`kafkette.client.inprocess`): every client given its
:attr:`~MemoryCluster.bootstrap_servers` talks to it with the same Kafka
requests as over TCP. What a test needs besides clients goes straight to the
core, in the core's own event loop:

- time: the broker's clock is a :class:`~kafkette.testing.ManualClock`;
  :meth:`MemoryCluster.advance` moves it and returns once every broker timer
  due by then has fired, so a test never sleeps for a session timeout;
- faults: :attr:`MemoryCluster.faults` (:class:`~kafkette.server.faults.table.FaultTable`)
  answers chosen requests with errors, loses answers, delays or disconnects;
- inspection: :meth:`~MemoryCluster.records`, :meth:`~MemoryCluster.committed`,
  :meth:`~MemoryCluster.high_watermark`, :meth:`~MemoryCluster.share_partition_state`
  ... read the core without a client;
- several nodes (``brokers=N``): :meth:`~MemoryCluster.move_leader`,
  :meth:`~MemoryCluster.stop_broker`, :meth:`~MemoryCluster.start_broker` and
  :meth:`~MemoryCluster.move_coordinator` drive the core's
  :class:`~kafkette.server.nodes.NodeTable`, as Kafka's controller would.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from types import TracebackType
from typing import Any, Literal

import anyio

from kafkette.client.inprocess import MEMORY_SCHEME, close_cluster, create_cluster
from kafkette.clocks import LoopWallClock
from kafkette.consumer.assignors.protocol import decode_assignment
from kafkette.consumer.fetch_buffer import CompletedFetch
from kafkette.consumer.record import ConsumerRecord
from kafkette.consumer.subscription import PartitionState
from kafkette.server import BrokerConfig
from kafkette.server.faults.table import FaultTable
from kafkette.server.maintenance import run_once
from kafkette.server.nodes import GROUP, TRANSACTION
from kafkette.server.share.persistence import ShareKey
from kafkette.structs import TopicPartition
from kafkette.testing.clock import ManualClock
from kafkette.testing.share import SharePartitionState, read_share_partition

MAX_TIMER_ROUNDS = 1000
"""Rounds of due timers :meth:`MemoryCluster.advance` runs at most (each may schedule more)."""


class MemoryCluster:
    """An in-process Kafka cluster for a test: ``memory://NAME`` over the broker core.

    ``name`` defaults to a fresh unique one. ``clock`` is the broker's time
    (default: a :class:`ManualClock` started at the current wall time, which
    moves only through :meth:`advance`). ``broker_config`` are Kafka broker
    properties in Python spelling (``group_min_session_timeout_ms=500`` is
    ``group.min.session.timeout.ms``); unknown names are errors.

    ``brokers=N`` (N > 1) makes nodes 1..N over the one broker core: each
    partition is led by one node (spread round-robin, as Kafka places them),
    Metadata lists every live node (``memory-NAME``, the node id as port), and
    a request for a partition sent to another node gets NOT_LEADER_OR_FOLLOWER
    with the new leader (KIP-951); each group and transactional id has its
    coordinator node (NOT_COORDINATOR elsewhere). :meth:`move_leader`,
    :meth:`stop_broker`, :meth:`start_broker` and :meth:`move_coordinator`
    change that while clients run; the records, groups and transactions stay.

    Use it as a context manager (``with`` or ``async with``) or call
    :meth:`close`: that stops the cluster's thread, and clients connecting to
    it afterwards get :class:`~kafkette.errors.KafkaConnectionError`.

    With ``in_loop=True`` the cluster has no thread: entered with ``async
    with``, it runs as tasks of that event loop, and only that loop's clients
    (async clients) may connect. Its clock then defaults to the loop's clock
    (as wall time, a :class:`~kafkette.clocks.LoopWallClock`), so broker timers
    (session, rebalance and transaction timeouts, long-poll fetches, delay
    faults) move with the loop's time: under trio's
    ``MockClock(autojump_threshold=0)`` clients and broker alike run in virtual
    time. Its inspection methods are called from the loop's thread.
    """

    def __init__(
        self,
        name: str | None = None,
        *,
        brokers: int = 1,
        clock: Callable[[], float] | None = None,
        in_loop: bool = False,
        **broker_config: Any,
    ) -> None:
        if isinstance(brokers, bool) or not isinstance(brokers, int) or brokers < 1:
            raise ValueError(f"brokers is a number of nodes (1 or more), not {brokers!r}")
        self.name = name if name is not None else f"cluster-{uuid.uuid4().hex[:12]}"
        self.bootstrap_servers = MEMORY_SCHEME + self.name
        """``memory://NAME``, for any kafkette client's ``bootstrap_servers``."""
        if clock is None:
            clock = LoopWallClock() if in_loop else ManualClock(int(time.time() * 1000))
        self.clock: Callable[[], float] = clock
        """The broker's clock (milliseconds since the epoch)."""
        properties = {key.replace("_", "."): str(value) for key, value in broker_config.items()}
        config = BrokerConfig.from_properties(properties) if properties else BrokerConfig()
        self._cluster = create_cluster(
            self.bootstrap_servers, config, self.clock, nodes=brokers, in_loop=in_loop
        )
        self._broker = self._cluster.broker
        self.closed = False

    @property
    def schema_registry_url(self) -> str:
        """``memory://NAME``, for a schema registry client (:mod:`kafkette.schema_registry`):
        the registry's core in this process, its state in this cluster's ``_schemas`` topic."""
        return self.bootstrap_servers

    @property
    def faults(self) -> FaultTable:
        """The faults armed on this cluster's broker (see :class:`FaultTable`)."""
        return self._broker.faults

    # -- lifetime ----------------------------------------------------------------------

    def close(self) -> None:
        """Stop the cluster (its records are gone); idempotent."""
        if not self.closed:
            self.closed = True
            close_cluster(self.bootstrap_servers, refuse_new=True)

    def __enter__(self) -> MemoryCluster:
        if self._cluster.in_loop:
            raise TypeError("a MemoryCluster made with in_loop=True is entered with async with")
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    async def __aenter__(self) -> MemoryCluster:
        if self._cluster.in_loop:
            if isinstance(self.clock, LoopWallClock):
                self.clock.start()
            await self._cluster.enter_loop()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            await self._cluster.exit_loop()
        finally:
            self.close()

    def __repr__(self) -> str:
        return f"MemoryCluster({self.bootstrap_servers!r}{', closed' if self.closed else ''})"

    # -- time ----------------------------------------------------------------------------

    def advance(self, seconds: float) -> None:
        """Move the broker's clock ``seconds`` forward and fire every timer due by then.

        Returns once group sessions, join and sync phases, transaction
        timeouts, retention and compaction due by the new time have been
        handled, and long-poll fetches whose wait has passed (in broker time)
        have answered: what follows in the test sees their effects.
        """
        clock = self.clock
        if isinstance(clock, LoopWallClock):
            raise TypeError(
                "advance() needs a ManualClock as the cluster's clock; this one follows its "
                "event loop's clock: sleep in the loop (trio.testing.MockClock makes it instant)"
            )
        if not isinstance(clock, ManualClock):
            raise TypeError(f"advance() needs a ManualClock as the cluster's clock, not {clock!r}")
        clock.advance(round(seconds * 1000))
        if self._cluster.in_loop:
            # In the test's own loop: the answers the timers release go out at its next await.
            self._cluster.run(self._fire_due_timers_now)
        else:
            self._cluster.call(self._fire_due_timers)

    async def _fire_due_timers(self) -> None:
        for _ in range(MAX_TIMER_ROUNDS):
            if not self._tick_due():
                break
            await anyio.wait_all_tasks_blocked()  # answers released by the ticks go out
        self._after_timers()
        await anyio.wait_all_tasks_blocked()

    def _fire_due_timers_now(self) -> None:
        for _ in range(MAX_TIMER_ROUNDS):
            if not self._tick_due():
                break
        self._after_timers()

    def _tick_due(self) -> bool:
        """Tick the coordinators with a deadline due; whether any was."""
        broker = self._broker
        now = broker.now_ms()
        due = [
            c
            for c in (broker.groups, broker.share_groups, broker.transactions)
            if (deadline := c.next_deadline_ms()) is not None and deadline <= now
        ]
        for coordinator in due:
            coordinator.tick(now)
        return bool(due)

    def _after_timers(self) -> None:
        run_once(self._broker.cluster)
        self._broker.data_changed.notify()  # long polls look at the clock again

    # -- inspection ----------------------------------------------------------------------

    def records(
        self,
        topic: str,
        partition: int | None = None,
        isolation: Literal["read_uncommitted", "read_committed"] = "read_uncommitted",
    ) -> list[ConsumerRecord]:
        """The records of ``topic`` (one partition, or all in partition order) as a
        consumer with ``isolation`` would read them from the start: up to the high
        watermark, or with ``read_committed`` up to the last stable offset without
        aborted transactions. Control records are left out."""
        if isolation not in ("read_uncommitted", "read_committed"):
            raise ValueError(f"isolation is read_uncommitted or read_committed, not {isolation!r}")
        return self._cluster.run(self._records, topic, partition, isolation == "read_committed")

    def _records(
        self, topic: str, partition: int | None, read_committed: bool
    ) -> list[ConsumerRecord]:
        found = self._broker.cluster.get_topic(topic)
        indexes = range(len(found.partitions)) if partition is None else [partition]
        out: list[ConsumerRecord] = []
        for index in indexes:
            log = self._broker.cluster.get_partition(topic, index).log
            start = log.log_start_offset
            end = log.last_stable_offset if read_committed else log.high_watermark
            if end <= start:
                continue
            data = log.read(start, 1 << 62, end).to_bytes()
            aborted = [
                (a.first_offset, a.producer_id) for a in log.aborted_transactions(start, end)
            ]
            state = PartitionState(position=start)
            fetch = CompletedFetch(
                TopicPartition(topic, index),
                state,
                start,
                data,
                end,
                aborted=aborted,
                read_committed=read_committed,
            )
            records, _ = fetch.take(end - start, None, None)
            out += [r for r in records if r.offset < end]
        return out

    def high_watermark(self, topic: str, partition: int) -> int:
        """The partition's high watermark (the offset after the last record consumers see)."""
        return self._cluster.run(self._log_offset, topic, partition, "high_watermark")

    def last_stable_offset(self, topic: str, partition: int) -> int:
        """The partition's last stable offset (the first offset of an open transaction)."""
        return self._cluster.run(self._log_offset, topic, partition, "last_stable_offset")

    def log_start_offset(self, topic: str, partition: int) -> int:
        """The partition's first offset (after retention and DeleteRecords)."""
        return self._cluster.run(self._log_offset, topic, partition, "log_start_offset")

    def _log_offset(self, topic: str, partition: int, which: str) -> int:
        log = self._broker.cluster.get_partition(topic, partition).log
        value: int = getattr(log, which)
        return value

    def committed(self, group: str) -> dict[TopicPartition, int]:
        """The offsets ``group`` has committed, by partition (none: an empty dict)."""
        return self._cluster.run(self._committed, group)

    def _committed(self, group: str) -> dict[TopicPartition, int]:
        offsets = self._broker.groups.fetch_offsets(group, None)
        return {
            TopicPartition(topic, partition): committed.offset
            for (topic, partition), committed in sorted(offsets.items())
            if committed is not None
        }

    def share_partition_state(
        self, group: str, topic: str, partition: int
    ) -> SharePartitionState | None:
        """What share group ``group`` holds of ``topic``'s ``partition``: its start and
        end offsets and each record in flight with its state, delivery count, member
        and lock deadline; None before the group first fetched from it."""
        return self._cluster.run(self._share_partition_state, group, topic, partition)

    def _share_partition_state(
        self, group: str, topic: str, partition: int
    ) -> SharePartitionState | None:
        topic_id = self._broker.cluster.get_topic(topic).topic_id
        found = self._broker.share_groups.partitions.get(ShareKey(group, topic_id, partition))
        return None if found is None else read_share_partition(found)

    def assignment(self, group: str) -> dict[str, set[TopicPartition]]:
        """The partitions each member of ``group`` was given (by member id): as the
        group's leader assigned them in its last completed rebalance (classic consumer
        groups), or as the coordinator last sent them to each member (groups of the
        consumer protocol, KIP-848)."""
        return self._cluster.run(self._assignment, group)

    def _assignment(self, group: str) -> dict[str, set[TopicPartition]]:
        if group in self._broker.consumer_groups.groups:
            described = self._broker.consumer_groups.describe(group)
            return {
                m.member_id: {
                    TopicPartition(t.topic_name, p) for t in m.assignment for p in t.partitions
                }
                for m in described.members
            }
        summary = self._broker.groups.describe_group(group)
        if summary.protocol_type != "consumer":
            return {m.member_id: set() for m in summary.members}
        return {
            m.member_id: set(decode_assignment(m.assignment).partitions) for m in summary.members
        }

    def metrics_text(self) -> str:
        """What ``kafkette serve --metrics`` would show for this cluster now: Prometheus'
        text format (requests, traffic per topic, logs, groups and lag, transactions,
        metrics clients pushed), read without HTTP."""
        return self._cluster.run(self._broker.metrics.text)

    def transactions(self) -> dict[str, str]:
        """Each live transactional id and its state as Kafka names it (``Ongoing``,
        ``CompleteCommit`` ...)."""
        return self._cluster.run(self._transactions)

    def _transactions(self) -> dict[str, str]:
        _, found = self._broker.transactions.list_transactions()
        return {meta.transactional_id: meta.state.display_name for meta in found}

    # -- nodes ---------------------------------------------------------------------------

    @property
    def nodes(self) -> list[int]:
        """The ids of the cluster's nodes (``[1]``... ``[1, ..., N]``), stopped ones too."""
        return list(self._broker.nodes.ids)

    def leader(self, topic: str, partition: int) -> int:
        """The node leading ``topic``/``partition`` now (-1: every node is stopped)."""
        return self._cluster.run(self._leader, topic, partition)

    def _leader(self, topic: str, partition: int) -> int:
        found = self._broker.cluster.get_partition(topic, partition)
        return self._broker.nodes.leader(found) if self._broker.nodes.multi else self.nodes[0]

    def replicas(self, topic: str, partition: int) -> list[int]:
        """The nodes replicating ``topic``/``partition``, its preferred leader first
        (topics created with a replication factor up to the node count)."""
        return self._cluster.run(self._replica_list, topic, partition, False)

    def isr(self, topic: str, partition: int) -> list[int]:
        """The in-sync replicas of ``topic``/``partition``: :meth:`stop_broker` takes a
        node out of them, :meth:`start_broker` puts it back."""
        return self._cluster.run(self._replica_list, topic, partition, True)

    def _replica_list(self, topic: str, partition: int, in_sync: bool) -> list[int]:
        found = self._broker.cluster.get_partition(topic, partition)
        nodes = self._broker.nodes
        if not nodes.multi:
            return [self.nodes[0]]
        return nodes.isr(found) if in_sync else nodes.replicas(found)

    def leader_epoch(self, topic: str, partition: int) -> int:
        """The partition's leader epoch (each leader move bumps it)."""
        return self._cluster.run(self._leader_epoch, topic, partition)

    def _leader_epoch(self, topic: str, partition: int) -> int:
        return self._broker.cluster.get_partition(topic, partition).leader_epoch

    def move_leader(self, topic: str, partition: int, node: int) -> None:
        """Make ``node`` lead ``topic``/``partition``, as a reassignment or a preferred
        leader election would: its leader epoch is bumped (unless ``node`` leads it
        already) and requests for it to any other node get NOT_LEADER_OR_FOLLOWER.
        ``node`` must be an in-sync replica (ValueError otherwise); a partition of one
        replica moves to any live node."""
        self._need_nodes("move_leader")
        self._cluster.run(self._move_leader, topic, partition, node)

    def _move_leader(self, topic: str, partition: int, node: int) -> None:
        found = self._broker.cluster.get_partition(topic, partition)
        if self._broker.nodes.move_leader(found, node):
            self._broker.data_changed.notify()  # long polls at the old leader answer now

    def stop_broker(self, node: int) -> None:
        """Stop ``node``: its connections drop, it accepts none, Metadata no longer lists
        it, it leaves the ISR of its partitions, the partitions it led move to their
        next in-sync replica (one replica: the next live node) and the keys it
        coordinated to the next live nodes (leader epochs bumped). A partition whose
        in-sync replicas are all stopped has no leader until the last of them starts."""
        self._need_nodes("stop_broker")
        self._cluster.run(self._stop_broker, node)
        self._cluster.drop_connections(node)

    def _stop_broker(self, node: int) -> None:
        broker = self._broker
        broker.nodes.stop(node, list(broker.cluster.partitions()))
        broker.data_changed.notify()

    def start_broker(self, node: int) -> None:
        """Start a stopped ``node`` again: it is listed and accepts connections, rejoins the
        ISR of its partitions, and partitions and keys left without a node take it.
        Leaders that moved away stay where they are (move them back with
        :meth:`move_leader`)."""
        self._need_nodes("start_broker")
        self._cluster.run(self._start_broker, node)

    def _start_broker(self, node: int) -> None:
        broker = self._broker
        broker.nodes.start(node, list(broker.cluster.partitions()))

    def coordinator(self, key: str, key_type: Literal["group", "transaction"] = "group") -> int:
        """The node coordinating group (or transactional id) ``key``."""
        return self._cluster.run(self._coordinator, key, key_type)

    def _coordinator(self, key: str, key_type: str) -> int:
        nodes = self._broker.nodes
        return nodes.coordinator(_key_type(key_type), key) if nodes.multi else self.nodes[0]

    def move_coordinator(
        self,
        group_or_txn_id: str,
        node: int,
        key_type: Literal["group", "transaction", "both"] = "both",
    ) -> None:
        """Make ``node`` the coordinator of a group and/or transactional id (by default
        both namespaces of that name): requests about it at other nodes get
        NOT_COORDINATOR, and FindCoordinator answers ``node``. The group's members,
        offsets and transactions stay as they are."""
        self._need_nodes("move_coordinator")
        self._cluster.run(self._move_coordinator, group_or_txn_id, node, key_type)

    def _move_coordinator(self, key: str, node: int, key_type: str) -> None:
        types = (GROUP, TRANSACTION) if key_type == "both" else (_key_type(key_type),)
        for kind in types:
            self._broker.nodes.move_coordinator(kind, key, node)

    def _need_nodes(self, what: str) -> None:
        if not self._broker.nodes.multi:
            raise ValueError(f"{what}() needs a cluster of several nodes: MemoryCluster(brokers=N)")


def _key_type(name: str) -> int:
    if name == "group":
        return GROUP
    if name == "transaction":
        return TRANSACTION
    raise ValueError(f"key_type is 'group' or 'transaction', not {name!r}")
