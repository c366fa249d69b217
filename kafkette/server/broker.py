"""The broker core: a request object in, a response object out.

:class:`Broker` knows nothing of sockets: the TCP listener
(:mod:`kafkette.server.net.listener`) and the in-process transport both hand it
a parsed request with its header and send back what :meth:`Broker.handle`
returns, serving each API with the handler registered for it in
:mod:`kafkette.server.dispatch`.

Time comes from an injected clock (milliseconds), so that tests control
session timeouts, retention and long polls without sleeping.
"""

from __future__ import annotations

import logging
import uuid

import anyio

from kafkette.backends import DiskStorage, Log, MemoryStorage, Storage
from kafkette.clocks import WallClockMs, wall_ms
from kafkette.errors import KafkaError
from kafkette.protocol.schema import Request, Response
from kafkette.server.acl.store import ACLS_FILE, open_authorizer
from kafkette.server.cluster import Cluster
from kafkette.server.collector import ServedCollector
from kafkette.server.config.broker_config import BrokerConfig
from kafkette.server.connection_quotas import ConnectionQuotas, parse_overrides
from kafkette.server.dispatch import HANDLERS, RequestContext
from kafkette.server.faults.table import FaultTable
from kafkette.server.groups.consumer_protocol import ConsumerGroupConfig, ConsumerGroupCoordinator
from kafkette.server.groups.consumer_topics import ClusterTopicImage
from kafkette.server.groups.coordinator import GroupCoordinator
from kafkette.server.groups.log_store import LogGroupStore, offsets_topic
from kafkette.server.groups.timer import Timed, group_timer_loop
from kafkette.server.maintenance import maintenance_loop
from kafkette.server.metrics import BrokerMetrics, BrokerState
from kafkette.server.nodes import NodeTable, single_node
from kafkette.server.producer_ids import IDS_FILE, ProducerIdManager
from kafkette.server.sasl.credentials import CredentialStore
from kafkette.server.sasl.users import CREDENTIALS_FILE, ScramUsers
from kafkette.server.share.coordinator import ShareConfig, ShareCoordinator
from kafkette.server.share.log_store import ShareStateLog, share_state_topic
from kafkette.server.txn.coordinator import TransactionCoordinator
from kafkette.server.txn.log_store import TxnLogStore, transaction_state_topic
from kafkette.server.txn.markers import MarkerWriter

logger = logging.getLogger("kafkette.server")


