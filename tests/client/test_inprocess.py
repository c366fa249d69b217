"""In-process clusters: memory://NAME and file:///path."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from kafkette.client.client import KafkaClient
from kafkette.client.config import AdminConfig
from kafkette.client.inprocess import close_cluster, get_cluster
from kafkette.client.sync_bridge import BackgroundLoop
from kafkette.errors import ConfigError
from kafkette.protocol.framing import encode_frame
from kafkette.protocol.headers import decode_response, encode_request
from kafkette.protocol.messages import MetadataRequest
from kafkette.server.data_dir.lock import DataDirLockedError
from tests.server.dataplane import batch, fetch_request, produce_request, records_of


@pytest.fixture
def memory_url() -> Iterator[str]:
    url = f"memory://test-{uuid.uuid4().hex[:8]}"
    yield url
    close_cluster(url)


def _config(url: str) -> AdminConfig:
    return AdminConfig.from_user(bootstrap_servers=url)


@pytest.mark.anyio
async def test_memory_cluster_serves_metadata_without_sockets(
    memory_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No network socket is used: connect and bind raise for the whole test.

    (The event loop's own self-pipe socketpair is not a network socket.)
    """

    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("memory:// must not connect or listen")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket.socket, "connect_ex", no_network)
    monkeypatch.setattr(socket.socket, "bind", no_network)
    async with KafkaClient(_config(memory_url)) as client:
        snapshot = await client.refresh_metadata(["orders"], allow_auto_topic_creation=True)
        assert snapshot.partition_count("orders") == 1
        assert await client.leader("orders", 0) == 1
        assert snapshot.brokers[1].host.startswith("memory-")


@pytest.mark.anyio
async def test_clients_in_different_loops_share_the_cluster(memory_url: str) -> None:
    """A topic auto-created from a background (sync-style) loop is seen from this loop."""
    loop = BackgroundLoop("other")
    try:

        async def create_in_other_loop() -> int:
            async with KafkaClient(_config(memory_url)) as client:
                snapshot = await client.refresh_metadata(["shared"], allow_auto_topic_creation=True)
                return snapshot.partition_count("shared") or 0

        assert await anyio.to_thread.run_sync(loop.call, create_in_other_loop) == 1
    finally:
        loop.close()
    async with KafkaClient(_config(memory_url)) as client:
        assert "shared" in (await client.refresh_metadata(None)).topics


@pytest.mark.anyio
async def test_names_are_separate_clusters(memory_url: str) -> None:
    other = memory_url + "-b"
    try:
        async with KafkaClient(_config(memory_url)) as a:
            await a.refresh_metadata(["only-in-a"], allow_auto_topic_creation=True)
        async with KafkaClient(_config(other)) as b:
            assert "only-in-a" not in (await b.refresh_metadata(None)).topics
    finally:
        close_cluster(other)


@pytest.mark.anyio
async def test_bad_bytes_close_only_that_stream(memory_url: str) -> None:
    cluster = get_cluster(memory_url)
    stream = cluster.open_stream()
    with pytest.raises(anyio.BrokenResourceError):
        await stream.send(b"GET / HTTP/1.1\r\n\r\n")
    with pytest.raises(anyio.EndOfStream):
        await stream.receive()
    async with KafkaClient(_config(memory_url)) as client:
        connection = await client.connection(await client.any_node())
        assert await connection.request(MetadataRequest(topics=None)) is not None


def test_in_process_cluster_must_be_the_only_server() -> None:
    with pytest.raises(ConfigError) as info:
        KafkaClient(AdminConfig.from_user(bootstrap_servers=["memory://x", "localhost:9092"]))
    assert info.value.setting == "bootstrap.servers"


@pytest.mark.anyio
async def test_file_cluster_keeps_topics_across_reopen(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'data'}"
    try:
        async with KafkaClient(_config(url)) as client:
            snapshot = await client.refresh_metadata(["kept"], allow_auto_topic_creation=True)
            topic_id = snapshot.topics["kept"].topic_id
    finally:
        close_cluster(url)
    try:
        async with KafkaClient(_config(url)) as client:
            snapshot = await client.refresh_metadata(None)
            assert snapshot.topics["kept"].topic_id == topic_id
    finally:
        close_cluster(url)


