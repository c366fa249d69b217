"""Injected faults: a small table a test fills and the broker consults per request.

A :class:`FaultTable` belongs to one :class:`~kafkette.server.Broker` (never
the process): :func:`~kafkette.server.net.frames.process_frame`, the one request
entry point of every transport, asks it for a :class:`FaultPlan` per request
when any fault is armed, then acts the plan out (sleep, answer with an error
instead of serving, close the connection before or after serving). The table
itself does no I/O and knows no transport, so the in-process clusters
(``kafkette.testing.MemoryCluster.faults``) and ``kafkette serve --fault
API:ERROR[:TIMES]`` (:func:`parse_fail_spec`, armed at start) share it.

Faults, checked in this order for each request:

- ``disconnect``: the connection is closed before the request is served;
- ``delay``: the request waits that long (real time) before it is served;
- ``fail``: the request is not served; it is answered with a Kafka error code
  (for every partition it names, where the answer is per partition);
- ``drop_response``: the request is served, then its connection is closed
  instead of answering, as when the answer is lost and the client times out;
- ``throttle``: every answer that has ``throttle_time_ms`` carries that value.

Requests of the runtime hook that arm or clear faults (:func:`controls_faults`)
are never faulted, so a test can always clear what it armed.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Final, Literal, TypeAlias, cast

import anyio
import attrs

from kafkette.errors import ERRORS, KafkaError
from kafkette.protocol.messages import (
    API_NAMES,
    RESPONSES,
    FetchResponse,
    FindCoordinatorResponse,
    ListOffsetsResponse,
    OffsetCommitResponse,
    ProduceResponse,
)
from kafkette.protocol.messages.fetch_response import FetchableTopicResponse, PartitionData
from kafkette.protocol.messages.find_coordinator_response import Coordinator
from kafkette.protocol.messages.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsTopicResponse,
)
from kafkette.protocol.messages.offset_commit_response import (
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from kafkette.protocol.messages.produce_response import (
    PartitionProduceResponse,
    TopicProduceResponse,
)
from kafkette.protocol.schema import Request, Response

ALWAYS: Final = "always"
Times: TypeAlias = "int | Literal['always'] | None"
"""How many matching requests a fault takes: a count, or ``"always"`` (None too) until
cleared."""

PRODUCE, FETCH, LIST_OFFSETS, OFFSET_COMMIT, FIND_COORDINATOR = 0, 1, 2, 8, 10
_KEYS_BY_NAME = {name.lower(): key for key, name in API_NAMES.items()}


class FaultDisconnect(Exception):
    """The transport must close the request's connection (without an answer)."""


def api_key(api: str | int) -> int:
    """The API key of ``api``: a key, or a Kafka API name (``"Produce"``, ``"FindCoordinator"``)."""
    if isinstance(api, int):
        if api not in API_NAMES:
            raise ValueError(f"{api} is not a Kafka API key")
        return api
    key = _KEYS_BY_NAME.get(api.lower().removesuffix("request"))
    if key is None:
        raise ValueError(f"{api!r} is not a Kafka API name (e.g. 'Produce', 'FindCoordinator')")
    return key


def error_code(error: type[KafkaError] | KafkaError | int) -> int:
    """A Kafka error code from an error class of :mod:`kafkette.errors`, an instance, or a code."""
    code = error if isinstance(error, int) else error.code
    if not isinstance(code, int) or code <= 0:
        raise ValueError(f"{error!r} has no Kafka error code")
    return code


@attrs.define
class Fault:
    """One armed fault; ``remaining`` None means until :meth:`FaultTable.clear`."""

    kind: str  # "fail", "drop", "delay", "disconnect"
    api_key: int | None
    remaining: int | None = 1
    error_code: int = 0
    delay_s: float = 0.0
    topic: str | None = None
    partition: int | None = None
    node: int | None = None
    """Only requests reaching this node (disconnect); None: any node."""


@attrs.frozen
class FaultPlan:
    """What to do with one request."""

    disconnect: bool = False
    delay_s: float = 0.0
    error_code: int | None = None
    drop_response: bool = False
    throttle_ms: int = 0


NO_FAULT = FaultPlan()


