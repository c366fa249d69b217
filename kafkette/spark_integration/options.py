"""The data source's options: Spark's Kafka connector names, meanings and error messages.

Spark hands a Python data source its options with lower-cased keys, so every
key here is lower case (``startingoffsets`` for ``startingOffsets``). Kafka
client settings are the ``kafka.``-prefixed options; :func:`kafka_client_settings`
strips the prefix and refuses the ones Spark's connector refuses, with Spark's
messages. The errors are :class:`ValueError`, Python's counterpart of the
``IllegalArgumentException`` Spark throws.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

import attrs

from kafkette.spark_integration.avro.options import AvroValues
from kafkette.structs import TopicPartition

KAFKA_PREFIX = "kafka."

_AUTO_OFFSET_RESET_MESSAGE = """
Kafka option 'auto.offset.reset' is not supported.
Instead set the source option 'startingoffsets' to 'earliest' or 'latest'
to specify where to start. Structured Streaming manages which offsets are consumed
internally, rather than relying on the kafkaConsumer to do it. This will ensure that no
data is missed when new topics/partitions are dynamically subscribed. Note that
'startingoffsets' only applies when a new Streaming query is started, and
that resuming will always pick up from where the query left off. See the docs for more
details.
"""

# Spark's messages for the client settings its connector refuses: records are
# bytes in and bytes out, and Spark (not the client) decides offsets and commits.
REFUSED_CLIENT_SETTINGS: Mapping[str, str] = {
    "auto.offset.reset": _AUTO_OFFSET_RESET_MESSAGE,
    "key.deserializer": (
        "Kafka option 'key.deserializer' is not supported as keys are deserialized as byte "
        "arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize "
        "the keys."
    ),
    "value.deserializer": (
        "Kafka option 'value.deserializer' is not supported as values are deserialized as byte "
        "arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize "
        "the values."
    ),
    "enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported",
    "interceptor.classes": "Kafka option 'interceptor.classes' is not supported",
    "key.serializer": (
        "Kafka option 'key.serializer' is not supported as keys are serialized with "
        "ByteArraySerializer."
    ),
    "value.serializer": (
        "Kafka option 'value.serializer' is not supported as value are serialized with "
        "ByteArraySerializer."
    ),
}


def kafka_client_settings(options: Mapping[str, str]) -> dict[str, str]:
    """The ``kafka.*`` options as Kafka client settings, the ``kafka.`` prefix stripped.

    Options without the prefix (the data source's own) are left out. A setting
    Spark's connector refuses (``kafka.auto.offset.reset``, the key and value
    (de)serializers, ``kafka.enable.auto.commit``, ``kafka.interceptor.classes``)
    raises :class:`ValueError` with Spark's message. Values stay strings:
    kafkette's clients accept Kafka's string forms and reject unknown settings
    when they are built.
    """
    settings: dict[str, str] = {}
    for key, value in options.items():
        if not key.lower().startswith(KAFKA_PREFIX):
            continue
        name = key[len(KAFKA_PREFIX) :].lower()
        refusal = REFUSED_CLIENT_SETTINGS.get(name)
        if refusal is not None:
            raise ValueError(refusal)
        settings[name] = value
    return settings


# ---- the data source's own options (lower-cased keys, as Spark passes them)

ASSIGN = "assign"
SUBSCRIBE = "subscribe"
SUBSCRIBE_PATTERN = "subscribepattern"
STRATEGY_KEYS = (SUBSCRIBE, SUBSCRIBE_PATTERN, ASSIGN)
STARTING_OFFSETS = "startingoffsets"
ENDING_OFFSETS = "endingoffsets"
STARTING_TIMESTAMP = "startingtimestamp"
ENDING_TIMESTAMP = "endingtimestamp"
STARTING_OFFSETS_BY_TIMESTAMP = "startingoffsetsbytimestamp"
ENDING_OFFSETS_BY_TIMESTAMP = "endingoffsetsbytimestamp"
STARTING_OFFSETS_BY_TIMESTAMP_STRATEGY = "startingoffsetsbytimestampstrategy"
FAIL_ON_DATA_LOSS = "failondataloss"
MIN_PARTITIONS = "minpartitions"
MAX_RECORDS_PER_PARTITION = "maxrecordsperpartition"
MAX_OFFSETS_PER_TRIGGER = "maxoffsetspertrigger"
MIN_OFFSETS_PER_TRIGGER = "minoffsetspertrigger"
MAX_TRIGGER_DELAY = "maxtriggerdelay"
GROUP_ID_PREFIX = "groupidprefix"
GROUP_ID = "kafka.group.id"
INCLUDE_HEADERS = "includeheaders"
POLL_TIMEOUT_MS = "kafkaconsumer.polltimeoutms"

DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000
DEFAULT_POLL_TIMEOUT_MS = 120_000
EARLIEST = -2
"""In offset JSON, the partition's earliest offset (Spark's -2)."""
LATEST = -1
"""In offset JSON, the partition's latest offset (Spark's -1)."""

_ASSIGN_EXAMPLE = 'Expected e.g. {"topicA":[0,1],"topicB":[0,1]}, got '
_OFFSETS_EXAMPLE = 'Expected e.g. {"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}, got '
_TIMESTAMPS_EXAMPLE = (
    'Expected e.g. {"topicA": {"0": 123456789, "1": 123456789},\n'
    '"topicB": {"0": 123456789, "1": 123456789}}, got '
)
_TIME_STRING_HELP = (
    "Time must be specified as seconds (s), milliseconds (ms), microseconds (us), "
    "minutes (m or min), hour (h), or day (d). E.g. 50s, 100ms, or 250us.\n"
    "Failed to parse time string: "
)


@attrs.frozen
class Assign:
    """``assign``: exactly these partitions."""

    partitions: tuple[TopicPartition, ...]


@attrs.frozen
class Subscribe:
    """``subscribe``: every partition of these topics."""

    topics: tuple[str, ...]


@attrs.frozen
class SubscribePattern:
    """``subscribePattern``: every partition of the topics whose whole name matches."""

    pattern: str


Strategy = Assign | Subscribe | SubscribePattern


@attrs.frozen
class EarliestOffsets:
    """``earliest``: each partition's first offset."""


