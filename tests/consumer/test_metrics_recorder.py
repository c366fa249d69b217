"""The consumer's own measurements read by KIP-714's standard metrics: Java's
poll-idle-ratio-avg and the commit latency, with a clock passed in."""

from __future__ import annotations

from collections.abc import Generator, Iterator

from kafkette.consumer.metrics import MetricsRecorder


def poll(result: str) -> Generator[None, None, str]:
    yield None
    return result


def drive(steps: Generator[None, None, str]) -> str:
    try:
        while True:
            next(steps)
    except StopIteration as stop:
        return str(stop.value)


def test_poll_idle_ratio_is_the_time_in_poll_over_that_and_the_time_since_the_last() -> None:
    """Polls of 10, 10 and 50 ms, the application taking 30 ms and then none between
    them: ratios 10/40 and 50/50 (the first poll has no time before it): 0.625."""
    times: Iterator[float] = iter([0.0, 10.0, 40.0, 50.0, 50.0, 100.0])
    recorder = MetricsRecorder()
    clock = lambda: next(times)  # noqa: E731
    assert [drive(recorder.timed_poll(poll(r), clock)) for r in "abc"] == ["a", "b", "c"]
    snapshot = recorder.snapshot({})
    assert snapshot.poll_idle_ratio_avg == 0.625


def test_commit_latency_avg_and_max() -> None:
    recorder = MetricsRecorder()
    assert recorder.snapshot({}).commit_latency_avg_ms == 0.0
    for latency in (4.0, 10.0, 1.0):
        recorder.commit_done(latency)
    snapshot = recorder.snapshot({})
    assert (snapshot.commit_latency_avg_ms, snapshot.commit_latency_max_ms) == (5.0, 10.0)
