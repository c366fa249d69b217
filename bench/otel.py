"""What OpenTelemetry costs the producer: off, and traces plus metrics on.

Against one ``kafkette serve --memory`` child process, a sync Producer sends
``--records`` values of 100 bytes (``acks=1``, ``linger.ms=5``, as bench/clients.py)
and the clock stops when all are acknowledged (``flush``). Two paths: the common send
(no headers) and the general one (a header on each record, which the common send does
not take). Variants, each in its own child process, rounds alternating with the order
rotating (the machine is shared):

- ``before``: the package at ``--before DIR`` (a checkout of the commit before the hooks,
  e.g. ``git worktree add DIR a696b09`` with the built ``*.so`` copied in), when given;
- ``off``: this tree, no provider (the default);
- ``on``: this tree with the SDK's TracerProvider (a BatchSpanProcessor into an exporter
  that drops the spans) and MeterProvider (an InMemoryMetricReader nobody reads);
- ``sdk``: no producer, only what the SDK does per record when ``on`` (a span with its
  context injected, a counter and a histogram), to tell the SDK's cost from ours.

Figures: median and best records/s per variant, each variant's median over ``off``, and
the cost per record of ``on`` (median wall time difference over the records).

``--kip714`` measures KIP-714's client metrics instead (no OpenTelemetry SDK), on the
common path: ``nopush`` (``enable.metrics.push=false``), ``idle`` (the default: the
client asks for its subscription, none matches it) and ``push`` (a CLIENT_METRICS
subscription of every metric every 100 ms matches it: pushes all through the run, far
more often than anyone would configure).

    .venv/bin/python bench/otel.py [--records 100000] [--repeat 5] [--before DIR]
        [--send-only] [--without-on] [--kip714]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.brokers import BrokerProcess

ROOT = Path(__file__).resolve().parent.parent
PATHS = ("common", "headers")

CHILD = r"""
import sys, time
from kafkette import Producer

variant, path, records, topic, bootstrap, send_only = sys.argv[1:7]
records = int(records)
settings = {"bootstrap_servers": bootstrap, "acks": 1, "linger_ms": 5}
if variant in ("nopush", "idle", "push"):
    settings["enable_metrics_push"] = variant != "nopush"
    settings["client_id"] = "kip714-" + variant  # the subscription matches kip714-push
if variant in ("on", "sdk"):
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Drop(SpanExporter):
        def export(self, spans):
            return SpanExportResult.SUCCESS

    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(Drop(), max_queue_size=1 << 20))
    settings["tracer_provider"] = tracer_provider
    settings["meter_provider"] = MeterProvider(metric_readers=[InMemoryMetricReader()])
value = b"x" * 100
headers = [("h", b"1")] if path == "headers" else None
if variant == "sdk":  # the SDK's own work per record: a span with its context injected,
    # a counter and a histogram, as a send records them, without kafkette
    from opentelemetry import propagate, trace

    tracer = tracer_provider.get_tracer("bench")
    meter = settings["meter_provider"].get_meter("bench")
    counter, histogram = meter.create_counter("c"), meter.create_histogram("h")
    attributes = {"messaging.system": "kafka", "messaging.operation.name": "send",
                  "messaging.operation.type": "send", "messaging.destination.name": topic}
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(records):
        span = tracer.start_span("send " + topic, kind=trace.SpanKind.PRODUCER,
                                 attributes=attributes)
        carrier = {}
        propagate.inject(carrier, context=trace.set_span_in_context(span))
        span.set_attribute("messaging.kafka.offset", 0)
        span.end()
        counter.add(1, attributes)
        histogram.record(0.001, attributes)
    print(time.perf_counter() - wall, time.process_time() - cpu)
    sys.exit(0)
with Producer(**settings) as producer:
    producer.send(topic, b"warm-up").result(30)
    wall, cpu = time.perf_counter(), time.process_time()
    send = producer.send
    for _ in range(records):
        send(topic, value, None, headers)
    if send_only == "0":
        producer.flush()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    telemetry = producer._core.client.telemetry
    print(wall, cpu, telemetry.requests_sent if telemetry is not None else 0)
