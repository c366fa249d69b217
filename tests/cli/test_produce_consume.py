"""``kafkette produce`` and ``kafkette consume`` against ``kafkette serve``."""

from __future__ import annotations

import json
from pathlib import Path

from kafkette import AdminClient, Producer
from kafkette.protocol.records import compression
from tests.brokers import BrokerProcess
from tests.cli.cli import kafkette, ok
from tests.cli.records import batches, create_topic, read_all

TOKENS = "%t|%p|%o|%k|%K|%s|%S|%h\\n"


def test_round_trip(broker: BrokerProcess) -> None:
    """Lines become records (empty lines skipped, no delimiter: no key), -v prints
    where they went; consume prints them with kcat's tokens, or as JSON."""
    lines = "k1:v1\n\nk2:v:2\nnokey\n:\nlast:no newline"
    out = ok(
        kafkette(
            "produce",
            "events",
            "-K:",
            "-H",
            "a=b",
            "-H",
            "c",
            "-v",
            input=lines,
            bootstrap=broker.bootstrap,
        )
    )
    assert out == (
        "TOPIC   PARTITION  OFFSET\n"
        "events  0          0\n"
        "events  0          1\n"
        "events  0          2\n"
        "events  0          3\n"
        "events  0          4\n"
    )
    headers = (("a", b"b"), ("c", None))
    assert read_all(broker.bootstrap, "events") == [
        (0, 0, b"k1", b"v1", headers),
        (0, 1, b"k2", b"v:2", headers),
        (0, 2, None, b"nokey", headers),
        (0, 3, b"", b"", headers),
        (0, 4, b"last", b"no newline", headers),
    ]
    out = ok(kafkette("consume", "events", "-e", "-f", TOKENS, bootstrap=broker.bootstrap))
    assert out == (
        "events|0|0|k1|2|v1|2|a=b,c=NULL\n"
        "events|0|1|k2|2|v:2|3|a=b,c=NULL\n"
        "events|0|2||-1|nokey|5|a=b,c=NULL\n"
        "events|0|3||0||0|a=b,c=NULL\n"
        "events|0|4|last|4|no newline|10|a=b,c=NULL\n"
    )
    out = ok(kafkette("consume", "events", "-e", "-c", "2", "--json", bootstrap=broker.bootstrap))
    first, second = (json.loads(line) for line in out.splitlines())
    assert isinstance(first.pop("timestamp"), int)
    assert first == {
        "topic": "events",
        "partition": 0,
        "offset": 0,
        "key": "k1",
        "value": "v1",
        "headers": [["a", "b"], ["c", None]],
    }
    assert second["offset"] == 1


def test_produce_options(memory_broker: BrokerProcess, tmp_path: Path) -> None:
    """-D and -Z, -p, -l, -z with --acks, --transactional-id, -v --json."""
    bootstrap = memory_broker.bootstrap
    create_topic(bootstrap, "two", 2)
    ok(
        kafkette(
            "produce",
            "two",
            "-D",
            ";",
            "-K",
            "\\t",
            "-Z",
            "-p",
            "1",
            input="a\tb;\tonly value;key only\t;;",
            bootstrap=bootstrap,
        )
    )
    value = bytes(range(256)) * 3 + b"\n\nend\n"
    (tmp_path / "blob").write_bytes(value)
    out = ok(
        kafkette(
            "produce",
            "two",
            "-p",
            "0",
            "-l",
            str(tmp_path / "blob"),
            "-v",
            "--json",
            bootstrap=bootstrap,
        )
    )
    assert json.loads(out) == [{"topic": "two", "partition": 0, "offset": 0}]
    assert read_all(bootstrap, "two", 2) == [
        (0, 0, None, value, ()),
        (1, 0, b"a", b"b", ()),
        (1, 1, None, b"only value", ()),
        (1, 2, b"key only", None, ()),
    ]
    lines = "".join(f"{i}\n" for i in range(200))
    codecs = {"gzip": "1", "snappy": "0", "lz4": "all", "zstd": "-1"}
    for codec, acks in codecs.items():
        ok(
            kafkette(
                "produce", codec, "-z", codec, "--acks", acks, input=lines, bootstrap=bootstrap
            )
        )
    for codec in codecs:
        assert [row[3] for row in read_all(bootstrap, codec)] == [
            str(i).encode() for i in range(200)
        ]
        found = {b.batch.compression for b in batches(bootstrap, codec)}
        assert found == {getattr(compression, codec.upper())}, codec
    ok(
        kafkette(
            "produce",
            "txn",
            "--transactional-id",
            "cli-txn",
            "-K:",
            input="k:v\nk2:v2\n",
            bootstrap=bootstrap,
        )
    )
    assert read_all(bootstrap, "txn", isolation="read_committed") == [
        (0, 0, b"k", b"v", ()),
        (0, 1, b"k2", b"v2", ()),
    ]
    assert all(b.batch.is_transactional for b in batches(bootstrap, "txn"))
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        described = admin.describe_transactions(["cli-txn"]).all()["cli-txn"]
    assert described.state.value == "CompleteCommit"