@attrs.frozen
class RemoteControl:
    """Who may arm a broker's faults over the network (:mod:`kafkette.server.faults.hook`,
    on with ``kafkette serve --enable-fault-injection``)."""

    super_users: frozenset[str] | None = None
    """The principals allowed (``User:NAME``, Kafka's ``super.users``), or None for
    every client: a broker that authenticates nobody."""

    def allows(self, principal: str | None) -> bool:
        """Whether a connection authenticated as ``principal`` (None: not at all) may."""
        return self.super_users is None or (principal is not None and principal in self.super_users)


class FaultTable:
    """The faults armed on one broker (thread-safe: tests arm them from any thread)."""

    def __init__(self, topic_name: Callable[[uuid.UUID], str | None] = lambda _: None) -> None:
        self._topic_name = topic_name
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._throttle_ms = 0
        self.active = False
        """Whether any fault is armed: the broker's per-request check, one attribute read."""
        self.remote: RemoteControl | None = None
        """Who may arm faults over the network; None (the default): nobody."""

    # -- arming ----------------------------------------------------------------------

    def fail(
        self,
        api: str | int,
        error: type[KafkaError] | KafkaError | int,
        times: Times = 1,
        topic: str | None = None,
        partition: int | None = None,
    ) -> None:
        """Answer the next ``times`` matching requests (None: all) with ``error``, unserved.

        With ``topic`` (and ``partition``) only requests naming that topic
        (partition) match; this works for Produce, Fetch, ListOffsets and
        OffsetCommit, whose answers then carry the error for every partition
        the request names.
        """
        key = api_key(api)
        code = error_code(error)
        _check_failable(key)
        if (topic is not None or partition is not None) and key not in _PARTITIONS:
            raise ValueError(f"{API_NAMES[key]} requests name no partitions to match a topic on")
        if partition is not None and topic is None:
            raise ValueError("a partition needs its topic")
        self._arm(Fault("fail", key, fault_times(times), code, topic=topic, partition=partition))

    def drop_response(self, api: str | int, times: Times = 1) -> None:
        """Serve the next ``times`` requests of ``api``, then close their connection unanswered."""
        self._arm(Fault("drop", api_key(api), fault_times(times)))

    def delay(self, api: str | int, seconds: float, times: Times = ALWAYS) -> None:
        """Hold requests of ``api`` ``seconds`` (real time) before serving them."""
        if seconds < 0:
            raise ValueError(f"a delay is not negative, got {seconds}")
        self._arm(Fault("delay", api_key(api), fault_times(times), delay_s=seconds))

    def disconnect(
        self, api: str | int | None = None, times: Times = 1, *, node: int | None = None
    ) -> None:
        """Close the connection of the next ``times`` requests (of ``api``, or any) unserved;
        with ``node``, only requests reaching that node (a broker unreachable for a while)."""
        key = None if api is None else api_key(api)
        self._arm(Fault("disconnect", key, fault_times(times), node=node))

    def throttle(self, ms: int) -> None:
        """Put ``throttle_time_ms = ms`` in every answer that has it (0 stops)."""
        if ms < 0:
            raise ValueError(f"a throttle time is not negative, got {ms}")
        with self._lock:
            self._throttle_ms = ms
            self._update()

    def clear(self) -> None:
        """Disarm every fault and the throttle."""
        with self._lock:
            self._faults.clear()
            self._throttle_ms = 0
            self._update()

    def armed(self) -> list[Fault]:
        """A copy of the faults still armed, oldest first."""
        with self._lock:
            return [attrs.evolve(f) for f in self._faults]

    @property
    def throttle_ms(self) -> int:
        """The throttle time put in answers (0: none)."""
        return self._throttle_ms

    def _arm(self, fault: Fault) -> None:
        with self._lock:
            self._faults.append(fault)
            self._update()

    def _update(self) -> None:
        self.active = bool(self._faults) or self._throttle_ms > 0

    # -- consulting ------------------------------------------------------------------

    def plan(self, api_key: int, request: Request, node: int | None = None) -> FaultPlan:
        """What to do with this request (reaching ``node``); uses up one count of each
        fault it matches (at most one fault of each kind applies)."""
        with self._lock:
            chosen: dict[str, Fault] = {}
            for fault in self._faults:
                if fault.kind in chosen or fault.api_key not in (None, api_key):
                    continue
                if fault.node is not None and fault.node != node:
                    continue
                if fault.topic is not None and not self._names(fault, api_key, request):
                    continue
                chosen[fault.kind] = fault
            if "disconnect" in chosen:  # the request goes no further: nothing else is used up
                chosen = {"disconnect": chosen["disconnect"]}
            for fault in chosen.values():
                if fault.remaining is not None:
                    fault.remaining -= 1
            self._faults = [f for f in self._faults if f.remaining is None or f.remaining > 0]
            self._update()
            if not chosen and not self._throttle_ms:
                return NO_FAULT
            failed = chosen.get("fail")
            delayed = chosen.get("delay")
            return FaultPlan(
                disconnect="disconnect" in chosen,
                delay_s=delayed.delay_s if delayed else 0.0,
                error_code=failed.error_code if failed else None,
                drop_response="drop" in chosen,
                throttle_ms=self._throttle_ms,
            )

    def _names(self, fault: Fault, api_key: int, request: Request) -> bool:
        for topic, partition in _PARTITIONS[api_key](request, self._topic_name):
            if topic == fault.topic and fault.partition in (None, partition):
                return True
        return False