@attrs.frozen
class LatestOffsets:
    """``latest``: each partition's end offset."""


@attrs.frozen
class SpecificOffsets:
    """Offset JSON: an offset per partition, -2 meaning earliest and -1 latest."""

    offsets: dict[TopicPartition, int]


@attrs.frozen
class SpecificTimestamps:
    """``*OffsetsByTimestamp``: per partition, the first offset at or after a timestamp."""

    timestamps: dict[TopicPartition, int]
    latest_on_no_match: bool = False


@attrs.frozen
class GlobalTimestamp:
    """``*Timestamp``: for every partition, the first offset at or after one timestamp."""

    timestamp: int
    latest_on_no_match: bool = False


OffsetLimit = (
    EarliestOffsets | LatestOffsets | SpecificOffsets | SpecificTimestamps | GlobalTimestamp
)


@attrs.frozen
class ReaderOptions:
    """Everything the reader needs, parsed and validated; picklable (goes to executors)."""

    strategy: Strategy
    starting: OffsetLimit
    ending: OffsetLimit
    """For streaming queries always :class:`LatestOffsets` (there is no end)."""
    client: dict[str, str]
    """The Kafka client settings (``kafka.*`` without the prefix)."""
    fail_on_data_loss: bool = True
    include_headers: bool = False
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    group_id_prefix: str | None = None
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    value_avro: AvroValues | None = None
    """``valueFormat=avro``: the reader's schema, found on the driver (:mod:`.avro`)."""

    @property
    def group_id(self) -> str | None:
        """``kafka.group.id`` when given."""
        return self.client.get("group.id")

    @property
    def commit_group(self) -> str | None:
        """The group processed offsets are committed to: ``kafka.group.id``, else
        ``groupIdPrefix`` itself; None when neither is set (no commits, as Spark)."""
        return self.group_id or self.group_id_prefix

    @property
    def read_committed(self) -> bool:
        return self.client.get("isolation.level", "").strip().lower() == "read_committed"


