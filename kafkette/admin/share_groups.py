"""Share-group (KIP-932) operations of :class:`~kafkette.admin.AsyncAdminClient`, and
the listing of groups of every type, as Kafka's Admin names them.

``list_groups`` is Kafka's ``Admin.listGroups`` (KIP-1043): every group, of any
type, under type and state filters (``types=["share"]`` lists the share groups).
A share group is described with ShareGroupDescribe and deleted with DeleteGroups;
its start offsets are read, moved and forgotten with DescribeShareGroupOffsets,
AlterShareGroupOffsets and DeleteShareGroupOffsets, each sent to the group's
coordinator and retried, as the consumer-group operations are (see
:mod:`kafkette.admin.groups`), while the coordinator is loading or elsewhere.

The broker refuses to alter or delete the offsets of a group with members
(NON_EMPTY_GROUP) or of an unknown group (GROUP_ID_NOT_FOUND): that error is every
item's error in the result.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable, Mapping

import anyio

from kafkette.admin.groups import GroupOperations
from kafkette.admin.share_types import (
    GroupListing,
    GroupListings,
    ShareGroupDescription,
    ShareMemberDescription,
    SharePartitionOffsetInfo,
)
from kafkette.admin.types import GroupState, GroupType, Outcome, Results
from kafkette.client.connection import BrokerConnection
from kafkette.consumer.timeouts import timeout_in_ms
from kafkette.errors import (
    KafkaError,
    make_error,
)
from kafkette.protocol.messages.alter_share_group_offsets_request import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
)
from kafkette.protocol.messages.alter_share_group_offsets_response import (
    AlterShareGroupOffsetsResponse,
)
from kafkette.protocol.messages.delete_share_group_offsets_request import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequestTopic,
)
from kafkette.protocol.messages.delete_share_group_offsets_response import (
    DeleteShareGroupOffsetsResponse,
)
from kafkette.protocol.messages.describe_share_group_offsets_request import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsRequestTopic,
)
from kafkette.protocol.messages.describe_share_group_offsets_response import (
    DescribeShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsResponseGroup,
)
from kafkette.protocol.messages.share_group_describe_request import ShareGroupDescribeRequest
from kafkette.protocol.messages.share_group_describe_response import (
    DescribedGroup,
    ShareGroupDescribeResponse,
)
from kafkette.protocol.schema import Request
from kafkette.structs import TopicPartition

_FIRST_STATES_VERSION = 4
_FIRST_TYPES_VERSION = 5
_NO_OPERATIONS = -(2**31)
"""``authorized_operations`` when they were not asked for."""


class ShareGroupOperations(GroupOperations):
    """The share-group half of the admin client (mixed into AsyncAdminClient)."""

    # ---- listing

    async def list_groups(
        self,
        *,
        states: Iterable[GroupState | str] | None = None,
        types: Iterable[GroupType | str] | None = None,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> GroupListings:
        """Groups of every type on every broker, as Kafka's ``Admin.listGroups``.

        ``types`` keeps only groups of those types (``classic``, ``consumer``,
        ``share``; ListGroups v5+), ``states`` only groups in those states (v4+); an
        older broker gets UNSUPPORTED_VERSION. A broker that cannot answer before the
        deadline is in the result's ``errors``.
        """
        listed, errors = await self._listed_groups(
            states, types, timeout_in_ms(None, timeout, timeout_ms), "list groups"
        )
        listings = [
            GroupListing(
                group.group_id,
                type=GroupType.parse(group.group_type) if version >= 5 else None,
                protocol=group.protocol_type,
                state=GroupState.parse(group.group_state) if version >= 4 else None,
                coordinator=node,
            )
            for node, version, group in listed
        ]
        return GroupListings(
            tuple(sorted(listings, key=lambda g: (g.group_id, g.coordinator))), errors
        )

    # ---- describe and delete

    async def describe_share_groups(
        self,
        group_ids: Iterable[str],
        *,
        include_authorized_operations: bool = False,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[str, ShareGroupDescription]:
        """State, epochs and members (with their assigned partitions) of each share group;
        GroupIdNotFoundError for an id that is not a share group."""
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        describe = functools.partial(
            self._describe_share_group, operations=include_authorized_operations
        )
        return await self._per_group(group_ids, describe, "describe share group", timeout_ms)

    async def _describe_share_group(
        self, group_id: str, *, operations: bool
    ) -> ShareGroupDescription:
        def build(connection: BrokerConnection) -> tuple[Request, int]:
            request = ShareGroupDescribeRequest(
                group_ids=[group_id], include_authorized_operations=operations
            )
            return request, connection.version_for(ShareGroupDescribeRequest)

        def entry(response: ShareGroupDescribeResponse) -> DescribedGroup:
            found = next((g for g in response.groups if g.group_id == group_id), None)
            if found is None:
                raise KafkaError(f"ShareGroupDescribe answered nothing for {group_id!r}")
            return found

        response, node = await self._ask_coordinator(
            group_id, build, ShareGroupDescribeResponse, lambda r: entry(r).error_code
        )
        group = entry(response)
        if group.error_code:
            raise make_error(group.error_code, group.error_message or f"group {group_id!r}")
        members = tuple(
            ShareMemberDescription(
                member.member_id,
                member.client_id,
                member.client_host,
                frozenset(
                    TopicPartition(topics.topic_name, index)
                    for topics in member.assignment.topic_partitions
                    for index in topics.partitions
                ),
                member.member_epoch,
                member.rack_id,
            )
            for member in group.members
        )
        allowed = group.authorized_operations
        return ShareGroupDescription(
            group_id=group.group_id,
            members=members,
            state=GroupState.parse(group.group_state),
            coordinator=await self._coordinator_node(node),
            group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            assignor=group.assignor_name,
            authorized_operations=None if allowed == _NO_OPERATIONS else allowed,
        )

    async def delete_share_groups(
        self,
        group_ids: Iterable[str],
        *,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[str, None]:
        """Delete share groups with their start offsets (DeleteGroups); a group with
        members fails with NON_EMPTY_GROUP, an unknown one with GROUP_ID_NOT_FOUND."""
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        return await self._per_group(
            group_ids, self._delete_group, "delete share group", timeout_ms
        )

    # ---- offsets

    async def list_share_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[TopicPartition, SharePartitionOffsetInfo | None]:
        """The share group's start offsets and lag: of ``partitions``, or of every
        partition the group has a state for (``None``). A partition without a state
        (never read by the group, or of an unknown group or topic) gets ``None``.

        Errors of the group as a whole (GROUP_AUTHORIZATION_FAILED...) are raised.
        """
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        wanted = None if partitions is None else list(dict.fromkeys(partitions))
        by_topic: dict[str, list[int]] = defaultdict(list)
        for tp in wanted or ():
            by_topic[tp.topic].append(tp.partition)
        topics = (
            None
            if wanted is None
            else [DescribeShareGroupOffsetsRequestTopic(t, ps) for t, ps in by_topic.items()]
        )
        request = DescribeShareGroupOffsetsRequest(
            groups=[DescribeShareGroupOffsetsRequestGroup(group_id, topics)]
        )

        def build(connection: BrokerConnection) -> tuple[Request, int]:
            return request, connection.version_for(DescribeShareGroupOffsetsRequest)

        def group_of(
            response: DescribeShareGroupOffsetsResponse,
        ) -> DescribeShareGroupOffsetsResponseGroup:
            found = next((g for g in response.groups if g.group_id == group_id), None)
            if found is None:
                raise KafkaError(f"DescribeShareGroupOffsets answered nothing for {group_id!r}")
            return found

        deadline = anyio.current_time() + self._timeout_s(timeout_ms)
        response, _ = await self._until_done(
            lambda: self._ask_coordinator(
                group_id, build, DescribeShareGroupOffsetsResponse, lambda r: group_of(r).error_code
            ),
            f"list share offsets of group {group_id!r}",
            deadline,
        )
        group = group_of(response)
        if group.error_code:
            raise make_error(
                group.error_code, group.error_message or f"listing the offsets of {group_id!r}"
            )
        outcomes: dict[TopicPartition, Outcome[SharePartitionOffsetInfo | None]] = {}
        for topic in group.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.topic_name, p.partition_index)
                if p.error_code:
                    outcomes[tp] = Outcome(
                        error=make_error(p.error_code, p.error_message or str(tp))
                    )
                elif p.start_offset < 0:
                    outcomes[tp] = Outcome(None)
                else:
                    info = SharePartitionOffsetInfo(
                        p.start_offset,
                        None if p.leader_epoch < 0 else p.leader_epoch,
                        None if p.lag < 0 else p.lag,
                    )
                    outcomes[tp] = Outcome(info)
        if wanted is None:
            return Results(dict(sorted(outcomes.items())))
        return Results({tp: outcomes.get(tp, Outcome(None)) for tp in wanted})

    async def alter_share_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int],
        *,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[TopicPartition, None]:
        """Move the share group's start offsets: each partition is read from its new
        offset, its in-flight state forgotten. The group must have no members
        (else every partition fails with NON_EMPTY_GROUP, as in Kafka)."""
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        for tp, offset in offsets.items():
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
                raise ValueError(f"start offset of {tp}: {offset!r} is not an offset (int >= 0)")
        by_topic: dict[str, list[AlterShareGroupOffsetsRequestPartition]] = defaultdict(list)
        for tp, offset in offsets.items():
            by_topic[tp.topic].append(AlterShareGroupOffsetsRequestPartition(tp.partition, offset))
        request = AlterShareGroupOffsetsRequest(
            group_id=group_id,
            topics=[AlterShareGroupOffsetsRequestTopic(t, ps) for t, ps in by_topic.items()],
        )

        def build(connection: BrokerConnection) -> tuple[Request, int]:
            return request, connection.version_for(AlterShareGroupOffsetsRequest)

        deadline = anyio.current_time() + self._timeout_s(timeout_ms)
        try:
            response, _ = await self._until_done(
                lambda: self._ask_coordinator(
                    group_id, build, AlterShareGroupOffsetsResponse, lambda r: r.error_code
                ),
                f"alter share offsets of group {group_id!r}",
                deadline,
            )
            if response.error_code:
                raise make_error(
                    response.error_code,
                    response.error_message or f"altering the offsets of {group_id!r}",
                )
        except KafkaError as exc:
            return Results({tp: Outcome(error=exc) for tp in offsets})
        answers = {
            TopicPartition(t.topic_name, p.partition_index): (p.error_code, p.error_message)
            for t in response.responses
            for p in t.partitions
        }
        outcomes: dict[TopicPartition, Outcome[None]] = {}
        for tp in offsets:
            code, message = answers.get(tp, (None, None))
            if code is None:
                outcomes[tp] = Outcome(error=KafkaError(f"no result for {tp}"))
            elif code:
                outcomes[tp] = Outcome(error=make_error(code, message or str(tp)))
            else:
                outcomes[tp] = Outcome(None)
        return Results(outcomes)

    async def delete_share_group_offsets(
        self,
        group_id: str,
        topics: Iterable[str],
        *,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[str, None]:
        """Forget the share group's state of whole topics (by name), as Kafka's
        ``deleteShareGroupOffsets``: the group reads them afresh per
        ``share.auto.offset.reset`` next time. The group must have no members."""
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        names = list(dict.fromkeys(topics))
        request = DeleteShareGroupOffsetsRequest(
            group_id=group_id, topics=[DeleteShareGroupOffsetsRequestTopic(t) for t in names]
        )

        def build(connection: BrokerConnection) -> tuple[Request, int]:
            return request, connection.version_for(DeleteShareGroupOffsetsRequest)

        deadline = anyio.current_time() + self._timeout_s(timeout_ms)
        try:
            response, _ = await self._until_done(
                lambda: self._ask_coordinator(
                    group_id, build, DeleteShareGroupOffsetsResponse, lambda r: r.error_code
                ),
                f"delete share offsets of group {group_id!r}",
                deadline,
            )
            if response.error_code:
                raise make_error(
                    response.error_code,
                    response.error_message or f"deleting the offsets of {group_id!r}",
                )
        except KafkaError as exc:
            return Results({name: Outcome(error=exc) for name in names})
        answers = {t.topic_name: (t.error_code, t.error_message) for t in response.responses}
        outcomes: dict[str, Outcome[None]] = {}
        for name in names:
            code, message = answers.get(name, (None, None))
            if code is None:
                outcomes[name] = Outcome(error=KafkaError(f"no result for topic {name!r}"))
            elif code:
                outcomes[name] = Outcome(error=make_error(code, message or name))
            else:
                outcomes[name] = Outcome(None)
        return Results(outcomes)


__all__ = ["ShareGroupOperations"]
