"""The nodes of a simulated cluster: which node leads each partition and coordinates each key.

One broker core can stand for several Kafka nodes (``MemoryCluster(brokers=N)``,
``kafkette serve --nodes N``): every node serves the same topics, logs, groups
and transactions, and :class:`NodeTable` is the routing layer on top. It says
which node leads each partition and which coordinates each group and
transactional id, which nodes are stopped, and moves leaders and coordinators
as Kafka's controller would. Handlers ask it whether the node a request
reached (:data:`serving_node`, set by the transport for each connection) may
serve it, and answer NOT_LEADER_OR_FOLLOWER or NOT_COORDINATOR otherwise.

A partition's leader is chosen when it is first looked at: node
``ids[(start + index) % N]``, ``start`` derived from the topic name, so the
partitions of a topic are spread round-robin from a per-topic starting node
as Kafka's replica placement does (deterministically, for tests); a stopped
node is skipped. Each move bumps the partition's leader epoch, which clients
use to fence stale requests (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH).

A group's or transactional id's coordinator is chosen the same way on first
look-up (from a hash of the key) and stays there until moved or stopped.

With one node (the default) nothing is routed: :attr:`NodeTable.multi` is
False and every request is served, exactly as a single broker does.

The table does no I/O and keeps no time; it is driven by the test hooks
(:class:`~kafkette.testing.MemoryCluster`) and by AlterPartitionReassignments.
"""

from __future__ import annotations

import contextvars
import zlib
from collections.abc import Iterable, Sequence

from kafkette.server.cluster import Partition

GROUP = 0
TRANSACTION = 1
"""Coordinator key types, as FindCoordinator numbers them."""

NO_LEADER = -1

serving_node: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "kafkette_serving_node", default=None
)
"""The node the current request's connection reached (None: the only node).

Set by the transport before it serves a connection's requests (the TCP
listener per listening socket, the in-process transport per request)."""


class NodeTable:
    """Node ids, their addresses, the stopped ones, partition leaders and coordinators."""

    def __init__(self, addresses: dict[int, tuple[str, int]]) -> None:
        if not addresses:
            raise ValueError("a cluster needs at least one node")
        self.ids: tuple[int, ...] = tuple(sorted(addresses))
        self.addresses = dict(addresses)
        """Node id -> advertised (host, port)."""
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

    # ---- partitions

    def leader(self, partition: Partition) -> int:
        """The node leading ``partition`` (NO_LEADER while every node is stopped)."""
        leader = partition.leader_id
        if leader is None:
            start = zlib.crc32(partition.topic.encode()) + partition.index
            leader = partition.leader_id = self._pick(start)
        return leader

    def leads(self, node: int | None, partition: Partition) -> bool:
        """Whether a request that reached ``node`` may be served for ``partition``."""
        return node is None or not self.multi or self.leader(partition) == node

    def move_leader(self, partition: Partition, node: int) -> bool:
        """Make ``node`` lead ``partition``, bumping its leader epoch; False if it already did."""
        self.check_node(node)
        if node in self.stopped:
            raise ValueError(
                f"node {node} is stopped: it cannot lead {partition.topic}-{partition.index}"
            )
        if self.leader(partition) == node:
            return False
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
        """Stop ``node``: its partitions and coordinators move to the next live nodes."""
        self.check_node(node)
        if node in self.stopped:
            return
        self.stopped.add(node)
        for partition in partitions:
            if self.leader(partition) == node:
                self._elect(partition)
        for key, owner in self._coordinators.items():
            if owner == node:
                self._coordinators[key] = self._pick(self.ids.index(node) + 1)

    def start(self, node: int, partitions: Iterable[Partition]) -> None:
        """Start ``node`` again: partitions and coordinators left without a node take it."""
        self.check_node(node)
        self.stopped.discard(node)
        for partition in partitions:
            if self.leader(partition) == NO_LEADER:
                partition.leader_id = node
                partition.leader_epoch += 1
        for key, owner in self._coordinators.items():
            if owner == NO_LEADER:
                self._coordinators[key] = node

    def _elect(self, partition: Partition) -> None:
        """Give ``partition`` the next live node after its leader (NO_LEADER if none)."""
        current = self.leader(partition)
        position = self.ids.index(current) + 1 if current in self.ids else 0
        partition.leader_id = self._pick(position)
        partition.leader_epoch += 1


def single_node(node_id: int, address: tuple[str, int]) -> NodeTable:
    """The table of a lone broker: no routing."""
    return NodeTable({node_id: address})


def numbered_nodes(addresses: Sequence[tuple[str, int]]) -> NodeTable:
    """Nodes 1..N at ``addresses`` (node i at ``addresses[i - 1]``)."""
    return NodeTable({i + 1: address for i, address in enumerate(addresses)})
