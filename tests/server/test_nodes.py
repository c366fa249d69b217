"""NodeTable: leaders and coordinators of a simulated multi-node cluster, without I/O."""

from __future__ import annotations

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kafkette.backends import LogConfig, MemoryStorage
from kafkette.server.cluster import Partition
from kafkette.server.nodes import GROUP, NO_LEADER, TRANSACTION, numbered_nodes, single_node


def partitions(topic: str, count: int) -> list[Partition]:
    storage = MemoryStorage(clock=lambda: 0, default_config=LogConfig())
    return [Partition(topic, i, storage.open_log(topic, i, LogConfig())) for i in range(count)]


def table(n: int = 3):  # type: ignore[no-untyped-def]
    return numbered_nodes([("h", 9000 + i) for i in range(n)])


def test_single_node_routes_nothing() -> None:
    """One node: every partition and key is served wherever the request arrives."""
    nodes = single_node(1, ("h", 9092))
    [p] = partitions("t", 1)
    assert not nodes.multi
    assert nodes.leads(7, p) and nodes.coordinates(7, GROUP, "g")


def test_leaders_spread_round_robin_from_a_per_topic_start() -> None:
    """The partitions of a topic take consecutive nodes, wrapping around."""
    nodes = table(3)
    ps = partitions("orders", 6)
    leaders = [nodes.leader(p) for p in ps]
    first = leaders[0]
    assert leaders == [((first - 1 + i) % 3) + 1 for i in range(6)]
    assert all(p.leader_epoch == 0 for p in ps)
    assert nodes.leads(leaders[1], ps[1]) and not nodes.leads(leaders[0], ps[1])


def test_move_bumps_the_epoch_once() -> None:
    nodes = table(3)
    [p] = partitions("t", 1)
    other = next(n for n in nodes.ids if n != nodes.leader(p))
    assert nodes.move_leader(p, other) is True
    assert (nodes.leader(p), p.leader_epoch) == (other, 1)
    assert nodes.move_leader(p, other) is False
    assert p.leader_epoch == 1


def test_move_to_unknown_or_stopped_node_is_refused() -> None:
    nodes = table(3)
    ps = partitions("t", 1)
    with pytest.raises(ValueError, match="node 9 is not in this cluster"):
        nodes.move_leader(ps[0], 9)
    nodes.stop(2, ps)
    with pytest.raises(ValueError, match="node 2 is stopped"):
        nodes.move_leader(ps[0], 2)
    with pytest.raises(ValueError, match="node 2 is stopped"):
        nodes.move_coordinator(GROUP, "g", 2)


def test_stop_moves_partitions_and_coordinators_to_the_next_live_node() -> None:
    nodes = table(3)
    ps = partitions("t", 3)
    nodes.move_coordinator(GROUP, "g", 2)
    nodes.move_coordinator(TRANSACTION, "tx", 3)
    led_by_2 = [p for p in ps if nodes.leader(p) == 2]
    assert len(led_by_2) == 1
    nodes.stop(2, ps)
    assert nodes.live() == [1, 3]
    assert [nodes.leader(p) for p in led_by_2] == [3]
    assert led_by_2[0].leader_epoch == 1
    assert nodes.coordinator(GROUP, "g") == 3
    assert nodes.coordinator(TRANSACTION, "tx") == 3
    assert sorted(p.leader_epoch for p in ps) == [0, 0, 1]


def test_all_stopped_leaves_no_leader_until_one_starts() -> None:
    nodes = table(2)
    ps = partitions("t", 2)
    nodes.coordinator(GROUP, "g")
    nodes.stop(1, ps)
    nodes.stop(2, ps)
    assert [nodes.leader(p) for p in ps] == [NO_LEADER, NO_LEADER]
    assert nodes.coordinator(GROUP, "g") == NO_LEADER
    nodes.start(2, ps)
    assert [nodes.leader(p) for p in ps] == [2, 2]
    assert nodes.coordinator(GROUP, "g") == 2
    assert nodes.coordinator(GROUP, "new-group") == 2


def test_coordinator_is_stable_until_moved() -> None:
    nodes = table(3)
    first = nodes.coordinator(GROUP, "g")
    assert nodes.coordinator(GROUP, "g") == first
    target = next(n for n in nodes.ids if n != first)
    nodes.move_coordinator(GROUP, "g", target)
    assert nodes.coordinates(target, GROUP, "g") and not nodes.coordinates(first, GROUP, "g")


class NodeMachine(RuleBasedStateMachine):
    """Any sequence of moves, stops and starts keeps the table consistent."""

    def __init__(self) -> None:
        super().__init__()
        self.nodes = table(4)
        self.parts = partitions("t", 5)
        self.epochs = [0] * 5
        self.leaders = [self.nodes.leader(p) for p in self.parts]

    def _record(self) -> None:
        for i, p in enumerate(self.parts):
            leader = self.nodes.leader(p)
            if leader != self.leaders[i]:
                assert p.leader_epoch > self.epochs[i], "a leader change bumps the epoch"
            else:
                assert p.leader_epoch == self.epochs[i], "no change, no bump"
            self.leaders[i], self.epochs[i] = leader, p.leader_epoch

    @rule(index=st.integers(0, 4), node=st.integers(1, 4))
    def move(self, index: int, node: int) -> None:
        if node in self.nodes.stopped:
            with pytest.raises(ValueError):
                self.nodes.move_leader(self.parts[index], node)
        else:
            self.nodes.move_leader(self.parts[index], node)
        self._record()

    @rule(node=st.integers(1, 4))
    def stop(self, node: int) -> None:
        self.nodes.stop(node, self.parts)
        self._record()

    @rule(node=st.integers(1, 4))
    def start(self, node: int) -> None:
        self.nodes.start(node, self.parts)
        self._record()

    @rule(key=st.sampled_from(["a", "b", "c"]))
    def coordinator(self, key: str) -> None:
        found = self.nodes.coordinator(GROUP, key)
        assert (found == NO_LEADER) == (not self.nodes.live())

    @invariant()
    def leaders_are_live(self) -> None:
        live = self.nodes.live()
        for p in self.parts:
            leader = self.nodes.leader(p)
            if live:
                assert leader in live
            else:
                assert leader == NO_LEADER


TestNodeMachine = NodeMachine.TestCase
