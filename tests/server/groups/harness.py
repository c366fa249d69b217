"""A GroupEngine driven by hand: a fake clock, results collected from callbacks."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from kafkette.protocol.codec import encode_message
from kafkette.protocol.messages import ConsumerProtocolSubscription
from kafkette.server.config.broker_config import BrokerConfig
from kafkette.server.groups.engine import GroupEngine, JoinParams
from kafkette.server.groups.group import Group, JoinResult, SyncResult
from kafkette.server.groups.store import CommittedOffset, MemoryGroupStore

NOW = 1_700_000_000_000
SESSION = 10_000
REBALANCE = 30_000
RANGE = (("range", b"range-meta"),)


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0 bytes (version prefix included)."""
    out = bytearray(b"\x00\x00")
    encode_message(ConsumerProtocolSubscription(topics=list(topics)), 0, out)
    return bytes(out)


class Harness:
    """One engine over a MemoryGroupStore, with time that moves only on :meth:`advance`."""

    def __init__(self, **settings: Any) -> None:
        defaults: dict[str, Any] = {
            "group_min_session_timeout_ms": 1_000,
            "group_max_session_timeout_ms": 60_000,
        }
        self.config = BrokerConfig(**{**defaults, **settings})
        self.store = MemoryGroupStore()
        ids = itertools.count(1)
        self.engine = GroupEngine(self.config, self.store, id_factory=lambda: str(next(ids)))
        self.now = NOW
        self.engine.schedule_offsets_check(self.now)

    def group(self, group_id: str = "g") -> Group:
        return self.engine.groups[group_id]

    def advance(self, ms: int) -> None:
        self.now += ms
        self.engine.tick(self.now)

    def join(
        self,
        member_id: str = "",
        *,
        group: str = "g",
        instance: str | None = None,
        protocols: Sequence[tuple[str, bytes]] = RANGE,
        session: int = SESSION,
        rebalance: int = REBALANCE,
        protocol_type: str = "consumer",
        client_id: str = "c",
        v4: bool = True,
        v9: bool = True,
    ) -> list[JoinResult]:
        """Send a JoinGroup; the returned list gets the result when it comes."""
        results: list[JoinResult] = []
        params = JoinParams(
            group_id=group,
            member_id=member_id,
            group_instance_id=instance,
            client_id=client_id,
            client_host="/10.0.0.1",
            session_timeout_ms=session,
            rebalance_timeout_ms=rebalance,
            protocol_type=protocol_type,
            protocols=tuple(protocols),
            require_known_member_id=v4,
            supports_skip_assignment=v9,
        )
        self.engine.join(self.now, params, results.append)
        return results

    def join_new(self, **kwargs: Any) -> list[JoinResult]:
        """A dynamic member's two-step join (MEMBER_ID_REQUIRED, then with its id)."""
        first = self.join(**kwargs)
        assert first[0].error_code == 79
        return self.join(first[0].member_id, **kwargs)

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        *,
        group: str = "g",
        instance: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> list[SyncResult]:
        results: list[SyncResult] = []
        self.engine.sync(
            self.now,
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
            assignments=assignments or {},
            callback=results.append,
        )
        return results

    def heartbeat(
        self, member_id: str, generation: int, *, group: str = "g", instance: str | None = None
    ) -> int:
        return self.engine.heartbeat(
            self.now,
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance,
        )

    def commit(
        self,
        offsets: dict[tuple[str, int], int],
        *,
        group: str = "g",
        generation: int = -1,
        member_id: str = "",
        instance: str | None = None,
        metadata: str = "",
    ) -> dict[tuple[str, int], int]:
        return self.engine.commit(
            self.now,
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance,
            offsets={
                key: CommittedOffset(offset=o, metadata=metadata, commit_timestamp_ms=self.now)
                for key, o in offsets.items()
            },
        )

    def stable_group(
        self, count: int, *, protocols: Sequence[tuple[str, bytes]] = RANGE
    ) -> list[str]:
        """``count`` dynamic members to Stable (the first alone in generation 1, then all of
        them in generation 2); their ids, leader first."""
        ids = [self.join(protocols=protocols)[0].member_id for _ in range(count)]
        alone = self.join(ids[0], protocols=protocols)
        assert (alone[0].error_code, alone[0].generation_id) == (0, 1)
        if count > 1:
            pending = [self.join(m, protocols=protocols) for m in ids[1:]]
            pending.insert(0, self.join(ids[0], protocols=protocols))
            results = [p[0] for p in pending]
        else:
            results = alone
        generation = results[0].generation_id
        assert results[0].leader_id == ids[0]
        for member_id in ids[1:]:
            assert self.sync(member_id, generation) == []
        assigned = self.sync(ids[0], generation, {m: m.encode() for m in ids})
        assert assigned[0].assignment == ids[0].encode()
        return ids
