"""Ctrl-C ends ``kafkette consume -G`` at once, also while its group rebalances.

A member killed with SIGKILL stays in its group until its session times out (45 s by
default); a rebalance in the meantime waits for it, and the JoinGroup of the member
still alive is parked at the coordinator. Ctrl-C must not wait for that rebalance:
the command leaves its group as best it can within a short bound and exits 130.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable

from kafkette import AdminClient, NewPartitions, Producer
from kafkette.admin.types import ConsumerGroupDescription, GroupState
from tests.brokers import BrokerProcess
from tests.cli.records import create_topic

WAIT_S = 30.0
"""Longest wait for the group to reach a state (a loaded machine starts processes slowly)."""
EXIT_S = 3.0
"""How soon after SIGINT the command must have exited: within a second, with margin for
a loaded two-core machine; far below the dead member's 45 s session."""


def consume(bootstrap: str, *settings: str) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "kafkette", "consume", "t", "-G", "g", "-b", bootstrap]
    command += ["-f", "%p:%o:%s\\n"]
    for setting in settings:
        command += ["-X", setting]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def read_lines(process: subprocess.Popen[bytes], count: int) -> list[str]:
    """The first ``count`` lines the process prints (read from the pipe unbuffered, so
    that select() sees what is left)."""
    assert process.stdout is not None
    fd = process.stdout.fileno()
    data = b""
    deadline = time.monotonic() + WAIT_S
    while data.count(b"\n") < count:
        left = deadline - time.monotonic()
        assert left > 0, f"only {data!r} printed"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 65536)
            assert chunk, f"the command ended after printing {data!r}"
            data += chunk
    return data.decode().splitlines(keepends=True)


def wait_for_group(
    admin: AdminClient, done: Callable[[ConsumerGroupDescription], bool]
) -> ConsumerGroupDescription:
    deadline = time.monotonic() + WAIT_S
    while True:
        described = admin.describe_consumer_groups(["g"]).all()["g"]
        if done(described):
            return described
        assert time.monotonic() < deadline, f"the group stayed {described}"
        time.sleep(0.05)


def test_ctrl_c_during_a_rebalance_held_by_a_killed_member(memory_broker: BrokerProcess) -> None:
    """B reads every record alone; A joins and the group settles with both; A is killed
    with SIGKILL. The topic grows, so B (the group's leader) rejoins: its JoinGroup waits
    for A's session to end. Ctrl-C then ends B within a second, with status 130, nothing
    on stderr, and each record printed exactly once."""
    bootstrap = memory_broker.bootstrap
    create_topic(bootstrap, "t", 2)
    with Producer(bootstrap_servers=bootstrap) as producer:
        for offset in range(3):
            for partition in (0, 1):
                producer.send("t", f"v{partition}{offset}".encode(), partition=partition)
        producer.flush()
    expected = sorted(f"{p}:{o}:v{p}{o}\n" for p in (0, 1) for o in range(3))
    b = consume(bootstrap, "heartbeat.interval.ms=200", "metadata.max.age.ms=300")
    a: subprocess.Popen[bytes] | None = None
    try:
        printed = read_lines(b, 6)
        assert sorted(printed) == expected
        with AdminClient(bootstrap_servers=bootstrap) as admin:
            a = consume(bootstrap)
            wait_for_group(admin, lambda g: g.state is GroupState.STABLE and len(g.members) == 2)
            a.kill()
            a.wait()
            admin.create_partitions({"t": NewPartitions(3)}).all()
            wait_for_group(admin, lambda g: g.state is GroupState.PREPARING_REBALANCE)
            started = time.monotonic()
            b.send_signal(signal.SIGINT)
            try:
                status = b.wait(60)
            finally:
                took = time.monotonic() - started
            assert took < EXIT_S, f"exited {took:.2f} s after SIGINT"
            assert status == 130
            out, err = b.communicate()
            assert err == b""
            assert sorted(printed + out.decode().splitlines(keepends=True)) == expected
            # B left: only the killed member is left, until its session ends
            (member,) = admin.describe_consumer_groups(["g"]).all()["g"].members
            assert member.client_id
    finally:
        for process in (a, b):
            if process is not None:
                stop(process)


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.kill()
        process.wait()
    for pipe in (process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()