def parse_reader_options(options: Mapping[str, str], *, streaming: bool) -> ReaderOptions:
    """Validate the reader's options as Spark's Kafka source does, in Spark's order.

    Raises :class:`ValueError` with Spark's message where Spark has one.
    """
    params = {key.lower(): value for key, value in options.items()}
    if streaming:
        if ENDING_OFFSETS in params:
            raise ValueError("ending offset not valid in streaming queries")
        if ENDING_OFFSETS_BY_TIMESTAMP in params:
            raise ValueError("ending timestamp not valid in streaming queries")
        starting = offset_limit(
            params, STARTING_TIMESTAMP, STARTING_OFFSETS_BY_TIMESTAMP, STARTING_OFFSETS,
            LatestOffsets(),
        )  # fmt: skip
        ending: OffsetLimit = LatestOffsets()
    else:
        starting = offset_limit(
            params, STARTING_TIMESTAMP, STARTING_OFFSETS_BY_TIMESTAMP, STARTING_OFFSETS,
            EarliestOffsets(),
        )  # fmt: skip
        _check_batch_start(starting)
        ending = offset_limit(
            params, ENDING_TIMESTAMP, ENDING_OFFSETS_BY_TIMESTAMP, ENDING_OFFSETS,
            LatestOffsets(),
        )  # fmt: skip
        _check_batch_end(ending)
    strategy = _strategy(params)
    min_partitions = _optional_int(params, MIN_PARTITIONS)
    if min_partitions is not None and min_partitions <= 0:
        raise ValueError("minPartitions must be positive")
    max_records = _optional_int(params, MAX_RECORDS_PER_PARTITION)
    if max_records is not None and max_records <= 0:
        raise ValueError(f"{MAX_RECORDS_PER_PARTITION} must be positive")
    client = kafka_client_settings(params)
    if "bootstrap.servers" not in client:
        raise ValueError(
            "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer"
        )
    max_offsets = _optional_int(params, MAX_OFFSETS_PER_TRIGGER)
    min_offsets = _optional_int(params, MIN_OFFSETS_PER_TRIGGER)
    if min_offsets is not None and max_offsets is not None and min_offsets > max_offsets:
        raise ValueError(
            f"The value of minOffsetPerTrigger({min_offsets}) is higher than the "
            f"maxOffsetsPerTrigger({max_offsets})."
        )
    if max_offsets is not None and max_offsets <= 0:
        raise ValueError(f"Invalid value '{max_offsets}' for option 'maxOffsetsPerTrigger'")
    if min_offsets is not None and min_offsets <= 0:
        raise ValueError(f"Invalid value '{min_offsets}' for option 'minOffsetsPerTrigger'")
    if not streaming:
        checks = (starting, ending)
        _check_limits_agree(*checks)
    delay = params.get(MAX_TRIGGER_DELAY)
    return ReaderOptions(
        strategy=strategy,
        starting=starting,
        ending=ending,
        client=client,
        fail_on_data_loss=_bool(params, FAIL_ON_DATA_LOSS, True),
        include_headers=_bool(params, INCLUDE_HEADERS, False),
        min_partitions=min_partitions,
        max_records_per_partition=max_records,
        max_offsets_per_trigger=max_offsets,
        min_offsets_per_trigger=min_offsets,
        max_trigger_delay_ms=(
            DEFAULT_MAX_TRIGGER_DELAY_MS if delay is None else time_string_ms(delay)
        ),
        group_id_prefix=params.get(GROUP_ID_PREFIX),
        poll_timeout_ms=_optional_int(params, POLL_TIMEOUT_MS) or DEFAULT_POLL_TIMEOUT_MS,
    )


def include_headers(options: Mapping[str, str]) -> bool:
    """``includeHeaders`` alone (the schema depends on it and nothing else)."""
    return _bool({k.lower(): v for k, v in options.items()}, INCLUDE_HEADERS, False)


def single_topic(options: Mapping[str, str]) -> str | None:
    """The one topic ``subscribe`` or ``assign`` names; None for several, a pattern, or
    options that name none (their error is the reader's to raise)."""
    try:
        strategy = _strategy({k.lower(): v for k, v in options.items()})
    except ValueError:
        return None
    if isinstance(strategy, Subscribe):
        topics = set(strategy.topics)
    elif isinstance(strategy, Assign):
        topics = {tp.topic for tp in strategy.partitions}
    else:
        return None
    return topics.pop() if len(topics) == 1 else None


