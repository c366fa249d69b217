"""The nodes of a simulated cluster: each partition's replicas, ISR and leader; coordinators.

One broker core can stand for several Kafka nodes (``MemoryCluster(brokers=N)``,
``kafkette serve --nodes N``): every node serves the same topics, logs, groups
and transactions, and :class:`NodeTable` is the routing layer on top. It says
which nodes replicate each partition, which of them are in sync and which
leads it, which node coordinates each group and transactional id, which nodes
are stopped, and moves leaders and coordinators as Kafka's controller would.
Handlers ask it whether the node a request reached (:data:`serving_node`, set
by the transport for each connection) may serve it, and answer
NOT_LEADER_OR_FOLLOWER or NOT_COORDINATOR otherwise.

**Replicas.** A partition's data is one log in the core; only what clients
observe is simulated. A topic created with replication factor R gets R
replicas per partition, placed as Kafka's rack-unaware assignment does
(:meth:`NodeTable.place`: the first replica of partition p on node
``ids[(start + p) % N]``, the others shifted round-robin after it), with the
random start and shift of Kafka derived from the topic name instead, so that
tests are deterministic. The first replica is the preferred leader; the ISR
holds the replicas whose node runs. Stopping a node removes it from the ISR
of its partitions (never the last member, as Kafka keeps it) and moves the
leadership of those it led to the next in-sync replica, bumping the leader
epoch; with none left the partition has no leader (LEADER_NOT_AVAILABLE)
until the last in-sync replica starts again. Starting a node puts it back in
the ISR of its partitions that have a leader (it catches up at once: the log
is shared). ``min.insync.replicas`` is checked against the ISR for acks=all
(:meth:`NodeTable.not_enough_replicas`), as Kafka's leader does before an
append.

A partition with one replica keeps the behaviour tests of leader moves rely
on: its replica goes with its leader, so stopping its node moves it to the
next live node, and a move names any live node (a reassignment of its one
replica, which is what Kafka's AlterPartitionReassignments with one node
does).

**Fetch from follower (KIP-392).** With ``replica.selector.class`` set to
Kafka's ``RackAwareReplicaSelector`` and racks given to the nodes
(``broker.rack``: one rack per node, comma-separated), a consumer's Fetch to
the leader carrying a ``client.rack`` is answered with the in-sync replica
in that rack as ``preferred_read_replica`` (the leader itself when it is in
that rack, or when none is), and a follower in the ISR serves consumers'
fetches (version 11 on, as Kafka's followers do) for the partitions it
replicates.

A group's or transactional id's coordinator is chosen on first look-up (from
a hash of the key) and stays there until moved or stopped.

With one node (the default) nothing is routed: :attr:`NodeTable.multi` is
False and every request is served, exactly as a single broker does.

The table does no I/O and keeps no time; it is driven by the test hooks
(:class:`~kafkette.testing.MemoryCluster`, the ``kafkette.fault.stop_broker`` and
``start_broker`` commands of ``kafkette serve --enable-fault-injection``), by
CreateTopics and CreatePartitions, and by AlterPartitionReassignments.
"""

from __future__ import annotations

import contextvars
import zlib
from collections.abc import Iterable, Sequence

from kafkette.errors import (
    ConfigError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    NotEnoughReplicasError,
)
from kafkette.server.cluster import Partition

GROUP = 0
TRANSACTION = 1
"""Coordinator key types, as FindCoordinator numbers them."""

NO_LEADER = -1
NO_REPLICA = -1
"""``preferred_read_replica`` when the client is to keep fetching from the leader."""

RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
"""The ``replica.selector.class`` that turns on fetch-from-follower (KIP-392)."""
CONSUMER_FOLLOWER_FETCH_VERSION = 11
"""The first Fetch version carrying client metadata (``rack_id``): from it on a
follower serves a consumer's fetch, as Kafka's does."""

serving_node: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "kafkette_serving_node", default=None
)
"""The node the current request's connection reached (None: the only node).

Set by the transport before it serves a connection's requests (the TCP
listener per listening socket, the in-process transport per request)."""


def node_racks(setting: str | None, count: int) -> list[str | None]:
    """The rack of each of ``count`` nodes from the ``broker.rack`` setting: one rack
    for all, or one per node, comma-separated (raises :class:`ConfigError`)."""
    if setting is None or not setting.strip():
        return [None] * count
    racks = [r.strip() for r in setting.split(",")]
    if len(racks) == 1:
        return [racks[0]] * count
    if len(racks) != count or not all(racks):
        raise ConfigError(
            "broker.rack",
            f"expected one rack for all {count} nodes or one per node (comma-separated), "
            f"got {setting!r}",
        )
    return list(racks)


