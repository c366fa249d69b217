""":class:`RemoteFaults`: the faults of a ``kafkette serve`` armed over the network.

The twin of :attr:`MemoryCluster.faults <kafkette.testing.MemoryCluster.faults>`
for a broker in another process: the same methods with the same arguments and
checks, each sent as one IncrementalAlterConfigs request on the broker resource
(the wire form of :mod:`kafkette.server.faults.hook`), so one test body arms
faults on ``memory://`` and over TCP alike. The broker must have been started
with ``kafkette serve --enable-fault-injection``; any other broker refuses
with :class:`~kafkette.errors.InvalidConfigError` and arms nothing.

The requests that arm and clear faults are never faulted themselves, so
:meth:`RemoteFaults.clear` gets through whatever is armed; :meth:`RemoteFaults.armed`
is an ordinary DescribeConfigs (a ``disconnect()`` with no API meets it, and the
admin client retries).
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

from kafkette.admin import AdminClient, AlterConfigOp, ConfigResource, ResourceType
from kafkette.errors import KafkaError
from kafkette.server.faults.hook import (
    ARMED,
    CLEAR,
    PREFIX,
    START_BROKER,
    STOP_BROKER,
    parse_armed,
)
from kafkette.server.faults.table import (
    ALWAYS,
    Fault,
    FaultSpec,
    FaultTable,
    Times,
    api_key,
    error_code,
    fault_times,
)

REQUEST_TIMEOUT_S = 30.0


class RemoteFaults:
    """Arm and clear the faults of a ``kafkette serve --enable-fault-injection`` broker.

    ``RemoteFaults("127.0.0.1:9092")``; ``client_config`` are admin client
    settings (``security_protocol``, ``sasl_mechanism``, ... for a broker whose
    SASL users must be among its ``super.users``). A sync client: each call
    returns once the broker has armed the fault, or raises the Kafka error it
    answered with. A bad argument raises ValueError before anything is sent,
    as :class:`~kafkette.server.faults.table.FaultTable` does. Close it (or use it as
    a context manager) to close its admin client.
    """

    def __init__(self, bootstrap_servers: str, **client_config: Any) -> None:
        self.bootstrap_servers = bootstrap_servers
        self._client_config = client_config
        self._admin: AdminClient | None = None

    # -- the FaultTable methods ----------------------------------------------------------

    def fail(
        self,
        api: str | int,
        error: type[KafkaError] | KafkaError | int,
        times: Times = 1,
        topic: str | None = None,
        partition: int | None = None,
    ) -> None:
        """Answer the next ``times`` matching requests (or always) with ``error``, unserved."""
        self._arm(
            FaultSpec(
                "fail",
                api_key(api),
                error_code(error),
                fault_times(times),
                topic=topic,
                partition=partition,
            )
        )

    def drop_response(self, api: str | int, times: Times = 1) -> None:
        """Serve the next ``times`` requests of ``api``, then close their connection unanswered."""
        self._arm(FaultSpec("drop_response", api_key(api), times=fault_times(times)))

    def delay(self, api: str | int, seconds: float, times: Times = ALWAYS) -> None:
        """Hold requests of ``api`` ``seconds`` (real time) before serving them."""
        self._arm(
            FaultSpec("delay", api_key(api), times=fault_times(times), seconds=float(seconds))
        )

    def disconnect(
        self, api: str | int | None = None, times: Times = 1, *, node: int | None = None
    ) -> None:
        """Close the connection of the next ``times`` requests (of ``api``, or any) unserved;
        with ``node``, only requests reaching that node (``kafkette serve --nodes``)."""
        key = None if api is None else api_key(api)
        self._arm(FaultSpec("disconnect", key, times=fault_times(times), node=node))

    def throttle(self, ms: int) -> None:
        """Put ``throttle_time_ms = ms`` in every answer that has it (0 stops)."""
        self._arm(FaultSpec("throttle", ms=ms))

    def clear(self) -> None:
        """Disarm every fault and the throttle."""
        self._alter(CLEAR, "")

    def armed(self) -> list[Fault]:
        """The faults still armed on the broker, oldest first (as ``FaultTable.armed``)."""
        resource = ConfigResource(ResourceType.BROKER, "")
        entries = self._client().describe_configs([resource], timeout=REQUEST_TIMEOUT_S)
        entry = entries[resource].result().get(ARMED)
        if entry is None:
            raise KafkaError(
                f"{self.bootstrap_servers} lists no {ARMED}: is it kafkette serve "
                "--enable-fault-injection?"
            )
        return [spec.fault() for spec in parse_armed(entry.value) if spec.kind != "throttle"]

    # -- the wire --------------------------------------------------------------------------

    # -- the MemoryCluster node methods ----------------------------------------------------

    def stop_broker(self, node: int) -> None:
        """Stop ``node`` of ``kafkette serve --nodes N`` as :meth:`MemoryCluster.stop_broker
        <kafkette.testing.MemoryCluster.stop_broker>` does: it leaves the ISR of its
        partitions, their leadership moves to the next in-sync replica, and it closes
        each connection at its next request."""
        self._alter(STOP_BROKER, str(_node(node)))

    def start_broker(self, node: int) -> None:
        """Start a stopped ``node`` again: it rejoins the ISR of its partitions."""
        self._alter(START_BROKER, str(_node(node)))

    def _arm(self, spec: FaultSpec) -> None:
        spec.arm(FaultTable())  # the in-process checks, before anything is sent
        kind, _, value = str(spec).partition(":")
        self._alter(PREFIX + kind, value)

    def _alter(self, name: str, value: str) -> None:
        resource = ConfigResource(ResourceType.BROKER, "")
        results = self._client().incremental_alter_configs(
            {resource: [AlterConfigOp(name, value)]}, timeout=REQUEST_TIMEOUT_S
        )
        results[resource].result()

    def _client(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(
                bootstrap_servers=self.bootstrap_servers, **self._client_config
            )
        return self._admin

    # -- lifetime --------------------------------------------------------------------------

    def close(self) -> None:
        """Close the admin client (the armed faults stay armed on the broker)."""
        if self._admin is not None:
            admin, self._admin = self._admin, None
            admin.close()

    def __enter__(self) -> RemoteFaults:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RemoteFaults({self.bootstrap_servers!r})"


def _node(node: int) -> int:
    if isinstance(node, bool) or not isinstance(node, int) or node < 0:
        raise ValueError(f"node is a node id, not {node!r}")
    return node


__all__ = ["RemoteFaults"]
