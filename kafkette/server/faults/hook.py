"""The runtime fault hook: a broker's faults armed and cleared over Kafka's admin API.

A test of clients against ``kafkette serve`` arms the same faults as
``MemoryCluster.faults`` does in process (:class:`~kafkette.server.faults.table.FaultTable`)
by altering the configs of the BROKER resource with reserved names, each
value a fault in the text form of :func:`~kafkette.server.faults.table.parse_fault_spec`
without its kind:

============================== ============================================
name (operation SET)           value
============================== ============================================
``kafkette.fault.fail``        ``API:ERROR[:TIMES[:TOPIC[:PARTITION]]]``
``kafkette.fault.drop_response`` ``API[:TIMES]``
``kafkette.fault.delay``       ``API:SECONDS[:TIMES]``
``kafkette.fault.disconnect``  ``[API[:TIMES]]`` (empty: the next request)
``kafkette.fault.throttle``    ``MS`` (0 stops)
``kafkette.fault.clear``       anything (disarms every fault and the throttle)
``kafkette.fault.stop_broker`` ``NODE``: stop a node of ``--nodes N``
``kafkette.fault.start_broker`` ``NODE``: start it again
============================== ============================================

(``stop_broker`` and ``start_broker`` act on the simulated nodes as
``MemoryCluster.stop_broker``/``start_broker`` do: :class:`~kafkette.server.nodes.NodeTable`
moves leaders and changes the ISRs; a stopped node closes each connection at its next
request, except these commands.)

and DescribeConfigs of the broker lists what is armed as
``kafkette.fault.armed`` (the canonical texts, ``;``-separated, oldest first,
with what remains of each count). The client side is
:class:`kafkette.testing.RemoteFaults`.

Why this wire form: it is Kafka's own protocol, so any Kafka admin client can
arm a fault (Java's ``kafka-configs.sh --entity-type brokers --entity-default
--alter --add-config kafkette.fault.fail=Produce:NOT_ENOUGH_REPLICAS:3``,
confluent-kafka's ``incremental_alter_configs``, kafka-python's
``alter_configs``), with nothing to install on the test's side and no second
port to open or secure; it goes through the listener's TLS and SASL like any
request. Kafka itself already drives runtime actions that are not stored
configs through these APIs (log levels, the BROKER_LOGGER resource). A
resource with per-entry names gives each fault kind its own name and a
per-resource error with a message, ``validate_only`` checks a fault without
arming it, and the BROKER resource is the right scope: the faults belong to
the broker core (all its nodes with ``--nodes``), never the process. The
values are commands, not configs: they are not stored, not listed among the
broker's configs and do not replace its dynamic configs (AlterConfigs naming
only ``kafkette.fault.*`` names leaves the others as they are); a resource
cannot mix them with real configs. These requests are never faulted
themselves (:func:`~kafkette.server.faults.table.controls_faults`): ``clear()`` gets
through whatever is armed.

Access: the hook is off unless the broker was started with
``kafkette serve --enable-fault-injection`` (:attr:`FaultTable.remote
<kafkette.server.faults.table.FaultTable.remote>`); otherwise every such name is
answered INVALID_CONFIG saying so, exactly as an unknown config would be,
and nothing is armed. Off by default because a fault is a denial of service
by design (``fail:Produce:...:always``, an hour's ``delay`` on Fetch): a
broker serving real clients must not hand that to whoever can send an admin
request. With Kafka's ``super.users`` property (which ``kafkette serve``
requires when it has SASL users), only those principals may use it: the
connection's SASL user or TLS client certificate
(:mod:`kafkette.server.acl.principal`). Others get CLUSTER_AUTHORIZATION_FAILED,
as Kafka answers a principal not allowed to alter a broker's configs, and a
connection that did not authenticate is ``User:ANONYMOUS`` and refused. With
an ACL authorizer, the request also needs ALTER_CONFIGS on the cluster, as
any broker config change does (checked first, by the configs handler).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any, Protocol

from kafkette.errors import (
    ClusterAuthorizationFailedError,
    InvalidConfigError,
    InvalidRequestError,
)
from kafkette.protocol.messages.describe_configs_response import DescribeConfigsResourceResult
from kafkette.server.acl.principal import connection_principal
from kafkette.server.faults.table import (
    CONFIG_PREFIX,
    KINDS,
    FaultSpec,
    FaultTable,
    parse_fault_spec,
)

PREFIX = CONFIG_PREFIX
"""Every name of the hook starts with this."""
CLEAR = PREFIX + "clear"
STOP_BROKER = PREFIX + "stop_broker"
START_BROKER = PREFIX + "start_broker"
"""Commands that stop and start a simulated node (``kafkette serve --nodes N``)."""
ARMED = PREFIX + "armed"
"""The DescribeConfigs entry listing the armed faults."""
SEPARATOR = ";"
"""Between faults in the value of :data:`ARMED`."""
BROKER_RESOURCE = 4
SET = 0
DYNAMIC_BROKER_CONFIG = 2
STRING_TYPE = 2
OFF_MESSAGE = (
    "fault injection is off on this broker (start kafkette serve with --enable-fault-injection)"
)


class AlterEntry(Protocol):
    """One config entry of AlterConfigs or IncrementalAlterConfigs."""

    @property
    def name(self) -> str: ...

    @property
    def value(self) -> str | None: ...


class Nodes(Protocol):
    """What :data:`STOP_BROKER` and :data:`START_BROKER` drive: the broker's
    :class:`~kafkette.server.nodes.NodeTable` (this room may not import the core)."""

    @property
    def multi(self) -> bool: ...

    @property
    def ids(self) -> tuple[int, ...]: ...

    def stop(self, node: int, partitions: list[Any]) -> None: ...

    def start(self, node: int, partitions: list[Any]) -> None: ...


def names_faults(resource_type: int, entries: Iterable[AlterEntry]) -> bool:
    """Whether an alter of a resource is for this hook (a BROKER one naming a fault)."""
    return resource_type == BROKER_RESOURCE and any(e.name.startswith(PREFIX) for e in entries)


def alter(
    table: FaultTable,
    node_ids: Collection[int],
    resource_name: str,
    entries: Sequence[AlterEntry],
    operations: Sequence[int],
    validate_only: bool,
    nodes: Nodes | None = None,
    partitions: Callable[[], Iterable[Any]] = tuple,
) -> None:
    """Arm on ``table`` (or with ``validate_only`` check) the faults one resource names,
    all or none.

    ``node_ids`` are the nodes the broker core stands for (a resource names one,
    or none: the empty name). ``operations`` are the entries'
    IncrementalAlterConfigs operations (SET for AlterConfigs). ``nodes`` and
    ``partitions`` are what :data:`STOP_BROKER` and :data:`START_BROKER` act on. Raises
    the :class:`~kafkette.errors.ApiError` to answer the resource with.
    """
    first = entries[0].name
    if table.remote is None:
        raise InvalidConfigError(f"{first}: {OFF_MESSAGE}")
    if not table.remote.allows(connection_principal.get()):
        who = connection_principal.get() or "User:ANONYMOUS"
        raise ClusterAuthorizationFailedError(
            f"{who} may not arm faults: only the broker's super.users may"
        )
    _check_resource(node_ids, resource_name)
    specs: list[FaultSpec | None] = []  # None: clear
    commands: list[tuple[str, int]] = []
    seen: set[str] = set()
    for entry, operation in zip(entries, operations, strict=True):
        name, value = entry.name, entry.value
        if not name.startswith(PREFIX):
            raise InvalidRequestError(
                f"{name}: a resource naming {PREFIX}* faults names nothing else"
            )
        if name in seen:
            raise InvalidRequestError(f"Error due to duplicate config keys: {name}")
        seen.add(name)
        if operation != SET:
            raise InvalidRequestError(f"{name}: faults are armed with SET only")
        if value is None:
            raise InvalidRequestError(f"Null value not supported for : {name}")
        if name in (STOP_BROKER, START_BROKER):
            commands.append((name, _node(nodes, name, value)))
            continue
        specs.append(_spec(name, value))
    if validate_only:
        return
    for name, node in commands:
        assert nodes is not None
        if name == STOP_BROKER:
            nodes.stop(node, list(partitions()))
        else:
            nodes.start(node, list(partitions()))
    for spec in specs:
        if spec is None:
            table.clear()
        else:
            spec.arm(table)


def _spec(name: str, value: str) -> FaultSpec | None:
    if name == CLEAR:
        return None
    kind = name.removeprefix(PREFIX)
    if kind not in KINDS:
        raise InvalidConfigError(f"{name} is not a fault (kafkette.fault.fail, ...)")
    try:
        return parse_fault_spec(f"{kind}:{value}" if value else kind)
    except ValueError as exc:
        raise InvalidConfigError(f"{name}={value}: {exc}") from None


def _node(nodes: Nodes | None, name: str, value: str) -> int:
    """The node a stop or start command names, checked."""
    if nodes is None or not nodes.multi:
        raise InvalidConfigError(f"{name}: this broker stands for one node (serve --nodes N)")
    node = int(value) if value.strip().isdigit() else None
    if node is None or node not in nodes.ids:
        raise InvalidConfigError(f"{name}={value}: expected one of the nodes {list(nodes.ids)}")
    return node


def _check_resource(node_ids: Collection[int], name: str) -> None:
    if name == "":
        return
    if not name.isdigit() or int(name) not in node_ids:
        raise InvalidRequestError(
            f"Unexpected broker id, expected one of {sorted(node_ids)} "
            f"or empty string, but received {name}"
        )


def armed_text(table: FaultTable) -> str:
    """The armed faults as the value of :data:`ARMED` (the throttle last, when set)."""
    texts = [str(FaultSpec.of(f)) for f in table.armed()]
    if table.throttle_ms:
        texts.append(f"throttle:{table.throttle_ms}")
    return SEPARATOR.join(texts)


def describe_entry(
    table: FaultTable, keys: Sequence[str] | None
) -> list[DescribeConfigsResourceResult]:
    """The :data:`ARMED` entry for DescribeConfigs of the broker whose faults ``table``
    holds, when the hook is on and ``keys`` (None: all) asks for it; else nothing."""
    if table.remote is None or (keys is not None and ARMED not in keys):
        return []
    return [
        DescribeConfigsResourceResult(
            name=ARMED,
            value=armed_text(table),
            read_only=True,
            is_default=False,
            config_source=DYNAMIC_BROKER_CONFIG,
            is_sensitive=False,
            config_type=STRING_TYPE,
            documentation="The faults armed on this broker (kafkette.fault.* names)",
        )
    ]


def parse_armed(text: str | None) -> list[FaultSpec]:
    """The faults listed in a value of :data:`ARMED`."""
    return [parse_fault_spec(t) for t in (text or "").split(SEPARATOR) if t]


__all__ = [
    "ARMED",
    "CLEAR",
    "OFF_MESSAGE",
    "PREFIX",
    "START_BROKER",
    "STOP_BROKER",
    "alter",
    "armed_text",
    "describe_entry",
    "names_faults",
    "parse_armed",
]
