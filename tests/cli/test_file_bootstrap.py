"""``-b file://DIR``: a stopped disk broker's directory, opened in this process."""

from __future__ import annotations

from pathlib import Path

from kafkette import Producer
from tests.brokers import BrokerProcess
from tests.cli.cli import kafkette, ok
from tests.dir_state import tree_state


def test_consume_a_stopped_brokers_directory(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with BrokerProcess(data) as broker:
        with Producer(bootstrap_servers=broker.bootstrap) as producer:
            for i in range(3):
                producer.send("kept", f"v{i}".encode(), key=f"k{i}".encode(), headers={"h": b"x"})
        locked = kafkette("consume", "kept", "-e", bootstrap=f"file://{data}")
        assert (locked.returncode, locked.stdout) == (1, "")
        assert locked.stderr.startswith(
            f"kafkette consume: DATA_DIR_LOCKED: data directory {data} is in use by another "
            "process (pid "
        )
        broker.stop()
        out = ok(
            kafkette("consume", "kept", "-e", "-f", "%o %k=%s %h\\n", bootstrap=f"file://{data}")
        )
    assert out == "0 k0=v0 h=x\n1 k1=v1 h=x\n2 k2=v2 h=x\n"


def _make_read_only(root: Path, mode: bool) -> None:
    """Take the write permission off every directory and file under ``root`` (or give it
    back). Running as root, this stops nothing: the tree's hash is the proof."""
    paths = [root, *root.rglob("*")]
    for path in paths if mode else reversed(paths):
        if path.is_dir():
            path.chmod(0o555 if mode else 0o755)
        else:
            path.chmod(0o444 if mode else 0o644)


def test_a_stopped_brokers_directory_is_read_without_changing_a_byte(tmp_path: Path) -> None:
    """consume, topics and offsets read a stopped broker's directory exactly (keys, headers,
    a gzip batch, an aborted transaction, several segments); produce is refused naming the
    read-only opening; every file and directory keeps its bytes and mtime."""
    data = tmp_path / "data"
    with BrokerProcess(data) as broker:
        ok(
            kafkette(
                "topics",
                "create",
                "kept",
                "--partitions",
                "2",
                "--config",
                "segment.bytes=1024",
                bootstrap=broker.bootstrap,
            )
        )
        with Producer(bootstrap_servers=broker.bootstrap) as producer:
            for i in range(30):
                producer.send(
                    "kept",
                    f"v{i}".encode(),
                    key=f"k{i}".encode(),
                    headers={"h": b"x"},
                    partition=i % 2,
                )
                producer.flush()  # a batch each: the partitions fill several segments
        with Producer(bootstrap_servers=broker.bootstrap, transactional_id="tx") as producer:
            producer.init_transactions()
            producer.begin_transaction()
            producer.send("kept", b"gone", key=b"aborted", partition=0)
            producer.flush()
            producer.abort_transaction()
        ok(
            kafkette(
                "produce",
                "kept",
                "-K:",
                "-z",
                "gzip",
                "-p",
                "1",
                input="z1:gz1\nz2:gz2\n",
                bootstrap=broker.bootstrap,
            )
        )
        holder = (data / ".lock").read_text().strip()
        locked = kafkette("offsets", "kept", bootstrap=f"file://{data}")
        assert (locked.returncode, locked.stdout, locked.stderr) == (
            1,
            "",
            f"kafkette offsets: DATA_DIR_LOCKED: data directory {data} is in use by another "
            f"process ({holder}); stop it to open the directory read-only\n",
        )
        broker.stop()
    assert len(list((data / "logs" / "kept-0").glob("*.log"))) >= 2
    before = tree_state(data)
    url = f"file://{data}"
    fmt = "%p %o %k=%s %h\\n"
    p0 = "".join(f"0 {i} k{2 * i}=v{2 * i} h=x\n" for i in range(15))
    p1 = "".join(f"1 {i} k{2 * i + 1}=v{2 * i + 1} h=x\n" for i in range(15))
    p1 += "1 15 z1=gz1 \n1 16 z2=gz2 \n"
    assert ok(kafkette("consume", "kept", "-p", "0", "-e", "-f", fmt, bootstrap=url)) == (
        p0 + "0 15 aborted=gone \n"  # read_uncommitted, as kcat: the aborted record too
    )
    committed = ("consume", "kept", "-e", "-f", fmt, "--isolation", "read_committed")
    assert ok(kafkette(*committed, "-p", "0", bootstrap=url)) == p0
    assert ok(kafkette(*committed, "-p", "1", bootstrap=url)) == p1
    assert ok(kafkette("topics", "list", bootstrap=url)) == "TOPIC  PARTITIONS\nkept   2\n"
    assert ok(kafkette("topics", "describe", "kept", bootstrap=url)) == (
        "TOPIC  PARTITION  LEADER  REPLICAS  ISR  EARLIEST  LATEST\n"
        "kept   0          1       1         1    0         17\n"
        "kept   1          1       1         1    0         17\n"
        "\n"
        "TOPIC  CONFIG         VALUE  SOURCE\n"
        "kept   segment.bytes  1024   DYNAMIC_TOPIC_CONFIG\n"
    )
    assert ok(kafkette("offsets", "kept", bootstrap=url)) == (
        "TOPIC  PARTITION  EARLIEST  LATEST\n"
        "kept   0          0         17\n"
        "kept   1          0         17\n"
    )
    refused = kafkette("produce", "kept", input="more\n", bootstrap=url)
    assert (refused.returncode, refused.stdout, refused.stderr) == (
        1,
        "",
        "kafkette produce: CLUSTER_AUTHORIZATION_FAILED (31): Cluster authorization failed. "
        f"(InitProducerId) ({url} is opened read-only)\n",
    )
    created = kafkette("topics", "create", "new", bootstrap=url)
    assert (created.returncode, created.stderr) == (
        1,
        "kafkette topics create: TOPIC_AUTHORIZATION_FAILED (29): Topic authorization failed. "
        f"(the data directory {data} is opened read-only)\n",
    )
    assert tree_state(data) == before
    _make_read_only(data, True)
    try:
        assert ok(kafkette(*committed, "-p", "1", bootstrap=url)) == p1
    finally:
        _make_read_only(data, False)
    assert tree_state(data) == before


def test_a_killed_brokers_directory_is_recovered_in_memory_only(tmp_path: Path) -> None:
    """After kill -9 (no clean-shutdown marker, an open transaction, unflushed indexes),
    consume and offsets read what recovery finds, and nothing under the directory
    changes; the broker started again afterwards recovers it as before."""
    data = tmp_path / "data"
    broker = BrokerProcess(data).start()
    try:
        with Producer(bootstrap_servers=broker.bootstrap, acks="all") as producer:
            for i in range(5):
                producer.send("crashed", f"v{i}".encode(), key=f"k{i}".encode()).result(30)
        transactional = Producer(bootstrap_servers=broker.bootstrap, transactional_id="open")
        transactional.init_transactions()
        transactional.begin_transaction()
        transactional.send("crashed", b"pending", key=b"p").result(30)
        broker.kill()
        transactional.close(timeout=0)
    finally:
        broker.close()
    assert not (data / "logs" / "crashed-0" / "clean-shutdown").exists()  # recovery will run
    before = tree_state(data)
    url = f"file://{data}"
    everything = "".join(f"{i} k{i}=v{i}\n" for i in range(5)) + "5 p=pending\n"
    fmt = ("-f", "%o %k=%s\\n")
    assert ok(kafkette("consume", "crashed", "-e", *fmt, bootstrap=url)) == everything
    committed = ok(
        kafkette("consume", "crashed", "-e", *fmt, "--isolation", "read_committed", bootstrap=url)
    )
    assert committed == "".join(f"{i} k{i}=v{i}\n" for i in range(5))  # stops at the open txn
    assert ok(kafkette("offsets", "crashed", bootstrap=url)) == (
        "TOPIC    PARTITION  EARLIEST  LATEST\ncrashed  0          0         6\n"
    )
    assert tree_state(data) == before
    with BrokerProcess(data) as again:
        assert ok(kafkette("consume", "crashed", "-e", *fmt, bootstrap=again.bootstrap)) == (
            everything
        )