class Broker:
    """One Kafka broker: this node leads every partition and coordinates every group
    (unless :attr:`nodes` makes it stand for several nodes).

    It builds its components and hands each the few things it uses. Its timers
    (the maintenance loop, the group and transaction coordinators' deadlines) run
    in :meth:`run_background`, which whoever runs the broker starts.
    """

    def __init__(
        self,
        config: BrokerConfig | None = None,
        *,
        storage: Storage | None = None,
        clock: WallClockMs = wall_ms,
    ) -> None:
        from kafkette.server import handlers  # noqa: F401  (registers every handler)

        self.config = config or BrokerConfig()
        self.clock = clock
        if storage is None:
            if self.config.data_dir is not None:
                storage = DiskStorage(
                    self.config.data_dir + "/logs",
                    clock=lambda: int(self.clock()),
                    default_config=self.config.log,
                    read_only=self.config.read_only,
                )
            else:
                storage = MemoryStorage(
                    clock=lambda: int(self.clock()), default_config=self.config.log
                )
        self.cluster = Cluster(
            storage, self.config.log, self.config.data_dir, read_only=self.config.read_only
        )
        self.data_changed = _Notifier()
        """Woken on every append, for long-polling fetches."""
        self.closed = False
        self.faults = FaultTable(self._topic_name)
        """Faults a test armed on this broker, consulted per request (none by default)."""
        self.connection_quotas = ConnectionQuotas(self._connection_limits)
        """Open TCP connections per client address (``max.connections.per.ip``)."""
        self.authorizer = open_authorizer(
            self.config.authorizer_class_name,
            self.config.super_users,
            self.config.allow_everyone_if_no_acl_found,
            self.config.data_dir,
        )
        """The ACLs and their decisions (``authorizer.class.name``); None: every request
        is allowed."""
        self.acls_file = self.cluster.kept_file(ACLS_FILE)
        """The ACL bindings kept in the data directory (None without one)."""
        self._credentials_file = self.cluster.kept_file(CREDENTIALS_FILE)
        self._ids_file = self.cluster.kept_file(IDS_FILE)
        self.nodes: NodeTable = single_node(self.config.node_id, self.config.advertised)
        """The nodes this core stands for (one, unless a test cluster or ``kafkette serve
        --nodes`` made several): partition leaders and coordinators per node."""
        self._topic_changes: anyio.Lock | None = None
        self._producer_ids: ProducerIdManager | None = None
        self._scram_users: ScramUsers | None = None
        self.offsets_topic = offsets_topic(
            self.cluster,
            partitions=self.config.offsets_topic_num_partitions,
            segment_bytes=self.config.offsets_topic_segment_bytes,
            clock=self.now_ms,
            appended=self.appended,
        )
        """``__consumer_offsets``, made on first use."""
        group_log = LogGroupStore(self.offsets_topic)
        self.groups = GroupCoordinator(self.config, group_log, self.clock)
        """Consumer groups and committed offsets, kept in ``__consumer_offsets``."""
        loaded = group_log.load()
        self.groups.restore(loaded)
        self.consumer_topics = ClusterTopicImage(self.cluster)
        self.consumer_groups = ConsumerGroupCoordinator(
            ConsumerGroupConfig(
                session_timeout_ms=self.config.group_consumer_session_timeout_ms,
                heartbeat_interval_ms=self.config.group_consumer_heartbeat_interval_ms,
                max_size=self.config.group_consumer_max_size,
                assignors=self.config.group_consumer_assignors,
                migration_policy=self.config.group_consumer_migration_policy,
            ),
            self.consumer_topics,
            clock=self.now_ms,
        )
        """Groups of the consumer protocol (KIP-848), kept in ``__consumer_offsets`` as
        Kafka's consumer group records; their committed offsets are kept by :attr:`groups`."""
        self.consumer_groups.group_configs = self.cluster.group_configs
        if not self.config.read_only:
            self.consumer_groups.record_sink = group_log.write_consumer_group
        self.consumer_groups.restore(loaded.consumer_groups, self.now_ms())
        self.share_state_topic = share_state_topic(
            self.cluster, clock=self.now_ms, appended=self.appended
        )
        """``__share_group_state``, made on first use."""
        share_log = ShareStateLog(self.share_state_topic)
        self.share_groups = ShareCoordinator(
            ShareConfig(
                delivery_count_limit=self.config.group_share_delivery_count_limit,
                record_lock_duration_ms=self.config.group_share_record_lock_duration_ms,
                session_timeout_ms=self.config.group_share_session_timeout_ms,
                heartbeat_interval_ms=self.config.group_share_heartbeat_interval_ms,
                partition_max_record_locks=self.config.group_share_partition_max_record_locks,
                max_size=self.config.group_share_max_size,
            ),
            clock=self.now_ms,
            group_configs=self.cluster.group_configs,
            sink=None if self.config.read_only else share_log.append,
        )
        """Share groups (KIP-932), their share partitions kept in ``__share_group_state``."""
        self.share_groups.replay(share_log.load())
        self.share_groups.available = self.data_changed.notify
        self.transaction_state_topic = transaction_state_topic(
            self.cluster,
            partitions=self.config.transaction_state_log_num_partitions,
            segment_bytes=self.config.transaction_state_log_segment_bytes,
            clock=self.now_ms,
            appended=self.appended,
        )
        """``__transaction_state``, made on first use."""
        txn_log = TxnLogStore(self.transaction_state_topic)
        self.markers = MarkerWriter(
            self.cluster, group_log, self.groups, clock=self.now_ms, appended=self.appended
        )
        """Writes the markers that end transactions (the coordinator's and WriteTxnMarkers')."""
        self.transactions = TransactionCoordinator(
            txn_log,
            self.markers,
            group_log,
            clock=self.clock,
            allocate_producer_id=lambda: self.producer_ids.next_id(),
            max_timeout_ms=self.config.transaction_max_timeout_ms,
            id_expiration_ms=self.config.transactional_id_expiration_ms,
        )
        """Transactional ids and their transactions, kept in ``__transaction_state``."""
        self.transactions.load(finish_prepared=not self.config.read_only)
        self.metrics = BrokerMetrics(
            BrokerState(self.cluster, self.groups, self.consumer_groups, self.transactions),
            self.now_ms,
            self._topic_name,
        )
        """What the metrics endpoint shows (``kafkette serve --metrics``), KIP-714's
        client metrics subscriptions and what clients pushed."""
        self.metrics.client_metrics.restore(self.cluster.client_metrics_configs)
        self.metrics.client_metrics.on_change = self.cluster.set_client_metrics_configs

    @property
    def topic_changes(self) -> anyio.Lock:
        """Held while a request creates, grows or deletes topics: such requests are
        served one at a time, as Kafka's controller does, also while one of them
        yields to other connections in the middle of its work."""
        if self._topic_changes is None:  # made on first use: it needs an event loop
            self._topic_changes = anyio.Lock()
        return self._topic_changes

    @property
    def producer_ids(self) -> ProducerIdManager:
        """Allocator of idempotent producer ids (made on first use, past every id in the logs)."""
        if self._producer_ids is None:
            logs = [p.log for p in self.cluster.partitions()]
            ids = [pid for log in logs for pid in log.producer_state().producers]
            highest = max(max(ids, default=-1), self.transactions.highest_producer_id())
            self._producer_ids = ProducerIdManager(self._ids_file, at_least=highest + 1)
        return self._producer_ids

    @property
    def scram_users(self) -> ScramUsers:
        """The SCRAM users DescribeUserScramCredentials and AlterUserScramCredentials
        manage: a credential store of their own (made on first use) unless
        :meth:`use_credentials` gave the SASL listeners' one."""
        if self._scram_users is None:
            self._scram_users = self._users(CredentialStore())
        return self._scram_users

    def use_credentials(self, store: CredentialStore) -> None:
        """Manage ``store`` (the users the SASL listeners authenticate), loading into it
        the SCRAM credentials the data directory keeps
        (:class:`~kafkette.server.sasl.users.CredentialsFileError` if they cannot be read)."""
        self._scram_users = self._users(store)

    def _users(self, store: CredentialStore) -> ScramUsers:
        keep = None if self._credentials_file is None else self._credentials_file.change
        return ScramUsers(store, self.config.data_dir, keep=keep)

    def own_collector(self) -> ServedCollector:
        """Take charge of the process's garbage collector, as ``kafkette serve`` does
        (not an in-process cluster: there the user's process owns it): freeze what exists
        now and after bulk topic changes (:mod:`kafkette.server.collector`)."""
        collector = ServedCollector()
        self.cluster.collector = collector
        collector.install()
        return collector

    async def run_background(self) -> None:
        """Run the broker's timers until cancelled: retention, compaction and flushes
        (:func:`~kafkette.server.maintenance.maintenance_loop`), the coordinators'
        deadlines (:meth:`run_timers`) and the data directory's small files written in
        worker threads (:meth:`Cluster.keep_files_written
        <kafkette.server.cluster.Cluster.keep_files_written>`)."""
        for kept in self.cluster.kept_files:  # deferred before any task of this starts
            kept.defer()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(maintenance_loop, self.cluster, self.config, self.now_ms)
            tasks.start_soon(self.run_timers)
            tasks.start_soon(self.cluster.keep_files_written)

    async def run_timers(self) -> None:
        """Run the deadlines of the classic group, consumer group and transaction
        coordinators as they come due, until cancelled; at once for a broker serving
        its data directory read-only: what they do (expiring members, offsets and
        transactions) writes to the logs."""
        if self.config.read_only:
            return
        coordinators: tuple[tuple[str, Timed], ...] = (
            ("group", self.groups),
            ("consumer group", self.consumer_groups),
            ("share group", self.share_groups),
            ("transaction", self.transactions),
        )
        await group_timer_loop(coordinators, self.now_ms)

    def connection_closed(self, peer: str) -> None:
        """A client connection from ``peer`` (its ``host:port``) closed: the share
        sessions it opened end (Kafka's ShareSessionCache disconnect listener)."""
        self.share_groups.disconnect(peer)

    def appended(self, log: Log) -> None:
        """After an append to ``log``: advance its high watermark to the log end (this
        node is the only replica) and wake long-polling fetches."""
        log.update_high_watermark(log.log_end_offset)
        self.data_changed.notify()

    def _connection_limits(self) -> tuple[int, dict[str, int]]:
        """``max.connections.per.ip`` and its overrides: dynamic values over static."""
        dynamic = {**self.cluster.dynamic_default_configs, **self.cluster.dynamic_broker_configs}
        limit = dynamic.get("max.connections.per.ip")
        overrides = dynamic.get(
            "max.connections.per.ip.overrides", self.config.max_connections_per_ip_overrides
        )
        return (
            self.config.max_connections_per_ip if limit is None else int(limit),
            parse_overrides(overrides),
        )

    def _topic_name(self, topic_id: uuid.UUID) -> str | None:
        try:
            return self.cluster.get_topic_by_id(topic_id).name
        except KafkaError:
            return None

    @property
    def node_id(self) -> int:
        return self.config.node_id

    @property
    def cluster_id(self) -> str:
        return self.cluster.cluster_id

    def now_ms(self) -> int:
        return int(self.clock())

    def supported_versions(self) -> dict[int, tuple[int, int]]:
        """API key -> (min, max) version this broker serves."""
        return {key: (e.min_version, e.max_version) for key, e in sorted(HANDLERS.items())}

    def supports(self, api_key: int, api_version: int) -> bool:
        entry = HANDLERS.get(api_key)
        return entry is not None and entry.min_version <= api_version <= entry.max_version

    async def handle(self, ctx: RequestContext, request: Request) -> Response | None:
        """Serve one request; ``None`` means no response is sent (Produce with acks=0)."""
        entry = HANDLERS[request.API_KEY]
        return await entry.func(self, ctx, request)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.cluster.close()


class _Notifier:
    """A broadcast wake-up: waiters sleep until the next :meth:`notify` (or a timeout)."""

    def __init__(self) -> None:
        self._event: anyio.Event | None = None  # made on first wait: it needs an event loop

    @property
    def waiting(self) -> bool:
        """Whether a waiter sleeps until the next :meth:`notify`."""
        return self._event is not None

    def notify(self) -> None:
        if self._event is not None:
            self._event.set()
            self._event = None

    async def wait(self, timeout_s: float) -> None:
        if self._event is None:
            self._event = anyio.Event()
        event = self._event
        with anyio.move_on_after(timeout_s):
            await event.wait()
