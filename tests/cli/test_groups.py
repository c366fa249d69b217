"""``kafkette groups`` against ``kafkette serve``, with confluent-kafka (librdkafka) as the
group's consumer: it resumes where reset-offsets put the group."""

from __future__ import annotations

import json

import confluent_kafka

from tests.cli.cli import kafkette, ok


def confluent_consumer(bootstrap: str, group: str) -> confluent_kafka.Consumer:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "client.id": "librdkafka",
        }
    )
    consumer.subscribe(["timed"])
    return consumer


def take(consumer: confluent_kafka.Consumer, count: int) -> list[tuple[int, int]]:
    """(partition, offset) of the next ``count`` records."""
    taken: list[tuple[int, int]] = []
    while len(taken) < count:
        message = consumer.poll(10)
        assert message is not None and message.error() is None
        taken.append((message.partition(), message.offset()))
    return sorted(taken)


def test_groups(timed: str) -> None:
    consumer = confluent_consumer(timed, "app")
    assert take(consumer, 8) == [(0, o) for o in range(5)] + [(1, o) for o in range(3)]
    consumer.commit(
        offsets=[
            confluent_kafka.TopicPartition("timed", 0, 4),
            confluent_kafka.TopicPartition("timed", 1, 3),
        ],
        asynchronous=False,
    )
    # while the member is active: described with its assignment, not reset
    described = json.loads(ok(kafkette("groups", "describe", "app", "--json", bootstrap=timed)))
    member = described["partitions"][0]["member"]
    host = described["partitions"][0]["host"]
    assert member.startswith("librdkafka-")
    assert host.endswith("127.0.0.1")
    assert described == {
        "group": "app",
        "state": "Stable",
        "assignor": "range",
        "members": 1,
        "partitions": [
            {
                "topic": "timed",
                "partition": 0,
                "committed": 4,
                "end": 5,
                "lag": 1,
                "member": member,
                "client_id": "librdkafka",
                "host": described["partitions"][0]["host"],
            },
            {
                "topic": "timed",
                "partition": 1,
                "committed": 3,
                "end": 3,
                "lag": 0,
                "member": member,
                "client_id": "librdkafka",
                "host": described["partitions"][1]["host"],
            },
        ],
    }
    refused = kafkette(
        "groups",
        "reset-offsets",
        "app",
        "--all-topics",
        "--to-earliest",
        "--execute",
        bootstrap=timed,
    )
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr == (
        "kafkette groups reset-offsets: ILLEGAL_STATE: the offsets of group 'app' can only be "
        "reset while it has no active members; it has 1 and is Stable\n"
    )
    consumer.close()

    assert ok(kafkette("groups", "list", bootstrap=timed)) == (
        "GROUP  TYPE     STATE  SIMPLE  COORDINATOR\napp    classic  Empty  false   1\n"
    )
    assert ok(kafkette("groups", "describe", "app", bootstrap=timed)) == (
        "GROUP  STATE  ASSIGNOR  MEMBERS\n"
        "app    Empty  -         0\n"
        "\n"
        "TOPIC  PARTITION  COMMITTED  END  LAG  MEMBER  CLIENT_ID  HOST\n"
        "timed  0          4          5    1    -       -          -\n"
        "timed  1          3          3    0    -       -          -\n"
    )
    # --dry-run (the default) prints the plan and changes nothing
    plan = kafkette(
        "groups", "reset-offsets", "app", "--topic", "timed", "--shift-by", "-2", bootstrap=timed
    )
    assert plan.returncode == 0
    assert plan.stdout == (
        "GROUP  TOPIC  PARTITION  CURRENT  NEW\n"
        "app    timed  0          4        2\n"
        "app    timed  1          3        1\n"
    )
    assert plan.stderr == "dry run: nothing changed; --execute commits the new offsets\n"
    # timestamps: partition 0 at 1000..5000 ms, partition 1 at 1500, 2500, 3500 ms
    out = ok(
        kafkette(
            "groups",
            "reset-offsets",
            "app",
            "--topic",
            "timed:0,1",
            "--to-datetime",
            "1970-01-01T00:00:02.500Z",
            "--execute",
            bootstrap=timed,
        )
    )
    assert out == (
        "GROUP  TOPIC  PARTITION  CURRENT  NEW\n"
        "app    timed  0          4        2\n"
        "app    timed  1          3        1\n"
    )
    consumer = confluent_consumer(timed, "app")
    assert take(consumer, 5) == [(0, 2), (0, 3), (0, 4), (1, 1), (1, 2)]
    consumer.close()
    out = ok(
        kafkette(
            "groups",
            "reset-offsets",
            "app",
            "--topic",
            "timed:1",
            "--to-offset",
            "99",
            "--execute",
            "--json",
            bootstrap=timed,
        )
    )
    assert json.loads(out) == [
        {"group": "app", "topic": "timed", "partition": 1, "current": 1, "new": 3}
    ]
    assert ok(kafkette("groups", "delete", "app", bootstrap=timed)) == "deleted group app\n"
    assert ok(kafkette("groups", "list", "--json", bootstrap=timed)) == "[]\n"