def test_file_cluster_is_locked_against_a_second_process(tmp_path: Path) -> None:
    data = tmp_path / "data"
    url = f"file://{data}"
    get_cluster(url)
    try:
        code = f"from kafkette.client.inprocess import get_cluster\nget_cluster({url!r})\n"
        result = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
        )
        assert result.returncode != 0
        assert DataDirLockedError.__name__ in result.stderr
        assert f"in use by another process (pid {__import__('os').getpid()}" in result.stderr
    finally:
        close_cluster(url)
    # released: a new process may open it now
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            f"from kafkette.client.inprocess import get_cluster, close_cluster\n"
            f"get_cluster({url!r}); close_cluster({url!r}); print('ok')",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.stdout.strip() == "ok", result.stderr


def test_file_cluster_keeps_records_across_reopen(tmp_path: Path) -> None:
    """Records produced to file:///path are read back, exactly, after the cluster is reopened."""
    from kafkette import AdminClient, Consumer, NewTopic, Producer, TopicPartition

    url = f"file://{tmp_path / 'data'}"
    try:
        with AdminClient(bootstrap_servers=url) as admin:
            admin.create_topics([NewTopic("kept", 2)]).all()
        with Producer(bootstrap_servers=url) as producer:
            futures = [producer.send("kept", b"v%d" % i, key=b"k%d" % i) for i in range(100)]
            producer.flush()
            sent = {
                (f.result().partition, f.result().offset): b"v%d" % i for i, f in enumerate(futures)
            }
    finally:
        close_cluster(url)
    try:
        with Consumer(bootstrap_servers=url) as consumer:
            partitions = [TopicPartition("kept", 0), TopicPartition("kept", 1)]
            consumer.assign(partitions)
            consumer.seek_to_beginning(*partitions)
            received: dict[tuple[int, int], bytes | None] = {}
            for _ in range(40):
                for records in consumer.poll(timeout_ms=250).values():
                    received.update({(r.partition, r.offset): r.value for r in records})
                if len(received) == 100:
                    break
        assert received == sent
    finally:
        close_cluster(url)


@pytest.mark.anyio
async def test_long_polls_do_not_starve_other_requests_of_worker_threads(
    memory_url: str,
) -> None:
    """A request waiting at the broker (long-poll fetches, JoinGroups) holds no worker
    thread (the caller's loop is woken when its answer is ready), so even with the event
    loop's thread limit down to 2 such requests cannot hold back the one that wakes them."""
    limiter = anyio.to_thread.current_default_thread_limiter()
    saved, limiter.total_tokens = limiter.total_tokens, 2
    cluster = get_cluster(memory_url)
    cluster.broker.cluster.create_topic("polled", 1)
    results: list[bytes | None] = []

    async def long_poll() -> None:
        stream = cluster.open_stream()
        request = fetch_request("polled", {0: 0}, max_wait_ms=10_000)
        await stream.send(encode_frame(encode_request(request, 12, 1, "t")))
        _, response = decode_response((await stream.receive(1 << 20))[4:], 1, 12)
        results.append(records_of(response.responses[0].partitions[0].records)[0].value)

    try:
        started = time.monotonic()
        async with anyio.create_task_group() as tg:
            for _ in range(2):
                tg.start_soon(long_poll)
            await anyio.sleep(0.2)  # both fetches are now parked at the broker
            producer = cluster.open_stream()
            request = produce_request("polled", 0, batch([(b"k", b"v")]))
            await producer.send(encode_frame(encode_request(request, 9, 2, "t")))
            _, produced = decode_response((await producer.receive(1 << 20))[4:], 0, 9)
        assert produced.responses[0].partition_responses[0].error_code == 0
        assert results == [b"v", b"v"]
        assert time.monotonic() - started < 5  # not the fetches' 10 s wait
    finally:
        limiter.total_tokens = saved
