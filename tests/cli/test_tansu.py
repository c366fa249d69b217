"""The command line against Tansu, a Kafka broker nobody here wrote (Rust, memory storage).

Every subcommand that Tansu's APIs allow is run as a user would, with the exact output.
Tansu gaps, named where the test meets them:

- it serves no ListTransactions, DescribeProducers or CreatePartitions: ``txns list``,
  ``producers`` and ``topics add-partitions`` fail with UNSUPPORTED_VERSION naming the
  API (exit 1), which is what a user sees against any broker without them;
- ListOffsets "latest" answers the last offset instead of the next one (1 where Kafka
  and kafkette serve say 2), so ``offsets`` prints it and ``groups describe`` a lag of -1;
- ListGroups gives no state (``groups list`` prints Unknown);
- topics are not created on first use (``perf produce`` needs ``topics create`` first);
- a new group's first JoinGroup is answered after about half the session timeout (23 s
  at the default 45 s), so the group consumers here use a 6 s session timeout.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.brokers import TansuProcess, tansu_broker
from tests.cli.cli import kafkette, ok

GROUP = ("-G", "g1", "-X", "session.timeout.ms=6000")
"""A balanced consumer of group g1 (see the module's note on Tansu's first join)."""


@pytest.fixture(scope="module")
def tansu_cli() -> Iterator[TansuProcess]:
    yield from tansu_broker()


def test_topics_produce_consume_and_groups_on_tansu(tansu_cli: TansuProcess) -> None:
    b = tansu_cli.bootstrap
    assert ok(kafkette("topics", "create", "orders", "--partitions", "2", bootstrap=b)) == (
        "created topic orders with 2 partitions\n"
    )
    assert ok(kafkette("topics", "list", bootstrap=b)) == "TOPIC   PARTITIONS\norders  2\n"
    assert ok(kafkette("produce", "orders", "-K:", "-H", "a=b", "-p", "0",
                       input="k1:v1\nk2:v2\n", bootstrap=b)) == ""  # fmt: skip
    assert ok(kafkette("consume", "orders", "-e", "-f", "%k|%s|%h|%p|%o\\n", bootstrap=b)) == (
        "k1|v1|a=b|0|0\nk2|v2|a=b|0|1\n"
    )
    assert ok(kafkette("offsets", "orders", bootstrap=b)) == (
        "TOPIC   PARTITION  EARLIEST  LATEST\n"
        "orders  0          0         1\n"  # Tansu: the last offset, not the next (2)
        "orders  1          0         0\n"
    )
    assert ok(kafkette("consume", "orders", *GROUP, "-e", "-f", "%s\\n", bootstrap=b)) == (
        "v1\nv2\n"
    )
    assert ok(kafkette("groups", "list", bootstrap=b)) == (
        "GROUP  TYPE     STATE    SIMPLE  COORDINATOR\ng1     classic  Unknown  false   111\n"
    )
    assert ok(kafkette("groups", "describe", "g1", bootstrap=b)) == (
        "GROUP  STATE  ASSIGNOR  MEMBERS\n"
        "g1     Empty  -         0\n"
        "\n"
        "TOPIC   PARTITION  COMMITTED  END  LAG  MEMBER  CLIENT_ID  HOST\n"
        "orders  0          2          1    -1   -       -          -\n"
        "orders  1          0          0    0    -       -          -\n"
    )
    reset = ["groups", "reset-offsets", "g1", "--to-earliest", "--topic", "orders"]
    assert ok(kafkette(*reset, "--execute", bootstrap=b)) == (
        "GROUP  TOPIC   PARTITION  CURRENT  NEW\n"
        "g1     orders  0          2        0\n"
        "g1     orders  1          0        0\n"
    )
    assert ok(kafkette("consume", "orders", *GROUP, "-e", "-f", "%s\\n", bootstrap=b)) == (
        "v1\nv2\n"  # from the reset position again
    )
    assert ok(kafkette("produce", "orders", "--transactional-id", "tx1", "-p", "1",
                       input="a\nb\n", bootstrap=b)) == ""  # fmt: skip
    assert ok(
        kafkette("consume", "orders", "-p", "1", "-e", "--isolation", "read_committed",
                 "-f", "%s\\n", bootstrap=b)
    ) == "a\nb\n"  # fmt: skip
    assert ok(kafkette("topics", "alter", "orders", "--config", "retention.ms=1000",
                       bootstrap=b)) == "altered topic orders: set retention.ms=1000\n"  # fmt: skip
    assert ok(kafkette("topics", "delete", "orders", bootstrap=b)) == "deleted topic orders\n"
    assert ok(kafkette("topics", "list", bootstrap=b)) == "TOPIC  PARTITIONS\n"


def test_cluster_on_tansu(tansu_cli: TansuProcess) -> None:
    lines = ok(kafkette("cluster", bootstrap=tansu_cli.bootstrap)).splitlines()
    assert lines[:5] == [
        "CLUSTER_ID     CONTROLLER",
        "tansu_cluster  111",
        "",
        "BROKER  HOST       PORT   RACK",
        f"111     127.0.0.1  {tansu_cli.port:<5}  -",
    ]
    assert lines[7].split() == ["Produce", "0", "0", "11", "0-11"]


@pytest.mark.parametrize(
    ("args", "api"),
    [
        (("txns", "list"), "ListTransactions"),
        (("producers", "orders"), "DescribeProducers"),
        (("topics", "add-partitions", "orders", "--partitions", "3"), "CreatePartitions"),
    ],
)
def test_apis_tansu_does_not_serve(
    tansu_cli: TansuProcess, args: tuple[str, ...], api: str
) -> None:
    ok(kafkette("topics", "create", "orders", "--if-not-exists", bootstrap=tansu_cli.bootstrap))
    result = kafkette(*args, bootstrap=tansu_cli.bootstrap)
    name = " ".join(["kafkette", *args[: 2 if args[0] in ("txns", "topics") else 1]])
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        f"{name}: UNSUPPORTED_VERSION (35): The version of API is not supported. "
        f"({tansu_cli.bootstrap} does not support {api})\n"
    )


def test_perf_produce_on_tansu(tansu_cli: TansuProcess) -> None:
    b = tansu_cli.bootstrap
    ok(kafkette("topics", "create", "perf", "--partitions", "1", bootstrap=b))
    summary = ok(kafkette("perf", "produce", "perf", "--records", "2000", "--size", "100",
                          "--json", bootstrap=b))  # fmt: skip
    assert '"records": 2000' in summary.splitlines()[-1]
    assert ok(kafkette("consume", "perf", "-e", "-f", "%o\\n", bootstrap=b)).splitlines() == [
        str(offset) for offset in range(2000)
    ]
