"""Exactly-once copy with kafkette copiers in child processes, modelled on Kafka's
transactions system test: source records over 3 partitions, two copiers (consume ->
produce -> send_offsets_to_transaction -> commit, every 7th transaction aborted), copiers
SIGKILLed and restarted, and the broker (``kafkette serve --data-dir``) SIGKILLed and
restarted. The output read with read_committed holds every source record exactly once,
in source order per partition."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from kafkette import AdminClient, NewTopic, Producer
from tests.brokers import BrokerProcess
from tests.producer.transactions.copier import GROUP
from tests.producer.transactions.helpers import confluent_read, read_all

PARTITIONS = 3
RECORDS = 100_000
COPIERS = ("copier-a", "copier-b")
GATE_AHEAD = 0.1


def start_copier(
    bootstrap: str, transactional_id: str, log: Path, gate: Path
) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.producer.transactions.copier",
                bootstrap,
                transactional_id,
                str(gate),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=Path(__file__).resolve().parents[3],
        )


def open_gate(gate: Path, fraction: float | None) -> None:
    """Let the copiers copy each partition up to ``fraction`` of it (None: all of it)."""
    limit = RECORDS if fraction is None else int(min(fraction, 1.0) * RECORDS / PARTITIONS)
    gate.with_suffix(".new").write_text(str(limit))
    gate.with_suffix(".new").replace(gate)


def committed_total(bootstrap: str) -> int:
    try:
        with AdminClient(bootstrap_servers=bootstrap, default_api_timeout_ms=5_000) as admin:
            offsets = admin.list_consumer_group_offsets(GROUP).all()
    except Exception:  # the broker is restarting
        return -1
    return sum(o.offset for o in offsets.values() if o is not None)


def test_exactly_once_copy_across_copier_and_broker_kills(
    disk_broker: BrokerProcess, tmp_path: Path
) -> None:
    bootstrap = disk_broker.bootstrap
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic("in", PARTITIONS), NewTopic("out", PARTITIONS)]).all()
    expected: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    with Producer(bootstrap_servers=bootstrap, linger_ms=20) as source:
        for i in range(RECORDS):
            value = b"%d" % i
            source.send("in", value, partition=i % PARTITIONS)
            expected[i % PARTITIONS].append(value)

    logs = {name: tmp_path / f"{name}.log" for name in COPIERS}
    # (fraction of the records committed, what to kill then)
    kills = [(0.15, "copier-a"), (0.35, "broker"), (0.55, "copier-b"), (0.75, "copier-a")]
    # The gate stays a little ahead of the next kill: the copiers are still at work when
    # it happens, yet however fast they copy, they cannot finish before it.
    gate = tmp_path / "gate"
    open_gate(gate, kills[0][0] + GATE_AHEAD)
    copiers = {name: start_copier(bootstrap, name, logs[name], gate) for name in COPIERS}
    restarts = 0
    deadline = time.monotonic() + 150
    try:
        while True:
            total = committed_total(bootstrap)
            if total == RECORDS:
                break
            assert time.monotonic() < deadline, f"{total} of {RECORDS} copied; " + "; ".join(
                f"{n}: {logs[n].read_text()[-2000:]}" for n in COPIERS
            )
            if kills and total >= kills[0][0] * RECORDS:
                _, victim = kills.pop(0)
                if victim == "broker":
                    disk_broker.kill()
                    disk_broker.start()
                else:
                    copiers[victim].kill()
                    copiers[victim].wait()
                    copiers[victim] = start_copier(bootstrap, victim, logs[victim], gate)
                open_gate(gate, kills[0][0] + GATE_AHEAD if kills else None)
            for name, process in copiers.items():
                if process.poll() is not None:  # gave up after an error: start it again
                    restarts += 1
                    copiers[name] = start_copier(bootstrap, name, logs[name], gate)
            time.sleep(0.05)
    finally:
        for process in copiers.values():
            process.kill()
            process.wait()
    assert not kills, f"the copy finished before every kill happened: {kills}"

    out = read_all(bootstrap, "out", PARTITIONS, "read_committed", timeout_s=60)
    for p in range(PARTITIONS):
        assert [value for partition, _, value in out if partition == p] == expected[p]
    assert confluent_read(bootstrap, "out", PARTITIONS, "read_committed", timeout_s=60) == out