"""


def run_child(
    root: Path, variant: str, path: str, records: int, topic: str, broker: str, send_only: bool
) -> tuple[float, float, int]:
    """The child's wall and CPU time, and the KIP-714 requests its producer sent."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD,
            variant,
            path,
            str(records),
            topic,
            broker,
            str(int(send_only)),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        timeout=600,
        check=True,
    )
    wall, cpu, requests = done.stdout.split()
    return float(wall), float(cpu), int(requests)


def subscribe_push(bootstrap: str) -> None:
    """The CLIENT_METRICS subscription of ``--kip714``'s ``push`` variant."""
    from kafkette import AdminClient
    from kafkette.admin import AlterConfigOp, ConfigResource, ResourceType

    with AdminClient(bootstrap_servers=bootstrap, enable_metrics_push=False) as admin:
        changes = [
            AlterConfigOp("metrics", "*"),
            AlterConfigOp("interval.ms", "100"),
            AlterConfigOp("match", "client_id=kip714-push"),
        ]
        resource = ConfigResource(ResourceType.CLIENT_METRICS, "bench")
        admin.incremental_alter_configs({resource: changes}).all()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--before", type=Path, default=None)
    parser.add_argument(
        "--send-only",
        action="store_true",
        help="stop the clock when the sends return, before the flush: send()'s own cost",
    )
    parser.add_argument("--without-on", action="store_true", help="only before and off")
    parser.add_argument("--kip714", action="store_true", help="KIP-714 pushing off, idle, on")
    args = parser.parse_args()
    variants = [("off", ROOT)] if args.without_on else [("off", ROOT), ("on", ROOT), ("sdk", ROOT)]
    paths = PATHS
    if args.kip714:
        variants, paths = [("nopush", ROOT), ("idle", ROOT), ("push", ROOT)], ("common",)
    if args.before is not None:
        variants.insert(0, ("before", args.before.resolve()))
    walls: dict[tuple[str, str], list[float]] = {}
    telemetry_requests: dict[str, list[int]] = {}
    cpus: dict[str, list[float]] = {}
    broker = BrokerProcess()
    broker.start()
    topics = iter(range(1 << 30))
    try:
        if args.kip714:
            subscribe_push(broker.bootstrap)
        for round_number in range(args.repeat):
            for path in paths:
                turn = round_number % len(variants)
                for variant, root in variants[turn:] + variants[:turn]:
                    name = "off" if variant == "before" else variant
                    topic = f"otel-{variant}-{path}-{next(topics)}"
                    wall, cpu, sent = run_child(
                        root, name, path, args.records, topic, broker.bootstrap, args.send_only
                    )
                    walls.setdefault((variant, path), []).append(wall)
                    telemetry_requests.setdefault(variant, []).append(sent)
                    cpus.setdefault(variant, []).append(cpu)
            print(f"round {round_number + 1}/{args.repeat} done", file=sys.stderr, flush=True)
    finally:
        broker.close()
    clock = "until the sends return" if args.send_only else "until all are acknowledged"
    print(f"{args.records:,} records of 100 B, sync Producer, kafkette serve --memory, {clock}")
    base = "nopush" if args.kip714 else "off"
    print(f"{'path':<9}{'variant':<8}{'median rec/s':>14}{'best rec/s':>12}{'vs ' + base:>10}")
    for path in paths:
        off = statistics.median(walls[(base, path)])
        for variant, _ in variants:
            times = walls[(variant, path)]
            median = statistics.median(times)
            print(
                f"{path:<9}{variant:<8}{args.records / median:>14,.0f}"
                f"{args.records / min(times):>12,.0f}{off / median:>10.2f}"
            )
        if args.kip714:
            for variant, _ in variants:
                sent = statistics.median(telemetry_requests[variant])
                cpu_us = statistics.median(cpus[variant]) / args.records * 1e6
                print(
                    f"{variant}: {sent:g} GetTelemetrySubscriptions/PushTelemetry a run, "
                    f"process CPU {cpu_us:.2f} µs/record (median)"
                )
            continue
        if args.without_on:
            continue
        on = statistics.median(walls[("on", path)])
        sdk = statistics.median(walls[("sdk", path)])
        print(
            f"{path:<9}tracing and metrics on: {(on - off) / args.records * 1e6:.2f} µs/record, "
            f"of which the SDK's own work (the sdk row): {sdk / args.records * 1e6:.2f} µs"
        )


if __name__ == "__main__":
    main()
