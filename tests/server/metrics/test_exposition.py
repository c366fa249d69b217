"""Prometheus' text format as we write it."""

from __future__ import annotations

import math

from kafkette.server.metrics.exposition import (
    Family,
    format_value,
    histogram_samples,
    label_name,
    metric_name,
    render,
)


def test_families_escape_labels_and_help_and_skip_empty_ones() -> None:
    """Label values escape backslash, quote and newline; HELP escapes backslash and newline;
    a family without samples is left out."""
    family = Family("kafkette_x_total", "counter", 'a "help"\nline \\ end')
    family.add((("topic", 'a"b\\c\nd'),), 3)
    empty = Family("kafkette_empty", "gauge", "nothing")
    assert render([family, empty]) == (
        '# HELP kafkette_x_total a "help"\\nline \\\\ end\n'
        "# TYPE kafkette_x_total counter\n"
        'kafkette_x_total{topic="a\\"b\\\\c\\nd"} 3\n'
    )
    assert render([empty]) == ""


def test_values_and_names() -> None:
    assert [format_value(v) for v in (0, 7, 2.0, 0.25, 1e-05, math.inf, -math.inf)] == [
        "0",
        "7",
        "2",
        "0.25",
        "1e-05",
        "+Inf",
        "-Inf",
    ]
    assert format_value(math.nan) == "NaN"
    assert metric_name("org.apache.kafka.producer.node.request.latency.avg") == (
        "org_apache_kafka_producer_node_request_latency_avg"
    )
    assert metric_name("1st-metric") == "_1st_metric"
    assert label_name("node.id") == "node_id"


def test_histogram_buckets_are_cumulative_and_end_with_inf() -> None:
    family = Family("d_seconds", "histogram", "durations")
    histogram_samples(family, (("api", "Fetch"),), (0.1, 1.0), [2, 0, 3], 7.5)
    assert render([family]).splitlines()[2:] == [
        'd_seconds_bucket{api="Fetch",le="0.1"} 2',
        'd_seconds_bucket{api="Fetch",le="1"} 2',
        'd_seconds_bucket{api="Fetch",le="+Inf"} 5',
        'd_seconds_sum{api="Fetch"} 7.5',
        'd_seconds_count{api="Fetch"} 5',
    ]