class NodeTable:
    """Node ids, their addresses and racks, the stopped ones, replicas and coordinators."""

    def __init__(
        self,
        addresses: dict[int, tuple[str, int]],
        racks: dict[int, str | None] | None = None,
        *,
        rack_aware: bool = False,
    ) -> None:
        if not addresses:
            raise ValueError("a cluster needs at least one node")
        self.ids: tuple[int, ...] = tuple(sorted(addresses))
        self.addresses = dict(addresses)
        """Node id -> advertised (host, port)."""
        self.racks: dict[int, str | None] = {n: (racks or {}).get(n) for n in self.ids}
        """Node id -> its ``broker.rack`` (None: no rack)."""
        self.rack_aware = rack_aware
        """Whether ``replica.selector.class`` is Kafka's RackAwareReplicaSelector."""
        self.multi = len(self.ids) > 1
        """Whether requests are routed at all (False: one node serves everything)."""
        self.stopped: set[int] = set()
        self._coordinators: dict[tuple[int, str], int] = {}

    # ---- nodes

    def live(self) -> list[int]:
        """The ids of the nodes that run, in order."""
        return [n for n in self.ids if n not in self.stopped]

    def check_node(self, node: int) -> None:
        """Raise ValueError unless ``node`` is a node of this cluster."""
        if node not in self.addresses:
            raise ValueError(f"node {node} is not in this cluster (nodes {list(self.ids)})")

    def is_live(self, node: int | None) -> bool:
        return node is None or node not in self.stopped

    def _pick(self, start: int) -> int:
        """The first live node from position ``start`` on (round-robin); NO_LEADER if none."""
        count = len(self.ids)
        for step in range(count):
            node = self.ids[(start + step) % count]
            if node not in self.stopped:
                return node
        return NO_LEADER

    # ---- placement

    def place(self, topic: str, first: int, count: int, factor: int) -> list[list[int]]:
        """Replicas for partitions ``first`` .. ``first + count - 1`` of ``topic``, as
        Kafka's rack-unaware assignment spreads them; raises INVALID_REPLICATION_FACTOR
        with Kafka's message when there are fewer nodes than ``factor``."""
        nodes = len(self.ids)
        if factor > nodes:
            raise InvalidReplicationFactorError(
                f"Unable to replicate the partition {factor} time(s): The target replication "
                f"factor of {factor} cannot be reached because only {nodes} broker(s) are "
                "registered."
            )
        if not self.live():
            raise InvalidReplicationFactorError(
                f"Unable to replicate the partition {factor} time(s): All brokers are "
                "currently fenced or in controlled shutdown."
            )
        start = zlib.crc32(topic.encode())
        shift = start % nodes
        placed: list[list[int]] = []
        for partition in range(first, first + count):
            if partition > 0 and partition % nodes == 0:
                shift += 1
            if factor == 1:  # as Kafka's placer, a running node first
                placed.append([self._pick(start + partition)])
                continue
            leader = (start + partition) % nodes
            followers = (
                (leader + 1 + (shift + j) % (nodes - 1)) % nodes for j in range(factor - 1)
            )
            placed.append([self.ids[leader], *(self.ids[f] for f in followers)])
        return placed

    def check_assignment(self, replicas: Sequence[int], factor: int | None) -> None:
        """Kafka's checks of a manual assignment of one partition (``factor``: that of
        the partitions before it); raises INVALID_REPLICA_ASSIGNMENT."""
        if not replicas:
            raise InvalidReplicaAssignmentError(
                "The manual partition assignment includes an empty replica list."
            )
        previous = None
        for node in sorted(replicas):
            if node not in self.addresses:
                raise InvalidReplicaAssignmentError(
                    f"The manual partition assignment includes broker {node}, but no such "
                    "broker is registered."
                )
            if node == previous:
                raise InvalidReplicaAssignmentError(
                    f"The manual partition assignment includes the broker {node} more than once."
                )
            previous = node
        if factor is not None and len(replicas) != factor:
            raise InvalidReplicaAssignmentError(
                f"The manual partition assignment includes a partition with {len(replicas)} "
                "replica(s), but this is not consistent with previous partitions, which have "
                f"{factor} replica(s)."
            )

    def check_assigned_live(self, replicas: Sequence[int], index: int) -> None:
        """Kafka's refusal of a manual assignment whose nodes are all stopped."""
        if all(n in self.stopped for n in replicas):
            raise InvalidReplicaAssignmentError(
                f"All brokers specified in the manual partition assignment for partition "
                f"{index} are fenced or in controlled shutdown."
            )

    # ---- partitions

    def _settle(self, partition: Partition) -> list[int]:
        """The replicas of ``partition``, its ISR and leader chosen on first look."""
        replicas = partition.replicas
        if replicas is not None and not all(n in self.addresses for n in replicas):
            # Kept in the data directory by a broker that stood for more nodes.
            replicas = partition.replicas = [n for n in replicas if n in self.addresses] or None
        if replicas is None:
            # A topic created without placement (one replica): the leader is its replica.
            start = zlib.crc32(partition.topic.encode()) + partition.index
            leader = partition.leader_id
            if leader is None:
                leader = partition.leader_id = self._pick(start)
            replicas = partition.replicas = [
                leader if leader != NO_LEADER else self.ids[start % len(self.ids)]
            ]
        if partition.isr is None:
            partition.isr = [n for n in replicas if n not in self.stopped] or replicas[:1]
        if partition.leader_id is None:
            partition.leader_id = next(
                (n for n in replicas if n in partition.isr and n not in self.stopped), NO_LEADER
            )
        return replicas

    def replicas(self, partition: Partition) -> list[int]:
        """The nodes replicating ``partition``, the preferred leader first."""
        return list(self._settle(partition))

    def isr(self, partition: Partition) -> list[int]:
        """The in-sync replicas of ``partition``."""
        self._settle(partition)
        return list(partition.isr or ())

    def offline(self, partition: Partition) -> list[int]:
        """The replicas of ``partition`` whose node is stopped."""
        return [n for n in self._settle(partition) if n in self.stopped]

    def leader(self, partition: Partition) -> int:
        """The node leading ``partition`` (NO_LEADER while it has none)."""
        self._settle(partition)
        leader = partition.leader_id
        return NO_LEADER if leader is None else leader

    def leads(self, node: int | None, partition: Partition) -> bool:
        """Whether a request that reached ``node`` may be served for ``partition``."""
        return node is None or not self.multi or self.leader(partition) == node

    def serves_fetch(self, node: int | None, partition: Partition, version: int) -> bool:
        """Whether a consumer's Fetch of ``version`` that reached ``node`` is served for
        ``partition``: at its leader, and from version 11 at an in-sync follower."""
        if self.leads(node, partition):
            return True
        return (
            version >= CONSUMER_FOLLOWER_FETCH_VERSION
            and node in self.isr(partition)
            and self.leader(partition) != NO_LEADER
        )

    def preferred_read_replica(self, node: int | None, partition: Partition, rack: str) -> int:
        """The replica a consumer in ``rack`` fetching at ``node`` should read from, as
        Kafka's leader answers with RackAwareReplicaSelector; NO_REPLICA for none (the
        leader itself, a follower answering, no selector, no client rack)."""
        if not self.multi or not self.rack_aware or not rack or node is None:
            return NO_REPLICA
        if self.leader(partition) != node:
            return NO_REPLICA
        same_rack = [n for n in self.isr(partition) if self.racks.get(n) == rack]
        if not same_rack or node in same_rack:
            return NO_REPLICA
        return same_rack[0]  # every in-sync replica is as caught up as the leader here

    def not_enough_replicas(self, partition: Partition) -> NotEnoughReplicasError | None:
        """Kafka's refusal of an acks=all write while the ISR is smaller than
        ``min.insync.replicas`` (at most the replica count); None when it may be written."""
        replicas = self._settle(partition)
        wanted = min(partition.log.config.min_insync_replicas, len(replicas))
        isr = partition.isr or []
        if len(isr) >= wanted:
            return None
        return NotEnoughReplicasError(
            f"The size of the current ISR Set({', '.join(map(str, isr))}) is insufficient to "
            f"satisfy the min.isr requirement of {wanted} for partition "
            f"{partition.topic}-{partition.index}"
        )

    def assign(self, partition: Partition, replicas: Sequence[int]) -> None:
        """Give a new partition its replicas: the running ones in sync, the first of
        them leading."""
        partition.replicas = list(replicas)
        partition.isr = None
        partition.leader_id = None
        self._settle(partition)

    def reassign(self, partition: Partition, replicas: Sequence[int]) -> bool:
        """Give ``partition`` the replicas ``replicas`` at once (a reassignment that
        completes as it starts: the data is shared); whether its leader changed.

        As Kafka, the leader stays unless it is not among them, and then the first
        running one of them leads (leader epoch bumped); the running ones are in sync.
        Raises INVALID_REPLICA_ASSIGNMENT for an unknown node, one named twice, or none
        running."""
        self.check_assignment(replicas, None)
        if all(n in self.stopped for n in replicas):
            raise InvalidReplicaAssignmentError(
                f"replica assignment {list(replicas)} has brokers that are not alive "
                f"(live: {self.live()})"
            )
        self._settle(partition)
        before = partition.leader_id
        partition.replicas = list(replicas)
        partition.isr = [n for n in replicas if n not in self.stopped]
        if before in partition.isr:
            return False
        partition.leader_id = partition.isr[0]
        partition.leader_epoch += 1
        return True

    def move_leader(self, partition: Partition, node: int) -> bool:
        """Make ``node`` lead ``partition``, bumping its leader epoch; False if it already did.

        ``node`` must be an in-sync replica (with one replica: any live node, which the
        replica moves to)."""
        self.check_node(node)
        if node in self.stopped:
            raise ValueError(
                f"node {node} is stopped: it cannot lead {partition.topic}-{partition.index}"
            )
        replicas = self._settle(partition)
        if self.leader(partition) == node:
            return False
        if len(replicas) == 1:
            partition.replicas = partition.isr = [node]
        elif node not in (partition.isr or ()):
            raise ValueError(
                f"node {node} is not an in-sync replica of {partition.topic}-{partition.index} "
                f"(replicas {replicas}, ISR {partition.isr})"
            )
        partition.leader_id = node
        partition.leader_epoch += 1
        return True

    # ---- coordinators

    def coordinator(self, key_type: int, key: str) -> int:
        """The node coordinating ``key`` (a group id, or a transactional id)."""
        found = self._coordinators.get((key_type, key))
        if found is None or found == NO_LEADER:
            found = self._pick(zlib.crc32(key.encode()))
            if found != NO_LEADER:
                self._coordinators[(key_type, key)] = found
        return found

    def coordinates(self, node: int | None, key_type: int, key: str) -> bool:
        """Whether a request that reached ``node`` may be served for ``key``."""
        return node is None or not self.multi or self.coordinator(key_type, key) == node

    def move_coordinator(self, key_type: int, key: str, node: int) -> None:
        """Make ``node`` coordinate ``key`` from now on."""
        self.check_node(node)
        if node in self.stopped:
            raise ValueError(f"node {node} is stopped: it cannot coordinate {key!r}")
        self._coordinators[(key_type, key)] = node

    # ---- stopping and starting

    def stop(self, node: int, partitions: Iterable[Partition]) -> None:
        """Stop ``node``: it leaves the ISR of its partitions, those it led move to the
        next in-sync replica, its coordinators to the next live nodes."""
        self.check_node(node)
        if node in self.stopped:
            return
        for partition in partitions:
            self._settle(partition)  # as before the stop
        self.stopped.add(node)
        for partition in partitions:
            self._stopped(partition, node)
        for key, owner in self._coordinators.items():
            if owner == node:
                self._coordinators[key] = self._pick(self.ids.index(node) + 1)

    def _stopped(self, partition: Partition, node: int) -> None:
        replicas = self._settle(partition)
        isr = partition.isr or []
        if len(replicas) == 1:
            if partition.leader_id == node:  # the one replica goes to the next live node
                moved = self._pick(self.ids.index(node) + 1)
                partition.leader_id = moved
                if moved != NO_LEADER:
                    partition.replicas = partition.isr = [moved]
                partition.leader_epoch += 1
            return
        if node in isr and len(isr) > 1:
            isr.remove(node)
        if partition.leader_id == node:
            partition.leader_id = next(
                (n for n in replicas if n in isr and n not in self.stopped), NO_LEADER
            )
            partition.leader_epoch += 1

    def start(self, node: int, partitions: Iterable[Partition]) -> None:
        """Start ``node`` again: it rejoins the ISR of its partitions that have a leader
        and leads those whose last in-sync replica it was; partitions and coordinators
        left without a node take it."""
        self.check_node(node)
        self.stopped.discard(node)
        for partition in partitions:
            replicas = self._settle(partition)
            isr = partition.isr or []
            if partition.leader_id == NO_LEADER:
                if len(replicas) == 1:
                    partition.replicas = partition.isr = [node]
                elif node not in isr:
                    continue  # Kafka waits for the last in-sync replica (no unclean election)
                partition.leader_id = node
                partition.leader_epoch += 1
                # The running followers catch up with the new leader.
                isr.extend(n for n in replicas if n not in isr and n not in self.stopped)
            elif node in replicas and node not in isr:
                isr.append(node)
        for key, owner in self._coordinators.items():
            if owner == NO_LEADER:
                self._coordinators[key] = node


def single_node(node_id: int, address: tuple[str, int], rack: str | None = None) -> NodeTable:
    """The table of a lone broker: no routing."""
    return NodeTable({node_id: address}, {node_id: rack})


def numbered_nodes(
    addresses: Sequence[tuple[str, int]],
    rack_setting: str | None = None,
    selector: str | None = None,
) -> NodeTable:
    """Nodes 1..N at ``addresses`` (node i at ``addresses[i - 1]``), their racks from the
    ``broker.rack`` setting (:func:`node_racks`), fetch-from-follower on when
    ``selector`` (``replica.selector.class``) is Kafka's RackAwareReplicaSelector."""
    racks = node_racks(rack_setting, len(addresses))
    return NodeTable(
        {i + 1: address for i, address in enumerate(addresses)},
        {i + 1: rack for i, rack in enumerate(racks)},
        rack_aware=(selector or "").strip() == RACK_AWARE_SELECTOR,
    )
