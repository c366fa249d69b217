"""Brokers for the group tests: Tansu, and (once it has a group coordinator) our own.

``group_target`` runs a test on each broker in ``GROUP_TARGETS``. Tansu
defects a test works around are named in that test.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from kafkette.client.inprocess import close_cluster
from tests.brokers import BrokerProcess, TansuProcess, kafkette_broker, tansu_broker
from tests.consumer.targets import Target

GROUP_TARGETS = ["tansu"]


@pytest.fixture(scope="module")
def group_serve_broker() -> Iterator[BrokerProcess]:
    yield from kafkette_broker(None, "--group-min-session-timeout-ms", "500")


@pytest.fixture(scope="module")
def group_tansu() -> Iterator[TansuProcess]:
    yield from tansu_broker()


def make_target(request: pytest.FixtureRequest, name: str) -> Iterator[Target]:
    if name == "memory":
        url = f"memory://group-{uuid.uuid4().hex[:8]}"
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


@pytest.fixture(params=GROUP_TARGETS)
def group_target(request: pytest.FixtureRequest) -> Iterator[Target]:
    yield from make_target(request, request.param)


@pytest.fixture
def topic() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def group() -> str:
    return f"g-{uuid.uuid4().hex[:10]}"
