"""What every client subcommand shares: settings, output, errors and exit statuses."""

from __future__ import annotations

import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from kafkette import Producer
from tests.brokers import BrokerProcess, free_port
from tests.cli.cli import kafkette, ok


def test_help_lists_the_subcommands_and_the_entry_point_is_kept() -> None:
    from kafkette.cli import main

    assert callable(main)
    out = ok(kafkette("--help"))
    for command in ("serve", "produce", "consume"):
        assert command in out


def test_settings_from_options_file_and_environment(
    memory_broker: BrokerProcess, tmp_path: Path
) -> None:
    """-b, then -X, then -F, then $KAFKETTE_BOOTSTRAP_SERVERS name the cluster; a setting
    only one client knows (group.id) is given to that client only."""
    props = tmp_path / "client.properties"
    props.write_text(f"# a comment\nbootstrap.servers = {memory_broker.bootstrap}\nlinger.ms=0\n")
    ok(kafkette("produce", "t", "-F", str(props), "-X", "group.id=g", input="a\n"))
    env = {"KAFKETTE_BOOTSTRAP_SERVERS": memory_broker.bootstrap}
    ok(kafkette("produce", "t", "-X", "client.id=cli", input="b\n", env=env))
    ok(kafkette("produce", "t", "-X", f"bootstrap.servers={memory_broker.bootstrap}", input="c\n"))
    # -b wins over a wrong bootstrap in -X and in the environment
    wrong = {"KAFKETTE_BOOTSTRAP_SERVERS": "127.0.0.1:1"}
    ok(
        kafkette(
            "produce",
            "t",
            "-X",
            "bootstrap.servers=127.0.0.1:1",
            input="d\n",
            env=wrong,
            bootstrap=memory_broker.bootstrap,
        )
    )
    assert ok(kafkette("consume", "t", "-e", bootstrap=memory_broker.bootstrap)) == "a\nb\nc\nd\n"


def test_usage_errors_exit_2_with_one_line(tmp_path: Path) -> None:
    result = kafkette("consume", "t", "-X", "bootstrap.server=localhost:9092")
    assert result.returncode == 2
    assert result.stderr == (
        "kafkette consume: error: configuration setting 'bootstrap.server': "
        "unknown client setting; did you mean 'bootstrap.servers'?\n"
    )
    assert result.stdout == ""
    for args, message in [
        (("-X", "linger.ms"), "kafkette produce: error: -X 'linger.ms': expected KEY=VALUE\n"),
        (
            ("-X", "linger.ms=soon"),
            "kafkette produce: error: configuration setting 'linger.ms': "
            "invalid literal for int() with base 10: 'soon'\n",
        ),
        (
            ("-F", str(tmp_path / "missing")),
            f"kafkette produce: error: -F {tmp_path / 'missing'}: No such file or directory\n",
        ),
    ]:
        result = kafkette("produce", "t", *args)
        assert (result.returncode, result.stderr) == (2, message)
    result = kafkette("consume")  # argparse: a missing argument
    assert result.returncode == 2
    assert result.stderr.endswith("error: the following arguments are required: TOPIC\n")


def test_kafka_errors_exit_1_with_one_line_or_a_traceback_with_debug(
    memory_broker: BrokerProcess,
) -> None:
    result = kafkette("consume", "missing", bootstrap=memory_broker.bootstrap)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        "kafkette consume: UNKNOWN_TOPIC_OR_PARTITION (3): "
        "This server does not host this topic-partition. (missing)\n"
    )
    result = kafkette("consume", "missing", "--debug", bootstrap=memory_broker.bootstrap)
    assert result.returncode == 1
    assert result.stderr.startswith("Traceback (most recent call last):\n")
    assert result.stderr.endswith(
        "kafkette consume: UNKNOWN_TOPIC_OR_PARTITION (3): "
        "This server does not host this topic-partition. (missing)\n"
    )


def test_no_broker_is_a_kafka_error() -> None:
    """The refused connection is shown at once (one line), then the call's timeout as a
    Kafka error (one line)."""
    port = free_port()
    result = kafkette(
        "consume", "t", "-X", "default.api.timeout.ms=500", bootstrap=f"127.0.0.1:{port}"
    )
    assert result.returncode == 1
    refused, timeout, rest = result.stderr.split("\n", 2)
    assert refused.startswith(
        f"kafkette: connecting to 127.0.0.1:{port} failed: Connection refused"
    )
    assert timeout.startswith("kafkette consume: TIMEOUT: ")
    assert rest == ""


def test_ctrl_c_and_a_closed_pipe_end_quietly(memory_broker: BrokerProcess) -> None:
    with Producer(bootstrap_servers=memory_broker.bootstrap, linger_ms=50) as producer:
        for i in range(20_000):
            producer.send("many", str(i).encode())
    command = [sys.executable, "-m", "kafkette", "consume", "many", "-b", memory_broker.bootstrap]
    # | head -1: the reader goes away after one line
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as reader:
        assert reader.stdout is not None and reader.stderr is not None
        assert reader.stdout.readline() == b"0\n"
        reader.stdout.close()
        assert reader.wait(30) == 141
        assert reader.stderr.read() == b""
    # Ctrl-C while waiting for records: once a record produced after the start is
    # printed, the command is in its poll loop
    with subprocess.Popen(
        [*command, "-o", "end"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as waiter:
        assert waiter.stdout is not None and waiter.stderr is not None
        deadline = time.monotonic() + 30
        while True:
            with Producer(bootstrap_servers=memory_broker.bootstrap) as producer:
                producer.send("many", b"new").result(10)
            ready, _, _ = select.select([waiter.stdout], [], [], 0.5)
            if ready or time.monotonic() > deadline:
                break
        assert waiter.stdout.readline() == b"new\n"
        waiter.send_signal(signal.SIGINT)
        assert waiter.wait(30) == 130
        assert waiter.stderr.read() == b""
