"""resolve_assignors: partition.assignment.strategy to assignor objects."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from kafkette.consumer.assignors import (
    ASSIGNORS,
    Assignment,
    Assignor,
    RangeAssignor,
    RoundRobinAssignor,
    Subscription,
    resolve_assignors,
)
from kafkette.errors import ConfigError


class MineAssignor(Assignor):
    """A user's assignor: everything to nobody."""

    name = "mine"

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        return {m: Assignment(partitions=()) for m in subscriptions}


def test_names_and_java_class_names() -> None:
    """Kafka names and Java class names resolve to the same classes, in the order given."""
    resolved = resolve_assignors(["roundrobin", "org.apache.kafka.clients.consumer.RangeAssignor"])
    assert [type(a) for a in resolved] == [RoundRobinAssignor, RangeAssignor]


def test_comma_separated_string() -> None:
    """A plain string is Kafka's comma-separated list."""
    resolved = resolve_assignors(" range , org.apache.kafka.clients.consumer.RoundRobinAssignor")
    assert [a.name for a in resolved] == ["range", "roundrobin"]


def test_instances_and_classes() -> None:
    """An instance is used as is; a subclass is built with no arguments."""
    mine = MineAssignor()
    resolved = resolve_assignors([mine, RangeAssignor])
    assert resolved[0] is mine
    assert type(resolved[1]) is RangeAssignor


def test_registry_names() -> None:
    """The registry is keyed by each class's protocol name."""
    assert all(name == cls.name for name, cls in ASSIGNORS.items())
    assert {"range", "roundrobin"} <= set(ASSIGNORS)


@pytest.mark.parametrize(
    "strategies",
    [
        ["rang"],
        ["org.apache.kafka.clients.consumer.NoSuchAssignor"],
        [],
        "",
        ["range", RangeAssignor],
        [int],
        [3],
    ],
)
def test_bad_strategies_name_the_setting(strategies: object) -> None:
    """Unknown names, an empty list, duplicates or non-assignors are configuration errors."""
    with pytest.raises(ConfigError) as info:
        resolve_assignors(strategies)  # type: ignore[arg-type]
    assert info.value.setting == "partition.assignment.strategy"
