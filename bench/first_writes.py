"""First writes to many new partitions of a disk broker, and what they cost others (#30).

A ``kafkette serve --data-dir`` broker; confluent-kafka (librdkafka) clients:

- create a topic of ``--partitions`` (5,000) partitions: seconds until
  CreateTopics answers;
- first round: one 200 B record to each partition (each partition's first
  write), seconds from the first ``produce()`` until ``flush()`` returns;
- steady round: the same again (every partition already written);
- the broker's stop (SIGTERM until it exits, every log closed), its restart
  (until it listens, every log opened) and its stop again, with nothing written.

Meanwhile a probe producer sends one record every 50 ms to a topic of its own
and times each round trip (``produce()`` to its delivery report): max and p99
per phase. Targets: first round within 1.5x of the steady round, probe round
trip under 100 ms throughout.

``--baseline REV`` first runs the same on the package as committed at REV
(``git archive`` into a scratch directory put first on the broker's
PYTHONPATH, with this tree's built C extensions), so that before and after
come from one run on one machine.

    .venv/bin/python bench/first_writes.py [--partitions 5000] [--baseline REV] [--dir DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.brokers import BrokerProcess

ROOT = Path(__file__).resolve().parent.parent
VALUE = b"v" * 200
PROBE_PERIOD_S = 0.05
TIMEOUT_S = 600.0


class Probe(threading.Thread):
    """One record every 50 ms to ``topic``; round trips (s) by the phase they started in."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": 1})
        self.topic = topic
        self.phase = "idle"
        self.times: dict[str, list[float]] = {}
        self.stopping = threading.Event()
        self.failures: list[str] = []

    def run(self) -> None:
        while not self.stopping.is_set():
            done: list[float] = []
            phase = self.phase
            started = time.perf_counter()

            def report(err: object, _msg: object, done: list[float] = done) -> None:
                if err is not None:
                    self.failures.append(str(err))
                done.append(time.perf_counter())

            self.producer.produce(self.topic, b"probe", on_delivery=report)
            while not done:
                self.producer.poll(0.001)
            self.times.setdefault(phase, []).append(done[0] - started)
            rest = PROBE_PERIOD_S - (time.perf_counter() - started)
            if rest > 0:
                time.sleep(rest)

    def stop(self) -> None:
        self.stopping.set()
        self.join()


