"""Interop with kcat (librdkafka) in both directions, through the same format string."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kafkette import Producer
from tests.brokers import BrokerProcess
from tests.cli.cli import kafkette, ok
from tests.cli.records import create_topic

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
EVERY_TOKEN = "%t %p %o %k %K %s %S %h %T %R %%\\n\\t|\\n"


def kcat(*args: str, input: bytes = b"") -> bytes:
    result = subprocess.run(["kcat", *args], input=input, capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_kafkette_produce_then_kcat_consume(memory_broker: BrokerProcess) -> None:
    ok(
        kafkette(
            "produce",
            "to-kcat",
            "-K:",
            "-H",
            "a=b",
            input="k1:v1\nk2:v2\nnokey\n",
            bootstrap=memory_broker.bootstrap,
        )
    )
    out = kcat(
        "-b", memory_broker.bootstrap, "-C", "-t", "to-kcat", "-e", "-q", "-f", "%k|%s|%h\\n"
    )
    assert out == b"k1|v1|a=b\nk2|v2|a=b\n|nokey|a=b\n"


def test_kcat_produce_then_kafkette_consume(memory_broker: BrokerProcess) -> None:
    kcat(
        "-b",
        memory_broker.bootstrap,
        "-P",
        "-t",
        "from-kcat",
        "-K:",
        input=b"k1:v1\nk2:v:2\n\nnokey\n",
    )
    out = ok(
        kafkette("consume", "from-kcat", "-e", "-f", "%k|%s\\n", bootstrap=memory_broker.bootstrap)
    )
    assert out == "k1|v1\nk2|v:2\n|nokey\n"


@pytest.mark.parametrize("codec", CODECS)
def test_same_text_from_both(memory_broker: BrokerProcess, codec: str) -> None:
    """1,000 records with keys (some null), null values, headers (some null) print the
    same bytes through kcat and kafkette, every token of the format included."""
    bootstrap = memory_broker.bootstrap
    topic = f"same-{codec}"
    create_topic(bootstrap, topic)
    with Producer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=20) as producer:
        for i in range(1000):
            key = None if i % 7 == 0 else f"key-{i}".encode()
            value = None if i % 5 == 0 else f"value {i} ".encode() * (i % 13)
            headers = [("h", str(i).encode()), ("n", None)] if i % 3 else []
            producer.send(topic, value, key=key, headers=headers, timestamp=1_700_000_000_000 + i)
    ours = subprocess.run(
        [
            sys.executable,
            "-m",
            "kafkette",
            "consume",
            topic,
            "-e",
            "-f",
            EVERY_TOKEN,
            "-b",
            bootstrap,
        ],
        capture_output=True,
        timeout=60,
    )
    assert (ours.returncode, ours.stderr) == (0, b"")
    theirs = kcat("-b", bootstrap, "-C", "-t", topic, "-e", "-q", "-f", EVERY_TOKEN)
    assert ours.stdout.count(b"|\n") == 1000
    assert ours.stdout == theirs
