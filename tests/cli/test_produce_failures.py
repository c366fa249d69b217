"""``kafkette produce -z zstd`` delivers, and a producer whose sender fails ends the
command at once with the error (#28: ``seq 5 | kafkette produce t -z zstd`` hung
when zstandard was missing)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest

from kafkette.protocol.records import ZSTD
from tests.brokers import BrokerProcess
from tests.cli.cli import TIMEOUT_S, kafkette, ok
from tests.cli.records import batches, read_all

SEQ_5 = "".join(f"{i}\n" for i in range(1, 6))
"""What ``seq 5`` writes."""


def test_produce_zstd(memory_broker: BrokerProcess) -> None:
    """zstd needs no extra: the records arrive in zstd batches and read back exactly."""
    bootstrap = memory_broker.bootstrap
    started = time.monotonic()
    ok(kafkette("produce", "t", "-z", "zstd", input=SEQ_5, bootstrap=bootstrap))
    assert time.monotonic() - started < 20
    assert read_all(bootstrap, "t") == [
        (0, offset, None, str(offset + 1).encode(), ()) for offset in range(5)
    ]
    assert {b.batch.compression for b in batches(bootstrap, "t")} == {ZSTD}


INJECT = {
    "codec": textwrap.dedent(
        """\
        from kafkette.protocol.errors import UnsupportedCompressionError
        from kafkette.protocol.records import default_records

        def compress(codec, data, **kwargs):
            raise UnsupportedCompressionError("zstd is unavailable here")

        default_records.compress = compress
        """
    ),
    "build": textwrap.dedent(
        """\
        from kafkette.producer.accumulator import ProducerBatch

        def build(batch):
            raise RuntimeError("batch building broke")

        ProducerBatch.build = build
        """
    ),
}
"""Code run before the command: the failure of the producer's sender."""

ERRORS = {
    "codec": "kafkette produce: unexpected error: UnsupportedCompressionError: "
    "zstd is unavailable here\n",
    "build": "kafkette produce: unexpected error: RuntimeError: batch building broke\n",
}


@pytest.mark.parametrize("kind", list(INJECT))
def test_produce_exits_when_the_sender_fails(memory_broker: BrokerProcess, kind: str) -> None:
    """Exit status 1 within seconds, the sender's error on stderr, nothing on stdout."""
    script = INJECT[kind] + "from kafkette.cli import main\nraise SystemExit(main())\n"
    command = [sys.executable, "-c", script, "produce", "t", "-z", "zstd"]
    command += ["-b", memory_broker.bootstrap]
    started = time.monotonic()
    result = subprocess.run(
        command, input=SEQ_5.encode(), capture_output=True, timeout=TIMEOUT_S, text=False
    )
    elapsed = time.monotonic() - started
    assert (result.returncode, result.stdout.decode(), result.stderr.decode()) == (
        1,
        "",
        ERRORS[kind],
    )
    assert elapsed < 15, elapsed
