"""Consumer group operations of :class:`~kafkette.admin.AsyncAdminClient`.

A group's membership and committed offsets live with its coordinator. Every
operation on named groups finds the coordinator (FindCoordinator, cached by
the client), sends its request over the coordinator connection and, while
the answer is that the coordinator is still loading or is elsewhere
(COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR)
or the connection fails, finds it again and retries with backoff until the
deadline, as Java's Admin does. Listing asks every broker (ListGroups), as
each knows only the groups it coordinates.

Results are per item, as in Java: per group for describe and delete, per
partition for offsets. Any other error code is that item's error.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TypeVar

import anyio

from kafkette.admin.consumer_group_describe import consumer_group_description
from kafkette.admin.types import (
    ConsumerGroupDescription,
    ConsumerGroupListing,
    ConsumerGroupListings,
    GroupState,
    GroupType,
    MemberDescription,
    Node,
    Outcome,
    Results,
)
from kafkette.client.backoff import backoff_ms
from kafkette.client.client import KafkaClient
from kafkette.client.config import AdminConfig
from kafkette.client.connection import BrokerConnection
from kafkette.consumer.assignors.protocol import decode_assignment
from kafkette.consumer.timeouts import timeout_in_ms
from kafkette.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NotCoordinatorError,
    RetriableError,
    UnsupportedVersionError,
    make_error,
)
from kafkette.protocol.errors import ProtocolError
from kafkette.protocol.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from kafkette.protocol.messages.describe_groups_response import DescribedGroup
from kafkette.protocol.messages.list_groups_response import ListedGroup
from kafkette.protocol.messages.offset_commit_request import (
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kafkette.protocol.messages.offset_delete_request import (
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from kafkette.protocol.messages.offset_fetch_request import (
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from kafkette.protocol.schema import Request, Response
from kafkette.structs import OffsetAndMetadata, TopicPartition

T = TypeVar("T")
R = TypeVar("R", bound=Response)

CONSUMER_PROTOCOL = "consumer"
_MOVED = frozenset({NotCoordinatorError.code, CoordinatorNotAvailableError.code})
"""Codes after which the coordinator is looked up again."""
_RETRY = _MOVED | {CoordinatorLoadInProgressError.code}
"""Group-level codes that are retried."""
_FIRST_STATES_VERSION = 4
_FIRST_TYPES_VERSION = 5
"""ListGroups reports and filters group types (classic, consumer) from v5 (KIP-848)."""
_GROUP_ID_NOT_FOUND = 69
"""ListGroups filters and reports states from v4."""
_FIRST_BATCHED_FETCH_VERSION = 8
"""OffsetFetch names its groups in a list from v8."""
_FIRST_ALL_PARTITIONS_FETCH_VERSION = 2


class _Retry(Exception):
    """A coordinator answer (or failure) after which the request is sent again."""


def _partitions_by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for tp in partitions:
        by_topic[tp.topic].append(tp.partition)
    return by_topic


class GroupOperations:
    """The consumer group half of the admin client (mixed into AsyncAdminClient)."""

    _client: KafkaClient
    config: AdminConfig

    # ---- plumbing

    def _timeout_s(self, timeout_ms: float | None) -> float:
        ms = self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms
        return ms / 1000

    async def _backoff(self, tries: int) -> None:
        config = self.config
        await anyio.sleep(
            backoff_ms(tries, config.retry_backoff_ms, config.retry_backoff_max_ms) / 1000
        )

    async def _until_done(
        self, attempt: Callable[[], Awaitable[T]], what: str, deadline: float
    ) -> T:
        """Run ``attempt`` until it does not raise :class:`_Retry` or a connection failure,
        with backoff; :class:`KafkaTimeoutError` at ``deadline`` (anyio's clock)."""
        tries = 0
        last: BaseException | None = None
        try:
            with anyio.fail_after(max(deadline - anyio.current_time(), 0)):
                while True:
                    try:
                        return await attempt()
                    except (_Retry, RetriableError, KafkaConnectionError, KafkaTimeoutError) as exc:
                        last = exc
                    await self._backoff(tries)
                    tries += 1
        except TimeoutError:
            cause = f"; last error: {last}" if last is not None else ""
            raise KafkaTimeoutError(f"{what}: no answer in time{cause}") from last

    async def _ask_coordinator(
        self,
        group_id: str,
        build: Callable[[BrokerConnection], tuple[Request, int]],
        response_type: type[R],
        group_error: Callable[[R], int],
    ) -> tuple[R, int]:
        """One request to the group's coordinator: (response, coordinator node).

        Raises :class:`_Retry` when the group-level error (``group_error``) says the
        coordinator is loading or elsewhere, or the connection failed; the
        coordinator is forgotten where it may have moved.
        """
        client = self._client
        node = await client.coordinator(group_id)
        try:
            connection = await client.coordinator_connection(node)
            request, version = build(connection)
            response = await connection.request(request, version=version)
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            client.invalidate_coordinator(group_id)
            raise _Retry(str(exc)) from exc
        if not isinstance(response, response_type):
            raise KafkaConnectionError(f"unexpected response {type(response).__name__}")
        code = group_error(response)
        if code in _MOVED:
            client.invalidate_coordinator(group_id)
        if code in _RETRY:
            raise _Retry(str(make_error(code, group_id)))
        return response, node

    async def _per_group(
        self,
        group_ids: Iterable[str],
        operation: Callable[[str], Awaitable[T]],
        what: str,
        timeout_ms: float | None,
    ) -> Results[str, T]:
        deadline = anyio.current_time() + self._timeout_s(timeout_ms)
        outcomes: dict[str, Outcome[T]] = {}
        for group_id in dict.fromkeys(group_ids):
            try:
                value = await self._until_done(
                    functools.partial(operation, group_id), f"{what} {group_id!r}", deadline
                )
            except KafkaError as exc:
                outcomes[group_id] = Outcome(error=exc)
            else:
                outcomes[group_id] = Outcome(value)
        return Results(outcomes)

    async def _coordinator_node(self, node_id: int) -> Node | None:
        broker = self._client.broker(node_id)
        if broker is None:
            await self._client.refresh_metadata([])
            broker = self._client.broker(node_id)
        return (
            None if broker is None else Node(broker.node_id, broker.host, broker.port, broker.rack)
        )

    # ---- listing

    async def list_consumer_groups(
        self,
        *,
        states: Iterable[GroupState | str] | None = None,
        types: Iterable[GroupType | str] | None = None,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> ConsumerGroupListings:
        """Consumer groups of every broker (groups of other protocol types are left out).

        ``states`` keeps only groups in those states (ListGroups v4+), ``types``
        only groups of those types, ``classic`` or ``consumer`` (v5+); an older
        broker gets UNSUPPORTED_VERSION. A broker that cannot answer before the
        deadline is in the result's ``errors``.
        """
        listed, errors = await self._listed_groups(
            states, types, timeout_in_ms(None, timeout, timeout_ms), "list consumer groups"
        )
        listings = [
            ConsumerGroupListing(
                group.group_id,
                is_simple_consumer_group=not group.protocol_type,
                state=GroupState.parse(group.group_state) if version >= 4 else None,
                coordinator=node,
                type=GroupType.parse(group.group_type) if version >= 5 else None,
            )
            for node, version, group in listed
            if group.protocol_type in (CONSUMER_PROTOCOL, "")
        ]
        return ConsumerGroupListings(
            tuple(sorted(listings, key=lambda g: (g.group_id, g.coordinator))), errors
        )

    async def _listed_groups(
        self,
        states: Iterable[GroupState | str] | None,
        types: Iterable[GroupType | str] | None,
        timeout_ms: float | None,
        what: str,
    ) -> tuple[list[tuple[int, int, ListedGroup]], dict[int, KafkaError]]:
        """Every broker's ListGroups answer as ``(node, version, group)``, with the
        brokers that could not answer before the deadline and why."""
        wanted = [GroupState.parse(s) if isinstance(s, str) else s for s in states or ()]
        kinds = [GroupType.parse(k) if isinstance(k, str) else k for k in types or ()]
        deadline = anyio.current_time() + self._timeout_s(timeout_ms)
        snapshot = await self._until_done(lambda: self._client.refresh_metadata([]), what, deadline)
        listed: list[tuple[int, int, ListedGroup]] = []
        errors: dict[int, KafkaError] = {}
        for node in sorted(snapshot.brokers):
            try:
                listed += await self._until_done(
                    functools.partial(self._list_groups, node, wanted, kinds),
                    f"list groups of broker {node}",
                    deadline,
                )
            except KafkaError as exc:
                errors[node] = exc
        return listed, errors

    async def _list_groups(
        self, node: int, states: list[GroupState], types: list[GroupType]
    ) -> list[tuple[int, int, ListedGroup]]:
        try:
            connection = await self._client.connection(node)
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            raise _Retry(str(exc)) from exc
        version = connection.version_for(ListGroupsRequest)
        if states and version < _FIRST_STATES_VERSION:
            raise UnsupportedVersionError(
                f"broker {node} cannot filter groups by state (ListGroups v{version} < v4)"
            )
        if types and version < _FIRST_TYPES_VERSION:
            raise UnsupportedVersionError(
                f"broker {node} cannot filter groups by type (ListGroups v{version} < v5)"
            )
        request = ListGroupsRequest(
            states_filter=[s.value for s in states], types_filter=[k.value for k in types]
        )
        response = await self._client.send(node, request)
        assert isinstance(response, ListGroupsResponse)
        if response.error_code in _RETRY:
            raise _Retry(str(make_error(response.error_code, f"broker {node}")))
        if response.error_code:
            raise make_error(response.error_code, f"listing the groups of broker {node}")
        return [(node, version, group) for group in response.groups]

    # ---- describe and delete

    async def describe_consumer_groups(
        self,
        group_ids: Iterable[str],
        *,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[str, ConsumerGroupDescription]:
        """Members (with their assigned partitions), state and assignor of each group.

        A ``consumer`` group (KIP-848) is described from ConsumerGroupDescribe, with
        its epochs and each member's epoch and target assignment; any other group
        from DescribeGroups, as Kafka's Admin does. A group that does not exist is
        described as ``DEAD`` with no members (as DescribeGroups up to v5 reports
        it); a group of another protocol type than ``consumer`` is an error.
        """
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        return await self._per_group(
            group_ids, self._describe_group, "describe consumer group", timeout_ms
        )

    async def _describe_group(self, group_id: str) -> ConsumerGroupDescription:
        """ConsumerGroupDescribe where the coordinator serves it, else DescribeGroups; and
        DescribeGroups after all when the group is not a ``consumer`` group."""

        def build(connection: BrokerConnection) -> tuple[Request, int]:
            try:
                version = connection.version_for(ConsumerGroupDescribeRequest)
            except UnsupportedVersionError:  # a broker before KIP-848: every group is classic
                return classic(connection)
            return ConsumerGroupDescribeRequest(group_ids=[group_id]), version

        def classic(connection: BrokerConnection) -> tuple[Request, int]:
            return (
                DescribeGroupsRequest(groups=[group_id]),
                connection.version_for(DescribeGroupsRequest),
            )

        def group_error(response: Response) -> int:
            if isinstance(response, ConsumerGroupDescribeResponse):
                found = [g.error_code for g in response.groups if g.group_id == group_id]
                return found[0] if found else 0
            assert isinstance(response, DescribeGroupsResponse)
            return _described(response, group_id).error_code

        response, node = await self._ask_coordinator(group_id, build, Response, group_error)
        if isinstance(response, ConsumerGroupDescribeResponse):
            group = next((g for g in response.groups if g.group_id == group_id), None)
            if group is None:
                raise KafkaError(f"describing group {group_id!r}: the coordinator left it out")
            # GROUP_ID_NOT_FOUND: classic, or no group; DescribeGroups says which. A
            # negative epoch too: Tansu answers every group id so, with no error.
            if group.error_code != _GROUP_ID_NOT_FOUND and group.group_epoch >= 0:
                if group.error_code:
                    raise make_error(group.error_code, f"describing group {group_id!r}")
                return consumer_group_description(group, await self._coordinator_node(node))
            response, node = await self._ask_coordinator(group_id, classic, Response, group_error)
        assert isinstance(response, DescribeGroupsResponse)
        return await self._classic_description(response, node, group_id)

    async def _classic_description(
        self, response: DescribeGroupsResponse, node: int, group_id: str
    ) -> ConsumerGroupDescription:
        group = _described(response, group_id)
        if group.error_code:
            raise make_error(group.error_code, f"describing group {group_id!r}")
        if group.protocol_type not in (CONSUMER_PROTOCOL, ""):
            raise KafkaError(
                f"group {group_id!r} is not a consumer group (protocol type "
                f"{group.protocol_type!r})"
            )
        members = []
        for member in group.members:
            assignment: frozenset[TopicPartition] = frozenset()
            if member.member_assignment:
                try:
                    assignment = frozenset(decode_assignment(member.member_assignment).partitions)
                except ProtocolError as exc:
                    raise KafkaError(
                        f"group {group_id!r}: member {member.member_id} has an unreadable "
                        f"assignment: {exc}"
                    ) from exc
            members.append(
                MemberDescription(
                    member.member_id,
                    member.group_instance_id,
                    member.client_id,
                    member.client_host,
                    assignment,
                )
            )
        return ConsumerGroupDescription(
            group_id=group.group_id,
            is_simple_consumer_group=not group.protocol_type,
            members=tuple(members),
            partition_assignor=group.protocol_data,
            state=GroupState.parse(group.group_state),
            coordinator=await self._coordinator_node(node),
            protocol_type=group.protocol_type,
        )

    async def delete_consumer_groups(
        self,
        group_ids: Iterable[str],
        *,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[str, None]:
        """Delete groups with their committed offsets; a group with active members
        fails with NON_EMPTY_GROUP, an unknown one with GROUP_ID_NOT_FOUND."""
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        return await self._per_group(
            group_ids, self._delete_group, "delete consumer group", timeout_ms
        )

    async def _delete_group(self, group_id: str) -> None:
        def build(connection: BrokerConnection) -> tuple[Request, int]:
            return (
                DeleteGroupsRequest(groups_names=[group_id]),
                connection.version_for(DeleteGroupsRequest),
            )

        def error_of(response: DeleteGroupsResponse) -> int:
            result = next((r for r in response.results if r.group_id == group_id), None)
            if result is None:
                raise KafkaError(f"DeleteGroups answered nothing for {group_id!r}")
            return result.error_code

        response, _ = await self._ask_coordinator(group_id, build, DeleteGroupsResponse, error_of)
        code = error_of(response)
        if code:
            raise make_error(code, f"deleting group {group_id!r}")

    # ---- offsets

    async def list_consumer_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        require_stable: bool = False,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets: of ``partitions``, or of every partition it
        committed (``None``). A partition without a committed offset gets ``None``.

        Errors of the group as a whole (GROUP_AUTHORIZATION_FAILED...) are raised.
        ``require_stable`` waits out pending transactional commits (v7+).
        """
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        wanted = None if partitions is None else list(dict.fromkeys(partitions))
        deadline = anyio.current_time() + self._timeout_s(timeout_ms)

        def build(connection: BrokerConnection) -> tuple[Request, int]:
            version = connection.version_for(OffsetFetchRequest)
            by_topic = None if wanted is None else _partitions_by_topic(wanted)
            if version >= _FIRST_BATCHED_FETCH_VERSION:
                request = OffsetFetchRequest(
                    groups=[
                        OffsetFetchRequestGroup(
                            group_id=group_id,
                            topics=None
                            if by_topic is None
                            else [OffsetFetchRequestTopics(t, ps) for t, ps in by_topic.items()],
                        )
                    ],
                    require_stable=require_stable,
                )
                return request, version
            if by_topic is None and version < _FIRST_ALL_PARTITIONS_FETCH_VERSION:
                raise UnsupportedVersionError(
                    f"OffsetFetch v{version} cannot fetch every partition of a group"
                )
            request = OffsetFetchRequest(
                group_id=group_id,
                topics=None
                if by_topic is None
                else [OffsetFetchRequestTopic(t, ps) for t, ps in by_topic.items()],
                require_stable=require_stable and version >= 7,
            )
            return request, version

        response, _ = await self._until_done(
            lambda: self._ask_coordinator(group_id, build, OffsetFetchResponse, _fetch_error),
            f"list offsets of group {group_id!r}",
            deadline,
        )
        code = _fetch_error(response)
        if code:
            raise make_error(code, f"listing the offsets of group {group_id!r}")
        outcomes: dict[TopicPartition, Outcome[OffsetAndMetadata | None]] = {}
        for tp, (code, offset, epoch, metadata) in _fetched(response).items():
            if code:
                outcomes[tp] = Outcome(error=make_error(code, str(tp)))
            elif offset < 0:
                outcomes[tp] = Outcome(None)
            else:
                outcomes[tp] = Outcome(
                    OffsetAndMetadata(offset, metadata or "", None if epoch < 0 else epoch)
                )
        if wanted is None:
            return Results(dict(sorted(outcomes.items())))
        return Results({tp: outcomes.get(tp, Outcome(None)) for tp in wanted})

    async def alter_consumer_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
        *,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[TopicPartition, None]:
        """Commit offsets for a group from outside it (generation -1, no member id).

        The group must have no active members: otherwise each partition fails
        with UNKNOWN_MEMBER_ID, as in Kafka.
        """
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        commits = {
            tp: value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(value)
            for tp, value in offsets.items()
        }
        by_topic: dict[str, list[OffsetCommitRequestPartition]] = defaultdict(list)
        for tp, commit in commits.items():
            by_topic[tp.topic].append(
                OffsetCommitRequestPartition(
                    partition_index=tp.partition,
                    committed_offset=commit.offset,
                    committed_leader_epoch=-1
                    if commit.leader_epoch is None
                    else commit.leader_epoch,
                    committed_metadata=commit.metadata,
                )
            )
        request = OffsetCommitRequest(
            group_id=group_id,
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=[OffsetCommitRequestTopic(t, ps) for t, ps in by_topic.items()],
        )

        def build(connection: BrokerConnection) -> tuple[Request, int]:
            return request, connection.version_for(OffsetCommitRequest)

        def errors(response: OffsetCommitResponse) -> dict[TopicPartition, int]:
            return {
                TopicPartition(t.name, p.partition_index): p.error_code
                for t in response.topics
                for p in t.partitions
            }

        def group_error(response: OffsetCommitResponse) -> int:
            return next((c for c in errors(response).values() if c in _RETRY), 0)

        deadline = anyio.current_time() + self._timeout_s(timeout_ms)
        try:
            response, _ = await self._until_done(
                lambda: self._ask_coordinator(group_id, build, OffsetCommitResponse, group_error),
                f"alter offsets of group {group_id!r}",
                deadline,
            )
        except KafkaError as exc:
            return Results({tp: Outcome(error=exc) for tp in commits})
        return _partition_results(commits, errors(response))

    async def delete_consumer_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition],
        *,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[TopicPartition, None]:
        """Delete the group's committed offsets of ``partitions``.

        A partition of a topic the group is subscribed to fails with
        GROUP_SUBSCRIBED_TO_TOPIC; an error of the whole request (an unknown
        group: GROUP_ID_NOT_FOUND) fails every partition.
        """
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        wanted = list(dict.fromkeys(partitions))
        request = OffsetDeleteRequest(
            group_id=group_id,
            topics=[
                OffsetDeleteRequestTopic(t, [OffsetDeleteRequestPartition(p) for p in ps])
                for t, ps in _partitions_by_topic(wanted).items()
            ],
        )

        def build(connection: BrokerConnection) -> tuple[Request, int]:
            return request, connection.version_for(OffsetDeleteRequest)

        deadline = anyio.current_time() + self._timeout_s(timeout_ms)
        try:
            response, _ = await self._until_done(
                lambda: self._ask_coordinator(
                    group_id, build, OffsetDeleteResponse, lambda r: r.error_code
                ),
                f"delete offsets of group {group_id!r}",
                deadline,
            )
            if response.error_code:
                raise make_error(response.error_code, f"deleting offsets of group {group_id!r}")
        except KafkaError as exc:
            return Results({tp: Outcome(error=exc) for tp in wanted})
        codes = {
            TopicPartition(t.name, p.partition_index): p.error_code
            for t in response.topics
            for p in t.partitions
        }
        return _partition_results(wanted, codes)


def _described(response: DescribeGroupsResponse, group_id: str) -> DescribedGroup:
    found = next((g for g in response.groups if g.group_id == group_id), None)
    if found is None:
        raise KafkaError(f"DescribeGroups answered nothing for {group_id!r}")
    return found


def _fetch_error(response: OffsetFetchResponse) -> int:
    """The group-level error of an OffsetFetch answer (any version)."""
    if response.groups:
        return response.groups[0].error_code
    if response.error_code:
        return response.error_code
    # Before v2 a coordinator error shows on the partitions only.
    codes = {p.error_code for t in response.topics for p in t.partitions}
    return next(iter(codes & _RETRY), 0)


def _fetched(
    response: OffsetFetchResponse,
) -> dict[TopicPartition, tuple[int, int, int, str | None]]:
    """TopicPartition -> (error code, offset, leader epoch, metadata)."""
    if response.groups:
        return {
            TopicPartition(t.name, p.partition_index): (
                p.error_code,
                p.committed_offset,
                p.committed_leader_epoch,
                p.metadata,
            )
            for t in response.groups[0].topics
            for p in t.partitions
        }
    return {
        TopicPartition(t.name, p.partition_index): (
            p.error_code,
            p.committed_offset,
            p.committed_leader_epoch,
            p.metadata,
        )
        for t in response.topics
        for p in t.partitions
    }


def _partition_results(
    wanted: Iterable[TopicPartition], codes: Mapping[TopicPartition, int]
) -> Results[TopicPartition, None]:
    outcomes: dict[TopicPartition, Outcome[None]] = {}
    for tp in wanted:
        code = codes.get(tp)
        if code is None:
            outcomes[tp] = Outcome(error=KafkaError(f"no result for {tp}"))
        elif code:
            outcomes[tp] = Outcome(error=make_error(code, str(tp)))
        else:
            outcomes[tp] = Outcome(None)
    return Results(outcomes)


__all__ = ["GroupOperations"]
