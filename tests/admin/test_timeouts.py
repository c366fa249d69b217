"""Admin timeouts in seconds (``timeout=``) beside kafka-python's ``timeout_ms=``.

That the sync client's signatures are the async one's is checked for every
client in ``tests/test_sync_async_parity.py``."""

from __future__ import annotations

import inspect
import time

import anyio
import pytest

from kafkette import AdminClient, AsyncAdminClient, NewTopic
from kafkette.errors import KafkaTimeoutError
from kafkette.testing import MemoryCluster


def _public_methods(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(getattr(cls, name))
        for name in dir(cls)
        if not name.startswith("_") and inspect.isfunction(getattr(cls, name))
    }


def test_every_admin_operation_takes_both_timeouts() -> None:
    for cls in (AsyncAdminClient, AdminClient):
        for name, signature in _public_methods(cls).items():
            if name == "close":
                continue
            kinds = {p.name: p.kind for p in signature.parameters.values()}
            assert kinds.get("timeout") == inspect.Parameter.KEYWORD_ONLY, (cls, name)
            assert kinds.get("timeout_ms") == inspect.Parameter.KEYWORD_ONLY, (cls, name)


def test_sync_timeout_in_seconds_and_milliseconds() -> None:
    with (
        MemoryCluster() as cluster,
        AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin,
    ):
        admin.create_topics([NewTopic("t", 1)], timeout=10.0).all()
        assert admin.list_topics(timeout=10.0) == ["t"]
        assert admin.list_topics(timeout_ms=10_000) == ["t"]
        with pytest.raises(TypeError, match="give one timeout"):
            admin.list_topics(timeout=1.0, timeout_ms=1000)
        cluster.faults.delay("Metadata", 2.0)
        started = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match=r"within 0\.3s"):
            admin.list_topics(timeout=0.3)
        with pytest.raises(KafkaTimeoutError, match=r"within 0\.3s"):
            admin.list_topics(timeout_ms=300)
        assert time.monotonic() - started < 1.9  # neither waited for the delayed answer
        cluster.faults.clear()


@pytest.mark.anyio
async def test_async_timeout_in_seconds_and_milliseconds() -> None:
    async with (
        MemoryCluster() as cluster,
        AsyncAdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin,
    ):
        (await admin.create_topics([NewTopic("t", 1)], timeout=10.0)).all()
        assert await admin.list_topics(timeout=10.0) == ["t"]
        with pytest.raises(TypeError, match="give one timeout"):
            await admin.describe_cluster(timeout=1.0, timeout_ms=1000)
        cluster.faults.delay("Metadata", 2.0)
        started = anyio.current_time()
        with pytest.raises(KafkaTimeoutError, match=r"within 0\.3s"):
            await admin.list_topics(timeout=0.3)
        with pytest.raises(KafkaTimeoutError, match=r"within 0\.3s"):
            await admin.list_topics(timeout_ms=300)
        assert anyio.current_time() - started < 1.9
        cluster.faults.clear()
