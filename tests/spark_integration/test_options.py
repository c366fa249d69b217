"""The data source's option parsing: Spark's option names, meanings and error messages."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkette.spark_integration.options import (
    Assign,
    EarliestOffsets,
    GlobalTimestamp,
    LatestOffsets,
    ReaderOptions,
    SpecificOffsets,
    SpecificTimestamps,
    Subscribe,
    SubscribePattern,
    include_headers,
    kafka_client_settings,
    offsets_from_json,
    offsets_json,
    parse_reader_options,
    time_string_ms,
)
from kafkette.structs import TopicPartition


def test_kafka_client_settings_strips_the_prefix_and_leaves_source_options_out() -> None:
    options = {
        "kafka.bootstrap.servers": "127.0.0.1:9092",
        "kafka.isolation.level": "read_committed",
        "subscribe": "t",
        "startingoffsets": "earliest",
    }
    assert kafka_client_settings(options) == {
        "bootstrap.servers": "127.0.0.1:9092",
        "isolation.level": "read_committed",
    }


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("kafka.auto.offset.reset", "Kafka option 'auto.offset.reset' is not supported."),
        ("kafka.key.deserializer", "Kafka option 'key.deserializer' is not supported as keys"),
        ("kafka.value.deserializer", "Kafka option 'value.deserializer' is not supported as"),
        ("kafka.enable.auto.commit", "Kafka option 'enable.auto.commit' is not supported"),
        ("kafka.interceptor.classes", "Kafka option 'interceptor.classes' is not supported"),
        ("kafka.key.serializer", "Kafka option 'key.serializer' is not supported as keys"),
        ("kafka.value.serializer", "Kafka option 'value.serializer' is not supported as value"),
    ],
)
def test_kafka_client_settings_refuses_what_spark_refuses(key: str, message: str) -> None:
    with pytest.raises(ValueError, match="^\n?" + message.replace(".", r"\.")):
        kafka_client_settings({"kafka.bootstrap.servers": "h:1", key: "x"})


BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def batch(**options: str) -> ReaderOptions:
    return parse_reader_options({**BOOT, **options}, streaming=False)


def stream(**options: str) -> ReaderOptions:
    return parse_reader_options({**BOOT, **options}, streaming=True)


def test_defaults_are_sparks() -> None:
    parsed = batch(subscribe="a, b,,")
    assert parsed.strategy == Subscribe(("a", "b"))
    assert parsed.starting == EarliestOffsets()
    assert parsed.ending == LatestOffsets()
    assert parsed.fail_on_data_loss is True
    assert parsed.include_headers is False
    assert parsed.max_trigger_delay_ms == 15 * 60 * 1000
    assert parsed.commit_group is None
    assert stream(subscribe="a").starting == LatestOffsets()


def test_every_option_is_read() -> None:
    parsed = stream(
        subscribepattern="top.*",
        startingoffsets='{"t":{"0":23,"1":-2}}',
        failondataloss="false",
        includeheaders="TRUE",
        minpartitions="4",
        maxrecordsperpartition="100",
        maxoffsetspertrigger="10",
        minoffsetspertrigger="5",
        maxtriggerdelay="30s",
        groupidprefix="mine",
        **{"kafka.isolation.level": "read_committed"},
    )
    assert parsed.strategy == SubscribePattern("top.*")
    assert parsed.starting == SpecificOffsets(
        {TopicPartition("t", 0): 23, TopicPartition("t", 1): -2}
    )
    assert (parsed.fail_on_data_loss, parsed.include_headers) == (False, True)
    assert (parsed.min_partitions, parsed.max_records_per_partition) == (4, 100)
    assert (parsed.max_offsets_per_trigger, parsed.min_offsets_per_trigger) == (10, 5)
    assert parsed.max_trigger_delay_ms == 30_000
    assert parsed.read_committed
    assert parsed.commit_group == "mine"
    assert stream(subscribe="t", groupidprefix="p", **{"kafka.group.id": "g"}).commit_group == "g"


def test_assign_and_timestamps() -> None:
    parsed = batch(
        assign='{"a":[0,1],"b":[2]}',
        startingoffsetsbytimestamp='{"a":{"0":1000,"1":2000},"b":{"2":3000}}',
        endingtimestamp="5000",
        startingoffsetsbytimestampstrategy="latest",
    )
    assert parsed.strategy == Assign(
        (TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 2))
    )
    assert parsed.starting == SpecificTimestamps(
        {TopicPartition("a", 0): 1000, TopicPartition("a", 1): 2000, TopicPartition("b", 2): 3000},
        latest_on_no_match=True,
    )
    assert parsed.ending == GlobalTimestamp(5000, latest_on_no_match=True)


def test_a_global_timestamp_wins_over_per_partition_timestamps_and_offsets() -> None:
    parsed = batch(
        subscribe="t",
        startingtimestamp="7",
        startingoffsetsbytimestamp='{"t":{"0":1}}',
        startingoffsets="earliest",
    )
    assert parsed.starting == GlobalTimestamp(7)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {},
            "One of the following options must be specified for Kafka source: subscribe, "
            "subscribepattern, assign. See the docs for more details.",
        ),
        (
            {"subscribe": "a", "assign": '{"a":[0]}'},
            "Only one of the following options can be "
            "specified for Kafka source: subscribe, subscribepattern, assign.",
        ),
        (
            {"assign": "a"},
            "No topicpartitions to assign as specified value for option 'assign' is 'a'",
        ),
        ({"assign": "{x"}, 'Expected e.g. {"topicA":[0,1],"topicB":[0,1]}, got {x'),
        (
            {"subscribe": " , "},
            "No topics to subscribe to as specified value for option 'subscribe' is ' , '",
        ),
        (
            {"subscribepattern": " "},
            "Pattern to subscribe is empty as specified value for option 'subscribePattern' is ' '",
        ),
        (
            {"subscribe": "t", "startingoffsets": "latest"},
            "starting offset can't be latest for batch queries on Kafka",
        ),
        (
            {"subscribe": "t", "startingoffsets": '{"t":{"0":-1}}'},
            "startingOffsets for t-0 can't be latest for batch queries on Kafka",
        ),
        (
            {"subscribe": "t", "endingoffsets": "earliest"},
            "ending offset can't be earliest for batch queries on Kafka",
        ),
        (
            {"subscribe": "t", "endingoffsets": '{"t":{"0":-2}}'},
            "ending offset for t-0 can't be earliest for batch queries on Kafka",
        ),
        (
            {"subscribe": "t", "startingoffsets": "{bad"},
            'Expected e.g. {"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}, got {bad',
        ),
        ({"subscribe": "t", "startingtimestamp": "soon"}, "Expected a single long value, got soon"),
        ({"subscribe": "t", "minpartitions": "0"}, "minPartitions must be positive"),
        (
            {"subscribe": "t", "maxrecordsperpartition": "-1"},
            "maxrecordsperpartition must be positive",
        ),
        (
            {"subscribe": "t", "minoffsetspertrigger": "9", "maxoffsetspertrigger": "3"},
            "The value of minOffsetPerTrigger(9) is higher than the maxOffsetsPerTrigger(3).",
        ),
        (
            {
                "subscribe": "t",
                "startingoffsets": '{"t":{"0":5}}',
                "endingoffsets": '{"u":{"0":9}}',
            },
            "[MISMATCHED_TOPIC_PARTITIONS_BETWEEN_START_OFFSET_AND_END_OFFSET]",
        ),
        (
            {
                "subscribe": "t",
                "startingoffsets": '{"t":{"0":9}}',
                "endingoffsets": '{"t":{"0":5}}',
            },
            "[UNRESOLVED_START_OFFSET_GREATER_THAN_END_OFFSET] The specified start offset 9 is "
            "greater than the end offset 5 for topic t partition 0.",
        ),
        ({"subscribe": "t", "failondataloss": "maybe"}, 'For input string: "maybe"'),
        ({"subscribe": "t", "maxtriggerdelay": "soon"}, "Time must be specified as seconds"),
        (
            {"subscribe": "t", "kafka.auto.offset.reset": "earliest"},
            "\nKafka option 'auto.offset.reset' is not supported.",
        ),
    ],
)
def test_wrong_batch_options_fail_with_sparks_message(
    options: dict[str, str], message: str
) -> None:
    with pytest.raises(ValueError) as caught:
        batch(**options)
    assert str(caught.value).startswith(message)


def test_bootstrap_servers_are_required() -> None:
    with pytest.raises(ValueError, match=r"^Option 'kafka\.bootstrap\.servers' must be specified"):
        parse_reader_options({"subscribe": "t"}, streaming=False)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"endingoffsets": "latest"}, "ending offset not valid in streaming queries"),
        (
            {"endingoffsetsbytimestamp": '{"t":{"0":1}}'},
            "ending timestamp not valid in streaming queries",
        ),
    ],
)
def test_streams_have_no_end(options: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        stream(subscribe="t", **options)


def test_a_stream_may_start_at_latest() -> None:
    assert stream(subscribe="t", startingoffsets="latest").starting == LatestOffsets()


def test_option_keys_in_any_case_are_read() -> None:
    assert include_headers({"includeHeaders": "true"})
    assert batch(subscribe="t", minPartitions="3").min_partitions == 3


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("15m", 900_000),
        ("100", 100),
        ("100ms", 100),
        ("2s", 2000),
        ("1h", 3_600_000),
        ("1d", 86_400_000),
        ("5min", 300_000),
        ("2000us", 2),
    ],
)
def test_time_strings(text: str, ms: int) -> None:
    assert time_string_ms(text) == ms


@given(
    st.dictionaries(
        st.builds(TopicPartition, st.text(min_size=1, max_size=5), st.integers(0, 100)),
        st.integers(-2, 2**62),
    )
)
def test_offset_json_round_trips(offsets: dict[TopicPartition, int]) -> None:
    as_json = offsets_json(offsets)
    assert offsets_from_json(json.loads(json.dumps(as_json))) == offsets
    assert parse_reader_options(
        {**BOOT, "subscribe": "x", "startingoffsets": json.dumps(as_json)}, streaming=True
    ).starting == SpecificOffsets(offsets)
