"""Exactly once across ``kill -9`` of the Spark driver and a restart from the checkpoint.

One driver subprocess (``crash_driver``) runs three KafkaSink queries and
stops each mid-batch 1: ``after`` once the batch's transactions committed,
``before`` with Spark partition 0's transaction open, ``control`` (at least
once) after its write. The test kills the driver's process group, checks the
crash points, and runs the driver again from the same checkpoints. Read with
read_committed, ``after`` and ``before`` hold each line once; the control
holds batch 1's lines twice.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from tests.brokers import BrokerProcess
from tests.spark_integration.sink_helpers import create_topics, read_all

ROOT = Path(__file__).parents[2]
BATCHES = [[f"b{b}-r{r}" for r in range(6)] for b in range(3)]
TIMEOUT_S = 600.0
NAMES = ("after", "before", "control")


def lines(*batches: int) -> Counter[bytes | None]:
    return Counter(line.encode() for b in batches for line in BATCHES[b])


def test_kill_9_of_the_driver_mid_batch_then_restart(
    spark_broker: BrokerProcess, unique_topic: str, tmp_path: Path
) -> None:
    bootstrap = spark_broker.bootstrap
    topics = {name: f"{unique_topic}-{name}" for name in NAMES}
    for topic in topics.values():
        create_topics(bootstrap, 2, topic)
        (tmp_path / topic / "in").mkdir(parents=True)
        for n, batch in enumerate(BATCHES):
            path = tmp_path / topic / "in" / f"{n}.txt"
            path.write_text("".join(f"{x}\n" for x in batch))
            os.utime(path, (1_700_000_000 + n, 1_700_000_000 + n))  # the file source's order
    command = [sys.executable, "-m", "tests.spark_integration.crash_driver"]
    command += ["--bootstrap", bootstrap, "--work", str(tmp_path)]
    queries = [f"{name}:{topic}" for name, topic in topics.items()]

    def values(name: str, read_committed: bool = True) -> Counter[bytes | None]:
        records = read_all(bootstrap, 2, topics[name], read_committed=read_committed)
        return Counter(value for _, _, _, value, _ in records)

    log = (tmp_path / "crash-run.log").open("w")
    crashing = subprocess.Popen(
        [*command, "--crash", *queries],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, the JVM and its Python in it
    )
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while not all((tmp_path / f"ready-{name}").exists() for name in NAMES):
            assert crashing.poll() is None, (tmp_path / "crash-run.log").read_text()[-5000:]
            assert time.monotonic() < deadline, "the queries did not reach their crash points"
            time.sleep(0.2)
    finally:
        os.killpg(crashing.pid, signal.SIGKILL)
        crashing.wait()
        log.close()

    # the crash points: after batch 1 committed; before partition 0 of batch 1 committed
    assert values("after") == lines(0, 1)
    assert values("control") == lines(0, 1)
    before = values("before")
    assert lines(0) <= before < lines(0, 1)
    assert values("before", read_committed=False) - before  # the open transaction's rows

    restart = subprocess.run(
        [*command, *queries],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert restart.returncode == 0, restart.stderr[-5000:]
    assert sorted(restart.stdout.splitlines()) == [f"{name} batches 3" for name in sorted(NAMES)]
    assert values("after") == lines(0, 1, 2)
    assert values("before") == lines(0, 1, 2)
    # the control: batch 1 ran again after the restart and its lines are there twice
    assert values("control") == lines(0, 1, 1, 2)
