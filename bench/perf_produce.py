"""``kafkette perf produce`` against ``bench/clients.py``'s kafkette producer (#20).

Both send ``--records`` values of ``--size`` bytes (1 KiB) with ``acks=1`` and
``linger.ms=5`` to a one-partition topic of the same ``kafkette serve --memory``
child process, and stop the clock when every record is acknowledged. They run
alternately, ``--rounds`` times each (the order rotating from round to round), so
that all see the same machine load: ``bench/clients.py``'s ``kafkette_sync``
and ``perf produce`` (``kafkette.cli.main``), each in this process and in a
child process of its own (as a user runs perf). Figures: wall-clock records/s
(perf's as its ``--json`` summary reports them: interpreter start and
connecting are outside its clock, as the bench's warm-up record is outside the
bench's), and, for the two in this process,
records per CPU-second of the process (all its threads; for perf this includes
its two end-offset look-ups), which the machine's load disturbs less. Each perf
run's record count is checked against the topic's end offsets. Each topic is
deleted after its run so that the memory broker does not grow. The 1-minute
load average is printed per round.

    .venv/bin/python bench/perf_produce.py [--records 200000] [--size 1024] [--rounds 3]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.clients import LINGER_MS, kafkette_sync
from kafkette import AdminClient, NewTopic, TopicPartition
from kafkette.admin import OffsetSpec
from kafkette.cli import main as kafkette_main
from tests.brokers import BrokerProcess


def perf_arguments(bootstrap: str, topic: str, size: int, records: int) -> list[str]:
    return [
        *("perf", "produce", topic, "--records", str(records), "--size", str(size)),
        *("--acks", "1", "-X", f"linger.ms={LINGER_MS}", "--json", "-b", bootstrap),
    ]


def checked(output: str, records: int) -> float:
    """The records/s of perf's summary; fails unless its counts agree with the end offsets."""
    summary = json.loads(output.splitlines()[-1])
    assert summary["type"] == "summary", summary
    assert summary["records"] == records, summary
    assert summary["end_offsets_after"] - summary["end_offsets_before"] == records, summary
    return float(summary["records_per_s"])


def perf_child(bootstrap: str, topic: str, size: int, records: int) -> tuple[float, float]:
    command = [sys.executable, "-m", "kafkette", *perf_arguments(bootstrap, topic, size, records)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if result.returncode:
        raise RuntimeError(f"perf produce exited with {result.returncode}: {result.stderr}")
    return checked(result.stdout, records), float("nan")


def perf_here(bootstrap: str, topic: str, size: int, records: int) -> tuple[float, float]:
    output = io.StringIO()
    cpu = time.process_time()
    with contextlib.redirect_stdout(output):
        assert kafkette_main(perf_arguments(bootstrap, topic, size, records)) == 0
    return checked(output.getvalue(), records), records / (time.process_time() - cpu)


def bench_here(bootstrap: str, topic: str, size: int, records: int) -> tuple[float, float]:
    wall, cpu = kafkette_sync(bootstrap, topic, b"v" * size, records)
    return records / wall, records / cpu


def bench_child(bootstrap: str, topic: str, size: int, records: int) -> tuple[float, float]:
    code = (
        f"import sys; sys.path.insert(0, {str(Path(__file__).resolve().parent.parent)!r})\n"
        "from bench.clients import kafkette_sync\n"
        f"print(kafkette_sync({bootstrap!r}, {topic!r}, b'v' * {size}, {records})[0])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600
    )
    if result.returncode:
        raise RuntimeError(f"the bench's producer exited with {result.returncode}: {result.stderr}")
    return records / float(result.stdout), float("nan")


def end_offset(admin: AdminClient, topic: str) -> int:
    found = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.LATEST}).all()
    return found[TopicPartition(topic, 0)].offset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    runners = {
        "bench/clients.py kafkette-sync (in process)": bench_here,
        "perf produce (in process)": perf_here,
        "bench/clients.py kafkette-sync (child process)": bench_child,
        "perf produce (child process)": perf_child,
    }
    rates: dict[str, list[tuple[float, float]]] = {name: [] for name in runners}
    with BrokerProcess() as broker, AdminClient(bootstrap_servers=broker.bootstrap) as admin:
        for round_number in range(args.rounds):
            load_before = os.getloadavg()[0]
            order = list(runners.items())
            order = order[round_number % len(order) :] + order[: round_number % len(order)]
            for number, (name, run) in enumerate(order):
                topic = f"perf-{round_number}-{number}"
                admin.create_topics([NewTopic(topic, 1)]).all()
                rates[name].append(run(broker.bootstrap, topic, args.size, args.records))
                extra = 1 if run in (bench_here, bench_child) else 0  # the bench's warm-up
                assert end_offset(admin, topic) == args.records + extra
                admin.delete_topics([topic]).all()
            print(
                f"round {round_number + 1}: "
                + ", ".join(f"{n} {r[-1][0]:,.0f}/s" for n, r in rates.items())
                + f"; load average {load_before:.2f} -> {os.getloadavg()[0]:.2f}",
                flush=True,
            )
    for name, values in rates.items():
        wall = statistics.median(v[0] for v in values)
        line = f"{name}: median {wall:,.0f} records/s ({wall * args.size / 1e6:.1f} MB/s)"
        line += f", runs {', '.join(f'{v[0]:,.0f}' for v in values)}"
        cpu = [v[1] for v in values if v[1] == v[1]]
        if cpu:
            line += f"; median {statistics.median(cpu):,.0f} records per CPU-second"
        print(line)


if __name__ == "__main__":
    main()
