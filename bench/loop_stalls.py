"""What a disk broker's heavy duties cost an unrelated client (#30): one command, one broker.

A ``kafkette serve --data-dir`` broker; confluent-kafka (librdkafka) clients. A
probe producer sends one record every 50 ms to a topic of its own and times each
round trip (``produce()`` to its delivery report), by phase:

- ``create``: a topic of ``--partitions`` (10,000) partitions is created;
- ``first``: one 200 B record to each (each partition's first write);
- ``fill``: ``--big-gib`` (2) GiB written to a topic of one partition, then
  written back to the disk (``sync``: deleting blocks that were never written
  costs little, which is not what a broker deleting an old log sees);
- ``delete``: DeleteTopics removes that topic;
- ``compact``: a compacted topic of ``--compact-records`` (1,000,000) 100 B
  records over 10,000 keys, 1 MiB segments, written meanwhile (``fill``,
  ``min.compaction.lag.ms`` 1 h), is made cleanable (lag 0) and the broker's
  cleaner (``log.cleaner.backoff.ms`` 1 s) compacts it, until the log's files
  on disk have shrunk to half.

Target: the probe's round trip under 100 ms in every phase (``fill`` aside: the
probe then shares the disk and the broker with a producer writing as fast as it
can). ``--baseline REV`` first runs the same on the package at REV (see
``bench/first_writes.py``), so before and after come from one run.

    .venv/bin/python bench/loop_stalls.py [--partitions 10000] [--big-gib 2]
        [--compact-records 1000000] [--baseline REV] [--rev REV] [--dir DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import cast

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from first_writes import TIMEOUT_S, Probe, export_tree, produce_round, quantile

from tests.brokers import BrokerProcess

PHASES = ("create", "first", "fill", "delete", "compact")
KEYS = 10_000


def _log_bytes(data_dir: str, topic: str) -> int:
    """Bytes of the ``.log`` files of ``topic``'s partition 0 under ``data_dir``."""
    directory = os.path.join(data_dir, "logs", f"{topic}-0")
    total = 0
    for name in os.listdir(directory):
        if name.endswith(".log"):
            with contextlib.suppress(FileNotFoundError):  # compaction deleted it meanwhile
                total += os.path.getsize(os.path.join(directory, name))
    return total


