"""Brokers for the group tests: memory://, ``kafkette serve`` and Tansu.

``group_target`` runs a test on memory:// and ``kafkette serve``;
``every_group_target`` on Tansu too (few tests use it: Tansu delays a new
group's first rebalance by 3 s and each rebalance takes seconds). Our
brokers allow sessions down to 500 ms so that tests can time members out
quickly. Tansu defects a test works around are named in that test; one
that keeps a test off Tansu: OffsetFetch answers no metadata for an offset
committed with some (confluent-kafka sees the same).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from kafkette.client.inprocess import close_cluster
from kafkette.testing import memory_cluster
from tests.brokers import BrokerProcess, TansuProcess, kafkette_broker, tansu_broker
from tests.consumer.targets import Target

KAFKETTE_TARGETS = ["memory", "serve"]
GROUP_TARGETS = [*KAFKETTE_TARGETS, "tansu"]
GROUP_PROPERTIES = {"group.min.session.timeout.ms": "500"}


@pytest.fixture(scope="module")
def group_serve_broker() -> Iterator[BrokerProcess]:
    yield from kafkette_broker(
        None, *(f"--set={key}={value}" for key, value in GROUP_PROPERTIES.items())
    )


@pytest.fixture(scope="module")
def group_tansu() -> Iterator[TansuProcess]:
    yield from tansu_broker()


def make_target(request: pytest.FixtureRequest, name: str) -> Iterator[Target]:
    if name == "memory":
        url = memory_cluster(f"group-{uuid.uuid4().hex[:8]}", properties=GROUP_PROPERTIES)
        target = Target(name, url)
        try:
            yield target
        finally:
            target.close()
            close_cluster(url)
        return
    if name == "serve":
        broker: BrokerProcess = request.getfixturevalue("group_serve_broker")
        target = Target(name, broker.bootstrap)
    else:
        tansu: TansuProcess = request.getfixturevalue("group_tansu")
        target = Target(name, tansu.bootstrap, tansu)
    try:
        yield target
    finally:
        target.close()


@pytest.fixture(params=KAFKETTE_TARGETS)
def group_target(request: pytest.FixtureRequest) -> Iterator[Target]:
    yield from make_target(request, request.param)


@pytest.fixture(params=GROUP_TARGETS)
def every_group_target(request: pytest.FixtureRequest) -> Iterator[Target]:
    yield from make_target(request, request.param)


@pytest.fixture
def topic() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def group() -> str:
    return f"g-{uuid.uuid4().hex[:10]}"
