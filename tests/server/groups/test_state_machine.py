"""Random sequences of group requests and clock moves: the engine keeps its invariants, and
every JoinGroup and SyncGroup gets exactly one answer in the end."""

from __future__ import annotations

from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from kafkette.server.groups.engine import JoinParams
from kafkette.server.groups.group import (
    VALID_PREVIOUS_STATES,
    ClassicGroupState,
    Group,
    JoinResult,
    SyncResult,
)
from tests.server.groups.harness import Harness

MEMBERS = 3
PROTOCOLS = [
    (("range", b"a"),),
    (("range", b"b"), ("roundrobin", b"b")),
    (("roundrobin", b"c"), ("range", b"c")),
    (("roundrobin", b"d"),),
]

join_op = st.tuples(
    st.just("join"),
    st.integers(0, MEMBERS - 1),
    st.sampled_from([0, 1, 2, 2, 3]),
    st.sampled_from([False] * 3 + [True]),
)
sync_op = st.tuples(st.just("sync"), st.integers(0, MEMBERS - 1), st.booleans())
operations = st.lists(
    st.one_of(
        join_op,
        join_op,
        sync_op,
        sync_op,
        st.tuples(st.just("heartbeat"), st.integers(0, MEMBERS - 1)),
        st.tuples(st.just("leave"), st.integers(0, MEMBERS - 1)),
        st.tuples(st.just("commit"), st.integers(0, MEMBERS - 1)),
        st.tuples(st.just("advance"), st.sampled_from([1, 1_000, 1_000, 5_000, 20_000])),
    ),
    max_size=50,
)


class Client:
    """What one member knows: its id, generation, and every answer it got."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.member_id = ""
        self.generation = -1
        self.instance = f"static-{index}" if index == 2 else None
        self.joins: list[list[JoinResult]] = []
        self.syncs: list[list[SyncResult]] = []

    def catch_up(self) -> None:
        """Take the member id and generation from the answers that came in meanwhile."""
        for answers in self.joins:
            if answers and answers[0].member_id and answers[0].error_code in (0, 79):
                self.member_id = answers[0].member_id
                self.generation = answers[0].generation_id


def check_invariants(group: Group) -> None:
    assert group.state in VALID_PREVIOUS_STATES
    if group.is_in(ClassicGroupState.EMPTY, ClassicGroupState.DEAD):
        assert not group.members
    if group.is_in(ClassicGroupState.STABLE, ClassicGroupState.COMPLETING_REBALANCE):
        assert group.members and group.leader_id in group.members
        assert group.protocol_name is not None
        assert all(group.protocol_name in m.protocol_names() for m in group.members.values())
    if group.is_in(ClassicGroupState.PREPARING_REBALANCE):
        assert group.join_deadline_ms is not None
    if not group.is_in(ClassicGroupState.COMPLETING_REBALANCE):
        assert not any(m.awaiting_sync for m in group.members.values())
    for instance, member_id in group.static_members.items():
        assert group.members[member_id].group_instance_id == instance
    assert group.pending_sync <= set(group.members)


@settings(max_examples=300, deadline=None)
@given(operations)
def test_random_operations_keep_invariants_and_answer_everyone(ops: list[Any]) -> None:
    h = Harness()
    clients = [Client(i) for i in range(MEMBERS)]
    generations: list[int] = []
    for op in ops:
        kind, *args = op
        if kind == "advance":
            h.advance(args[0])
        else:
            client = clients[args[0]]
            client.catch_up()
            if kind == "join":
                protocols, fresh = PROTOCOLS[args[1]], args[2]
                member_id = "" if fresh else client.member_id
                results: list[JoinResult] = []
                h.engine.join(
                    h.now,
                    JoinParams(
                        group_id="g",
                        member_id=member_id,
                        group_instance_id=client.instance,
                        client_id=f"c{client.index}",
                        session_timeout_ms=10_000,
                        rebalance_timeout_ms=15_000,
                        protocol_type="consumer",
                        protocols=protocols,
                    ),
                    results.append,
                )
                client.joins.append(results)
            elif kind == "sync":
                assignments = {c.member_id: b"x" for c in clients} if args[1] else {}
                client.syncs.append(
                    h.sync(
                        client.member_id, client.generation, assignments, instance=client.instance
                    )
                )
            elif kind == "heartbeat":
                h.heartbeat(client.member_id, client.generation, instance=client.instance)
            elif kind == "leave":
                h.engine.leave(h.now, "g", [(client.member_id, client.instance)])
            else:
                h.commit(
                    {("t", 0): 1},
                    member_id=client.member_id,
                    generation=client.generation,
                    instance=client.instance,
                )
        group = h.engine.groups.get("g")
        if group is not None:
            check_invariants(group)
            generations.append(group.generation_id)
            event(f"reached {group.state.value}")
    assert generations == sorted(generations)
    # Nobody heartbeats any more: everything expires, and every request is answered once.
    for _ in range(10):
        h.advance(20_000)
    group = h.engine.groups.get("g")
    assert group is None or not group.members
    for client in clients:
        assert all(len(answers) == 1 for answers in client.joins + client.syncs)