def _check_failable(key: int) -> None:
    if key not in _ERROR_RESPONSES and "error_code" not in attrs.fields_dict(
        cast(Any, RESPONSES[key])
    ):
        raise ValueError(f"fail() cannot answer {API_NAMES[key]} with an error code")


@attrs.frozen
class FailSpec:
    """A ``fail`` fault given as text (``kafkette serve --fault API:ERROR[:TIMES]``)."""

    api_key: int
    error_code: int
    times: int = 1

    def arm(self, table: FaultTable) -> None:
        table.fail(self.api_key, self.error_code, times=self.times)

    def __str__(self) -> str:
        name = ERRORS[self.error_code].name if self.error_code in ERRORS else self.error_code
        return f"{API_NAMES[self.api_key]}:{name}:{self.times}"


_CODES_BY_NAME = {info.name: code for code, info in ERRORS.items()}

KINDS = ("fail", "drop_response", "delay", "disconnect", "throttle")
"""The fault kinds a :class:`FaultSpec` names, as :class:`FaultTable`'s methods do."""
"""TIMES for a fault armed until cleared (``times=None``)."""
ANY_API = "*"
"""API for a ``disconnect`` of whatever request comes next."""
_TABLE_KINDS = {"drop": "drop_response"}


@attrs.frozen
class FaultSpec:
    """One fault of any kind given as text: ``kafkette serve --fault`` and the values
    of the runtime hook (:mod:`kafkette.server.faults.hook`).

    ``str()`` gives the canonical text, which :func:`parse_fault_spec` reads back.
    """

    kind: str
    api_key: int | None = None
    error_code: int = 0
    times: int | None = 1
    seconds: float = 0.0
    ms: int = 0
    topic: str | None = None
    partition: int | None = None
    node: int | None = None

    def arm(self, table: FaultTable) -> None:
        """Arm this fault on ``table`` (its method of the same name)."""
        if self.kind == "fail":
            assert self.api_key is not None
            table.fail(self.api_key, self.error_code, self.times, self.topic, self.partition)
        elif self.kind == "drop_response":
            assert self.api_key is not None
            table.drop_response(self.api_key, self.times)
        elif self.kind == "delay":
            assert self.api_key is not None
            table.delay(self.api_key, self.seconds, self.times)
        elif self.kind == "disconnect":
            table.disconnect(self.api_key, self.times, node=self.node)
        else:
            table.throttle(self.ms)

    @classmethod
    def of(cls, fault: Fault) -> FaultSpec:
        """The spec of an armed fault, counting what remains of it."""
        kind = _TABLE_KINDS.get(fault.kind, fault.kind)
        return cls(
            kind,
            fault.api_key,
            fault.error_code,
            fault.remaining,
            fault.delay_s,
            topic=fault.topic,
            partition=fault.partition,
            node=fault.node,
        )

    def fault(self) -> Fault:
        """The :class:`Fault` that :meth:`arm` puts in a table (not for throttle)."""
        kind = {v: k for k, v in _TABLE_KINDS.items()}.get(self.kind, self.kind)
        return Fault(
            kind,
            self.api_key,
            self.times,
            self.error_code,
            self.seconds,
            self.topic,
            self.partition,
            self.node,
        )

    def __str__(self) -> str:
        api = ANY_API if self.api_key is None else API_NAMES[self.api_key]
        times = ALWAYS if self.times is None else str(self.times)
        if self.kind == "throttle":
            return f"throttle:{self.ms}"
        if self.kind == "fail":
            error = ERRORS[self.error_code].name if self.error_code in ERRORS else self.error_code
            parts = [f"fail:{api}:{error}:{times}"]
            if self.topic is not None:
                parts.append(self.topic)
            if self.partition is not None:
                parts.append(str(self.partition))
            return ":".join(parts)
        if self.kind == "delay":
            return f"delay:{api}:{self.seconds!r}:{times}"
        if self.kind == "disconnect" and self.node is not None:
            return f"disconnect:{api}:{times}:{self.node}"
        return f"{self.kind}:{api}:{times}"