def offset_limit(
    params: Mapping[str, str],
    timestamp_key: str,
    by_timestamp_key: str,
    offsets_key: str,
    default: OffsetLimit,
) -> OffsetLimit:
    """One end of the range, by Spark's preference: one timestamp for every partition,
    then timestamps per partition, then ``earliest`` / ``latest`` / offset JSON."""
    strategy = params.get(STARTING_OFFSETS_BY_TIMESTAMP_STRATEGY, "error").strip()
    if strategy.upper() not in ("ERROR", "LATEST"):
        raise ValueError(
            f"No value found for '{strategy.upper()}' in option "
            f"'startingOffsetsByTimestampStrategy' (expected error or latest)"
        )
    latest_on_no_match = strategy.upper() == "LATEST"
    if timestamp_key in params:
        text = params[timestamp_key].strip()
        try:
            return GlobalTimestamp(int(text), latest_on_no_match)
        except ValueError:
            raise ValueError(f"Expected a single long value, got {text}") from None
    if by_timestamp_key in params:
        text = params[by_timestamp_key].strip()
        return SpecificTimestamps(_partition_numbers(text, _TIMESTAMPS_EXAMPLE), latest_on_no_match)
    given = params.get(offsets_key)
    if given is None:
        return default
    text = given.strip()
    if text.lower() == "latest":
        return LatestOffsets()
    if text.lower() == "earliest":
        return EarliestOffsets()
    return SpecificOffsets(_partition_numbers(text, _OFFSETS_EXAMPLE))


def parse_assign(text: str) -> tuple[TopicPartition, ...]:
    """``{"topicA":[0,1],"topicB":[0,1]}`` -> its partitions."""
    try:
        parsed = json.loads(text)
        if not isinstance(parsed, dict):
            raise TypeError
        partitions: list[TopicPartition] = []
        for topic, numbers in parsed.items():
            if not isinstance(numbers, list):
                raise TypeError
            partitions.extend(TopicPartition(topic, _json_int(n)) for n in numbers)
    except (ValueError, TypeError):
        raise ValueError(_ASSIGN_EXAMPLE + text) from None
    return tuple(partitions)


def time_string_ms(text: str) -> int:
    """Spark's time strings (``15m``, ``10s``, ``100ms``, ``250us``, ``1h``, ``1d``;
    a bare number is milliseconds) in milliseconds."""
    match = re.fullmatch(r"\s*(-?[0-9]+)\s*([a-z]*)\s*", text.lower())
    units = {"": 1.0, "ms": 1.0, "us": 0.001, "s": 1000.0, "m": 60_000.0, "min": 60_000.0,
             "h": 3_600_000.0, "d": 86_400_000.0}  # fmt: skip
    if match is None or match.group(2) not in units:
        raise ValueError(_TIME_STRING_HELP + text)
    return int(int(match.group(1)) * units[match.group(2)])


def offsets_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Per-partition offsets as Spark's offset JSON object, sorted: ``{"t": {"0": 23}}``."""
    result: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        result.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return result


def offsets_from_json(value: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    """The inverse of :func:`offsets_json`."""
    return {
        TopicPartition(topic, int(partition)): int(offset)
        for topic, partitions in value.items()
        for partition, offset in partitions.items()
    }


def _strategy(params: Mapping[str, str]) -> Strategy:
    given = [key for key in STRATEGY_KEYS if key in params]
    listed = ", ".join(STRATEGY_KEYS)
    if not given:
        raise ValueError(
            f"One of the following options must be specified for Kafka source: {listed}. "
            "See the docs for more details."
        )
    if len(given) > 1:
        raise ValueError(
            f"Only one of the following options can be specified for Kafka source: {listed}. "
            "See the docs for more details."
        )
    key = given[0]
    value = params[key]
    if key == ASSIGN:
        if not value.strip().startswith("{"):
            raise ValueError(
                f"No topicpartitions to assign as specified value for option 'assign' is '{value}'"
            )
        return Assign(parse_assign(value))
    if key == SUBSCRIBE:
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise ValueError(
                f"No topics to subscribe to as specified value for option 'subscribe' is '{value}'"
            )
        return Subscribe(topics)
    pattern = value.strip()
    if not pattern:
        raise ValueError(
            "Pattern to subscribe is empty as specified value for option "
            f"'subscribePattern' is '{value}'"
        )
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"Invalid subscribePattern {pattern!r}: {exc}") from None
    return SubscribePattern(pattern)


