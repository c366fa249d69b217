"""``-b file://DIR``: a stopped disk broker's directory, opened in this process."""

from __future__ import annotations

from pathlib import Path

from kafkette import Producer
from tests.brokers import BrokerProcess
from tests.cli.cli import kafkette, ok


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