def parse_fault_spec(text: str) -> FaultSpec:
    """A fault of any kind, ``KIND:ARGS`` (raises ValueError naming what is wrong):

    - ``fail:API:ERROR[:TIMES[:TOPIC[:PARTITION]]]``, or ``API:ERROR[:TIMES]`` as
      :func:`parse_fail_spec` reads it;
    - ``drop_response:API[:TIMES]``;
    - ``delay:API:SECONDS[:TIMES]`` (TIMES defaults to always);
    - ``disconnect[:API[:TIMES[:NODE]]]`` (API ``*`` or left out: any request; NODE:
      only requests reaching that node);
    - ``throttle:MS`` (0 stops).

    TIMES is a whole number, at least 1, or ``always`` (until cleared); it
    defaults to 1. API is a Kafka API name (``Produce``) or key; ERROR Kafka's
    name of the error (``NOT_ENOUGH_REPLICAS``, any case) or its code.
    """
    kind, _, rest = text.strip().partition(":")
    kind = kind.strip().lower()
    args = [a.strip() for a in rest.split(":")] if rest else []
    if kind not in KINDS:
        if not rest:
            raise ValueError(
                f"expected KIND:ARGS with KIND one of {', '.join(KINDS)}, got {text!r}"
            )
        fail = parse_fail_spec(text)
        return FaultSpec("fail", fail.api_key, fail.error_code, fail.times)
    if not all(args):
        raise ValueError(f"an empty field in {text!r}")
    if kind == "throttle":
        if len(args) != 1 or not args[0].isdigit() or int(args[0]) > MAX_THROTTLE_MS:
            raise ValueError(
                f"expected throttle:MS (a whole number up to {MAX_THROTTLE_MS}, 0 stops), "
                f"got {text!r}"
            )
        return FaultSpec("throttle", ms=int(args[0]))
    if kind == "fail":
        if not 2 <= len(args) <= 5:
            raise ValueError(f"expected fail:API:ERROR[:TIMES[:TOPIC[:PARTITION]]], got {text!r}")
        key = _parse_api(args[0])
        code = _parse_error(args[1])
        times = _parse_times(args[2]) if len(args) > 2 else 1
        topic = args[3] if len(args) > 3 else None
        partition = None
        if len(args) > 4:
            if not args[4].isdigit():
                raise ValueError(f"PARTITION is a whole number, got {args[4]!r}")
            partition = int(args[4])
        FaultTable().fail(key, code, times, topic, partition)  # the table's own checks
        return FaultSpec("fail", key, code, times, topic=topic, partition=partition)
    if kind == "drop_response":
        if not 1 <= len(args) <= 2:
            raise ValueError(f"expected drop_response:API[:TIMES], got {text!r}")
        times = _parse_times(args[1]) if len(args) > 1 else 1
        return FaultSpec("drop_response", _parse_api(args[0]), times=times)
    if kind == "delay":
        if not 2 <= len(args) <= 3:
            raise ValueError(f"expected delay:API:SECONDS[:TIMES], got {text!r}")
        try:
            seconds = float(args[1])
        except ValueError:
            raise ValueError(f"SECONDS is a number, got {args[1]!r}") from None
        if not 0 <= seconds <= MAX_DELAY_S:
            raise ValueError(f"SECONDS is between 0 and {MAX_DELAY_S:g}, got {args[1]!r}")
        times = _parse_times(args[2]) if len(args) > 2 else None
        return FaultSpec("delay", _parse_api(args[0]), times=times, seconds=seconds)
    if len(args) > 3:
        raise ValueError(f"expected disconnect[:API[:TIMES[:NODE]]], got {text!r}")
    which = None if not args or args[0] == ANY_API else _parse_api(args[0])
    times = _parse_times(args[1]) if len(args) > 1 else 1
    node = None
    if len(args) > 2:
        if not args[2].isdigit():
            raise ValueError(f"NODE is a node id, got {args[2]!r}")
        node = int(args[2])
    return FaultSpec("disconnect", which, times=times, node=node)