def produce_round(producer: Producer, topic: str, partitions: int) -> float:
    """Seconds to have one record acknowledged on each partition."""
    errors: list[str] = []

    def report(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    started = time.perf_counter()
    for partition in range(partitions):
        while True:
            try:
                producer.produce(topic, VALUE, partition=partition, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(TIMEOUT_S):
        raise RuntimeError("records still unacknowledged")
    if errors:
        raise RuntimeError(f"{len(errors)} records failed, e.g. {errors[0]}")
    return time.perf_counter() - started


@contextlib.contextmanager
def package_from(pythonpath: str | None) -> Iterator[None]:
    """Brokers started meanwhile run the package under ``pythonpath`` (None: this tree's)."""
    old, cwd = os.environ.get("PYTHONPATH"), os.getcwd()
    if pythonpath is not None:
        # python -m puts the working directory first on sys.path: leave this tree's.
        os.environ["PYTHONPATH"] = pythonpath
        os.chdir(pythonpath)
    try:
        yield
    finally:
        os.chdir(cwd)
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


def timed_stop(broker: BrokerProcess) -> float:
    """Seconds from SIGTERM until the broker exits; an error if it did not exit cleanly."""
    started = time.perf_counter()
    broker.stop(timeout=TIMEOUT_S)
    took = time.perf_counter() - started
    assert broker.process is not None
    if broker.process.returncode != 0:
        raise RuntimeError(f"the broker exited with {broker.process.returncode}:\n{broker.log()}")
    return took


def run(partitions: int, data_root: str, pythonpath: str | None) -> dict[str, object]:
    data_dir = tempfile.mkdtemp(prefix="first-writes-", dir=data_root)
    broker = BrokerProcess(data_dir)
    with package_from(pythonpath):
        broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("probe", 1)])["probe"].result(TIMEOUT_S)
        probe = Probe(broker.bootstrap, "probe")
        probe.start()
        time.sleep(1.0)
        figures: dict[str, object] = {}
        probe.phase = "create"
        started = time.perf_counter()
        future = admin.create_topics([NewTopic("wide", partitions)], request_timeout=TIMEOUT_S)
        future["wide"].result(TIMEOUT_S)
        figures["create_s"] = time.perf_counter() - started
        probe.phase = "idle"
        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "acks": 1,
                "linger.ms": 5,
                "queue.buffering.max.messages": 2 * partitions + 1000,
                "message.timeout.ms": int(TIMEOUT_S * 1000),
            }
        )
        metadata = producer.list_topics("wide", timeout=TIMEOUT_S)
        assert len(metadata.topics["wide"].partitions) == partitions
        time.sleep(0.5)
        for phase in ("first", "steady"):
            probe.phase = phase
            figures[f"{phase}_s"] = produce_round(producer, "wide", partitions)
            probe.phase = "idle"
            time.sleep(0.5)
        probe.stop()
        if probe.failures:
            raise RuntimeError(f"probe records failed: {probe.failures[:3]}")
        figures["probe"] = probe.times
        del producer, admin, probe  # no client left to reconnect once the broker stops
        figures["stop_s"] = timed_stop(broker)
        started = time.perf_counter()
        with package_from(pythonpath):
            broker.start()
        figures["restart_s"] = time.perf_counter() - started
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topic = admin.list_topics("wide", timeout=TIMEOUT_S).topics["wide"]
        assert len(topic.partitions) == partitions, len(topic.partitions)
        del admin
        figures["stop_again_s"] = timed_stop(broker)
        return figures
    finally:
        broker.stop(timeout=TIMEOUT_S)
        broker.close()
        shutil.rmtree(data_dir, ignore_errors=True)


def export_tree(rev: str, into: str) -> str:
    """The package at ``rev`` under ``into``, with this tree's built extensions."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "kafkette"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    for built in glob.glob(str(ROOT / "kafkette" / "**" / "*.so"), recursive=True):
        shutil.copy(built, os.path.join(into, os.path.relpath(built, ROOT)))
    return into


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


def show(label: str, partitions: int, figures: dict[str, object]) -> None:
    first, steady = float(figures["first_s"]), float(figures["steady_s"])  # type: ignore[arg-type]
    print(f"{label}:")
    print(f"  create {partitions} partitions: {float(figures['create_s']):7.2f} s")  # type: ignore[arg-type]
    print(f"  first round:  {first:7.2f} s ({partitions / first:9,.0f} records/s)")
    print(f"  steady round: {steady:7.2f} s ({partitions / steady:9,.0f} records/s)")
    print(f"  first / steady: {first / steady:.2f}x")
    for key, what in (("stop_s", "stop"), ("restart_s", "restart"), ("stop_again_s", "stop again")):
        print(f"  {what + ':':14}{float(figures[key]):7.2f} s")  # type: ignore[arg-type]
    times: dict[str, list[float]] = figures["probe"]  # type: ignore[assignment]
    for phase in ("create", "first", "steady"):
        values = times.get(phase) or [float("nan")]
        print(
            f"  probe during {phase:6}: {len(values):4} records, "
            f"max {max(values) * 1000:8.1f} ms, p99 {quantile(values, 0.99) * 1000:8.1f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=5000)
    parser.add_argument("--baseline", metavar="REV", help="also run the package at REV, first")
    parser.add_argument(
        "--dir",
        default=tempfile.gettempdir(),
        help="where the data directories go: a disk (on tmpfs an fsync costs nothing)",
    )
    args = parser.parse_args()
    if args.baseline:
        with tempfile.TemporaryDirectory() as scratch:
            tree = export_tree(args.baseline, scratch)
            try:
                figures = run(args.partitions, args.dir, tree)
                show(f"baseline {args.baseline}", args.partitions, figures)
            except KafkaException as exc:
                print(f"baseline {args.baseline}: failed: {exc}")
    show("this tree", args.partitions, run(args.partitions, args.dir, None))


if __name__ == "__main__":
    main()