def _fill(bootstrap: str, topic: str, total: int, size: int, keys: int = 0) -> None:
    """``total`` bytes of ``size``-byte values to partition 0 of ``topic``, as fast as
    the broker takes them (keyed over ``keys`` keys when > 0)."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": 1,
            "linger.ms": 20,
            "batch.size": 1 << 20,
            "message.max.bytes": 2 << 20,
            "queue.buffering.max.kbytes": 1 << 20,
            "message.timeout.ms": int(TIMEOUT_S * 1000),
        }
    )
    value = b"v" * size
    for n in range(total // size):
        key = b"k%d" % (n % keys) if keys else None
        while True:
            try:
                producer.produce(topic, value, key=key, partition=0)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(TIMEOUT_S):
        raise RuntimeError(f"{topic}: records still unacknowledged")


def _create(admin: AdminClient, topic: NewTopic) -> float:
    started = time.perf_counter()
    admin.create_topics([topic], request_timeout=TIMEOUT_S)[topic.topic].result(TIMEOUT_S)
    return time.perf_counter() - started


def run(args: argparse.Namespace, pythonpath: str | None) -> dict[str, object]:
    data_dir = tempfile.mkdtemp(prefix="loop-stalls-", dir=args.dir)
    old, cwd = os.environ.get("PYTHONPATH"), os.getcwd()
    if pythonpath is not None:
        os.environ["PYTHONPATH"] = pythonpath
        os.chdir(pythonpath)  # python -m puts the working directory first on sys.path
    broker = BrokerProcess(data_dir, args=("--set", "log.cleaner.backoff.ms=1000"))
    try:
        broker.start()
    finally:
        os.chdir(cwd)
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})

        def create(topic: NewTopic) -> float:
            return _create(admin, topic)

        create(NewTopic("probe", 1))
        probe = Probe(broker.bootstrap, "probe")
        probe.start()
        time.sleep(1.0)
        figures: dict[str, object] = {}

        probe.phase = "create"
        figures["create_s"] = create(NewTopic("wide", args.partitions))
        probe.phase = "first"
        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "acks": 1,
                "linger.ms": 5,
                "queue.buffering.max.messages": 2 * args.partitions + 1000,
                "message.timeout.ms": int(TIMEOUT_S * 1000),
            }
        )
        assert len(producer.list_topics("wide", TIMEOUT_S).topics["wide"].partitions) == (
            args.partitions
        )
        figures["first_s"] = produce_round(producer, "wide", args.partitions)
        del producer

        probe.phase = "fill"
        create(NewTopic("big", 1, config={"segment.bytes": str(1 << 30)}))
        _fill(broker.bootstrap, "big", int(args.big_gib * (1 << 30)), 100_000)
        figures["big_bytes"] = _log_bytes(data_dir, "big")
        os.sync()
        time.sleep(0.5)

        probe.phase = "delete"
        started = time.perf_counter()
        admin.delete_topics(["big"], request_timeout=TIMEOUT_S)["big"].result(TIMEOUT_S)
        figures["delete_s"] = time.perf_counter() - started
        time.sleep(0.5)

        probe.phase = "fill"
        table = {
            "cleanup.policy": "compact",
            "segment.bytes": str(1 << 20),
            "min.cleanable.dirty.ratio": "0.01",
            "min.compaction.lag.ms": str(3_600_000),  # not while it is written
        }
        create(NewTopic("table", 1, config=table))
        _fill(broker.bootstrap, "table", args.compact_records * 100, 100, keys=KEYS)
        written = _log_bytes(data_dir, "table")
        time.sleep(0.5)
        probe.phase = "compact"
        lag = ConfigEntry("min.compaction.lag.ms", "0", incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(ConfigResource.Type.TOPIC, "table", incremental_configs=[lag])
        done = admin.incremental_alter_configs([resource], request_timeout=TIMEOUT_S)
        done[resource].result(TIMEOUT_S)
        started = time.perf_counter()
        while _log_bytes(data_dir, "table") > written // 2:
            if time.perf_counter() - started > TIMEOUT_S:
                raise RuntimeError("the compacted log did not shrink")
            time.sleep(0.2)
        figures["compact_bytes"] = (written, _log_bytes(data_dir, "table"))
        time.sleep(2.0)  # the rest of the pass (checkpoints) and the next round
        probe.stop()
        if probe.failures:
            raise RuntimeError(f"probe records failed: {probe.failures[:3]}")
        figures["probe"] = probe.times
        del probe
        return figures
    finally:
        broker.kill()  # a clean stop of 10,000 logs is not what is measured here
        broker.close()
        shutil.rmtree(data_dir, ignore_errors=True)


def show(label: str, args: argparse.Namespace, figures: dict[str, object]) -> None:
    print(f"{label}:")
    print(f"  create {args.partitions} partitions: {float(figures['create_s']):7.2f} s")  # type: ignore[arg-type]
    print(f"  first round: {float(figures['first_s']):7.2f} s")  # type: ignore[arg-type]
    big = int(figures["big_bytes"])  # type: ignore[call-overload]
    print(f"  delete {big / (1 << 30):.2f} GiB: {float(figures['delete_s']):7.2f} s")  # type: ignore[arg-type]
    written, left = cast("tuple[int, int]", figures["compact_bytes"])
    print(f"  compact {written / (1 << 20):.0f} MiB to {left / (1 << 20):.1f} MiB")
    times: dict[str, list[float]] = figures["probe"]  # type: ignore[assignment]
    for phase in PHASES:
        values = times.get(phase) or [float("nan")]
        print(
            f"  probe during {phase:7}: {len(values):5} records, "
            f"max {max(values) * 1000:8.1f} ms, p99 {quantile(values, 0.99) * 1000:8.1f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--big-gib", type=float, default=2.0)
    parser.add_argument("--compact-records", type=int, default=1_000_000)
    parser.add_argument("--baseline", metavar="REV", help="also run the package at REV, first")
    parser.add_argument(
        "--rev", metavar="REV", help="measure the package at REV instead of the working tree"
    )
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
                show(f"baseline {args.baseline}", args, run(args, tree))
            except (KafkaException, RuntimeError) as exc:
                print(f"baseline {args.baseline}: failed: {exc}")
    if args.rev is None:
        show("this tree", args, run(args, None))
        return
    with tempfile.TemporaryDirectory() as scratch:
        show(args.rev, args, run(args, export_tree(args.rev, scratch)))


if __name__ == "__main__":
    main()