MAX_THROTTLE_MS = 2**31 - 1
"""Kafka's throttle_time_ms is an int32."""
MAX_DELAY_S = 3600.0
"""The longest delay a text spec may ask for (a request held longer is a hang)."""


def _parse_api(text: str) -> int:
    return api_key(int(text) if _is_int(text) else text)


def _parse_error(text: str) -> int:
    if _is_int(text):
        code = int(text)
        if code not in ERRORS:
            raise ValueError(f"{code} is not a Kafka error code")
    else:
        found = _CODES_BY_NAME.get(text.upper())
        if found is None:
            raise ValueError(f"{text!r} is not a Kafka error name (e.g. NOT_ENOUGH_REPLICAS)")
        code = found
    return error_code(code)


def _parse_times(text: str) -> int | None:
    if text.lower() == ALWAYS:
        return None
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"TIMES is a whole number, at least 1, or {ALWAYS!r}, got {text!r}")
    return int(text)


def parse_fail_spec(text: str) -> FailSpec:
    """``API:ERROR[:TIMES]``: the next TIMES (default 1) requests of API are answered
    with ERROR unserved. API is a Kafka API name (``Produce``) or key; ERROR is
    Kafka's name of the error (``NOT_ENOUGH_REPLICAS``, any case) or its code.
    Raises ValueError naming what is wrong."""
    parts = text.split(":")
    if len(parts) not in (2, 3) or not all(p.strip() for p in parts):
        raise ValueError(f"expected API:ERROR[:TIMES], got {text!r}")
    api, error = parts[0].strip(), parts[1].strip()
    key = api_key(int(api) if _is_int(api) else api)
    if _is_int(error):
        code = int(error)
        if code not in ERRORS:
            raise ValueError(f"{code} is not a Kafka error code")
    else:
        found = _CODES_BY_NAME.get(error.upper())
        if found is None:
            raise ValueError(f"{error!r} is not a Kafka error name (e.g. NOT_ENOUGH_REPLICAS)")
        code = found
    code = error_code(code)
    times = 1
    if len(parts) == 3:
        if not _is_int(parts[2]) or int(parts[2]) < 1:
            raise ValueError(f"TIMES is a whole number, at least 1, got {parts[2]!r}")
        times = int(parts[2])
    _check_failable(key)
    return FailSpec(key, code, times)


def _is_int(text: str) -> bool:
    return text.strip().lstrip("-").isdigit()


def fault_times(times: Times) -> int | None:
    """``times`` as the table keeps it: a count of at least 1, or None for always (until
    cleared), which the text form and the Python methods both spell ``"always"``."""
    if times is None:
        return None
    if isinstance(times, str):
        if times.lower() == ALWAYS:
            return None
        raise ValueError(f"times is a whole number, at least 1, or {ALWAYS!r}, got {times!r}")
    if isinstance(times, bool) or not isinstance(times, int) or times < 1:
        raise ValueError(f"times is a whole number, at least 1, or {ALWAYS!r}, got {times!r}")
    return times


# -- answers with an error ---------------------------------------------------------------

TopicName = Callable[[uuid.UUID], "str | None"]


def _produce_partitions(request: Any, _: TopicName) -> Iterator[tuple[str, int]]:
    for topic in request.topic_data:
        for p in topic.partition_data:
            yield topic.name, p.index


def _fetch_partitions(request: Any, name_of: TopicName) -> Iterator[tuple[str, int]]:
    for topic in request.topics:
        name = topic.topic or name_of(topic.topic_id) or ""
        for p in topic.partitions:
            yield name, p.partition


def _topics_partitions(request: Any, _: TopicName) -> Iterator[tuple[str, int]]:
    for topic in request.topics:
        for p in topic.partitions:
            yield topic.name, p.partition_index


_PARTITIONS: dict[int, Callable[[Any, TopicName], Iterator[tuple[str, int]]]] = {
    PRODUCE: _produce_partitions,
    FETCH: _fetch_partitions,
    LIST_OFFSETS: _topics_partitions,
    OFFSET_COMMIT: _topics_partitions,
}


def _produce_error(request: Any, code: int) -> Response:
    return ProduceResponse(
        responses=[
            TopicProduceResponse(
                name=t.name,
                partition_responses=[
                    PartitionProduceResponse(index=p.index, error_code=code, base_offset=-1)
                    for p in t.partition_data
                ],
            )
            for t in request.topic_data
        ]
    )