def _check_batch_start(starting: OffsetLimit) -> None:
    if isinstance(starting, LatestOffsets):
        raise ValueError("starting offset can't be latest for batch queries on Kafka")
    if isinstance(starting, SpecificOffsets):
        for tp, offset in starting.offsets.items():
            if offset == LATEST:
                raise ValueError(
                    f"startingOffsets for {tp} can't be latest for batch queries on Kafka"
                )


def _check_batch_end(ending: OffsetLimit) -> None:
    if isinstance(ending, EarliestOffsets):
        raise ValueError("ending offset can't be earliest for batch queries on Kafka")
    if isinstance(ending, SpecificOffsets):
        for tp, offset in ending.offsets.items():
            if offset == EARLIEST:
                raise ValueError(
                    f"ending offset for {tp} can't be earliest for batch queries on Kafka"
                )


def _check_limits_agree(starting: OffsetLimit, ending: OffsetLimit) -> None:
    """Spark's checkOffsetLimitValidity: the same partitions at both ends, start <= end."""
    pairs: tuple[dict[TopicPartition, int], dict[TopicPartition, int]] | None = None
    greater = "UNRESOLVED_START_OFFSET_GREATER_THAN_END_OFFSET"
    noun = "offset"
    if isinstance(starting, SpecificOffsets) and isinstance(ending, SpecificOffsets):
        pairs = (starting.offsets, ending.offsets)
    elif isinstance(starting, SpecificTimestamps) and isinstance(ending, SpecificTimestamps):
        pairs = (starting.timestamps, ending.timestamps)
        greater = "UNRESOLVED_START_TIMESTAMP_GREATER_THAN_END_TIMESTAMP"
        noun = "timestamp"
    if pairs is None:
        return
    start, end = pairs
    if set(start) != set(end):
        raise ValueError(
            "[MISMATCHED_TOPIC_PARTITIONS_BETWEEN_START_OFFSET_AND_END_OFFSET] The specified "
            "start offset and end offset should have the same topic-partitions. Topic-partitions "
            f"for start offset: {_tps(start)}, topic-partitions for end offset: {_tps(end)}."
        )
    for tp, first in start.items():
        last = end[tp]
        # earliest and latest (negative) are resolved later and not compared here
        if first > last and first >= 0 and last >= 0:
            raise ValueError(
                f"[{greater}] The specified start {noun} {first} is greater than the end "
                f"{noun} {last} for topic {tp.topic} partition {tp.partition}."
            )


def _tps(offsets: Mapping[TopicPartition, int]) -> str:
    return "Set(" + ", ".join(str(tp) for tp in sorted(offsets)) + ")"


def _partition_numbers(text: str, example: str) -> dict[TopicPartition, int]:
    try:
        parsed = json.loads(text)
        if not isinstance(parsed, dict):
            raise TypeError
        result = {}
        for topic, partitions in parsed.items():
            if not isinstance(partitions, dict):
                raise TypeError
            for partition, number in partitions.items():
                result[TopicPartition(topic, int(partition))] = _json_int(number)
    except (ValueError, TypeError):
        raise ValueError(example + text) from None
    return result


def _json_int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError
    return value


def _bool(params: Mapping[str, str], key: str, default: bool) -> bool:
    text = params.get(key)
    if text is None:
        return default
    if text.strip().lower() not in ("true", "false"):
        raise ValueError(f"For input string: \"{text}\" (option '{key}' must be true or false)")
    return text.strip().lower() == "true"


def _optional_int(params: Mapping[str, str], key: str) -> int | None:
    text = params.get(key)
    if text is None:
        return None
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError(
            f"For input string: \"{text}\" (option '{key}' must be an integer)"
        ) from None
