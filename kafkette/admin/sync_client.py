"""The synchronous admin client: :class:`AsyncAdminClient` run in a background loop."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from kafkette.acl import AclBinding, AclBindingFilter
from kafkette.admin.client import AsyncAdminClient
from kafkette.admin.scram import UserScramCredentialAlteration, UserScramCredentialsDescription
from kafkette.admin.share_types import (
    GroupListings,
    ShareGroupDescription,
    SharePartitionOffsetInfo,
)
from kafkette.admin.txn_types import (
    AbortTransactionSpec,
    ProducerState,
    TransactionDescription,
    TransactionListings,
    TransactionState,
)
from kafkette.admin.types import (
    AlterConfigOp,
    ClusterDescription,
    ConfigEntry,
    ConfigResource,
    ConsumerGroupDescription,
    ConsumerGroupListings,
    CreatedTopic,
    GroupState,
    GroupType,
    ListOffsetsResultInfo,
    NewPartitions,
    NewTopic,
    Results,
    TopicDescription,
)
from kafkette.client import telemetry
from kafkette.client.sync_bridge import BackgroundLoop
from kafkette.consumer.timeouts import timeout_in_ms
from kafkette.structs import OffsetAndMetadata, TopicPartition


class AdminClient:
    """Blocking admin client; the same operations as :class:`AsyncAdminClient`."""

    def __init__(self, config: Mapping[str, Any] | None = None, **settings: Any) -> None:
        self._loop = BackgroundLoop("kafkette AdminClient")
        try:
            self._async = self._loop.call(_make, config, settings)
        except BaseException:
            self._loop.close()
            raise
        self.config = self._async.config
        self._loop.call_soon(telemetry.run, self._async._client)  # KIP-714

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def client_instance_id(
        self, *, timeout_ms: float | None = None, timeout: float | None = None
    ) -> uuid.UUID:
        """See :meth:`AsyncAdminClient.client_instance_id`."""
        ms = timeout_in_ms(None, timeout, timeout_ms)
        return self._loop.call(
            telemetry.client_instance_id, self._async._client, None if ms is None else ms / 1000
        )

    def close(self) -> None:
        try:
            self._loop.call(self._async.close)
        finally:
            self._loop.close()

    def create_topics(
        self,
        new_topics: Iterable[NewTopic],
        *,
        validate_only: bool = False,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[str, CreatedTopic]:
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        topics = list(new_topics)
        return self._loop.call(
            lambda: self._async.create_topics(
                topics, validate_only=validate_only, timeout_ms=timeout_ms
            )
        )

    def delete_topics(
        self,
        topics: Iterable[str | uuid.UUID],
        *,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[str | uuid.UUID, None]:
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        names = list(topics)
        return self._loop.call(lambda: self._async.delete_topics(names, timeout_ms=timeout_ms))

    def create_partitions(
        self,
        new_partitions: Mapping[str, NewPartitions],
        *,
        validate_only: bool = False,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[str, None]:
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        return self._loop.call(
            lambda: self._async.create_partitions(
                new_partitions, validate_only=validate_only, timeout_ms=timeout_ms
            )
        )

    def list_topics(
        self,
        *,
        include_internal: bool = False,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> list[str]:
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        return self._loop.call(
            lambda: self._async.list_topics(
                include_internal=include_internal, timeout_ms=timeout_ms
            )
        )

    def describe_topics(
        self, names: Iterable[str], *, timeout_ms: float | None = None, timeout: float | None = None
    ) -> Results[str, TopicDescription]:
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        wanted = list(names)
        return self._loop.call(lambda: self._async.describe_topics(wanted, timeout_ms=timeout_ms))

    def describe_cluster(
        self, *, timeout_ms: float | None = None, timeout: float | None = None
    ) -> ClusterDescription:
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        return self._loop.call(lambda: self._async.describe_cluster(timeout_ms=timeout_ms))

    def describe_configs(
        self,
        resources: Iterable[ConfigResource],
        *,
        include_synonyms: bool = False,
        include_documentation: bool = False,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[ConfigResource, dict[str, ConfigEntry]]:
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        wanted = list(resources)
        return self._loop.call(
            lambda: self._async.describe_configs(
                wanted,
                include_synonyms=include_synonyms,
                include_documentation=include_documentation,
                timeout_ms=timeout_ms,
            )
        )

    def incremental_alter_configs(
        self,
        changes: Mapping[ConfigResource, Iterable[AlterConfigOp]],
        *,
        validate_only: bool = False,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[ConfigResource, None]:
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        return self._loop.call(
            lambda: self._async.incremental_alter_configs(
                changes, validate_only=validate_only, timeout_ms=timeout_ms
            )
        )

    def delete_records(
        self,
        before: Mapping[TopicPartition, int],
        *,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[TopicPartition, int]:
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        return self._loop.call(lambda: self._async.delete_records(before, timeout_ms=timeout_ms))

    def list_offsets(
        self,
        specs: Mapping[TopicPartition, int],
        *,
        isolation_level: str = "read_uncommitted",
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[TopicPartition, ListOffsetsResultInfo]:
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        return self._loop.call(
            lambda: self._async.list_offsets(
                specs, isolation_level=isolation_level, timeout_ms=timeout_ms
            )
        )

    # ---- consumer groups

    def list_consumer_groups(
        self,
        *,
        states: Iterable[GroupState | str] | None = None,
        types: Iterable[GroupType | str] | None = None,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> ConsumerGroupListings:
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        wanted = None if states is None else list(states)
        kinds = None if types is None else list(types)
        return self._loop.call(
            lambda: self._async.list_consumer_groups(
                states=wanted, types=kinds, timeout_ms=timeout_ms
            )
        )

    def describe_consumer_groups(
        self,
        group_ids: Iterable[str],
        *,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[str, ConsumerGroupDescription]:
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        wanted = list(group_ids)
        return self._loop.call(
            lambda: self._async.describe_consumer_groups(wanted, timeout_ms=timeout_ms)
        )

    def delete_consumer_groups(
        self,
        group_ids: Iterable[str],
        *,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[str, None]:
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        wanted = list(group_ids)
        return self._loop.call(
            lambda: self._async.delete_consumer_groups(wanted, timeout_ms=timeout_ms)
        )

    def list_consumer_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        require_stable: bool = False,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[TopicPartition, OffsetAndMetadata | None]:
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        wanted = None if partitions is None else list(partitions)
        return self._loop.call(
            lambda: self._async.list_consumer_group_offsets(
                group_id, wanted, require_stable=require_stable, timeout_ms=timeout_ms
            )
        )

    def alter_consumer_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
        *,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[TopicPartition, None]:
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        return self._loop.call(
            lambda: self._async.alter_consumer_group_offsets(
                group_id, offsets, timeout_ms=timeout_ms
            )
        )

    def delete_consumer_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition],
        *,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[TopicPartition, None]:
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        wanted = list(partitions)
        return self._loop.call(
            lambda: self._async.delete_consumer_group_offsets(
                group_id, wanted, timeout_ms=timeout_ms
            )
        )

    # ---- groups of every type, share groups

    def list_groups(
        self,
        *,
        states: Iterable[GroupState | str] | None = None,
        types: Iterable[GroupType | str] | None = None,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> GroupListings:
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        wanted = None if states is None else list(states)
        kinds = None if types is None else list(types)
        return self._loop.call(
            lambda: self._async.list_groups(states=wanted, types=kinds, timeout_ms=timeout_ms)
        )

    def describe_share_groups(
        self,
        group_ids: Iterable[str],
        *,
        include_authorized_operations: bool = False,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[str, ShareGroupDescription]:
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        wanted = list(group_ids)
        return self._loop.call(
            lambda: self._async.describe_share_groups(
                wanted,
                include_authorized_operations=include_authorized_operations,
                timeout_ms=timeout_ms,
            )
        )

    def delete_share_groups(
        self,
        group_ids: Iterable[str],
        *,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[str, None]:
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        wanted = list(group_ids)
        return self._loop.call(
            lambda: self._async.delete_share_groups(wanted, timeout_ms=timeout_ms)
        )

    def list_share_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[TopicPartition, SharePartitionOffsetInfo | None]:
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        wanted = None if partitions is None else list(partitions)
        return self._loop.call(
            lambda: self._async.list_share_group_offsets(group_id, wanted, timeout_ms=timeout_ms)
        )

    def alter_share_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int],
        *,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[TopicPartition, None]:
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        return self._loop.call(
            lambda: self._async.alter_share_group_offsets(group_id, offsets, timeout_ms=timeout_ms)
        )

    def delete_share_group_offsets(
        self,
        group_id: str,
        topics: Iterable[str],
        *,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[str, None]:
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        wanted = list(topics)
        return self._loop.call(
            lambda: self._async.delete_share_group_offsets(group_id, wanted, timeout_ms=timeout_ms)
        )

    # ---- transactions

    def list_transactions(
        self,
        *,
        states: Iterable[TransactionState | str] | None = None,
        producer_ids: Iterable[int] | None = None,
        duration_ms: int | None = None,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> TransactionListings:
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        wanted_states = None if states is None else list(states)
        wanted_ids = None if producer_ids is None else list(producer_ids)
        return self._loop.call(
            lambda: self._async.list_transactions(
                states=wanted_states,
                producer_ids=wanted_ids,
                duration_ms=duration_ms,
                timeout_ms=timeout_ms,
            )
        )

    def describe_transactions(
        self,
        transactional_ids: Iterable[str],
        *,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[str, TransactionDescription]:
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        wanted = list(transactional_ids)
        return self._loop.call(
            lambda: self._async.describe_transactions(wanted, timeout_ms=timeout_ms)
        )

    def describe_producers(
        self,
        partitions: Iterable[TopicPartition],
        *,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[TopicPartition, tuple[ProducerState, ...]]:
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        wanted = list(partitions)
        return self._loop.call(
            lambda: self._async.describe_producers(wanted, timeout_ms=timeout_ms)
        )

    def abort_transaction(
        self,
        spec: AbortTransactionSpec,
        *,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[TopicPartition, None]:
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        return self._loop.call(lambda: self._async.abort_transaction(spec, timeout_ms=timeout_ms))

    def describe_user_scram_credentials(
        self,
        users: Iterable[str] | None = None,
        *,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[str, UserScramCredentialsDescription]:
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        wanted = None if users is None else list(users)
        return self._loop.call(
            lambda: self._async.describe_user_scram_credentials(wanted, timeout_ms=timeout_ms)
        )

    def alter_user_scram_credentials(
        self,
        alterations: Iterable[UserScramCredentialAlteration],
        *,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[str, None]:
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        wanted = list(alterations)
        return self._loop.call(
            lambda: self._async.alter_user_scram_credentials(wanted, timeout_ms=timeout_ms)
        )

    def create_acls(
        self,
        bindings: Iterable[AclBinding],
        *,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[AclBinding, None]:
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        wanted = list(bindings)
        return self._loop.call(lambda: self._async.create_acls(wanted, timeout_ms=timeout_ms))

    def describe_acls(
        self,
        acl_filter: AclBindingFilter | None = None,
        *,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> list[AclBinding]:
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        return self._loop.call(lambda: self._async.describe_acls(acl_filter, timeout_ms=timeout_ms))

    def delete_acls(
        self,
        filters: Iterable[AclBindingFilter],
        *,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[AclBindingFilter, list[AclBinding]]:
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        wanted = list(filters)
        return self._loop.call(lambda: self._async.delete_acls(wanted, timeout_ms=timeout_ms))


async def _make(config: Mapping[str, Any] | None, settings: dict[str, Any]) -> AsyncAdminClient:
    return AsyncAdminClient(config, **settings)