def _fetch_error(request: Any, code: int) -> Response:
    return FetchResponse(
        responses=[
            FetchableTopicResponse(
                topic=t.topic,
                topic_id=t.topic_id,
                partitions=[
                    PartitionData(partition_index=p.partition, error_code=code, high_watermark=-1)
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ]
    )


def _list_offsets_error(request: Any, code: int) -> Response:
    return ListOffsetsResponse(
        topics=[
            ListOffsetsTopicResponse(
                name=t.name,
                partitions=[
                    ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=code)
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ]
    )


def _offset_commit_error(request: Any, code: int) -> Response:
    return OffsetCommitResponse(
        topics=[
            OffsetCommitResponseTopic(
                name=t.name,
                partitions=[
                    OffsetCommitResponsePartition(
                        partition_index=p.partition_index, error_code=code
                    )
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ]
    )


def _find_coordinator_error(request: Any, code: int) -> Response:
    keys = list(request.coordinator_keys) or [request.key]
    return FindCoordinatorResponse(
        error_code=code,
        node_id=-1,
        port=-1,
        coordinators=[Coordinator(key=k, node_id=-1, port=-1, error_code=code) for k in keys],
    )


_ERROR_RESPONSES: dict[int, Callable[[Any, int], Response]] = {
    PRODUCE: _produce_error,
    FETCH: _fetch_error,
    LIST_OFFSETS: _list_offsets_error,
    OFFSET_COMMIT: _offset_commit_error,
    FIND_COORDINATOR: _find_coordinator_error,
}


def error_response(request: Request, code: int) -> Response:
    """``request`` answered with ``code`` (where the answer is per partition, for each one
    the request names; otherwise in the answer's top-level ``error_code``)."""
    build = _ERROR_RESPONSES.get(request.API_KEY)
    if build is not None:
        return build(request, code)
    response: Response = cast(Any, RESPONSES[request.API_KEY])(error_code=code)
    return response


def set_throttle(response: Response, ms: int) -> None:
    """Put ``ms`` in the answer's ``throttle_time_ms``, where it has one."""
    if hasattr(response, "throttle_time_ms"):
        response.throttle_time_ms = ms


CONFIG_PREFIX = "kafkette.fault."
"""The config names of the runtime hook (:mod:`kafkette.server.faults.hook`)."""
ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS, BROKER_RESOURCE = 33, 44, 4


def controls_faults(request: Request) -> bool:
    """Whether ``request`` arms or clears faults through the runtime hook: such requests
    are never faulted themselves, so that ``clear()`` gets through whatever is armed
    (a ``fail`` of every IncrementalAlterConfigs, a ``disconnect`` of every request)."""
    if request.API_KEY not in (ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS):
        return False
    return any(
        resource.resource_type == BROKER_RESOURCE
        and any(c.name.startswith(CONFIG_PREFIX) for c in resource.configs)
        for resource in cast(Any, request).resources
    )


async def serve_with_faults(
    table: FaultTable,
    request: Request,
    serve: Callable[[], Awaitable[Response | None]],
    node: int | None = None,
) -> Response | None:
    """Serve ``request`` (reaching ``node``) with ``serve`` as the faults armed in
    ``table`` say.

    Raises :class:`FaultDisconnect` where the connection must close instead of answering.
    """
    plan = NO_FAULT if controls_faults(request) else table.plan(request.API_KEY, request, node)
    if plan.disconnect:
        raise FaultDisconnect(f"fault injected: {type(request).NAME} not served, connection closed")
    if plan.delay_s:
        await anyio.sleep(plan.delay_s)
    response: Response | None
    if plan.error_code is None:
        response = await serve()
    elif request.API_KEY == PRODUCE and getattr(request, "acks", 1) == 0:
        response = None  # acks=0: no answer, not even an error
    else:
        response = error_response(request, plan.error_code)
    if plan.drop_response:
        raise FaultDisconnect(f"fault injected: {type(request).NAME} served, answer dropped")
    if response is not None and plan.throttle_ms:
        set_throttle(response, plan.throttle_ms)
    return response


__all__ = [
    "FailSpec",
    "FaultDisconnect",
    "FaultPlan",
    "FaultSpec",
    "FaultTable",
    "RemoteControl",
    "api_key",
    "controls_faults",
    "error_code",
    "error_response",
    "parse_fail_spec",
    "parse_fault_spec",
    "serve_with_faults",
    "set_throttle",
]