def lines(result: str) -> list[str]:
    """Output lines sorted: records of different partitions may interleave."""
    return sorted(result.splitlines())


def test_consume_offsets(timed: str) -> None:
    def consume(*args: str) -> str:
        return ok(kafkette("consume", "timed", "-f", "%p:%o:%T:%s\\n", *args, bootstrap=timed))

    assert consume("-o", "3", "-p", "0", "-e") == "0:3:4000:v03\n0:4:5000:v04\n"
    assert lines(consume("-o", "-2", "-e")) == [
        "0:3:4000:v03",
        "0:4:5000:v04",
        "1:1:2500:v11",
        "1:2:3500:v12",
    ]
    assert lines(consume("-o", "s@2500", "-o", "e@4500", "-e")) == [
        "0:2:3000:v02",
        "0:3:4000:v03",
        "1:1:2500:v11",
        "1:2:3500:v12",
    ]
    assert lines(consume("--from-time", "1970-01-01T00:00:03.500+00:00", "-e")) == [
        "0:3:4000:v03",
        "0:4:5000:v04",
        "1:2:3500:v12",
    ]
    assert consume("-o", "end", "-e") == ""
    assert consume("-p", "0", "-c", "3") == "0:0:1000:v00\n0:1:2000:v01\n0:2:3000:v02\n"
    out = ok(kafkette("consume", "timed", "-p", "1", "-K", "#", "-e", bootstrap=timed))
    assert out == "k10#v10\nk11#v11\nk12#v12\n"


def test_consume_usage_errors(timed: str) -> None:
    for args, message in [
        (("-o", "stored"), "-o stored needs a group (-G GROUP)"),
        (("-G", "g", "-p", "0"), "-p cannot be used with -G (the group assigns partitions)"),
        (("-f", "%x"), "-f '%x': unknown format token %x"),
        (("-o", "soon"), "-o soon: expected beginning|end|stored|N|-N|s@MS|e@MS"),
    ]:
        result = kafkette("consume", "timed", *args, bootstrap=timed)
        assert (result.returncode, result.stdout) == (2, "")
        assert result.stderr == f"kafkette consume: error: {message}\n"


def test_read_committed(memory_broker: BrokerProcess) -> None:
    """read_committed skips an aborted transaction; -e ends past the transaction markers."""
    bootstrap = memory_broker.bootstrap
    with Producer(bootstrap_servers=bootstrap, transactional_id="t1") as producer:
        producer.init_transactions()
        for word, commit in (("kept", True), ("dropped", False), ("also", True)):
            producer.begin_transaction()
            producer.send("tx", word.encode())
            producer.flush()
            if commit:
                producer.commit_transaction()
            else:
                producer.abort_transaction()
    args = ("consume", "tx", "-e", "-f", "%o:%s\\n")
    assert ok(kafkette(*args, bootstrap=bootstrap)) == "0:kept\n2:dropped\n4:also\n"
    committed = ok(kafkette(*args, "--isolation", "read_committed", bootstrap=bootstrap))
    assert committed == "0:kept\n4:also\n"


def test_group_consume_commits(timed: str) -> None:
    """-G reads as a group member and commits what it printed: -c stops exactly after
    COUNT records, and the next run resumes there."""

    def consume(*args: str) -> list[str]:
        return lines(
            ok(kafkette("consume", "timed", "-G", "g", "-f", "%p:%o\\n", *args, bootstrap=timed))
        )

    first = consume("-o", "beginning", "-c", "6")
    assert len(first) == 6
    rest = consume("-e")
    assert sorted(first + rest) == sorted(
        [f"0:{o}" for o in range(5)] + [f"1:{o}" for o in range(3)]
    )
    assert consume("-e") == []
    with AdminClient(bootstrap_servers=timed) as admin:
        committed = admin.list_consumer_group_offsets("g").all()
    assert {(tp.partition, o.offset) for tp, o in committed.items() if o} == {(0, 5), (1, 3)}
